#!/usr/bin/env bash
# Issue 26, replayed: a user's work is not lost. (1) Ctrl-C (SIGINT raised by CLPIPE_FAULT=int at
# a known step, no sleeps) on one device stops at the step's end with a checkpoint, and --resume
# continues at the next step to the same result as an uninterrupted run; a second signal stops
# at once; (2) the same on a 2-rank pipeline with the signal on rank 1 only: both ranks stop at
# the same step and say the same; (3) a fresh run into another run's directory, a Hugging Face
# model or foreign files is refused before anything is written (--ckpt.overwrite=true replaces
# a run's checkpoints; its summary names its own); (4) checkpoints by default (runs/...) and by
# the clock; (5) flags of another command, misspellings, --resume without a checkpoint and past
# the end; (6) an llm.c shard, safetensors or binary file given as text; (7) eval of a checkpoint
# from elsewhere reproduces the run's figure. Usage: test_safe_runs.sh CLPIPE WORKDIR HF_FIXTURE_DIR
set -u
clpipe=$1
work=$2/safe-runs
fx=$3
rm -rf "$work" && mkdir -p "$work"
cd "$work" || exit 1
fail=0
check() { if ! eval "$1"; then echo "FAIL: $2"; fail=1; else echo "ok: $2"; fi; }
for i in $(seq 1 3000); do echo "the quick brown fox jumps over the lazy dog $((i % 17))."; done > corpus.txt
small=(--data corpus.txt --model.n_layer=2 --model.d_model=32 --model.n_head=4 --model.ctx=16
       --train.batch=2 --eval.every=0 --eval.batches=2)
mpi=(mpirun --allow-run-as-root --oversubscribe -np 2)
last_val() { sed -n 's/^eval at step [0-9]*: val loss \([0-9.]*\),.*/\1/p' "$1" | tail -1; }

# 1. one device: SIGINT after step 3 -> the run ends after step 4 with step-00000004
"$clpipe" train "${small[@]}" --steps 8 --ckpt.dir=full >full.out 2>&1
CLPIPE_FAULT=int:0:3 "$clpipe" train "${small[@]}" --steps 8 --ckpt.dir=ck1 >int1.out 2>&1
rc=$?
check "[ $rc -eq 130 ]" "Ctrl-C ends the run with status 130 (got $rc)"
check "[ -f ck1/step-00000004/manifest.json ] && [ ! -e ck1/step-00000005 ]" \
	"the step running at the signal finished and was saved (step-00000004)"
check "grep -q 'got signal 2 during step 4 (3 steps done): saving a checkpoint and stopping' int1.out" \
	"the signal is acknowledged at once"
check "grep -q 'stopped by signal 2 after step 4; checkpoint ck1/step-00000004 saved: continue with --resume --ckpt.dir=ck1' int1.out" \
	"the run says where it stopped and how to go on"
check "grep -q '^steps:       4 of 8, stopped by signal 2' int1.out && grep -q '^resume: .* --ckpt.dir=ck1 .*--resume' int1.out" \
	"the summary says so and prints the resume command"
"$clpipe" train "${small[@]}" --steps 8 --ckpt.dir=ck1 --resume >res1.out 2>&1
check "[ $? -eq 0 ] && grep -q 'resumed from ck1/step-00000004 at step 4' res1.out && grep -q '^step 5/8' res1.out && ! grep -q '^step 4/8' res1.out" \
	"--resume continues at step 5"
a=$(last_val full.out); b=$(last_val res1.out)
check "[ -n '$a' ] && [ '$a' = '$b' ]" "interrupted and resumed ends where the uninterrupted run does ($a, $b)"
CLPIPE_FAULT=intint:0:2 "$clpipe" train "${small[@]}" --steps 8 --ckpt.dir=ck2 >int2.out 2>&1
rc=$?
check "[ $rc -ne 0 ] && [ ! -e ck2/step-00000003 ] && grep -q 'was stopped by signal 2 during step 3' int2.out" \
	"a second signal stops at once (status $rc), saying what is lost"

