#!/usr/bin/env bash
# PipeFisher on DP2 x PP2 under ULFM with the failure inside a cycle (issue 28): K = 4 on a fixed
# cost table, rank 3 raises SIGKILL on itself after step 3. The data kept for the cycle's
# deferred factors lives in the old executor and is not carried over, so the take-over is
# refused: the survivors of the whole replica say (the first to say it stops the job, so the
# other may not get to print it), the agreed step lies inside a PipeFisher
# cycle and exit non-zero by themselves (the other replica's rank leaves), writing nothing
# under ckpt.dir (tools/supervise.sh relaunches from the last checkpoint, none yet here: the
# run's first falls at step 4).
# Usage: test_ft_pf_midcycle.sh CLPIPE MPIRUN WORKDIR
set -u
clpipe=$1
mpirun=$2
work=$3/pf-midcycle
rm -rf "$work" && mkdir -p "$work"
fail=0
check() { if ! eval "$1"; then echo "FAIL: $2"; fail=1; else echo "ok: $2"; fi; }

for i in $(seq 1 3000); do echo "the quick brown fox jumps over the lazy dog $((i % 17))."; done > "$work/corpus.txt"
cat >"$work/costs.json" <<'JSON'
{"format": "clpipe-costs", "version": 1, "source": "ft test: fixed",
 "stages": [
  {"fwd_s": 1, "bwd_s": 2, "opt_s": 0.1, "kfac_curv_a_s": 0.5, "kfac_curv_b_s": 0.5,
   "kfac_inv_s": 1, "kfac_precond_s": 0.2},
  {"fwd_s": 1, "bwd_s": 2, "opt_s": 0.1, "kfac_curv_a_s": 0.5, "kfac_curv_b_s": 0.5,
   "kfac_inv_s": 1, "kfac_precond_s": 0.2}]}
JSON
CLPIPE_FAULT=die:3:3 timeout 300 "$mpirun" --with-ft ulfm --oversubscribe -np 4 "$clpipe" train \
	--data "$work/corpus.txt" --model.n_layer=2 --model.d_model=32 --model.n_head=4 \
	--model.ctx=16 --train.batch=2 --train.micro_batches=2 --eval.every=0 --eval.batches=1 \
	--pipeline.stages=2 --pipeline.schedule=1f1b --pipeline.deadline=60 --optim.name=kfac \
	--pipeline.pipefisher=true --pipeline.pipefisher_costs="$work/costs.json" \
	--pipeline.replicas=2 --steps 8 --ckpt.dir="$work/ck" >"$work/ft.out" 2>&1
rc=$?
check "[ $rc -ne 0 ]" "the run ends non-zero (got $rc)"
# the first survivor to say it stops the job, which may take the other before it prints
check "[ \$(grep -ac 'the agreed step 3 lies inside a PipeFisher cycle (K = 4, the new layout.s K = 2)' '$work/ft.out') -ge 1 ]" \
	"a survivor of the whole replica says the agreed step lies inside a cycle"
check "! grep -aq '^step 4/8' '$work/ft.out'" "no survivor trains on"
check "[ ! -d '$work/ck/step-00000003' ]" "no checkpoint inside the cycle was written"
[ $fail -ne 0 ] && { echo "--- ft.out"; cat "$work/ft.out"; }
exit $fail
