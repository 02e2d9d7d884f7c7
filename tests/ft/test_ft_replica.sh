#!/usr/bin/env bash
# DP2 x PP2 1F1B under ULFM (mpirun --with-ft ulfm): rank 3 (replica 1, stage 1) raises SIGKILL
# on itself after step 2 (CLPIPE_FAULT=die:3:2, tools/cmd_train.c). The survivors must agree
# on step 2, go on as 2 stages x 1 replica over ranks 0 and 1 in the same processes, end with
# exit 0 at step 6, log the event on every survivor, count it in the summary, and leave a
# checkpoint that loads. Their losses must match a run without a failure over the same
# survivors: DP2 x PP2 to step 2 (checkpoint), then resumed as PP2 on 2 ranks to step 6.
# Tolerance: the take-over copies what a checkpoint holds (fp32 parameters and AdamW moments,
# the data position, the step counts) and the layout is the same, so the two compute the same
# sums in the same order (pipeline.deterministic): the printed loss and gradient norm must be
# equal (a tolerance of the printing's rounding, 5e-5 nats and 5e-4 in the norm).
# Usage: test_ft_replica.sh CLPIPE MPIRUN WORKDIR
set -u
clpipe=$1
mpirun=$2
work=$3/replica
rm -rf "$work" && mkdir -p "$work"
fail=0
check() { if ! eval "$1"; then echo "FAIL: $2"; fail=1; else echo "ok: $2"; fi; }

for i in $(seq 1 3000); do echo "the quick brown fox jumps over the lazy dog $((i % 17))."; done > "$work/corpus.txt"
common=(--data "$work/corpus.txt" --model.n_layer=2 --model.d_model=32 --model.n_head=4
        --model.ctx=16 --train.batch=2 --train.micro_batches=2 --eval.every=0
        --eval.batches=1 --pipeline.stages=2 --pipeline.schedule=1f1b --pipeline.deadline=60
        --pipeline.deterministic=true)
mpi=("$mpirun" --with-ft ulfm --oversubscribe)

# the run with a failure
CLPIPE_FAULT=die:3:2 timeout 300 "${mpi[@]}" -np 4 "$clpipe" train "${common[@]}" \
	--pipeline.replicas=2 --steps 6 --ckpt.dir="$work/ck" >"$work/ft.out" 2>&1
rc=$?
check "[ $rc -eq 0 ]" "the run with rank 3 killed after step 2 ends with exit 0 (got $rc)"
check "grep -aq '^step 6/6 ' '$work/ft.out'" "it reaches its planned step count"
check "[ \$(grep -ac 'ft: rank [0-9] (host .*lost rank 3 (host .*3 survivors agreed on step 2' '$work/ft.out') -eq 3 ]" \
	"every survivor logs the lost rank, its host and the agreed step"
check "grep -aq 'new layout 2 stages x 1 replica over 2 ranks; recovered in' '$work/ft.out'" \
	"the new layout is logged with the time it took"
check "grep -aq 'rank 2 .*leaves the run' '$work/ft.out'" "the rank whose replica lost a stage leaves"
check "grep -aq '^failures survived: 1' '$work/ft.out'" "the summary counts the failure"
check "[ -f '$work/ck/step-00000006/manifest.json' ]" "the checkpoint of step 6 is complete"
"$clpipe" eval --ckpt "$work/ck" --eval.batches=1 >"$work/eval.out" 2>&1
check "[ $? -eq 0 ] && grep -aq 'val loss' '$work/eval.out'" "the checkpoint loads and evaluates"

# the same survivors without a failure: DP2 x PP2 to step 2, then PP2 on 2 ranks
timeout 300 "${mpi[@]}" -np 4 "$clpipe" train "${common[@]}" --pipeline.replicas=2 --steps 2 \
	--ckpt.dir="$work/ref" >"$work/ref1.out" 2>&1
check "[ $? -eq 0 ]" "the reference's first part runs"
timeout 300 "${mpi[@]}" -np 2 "$clpipe" train "${common[@]}" --pipeline.replicas=1 --steps 6 \
	--ckpt.dir="$work/ref" --resume >"$work/ref2.out" 2>&1
check "[ $? -eq 0 ]" "the reference resumed over the survivors runs"
losses() { grep -ahE '^step [0-9]+/[0-9]+ \|' "$@" | sed -E 's/^step ([0-9]+)\/[0-9]+ /step \1 /; s/ \| [0-9]+ tok\/s.*//'; }
losses "$work/ft.out" >"$work/ft.loss"
losses "$work/ref1.out" "$work/ref2.out" >"$work/ref.loss"
check "[ \$(wc -l <'$work/ft.loss') -eq 6 ] && diff '$work/ft.loss' '$work/ref.loss'" \
	"losses and gradient norms of steps 1-6 equal the run without a failure over the same survivors"
[ $fail -ne 0 ] && { echo "--- ft.out"; cat "$work/ft.out"; echo "--- ref2.out"; cat "$work/ref2.out"; }
exit $fail
