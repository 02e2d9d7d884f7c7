#!/usr/bin/env bash
# Without ULFM (Open MPI 4.1): tools/supervise.sh relaunches a 2-stage 1F1B job whose rank 1
# raises SIGKILL on itself after step 3 (CLPIPE_FAULT=die:1:3) with --resume; the job then
# finishes unattended with exit 0 at its planned step 6 from the checkpoint of step 2 (one
# step, step 3, is lost and redone), its checkpoint loads, and the losses of steps 3-6 equal
# those of a run without a failure (resuming is exact: tests/exec's resume tests; the printed
# values must be equal). With MPIRUN (an Open MPI 5 with ULFM): the same under --with-ft ulfm,
# where the survivor finds no replica that still holds every stage, says so naming the lost
# rank, and exits non-zero by itself for the supervisor to relaunch (pipeline.replan = false:
# by default it re-plans over itself, ft.pp2_replan_1).
# Usage: test_ft_supervise.sh CLPIPE SUPERVISE WORKDIR [MPIRUN]
set -u
clpipe=$1
supervise=$2
ulfm=${4:-}
work=$3/supervise${ulfm:+-ulfm}
rm -rf "$work" && mkdir -p "$work"
fail=0
check() { if ! eval "$1"; then echo "FAIL: $2"; fail=1; else echo "ok: $2"; fi; }

for i in $(seq 1 3000); do echo "the quick brown fox jumps over the lazy dog $((i % 17))."; done > "$work/corpus.txt"
common=(--data "$work/corpus.txt" --model.n_layer=2 --model.d_model=32 --model.n_head=4
        --model.ctx=16 --train.batch=2 --train.micro_batches=2 --steps 6 --eval.every=0
        --eval.batches=1 --pipeline.stages=2 --pipeline.schedule=1f1b --pipeline.deadline=60
        --ckpt.every=2)
mpi=(mpirun --allow-run-as-root --oversubscribe -np 2)
# under ULFM the survivors would re-plan over themselves (ft.pp2_replan_1): not here
[ -n "$ulfm" ] && mpi=("$ulfm" --with-ft ulfm --oversubscribe -np 2) && common+=(--pipeline.replan=false)

CLPIPE_FAULT=die:1:3 timeout 500 "$supervise" --tries 3 -- "${mpi[@]}" "$clpipe" train \
	"${common[@]}" --ckpt.dir="$work/ck" >"$work/sup.out" 2>&1
rc=$?
check "[ $rc -eq 0 ]" "the supervised run ends with exit 0 (got $rc)"
check "grep -aq 'CLPIPE_FAULT: rank 1 dies after step 3' '$work/sup.out'" "rank 1 was killed"
check "grep -aq 'supervise: the job ended with status [1-9][0-9]* .*relaunching with --resume' '$work/sup.out'" \
	"the supervisor saw the job die and relaunched it"
[ -n "$ulfm" ] && check "grep -aq 'lost rank 1 (host .*): no replica holds every stage any more' '$work/sup.out'" \
	"under ULFM the survivor names the lost rank and why it cannot go on"
check "grep -aq 'resumed from .*step-00000002 at step 2' '$work/sup.out'" "the relaunch resumed from step 2"
check "grep -aq '^step 6/6 ' '$work/sup.out' && grep -aq 'supervise: finished after 1 relaunch' '$work/sup.out'" \
	"it reached its planned step count after one relaunch"
"$clpipe" eval --ckpt "$work/ck" --eval.batches=1 >"$work/eval.out" 2>&1
check "[ $? -eq 0 ] && grep -aq 'val loss' '$work/eval.out'" "the checkpoint loads and evaluates"

timeout 300 "${mpi[@]}" "$clpipe" train "${common[@]}" --ckpt.dir="$work/ref" >"$work/ref.out" 2>&1
check "[ $? -eq 0 ]" "the run without a failure runs"
losses() { grep -ahE '^step [3-6]/6 \|' "$1" | sed -E 's/ \| [0-9]+ tok\/s.*//' | tail -4; }
check "[ \$(losses '$work/sup.out' | wc -l) -eq 4 ] && diff <(losses '$work/sup.out') <(losses '$work/ref.out')" \
	"the losses of steps 3-6 after the relaunch equal the run without a failure"
[ $fail -ne 0 ] && { echo "--- sup.out"; cat "$work/sup.out"; }
exit $fail
