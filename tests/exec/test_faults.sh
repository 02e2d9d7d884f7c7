#!/usr/bin/env bash
# When a rank breaks: (1) a rank that dies takes the job down (non-zero exit), the surviving
# rank says which stage and step were lost and which checkpoint to resume from, and the last
# checkpoint stays intact and loadable; (2) a rank that stops answering makes its peer's wait
# expire after the deadline with a message naming rank, peer, step and operation, and the job
# ends non-zero. Usage: test_faults.sh CLPIPE WORKDIR
set -u
clpipe=$1
work=$2/faults
rm -rf "$work" && mkdir -p "$work"
fail=0
check() { if ! eval "$1"; then echo "FAIL: $2"; fail=1; else echo "ok: $2"; fi; }

for i in $(seq 1 3000); do echo "the quick brown fox jumps over the lazy dog $((i % 17))."; done > "$work/corpus.txt"
common=(--data "$work/corpus.txt" --model.n_layer=2 --model.d_model=32 --model.n_head=4
        --model.ctx=16 --train.batch=2 --train.micro_batches=2 --steps 6 --eval.every=0
        --eval.batches=1 --pipeline.stages=2 --pipeline.schedule=1f1b)
mpi=(mpirun --allow-run-as-root --oversubscribe -np 2)

# 1. rank 1 dies after step 3; checkpoints every 2 steps
CLPIPE_FAULT=die:1:3 timeout 300 "${mpi[@]}" "$clpipe" train "${common[@]}" \
	--ckpt.dir="$work/ck-die" --ckpt.every=2 --pipeline.deadline=60 >"$work/die.out" 2>&1
rc=$?
check "[ $rc -ne 0 ] && [ $rc -ne 124 ]" "a dead rank ends the job with a non-zero status (got $rc)"
check "[ -f '$work/ck-die/step-00000002/manifest.json' ]" "the checkpoint of step 2 is complete"
check "grep -Eq 'rank 0 of 2, holding stage 0 .*signal [0-9]+ during step 4 .*resume from the checkpoint .*ck-die/step-00000002' '$work/die.out'" \
	"the surviving rank says its stage, the lost step and the checkpoint to resume from"
"$clpipe" eval --ckpt "$work/ck-die" --eval.batches=1 >"$work/die-eval.out" 2>&1
check "[ $? -eq 0 ] && grep -q 'val loss' '$work/die-eval.out'" "the last checkpoint loads and evaluates"

# 2. rank 1 stops (SIGSTOP) after step 3; rank 0's next wait expires after 3 s
CLPIPE_FAULT=stop:1:3 timeout 300 "${mpi[@]}" "$clpipe" train "${common[@]}" \
	--pipeline.deadline=3 --no-ckpt >"$work/stop.out" 2>&1
rc=$?
check "[ $rc -ne 0 ] && [ $rc -ne 124 ]" "a stopped rank ends the job with a non-zero status (got $rc)"
check "grep -q 'timed out after 3.0 s' '$work/stop.out'" "the wait expired after the deadline"
check "grep -Eq 'rank 0, step 4: .*(from|to) rank 1.*\\(peer rank 1\\)' '$work/stop.out'" \
	"the message names rank, step, operation and peer"
[ $fail -ne 0 ] && { echo "--- die.out"; cat "$work/die.out"; echo "--- stop.out"; cat "$work/stop.out"; }
exit $fail
