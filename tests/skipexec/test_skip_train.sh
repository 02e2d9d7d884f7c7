#!/usr/bin/env bash
# clpipe train with pipeline.schedule = "skippipe" under mpirun: (1) paths made from
# skip.stage_nodes train, checkpoint, and the validation loss the job reports (the model gathered
# on rank 0) is the one `clpipe eval` computes from the checkpoint on one device, which also
# evaluates it with a stage removed; (2) a path file with a swap trains and resumes (with
# recomputation: the head stage holds no layer); (3) a path file for 5 nodes on 4 ranks is
# refused with a message; (4) a rank that stops makes its peers' dataflow stall past the
# deadline with a message naming the wait, and the job ends non-zero; (1b) Muon and (1c) Shampoo
# on the paths of (1): the job's validation loss is its checkpoint's.
# Usage: test_skip_train.sh CLPIPE DATADIR WORKDIR
set -u
clpipe=$1
paths=$2/train_paths.json
work=$3/skiptrain
rm -rf "$work" && mkdir -p "$work"
fail=0
check() { if ! eval "$1"; then echo "FAIL: $2"; fail=1; else echo "ok: $2"; fi; }

for i in $(seq 1 3000); do echo "the quick brown fox jumps over the lazy dog $((i % 17))."; done > "$work/corpus.txt"
common=(--data "$work/corpus.txt" --model.n_layer=3 --model.d_model=32 --model.n_head=4
        --model.ctx=16 --train.batch=2 --eval.every=0 --eval.batches=2
        --pipeline.schedule=skippipe --optim.warmup=1)
mpi=(mpirun --allow-run-as-root --oversubscribe)

# 1. paths from stage_nodes: 2 origins x 2 micro-batches, one stage skipped per path, cap 1
timeout 300 "${mpi[@]}" -np 5 "$clpipe" train "${common[@]}" --steps 3 \
	--skip.stage_nodes=[2,1,2] --skip.path_len=2 --skip.memory=1 --train.micro_batches=2 \
	--ckpt.dir="$work/ck-a" >"$work/a.out" 2>&1
check "[ $? -eq 0 ]" "training with paths from skip.stage_nodes"
check "grep -q 'skippipe: 5 nodes, 3 stages, 4 micro-batches per step, paths of 2 stages' '$work/a.out'" \
	"the path set is reported"
check "grep -q 'step 3/3 | loss' '$work/a.out'" "three steps ran"
train_val=$(sed -n 's/^eval at step 3: val loss \([0-9.]*\),.*/\1/p' "$work/a.out")
# the job evaluates whole rounds of its 4 micro-batches: 4 validation batches of 2 sequences
"$clpipe" eval --ckpt "$work/ck-a" --eval.batches=4 --train.batch=2 >"$work/a-eval.out" 2>&1
eval_val=$(sed -n 's/^val loss \([0-9.]*\) nats.*/\1/p' "$work/a-eval.out")
check "[ -n '$train_val' ] && [ '$train_val' = '$eval_val' ]" \
	"the job's validation loss ($train_val) is the checkpoint's on one device ($eval_val)"
"$clpipe" eval --ckpt "$work/ck-a" --eval.batches=4 --train.batch=2 --sample.skip_stages=[1] >"$work/a-skip.out" 2>&1
check "[ $? -eq 0 ] && grep -q 'skipping 1 of 3 layers: 1' '$work/a-skip.out' && grep -q 'val loss' '$work/a-skip.out'" \
	"the checkpoint evaluates with stage 1 removed"

# 1b. the same paths with Muon (optim.name = "muon", a dataflow optimizer like AdamW)
timeout 300 "${mpi[@]}" -np 5 "$clpipe" train "${common[@]}" --steps 3 --optim.name=muon \
	--skip.stage_nodes=[2,1,2] --skip.path_len=2 --skip.memory=1 --train.micro_batches=2 \
	--ckpt.dir="$work/ck-m" >"$work/m.out" 2>&1
check "[ $? -eq 0 ] && grep -q 'step 3/3 | loss' '$work/m.out'" "Muon trains with paths"
muon_val=$(sed -n 's/^eval at step 3: val loss \([0-9.]*\),.*/\1/p' "$work/m.out")
"$clpipe" eval --ckpt "$work/ck-m" --eval.batches=4 --train.batch=2 >"$work/m-eval.out" 2>&1
muon_eval=$(sed -n 's/^val loss \([0-9.]*\) nats.*/\1/p' "$work/m-eval.out")
check "[ -n '$muon_val' ] && [ '$muon_val' = '$muon_eval' ] && [ '$muon_val' != '$train_val' ]" \
	"Muon's validation loss ($muon_val) is its checkpoint's ($muon_eval), not AdamW's ($train_val)"