# 2. a 2-rank pipeline, SIGINT on rank 1 only: every rank stops after the same step
"${mpi[@]}" "$clpipe" train "${small[@]}" --steps 8 --pipeline.stages=2 --train.micro_batches=2 \
	--ckpt.dir=fullp >fullp.out 2>&1
CLPIPE_FAULT=int:1:3 timeout 300 "${mpi[@]}" -x CLPIPE_FAULT "$clpipe" train "${small[@]}" --steps 8 \
	--pipeline.stages=2 --train.micro_batches=2 --ckpt.dir=ckp >intp.out 2>&1
rc=$?
check "[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ -f ckp/step-00000004/manifest.json ] && [ ! -e ckp/step-00000005 ]" \
	"the pipeline stops with a complete checkpoint of step 4 (status $rc)"
for r in 0 1; do
	check "grep -q 'rank $r of 2: the job stopped by signal 2 (on rank 1) after step 4; checkpoint ckp/step-00000004 saved' intp.out" \
		"rank $r says the same"
done
check "grep -q 'resume:      mpirun -np 2 ' intp.out" "the resume command has the mpirun line"
"${mpi[@]}" "$clpipe" train "${small[@]}" --steps 8 --pipeline.stages=2 --train.micro_batches=2 \
	--ckpt.dir=ckp --resume >resp.out 2>&1
check "[ $? -eq 0 ] && grep -q 'resumed from ckp/step-00000004 at step 4' resp.out && grep -q '^step 5/8' resp.out" \
	"the pipeline resumes at step 5"
a=$(last_val fullp.out); b=$(last_val resp.out)
check "[ -n '$a' ] && [ '$a' = '$b' ]" "and ends where the uninterrupted pipeline does ($a, $b)"

# 3. a run owns its directory (issue 26, case 1: the second run's checkpoints were pruned)
"$clpipe" train "${small[@]}" --steps 6 --ckpt.dir=own --ckpt.every=2 >own1.out 2>&1
before=$(ls -lR own | md5sum)
"$clpipe" train "${small[@]}" --model.n_layer=3 --steps 3 --ckpt.dir=own >own2.out 2>&1
rc=$?
check "[ $rc -ne 0 ] && [ \"\$(ls -lR own | md5sum)\" = '$before' ]" "a fresh run into another run's directory is refused, nothing written"
check "grep -q \"ckpt.dir own holds another run's checkpoints (3, step 2 to 6: gpt2, 2 layers x 32)\" own2.out && grep -q 'add --resume' own2.out && grep -q 'ckpt.overwrite=true' own2.out" \
	"the refusal names what is there and the ways on"
"$clpipe" train "${small[@]}" --model.n_layer=3 --steps 3 --ckpt.dir=own --ckpt.every=1 --ckpt.overwrite=true >own3.out 2>&1
check "[ $? -eq 0 ] && [ \"\$(ls own)\" = \"\$(printf 'step-00000001\nstep-00000002\nstep-00000003')\" ]" \
	"--ckpt.overwrite=true replaces them; keep = 3 keeps this run's own"
check "grep -q '^checkpoint:  own/step-00000003' own3.out && grep -q 'sample --ckpt own/step-00000003' own3.out" \
	"the summary names the run's own checkpoint"
"$clpipe" export own own >x1.out 2>&1
rc1=$?
"$clpipe" export own/step-00000003 own >x2.out 2>&1
check "[ $rc1 -ne 0 ] && [ $? -ne 0 ] && grep -q \"own is a run's directory of checkpoints\" x1.out x2.out && [ ! -e own/model.safetensors ]" \
	"clpipe export into a run's directory is refused"
# a directory a running job holds (a rank of it, here flock's shell, holds its lock) is refused,
# nothing written; resuming there once it has gone works
cp -r own held
before=$(ls -lR held | md5sum)
flock -s held/.clpipe-lock "$clpipe" train "${small[@]}" --model.n_layer=3 --steps 4 --ckpt.dir=held \
	--resume >busy.out 2>&1
