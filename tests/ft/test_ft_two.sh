#!/usr/bin/env bash
# Two failures in one run under ULFM: DP3 x PP2 1F1B on 6 ranks; rank 5 (replica 2) raises
# SIGKILL after step 2, rank 3 (replica 1) after step 4 (CLPIPE_FAULT=die:5:2,die:3:4). The
# survivors go on as 2 replicas over 4 ranks, then as 1 over 2 (a second shrink, of the
# communicator the first recovery made), end with exit 0 at step 6, count 2 failures, and their
# checkpoint loads. Losses: equal (printed values; the tolerance of test_ft_replica.sh) to a run
# without failures over the same survivors: DP3 to step 2, resumed as DP2 to step 4, resumed as
# DP1 to step 6. Usage: test_ft_two.sh CLPIPE MPIRUN WORKDIR
set -u
clpipe=$1
mpirun=$2
work=$3/two
rm -rf "$work" && mkdir -p "$work"
fail=0
check() { if ! eval "$1"; then echo "FAIL: $2"; fail=1; else echo "ok: $2"; fi; }

for i in $(seq 1 3000); do echo "the quick brown fox jumps over the lazy dog $((i % 17))."; done > "$work/corpus.txt"
common=(--data "$work/corpus.txt" --model.n_layer=2 --model.d_model=32 --model.n_head=4
        --model.ctx=16 --train.batch=2 --train.micro_batches=2 --eval.every=0
        --eval.batches=1 --pipeline.stages=2 --pipeline.schedule=1f1b --pipeline.deadline=60
        --pipeline.deterministic=true)
mpi=("$mpirun" --with-ft ulfm --oversubscribe)

CLPIPE_FAULT=die:5:2,die:3:4 timeout 300 "${mpi[@]}" -np 6 "$clpipe" train "${common[@]}" \
	--pipeline.replicas=3 --steps 6 --ckpt.dir="$work/ck" >"$work/ft.out" 2>&1
rc=$?
check "[ $rc -eq 0 ]" "the run with two ranks killed ends with exit 0 (got $rc)"
check "grep -aq '^step 6/6 ' '$work/ft.out'" "it reaches its planned step count"
check "grep -aq 'new layout 2 stages x 2 replicas over 4 ranks' '$work/ft.out' && grep -aq 'new layout 2 stages x 1 replica over 2 ranks' '$work/ft.out'" \
	"it goes on with 2 replicas, then with 1"
check "grep -aq '^failures survived: 2' '$work/ft.out'" "the summary counts both failures"
"$clpipe" eval --ckpt "$work/ck" --eval.batches=1 >"$work/eval.out" 2>&1
check "[ $? -eq 0 ] && grep -aq 'val loss' '$work/eval.out'" "the checkpoint loads and evaluates"

timeout 300 "${mpi[@]}" -np 6 "$clpipe" train "${common[@]}" --pipeline.replicas=3 --steps 2 \
	--ckpt.dir="$work/ref" >"$work/ref1.out" 2>&1 &&
timeout 300 "${mpi[@]}" -np 4 "$clpipe" train "${common[@]}" --pipeline.replicas=2 --steps 4 \
	--ckpt.dir="$work/ref" --resume >"$work/ref2.out" 2>&1 &&
timeout 300 "${mpi[@]}" -np 2 "$clpipe" train "${common[@]}" --pipeline.replicas=1 --steps 6 \
	--ckpt.dir="$work/ref" --resume >"$work/ref3.out" 2>&1
check "[ $? -eq 0 ]" "the reference over the same survivors runs"
losses() { grep -ahE '^step [0-9]+/[0-9]+ \|' "$@" | sed -E 's/^step ([0-9]+)\/[0-9]+ /step \1 /; s/ \| [0-9]+ tok\/s.*//'; }
losses "$work/ft.out" >"$work/ft.loss"
losses "$work/ref1.out" "$work/ref2.out" "$work/ref3.out" >"$work/ref.loss"
check "[ \$(wc -l <'$work/ft.loss') -eq 6 ] && diff '$work/ft.loss' '$work/ref.loss'" \
	"losses and gradient norms of steps 1-6 equal the run without failures over the same survivors"
[ $fail -ne 0 ] && { echo "--- ft.out"; cat "$work/ft.out"; }
exit $fail