# 1c. the same with Shampoo (optim.name = "shampoo", dataflow like Muon; roots every step)
timeout 300 "${mpi[@]}" -np 5 "$clpipe" train "${common[@]}" --steps 3 --optim.name=shampoo \
	--skip.stage_nodes=[2,1,2] --skip.path_len=2 --skip.memory=1 --train.micro_batches=2 \
	--ckpt.dir="$work/ck-s" >"$work/s.out" 2>&1
check "[ $? -eq 0 ] && grep -q 'step 3/3 | loss' '$work/s.out'" "Shampoo trains with paths"
sh_val=$(sed -n 's/^eval at step 3: val loss \([0-9.]*\),.*/\1/p' "$work/s.out")
"$clpipe" eval --ckpt "$work/ck-s" --eval.batches=4 --train.batch=2 >"$work/s-eval.out" 2>&1
sh_eval=$(sed -n 's/^val loss \([0-9.]*\) nats.*/\1/p' "$work/s-eval.out")
check "[ -n '$sh_val' ] && [ '$sh_val' = '$sh_eval' ] && [ '$sh_val' != '$train_val' ] && [ '$sh_val' != '$muon_val' ]" \
	"Shampoo's validation loss ($sh_val) is its checkpoint's ($sh_eval), not AdamW's or Muon's"

# 1d. one-step-delayed Muon (muon.delay: the NS of the previous step's direction, in the
# OPT_STEP on dataflow ranks): trains with paths, its checkpoint evaluates to its val loss
timeout 300 "${mpi[@]}" -np 5 "$clpipe" train "${common[@]}" --steps 3 --optim.name=muon \
	--muon.delay=true --skip.stage_nodes=[2,1,2] --skip.path_len=2 --skip.memory=1 \
	--train.micro_batches=2 --ckpt.dir="$work/ck-md" >"$work/md.out" 2>&1
check "[ $? -eq 0 ] && grep -q 'step 3/3 | loss' '$work/md.out'" "delayed Muon trains with paths"
md_val=$(sed -n 's/^eval at step 3: val loss \([0-9.]*\),.*/\1/p' "$work/md.out")
"$clpipe" eval --ckpt "$work/ck-md" --eval.batches=4 --train.batch=2 >"$work/md-eval.out" 2>&1
md_eval=$(sed -n 's/^val loss \([0-9.]*\) nats.*/\1/p' "$work/md-eval.out")
check "[ -n '$md_val' ] && [ '$md_val' = '$md_eval' ] && [ '$md_val' != '$muon_val' ]" \
	"delayed Muon's validation loss ($md_val) is its checkpoint's ($md_eval), not Muon's ($muon_val)"

# 2. a path file (a swap, forward-first node, cap 2): 2 steps, then resumed to 3
timeout 300 "${mpi[@]}" -np 5 "$clpipe" train "${common[@]}" --steps 2 --skip.paths="$paths" \
	--ckpt.dir="$work/ck-b" >"$work/b.out" 2>&1
check "[ $? -eq 0 ] && grep -q 'paths from' '$work/b.out'" "training with a path file"
timeout 300 "${mpi[@]}" -np 5 "$clpipe" train "${common[@]}" --steps 3 --skip.paths="$paths" \
	--ckpt.dir="$work/ck-b" --resume --train.recompute=true >"$work/b2.out" 2>&1
check "[ $? -eq 0 ] && grep -q 'resumed from' '$work/b2.out' && grep -q 'step 3/3' '$work/b2.out'" \
	"a path-file run resumes from its checkpoint (recomputing activations: the head stage has no layer)"

# 3. the path file's 5 nodes on 4 ranks
timeout 300 "${mpi[@]}" -np 4 "$clpipe" train "${common[@]}" --steps 1 --skip.paths="$paths" \
	--no-ckpt >"$work/c.out" 2>&1
check "[ $? -ne 0 ] && grep -q 'the path set has 5 nodes (rank i is node i); this job has 4 ranks' '$work/c.out'" \
	"a path set for another number of ranks is refused"

# 4. rank 2 stops after step 1: its peers wait 3 s, then the job ends
CLPIPE_FAULT=stop:2:1 timeout 300 "${mpi[@]}" -np 5 "$clpipe" train "${common[@]}" --steps 3 \
	--skip.paths="$paths" --pipeline.deadline=3 --no-ckpt >"$work/d.out" 2>&1
rc=$?
check "[ $rc -ne 0 ] && [ $rc -ne 124 ]" "a stopped rank ends the job with a non-zero status (got $rc)"
check "grep -Eq 'step 2: dataflow stalled for 3.0 s: .* waits for RECV_.* from rank [0-9] .*\\(peer rank [0-9]\\)' '$work/d.out'" \
	"the stall names the op, the receive it waits for and the peer (the first to expire: the stop cascades)"
[ $fail -ne 0 ] && for f in a a-eval a-skip b b2 c d; do echo "--- $f.out"; tail -30 "$work/$f.out"; done
exit $fail