rc=$?
check "[ $rc -ne 0 ] && [ \"\$(ls -lR held | md5sum)\" = '$before' ] && grep -q 'ckpt.dir held is in use: a process of another clpipe job still runs there' busy.out" \
	"a run into a directory another job holds is refused naming it, nothing written"
"$clpipe" train "${small[@]}" --model.n_layer=3 --steps 4 --ckpt.dir=held --resume >free.out 2>&1
check "[ $? -eq 0 ] && grep -q 'resumed from held/step-00000003 at step 3' free.out" "once it has gone, the run resumes there"
mkdir hf && cp -r "$fx"/gpt2/. hf/
before=$(ls -lR hf | md5sum)
"$clpipe" train "${small[@]}" --steps 2 --ckpt.dir=hf --resume >hf1.out 2>&1
rc1=$?
"$clpipe" train "${small[@]}" --steps 2 --ckpt.dir=hf >hf2.out 2>&1
rc2=$?
check "[ $rc1 -ne 0 ] && [ $rc2 -ne 0 ] && [ \"\$(ls -lR hf | md5sum)\" = '$before' ]" \
	"a Hugging Face directory is refused, with and without --resume, nothing written"
check "grep -q 'holds a Hugging Face model (.*config.json' hf1.out && grep -q 'holds a Hugging Face model' hf2.out" \
	"the refusal says it is a Hugging Face model"
mkdir stuff && echo notes > stuff/notes.txt
"$clpipe" train "${small[@]}" --steps 2 --ckpt.dir=stuff >stuff.out 2>&1
check "[ $? -ne 0 ] && grep -q 'holds files that are not clpipe checkpoints (notes.txt)' stuff.out && [ \"\$(ls stuff)\" = notes.txt ]" \
	"a directory of other files is refused"

# 4. checkpoints by default, and by the clock
mkdir dflt && (cd dflt && "$clpipe" train "${small[@]/corpus.txt/../corpus.txt}" --steps 2 >out 2>&1)
dir=$(sed -n 's/^run directory: \(runs\/[0-9-]*\) .*/\1/p' dflt/out)
check "[ -n '$dir' ] && head -1 dflt/out | grep -q '^run directory: runs/' && [ -f dflt/$dir/step-00000002/manifest.json ]" \
	"a run without --ckpt.dir names runs/<date>-<time> first and saves there ($dir)"
check "grep -q \"^checkpoint:  $dir/step-00000002\" dflt/out && grep -q -- \"--ckpt.dir=$dir \" dflt/out" \
	"its summary names the directory in its commands"
"$clpipe" train "${small[@]}" --steps 3 --ckpt.dir=clock --ckpt.minutes=1e-9 --ckpt.keep=0 >clock.out 2>&1
check "[ -f clock/step-00000001/manifest.json ] && [ -f clock/step-00000002/manifest.json ] && [ -f clock/step-00000003/manifest.json ]" \
	"ckpt.minutes saves by the clock"
"$clpipe" train "${small[@]}" --steps 2 --no-ckpt >none.out 2>&1
check "[ $? -eq 0 ] && grep -q '^checkpoint:  none (--no-ckpt)' none.out && [ ! -e runs ]" "--no-ckpt saves nothing"

# 5. flags mean one thing
"$clpipe" train "${small[@]}" --steps 2 --ckpt own2 >f1.out 2>&1
check "[ $? -eq 2 ] && grep -q -- '--ckpt.dir DIR' f1.out && [ ! -e own2 ] && [ ! -e runs ]" "train --ckpt is an error naming --ckpt.dir"
"$clpipe" eval --ckpt.dir=own >f2.out 2>&1
check "[ $? -eq 2 ] && grep -q 'reads the checkpoint given by --ckpt DIR' f2.out" "eval --ckpt.dir is an error naming --ckpt"
"$clpipe" train "${small[@]}" --steps 2 --ckpt.evry=2 >f3.out 2>&1
check "[ $? -eq 2 ] && grep -q 'did you mean --ckpt.every?' f3.out" "a misspelt key: did you mean"
"$clpipe" train "${small[@]}" --stpes 2 >f4.out 2>&1
check "[ $? -eq 2 ] && grep -q 'did you mean --steps?' f4.out" "a misspelt flag: did you mean"
"$clpipe" train "${small[@]}" --steps 2 --ckpt.dir=own-typo --resume >f5.out 2>&1
check "[ $? -ne 0 ] && grep -q 'resume: ckpt.dir own-typo does not exist' f5.out && [ ! -e own-typo ]" \
	"--resume without a checkpoint is an error"
"$clpipe" train "${small[@]}" --steps 2 --ckpt.dir=auto --resume=auto >f6.out 2>&1
check "[ $? -eq 0 ] && [ -f auto/step-00000002/manifest.json ]" "--resume=auto starts fresh when there is none"
"$clpipe" train "${small[@]}" --model.n_layer=3 --steps 2 --ckpt.dir=own --resume >f7.out 2>&1
check "[ $? -eq 0 ] && grep -q 'nothing to train: the checkpoint is at step 3 and train.steps = 2' f7.out && ! grep -q 'train.steps=' f7.out" \
	"--resume past the end says so and exits 0"
# 6. data by content (issue 26, case 5: a shard trained as text)
"$clpipe" tokenize --out shard.bin corpus.txt >/dev/null
"$clpipe" train "${small[@]/corpus.txt/shard.bin}" --steps 1 --no-ckpt >d1.out 2>&1
check "[ $? -ne 0 ] && grep -q 'shard.bin is an llm.c token shard (magic 20240520, version 1, 142232 tokens' d1.out && grep -q 'data.format = \"shards\"' d1.out" \
	"an llm.c shard given as text is refused by name, with the setting that reads it"
"$clpipe" train "${small[@]/corpus.txt/shard.bin}" --data.format=shards --steps 1 --no-ckpt >d2.out 2>&1
check "[ $? -eq 0 ]" "and trains with data.format = shards"
"$clpipe" train "${small[@]/corpus.txt/$fx/gpt2/model.safetensors}" --steps 1 --no-ckpt >d3.out 2>&1
check "[ $? -ne 0 ] && grep -q 'is a safetensors file' d3.out" "a safetensors file given as text is refused by name"
"$clpipe" train "${small[@]/corpus.txt/$clpipe}" --steps 1 --no-ckpt >d4.out 2>&1
check "[ $? -ne 0 ] && grep -q 'looks binary, not text (.* of its first 4096 bytes are control characters' d4.out" \
	"other binary data (the clpipe executable) is refused"
# 7. eval reproduces the run (issue 26, case 4): its batch and evaluation size, its data found
# from any directory (stored absolute; a moved tree from the checkpoint's parents), a missing
# file names the flag that replaces it
mkdir -p tree && cp corpus.txt tree/tree-corpus.txt
(cd tree && "$clpipe" train "${small[@]/corpus.txt/tree-corpus.txt}" --train.batch=4 --eval.batches=3 \
	--steps 3 --ckpt.dir=ck >../e0.out 2>&1)
mv tree moved && mkdir -p elsewhere
want=$(sed -n 's/^eval at step 3: val loss \([0-9.]*\),.*/\1/p' e0.out)
(cd elsewhere && "$clpipe" eval --ckpt ../moved/ck >../e1.out 2>&1)
check "[ -n '$want' ] && grep -q \"^val loss $want \" e1.out && grep -q 'on .*/moved/tree-corpus.txt: 3 batches x 4 sequences of 16 tokens, fp32' e1.out" \
	"eval from another directory, after the tree moved, gives the run's own $want and names data and batch"
rm moved/tree-corpus.txt
(cd elsewhere && "$clpipe" eval --ckpt ../moved/ck >../e2.out 2>&1)
check "[ $? -ne 0 ] && grep -q 'is not there, .*give the data with --data FILE' e2.out" \
	"a missing data file says which flag replaces it"
[ $fail -ne 0 ] && for f in *.out; do echo "--- $f"; cat "$f"; done
exit $fail
