#!/usr/bin/env bash
# A PipeFisher checkpoint resumed in another layout (what a run resumed over the survivors of a
# lost rank does, issue 28): DP2 x PP2 1F1B with PipeFisher on a fixed cost table (K = 4)
# checkpoints at step 4; resumed as PP2 on 2 ranks, the stored cycle (for 4 ranks) is not this
# layout's, so the pass plans PP2's (K = 2, the same table) and the run goes on to step 8, says
# so, and its checkpoint carries the new cycle (a second resume uses it). Before, the resume
# was refused by the cycle check.
# Usage: test_pf_resume_layout.sh CLPIPE MPIRUN WORKDIR
set -u
clpipe=$1
mpirun=$2
work=$3/pf-resume-layout
rm -rf "$work" && mkdir -p "$work"
fail=0
check() { if ! eval "$1"; then echo "FAIL: $2"; fail=1; else echo "ok: $2"; fi; }

for i in $(seq 1 3000); do echo "the quick brown fox jumps over the lazy dog $((i % 17))."; done > "$work/corpus.txt"
cat >"$work/costs.json" <<'JSON'
{"format": "clpipe-costs", "version": 1, "source": "test: fixed",
 "stages": [
  {"fwd_s": 1, "bwd_s": 2, "opt_s": 0.1, "kfac_curv_a_s": 0.5, "kfac_curv_b_s": 0.5,
   "kfac_inv_s": 1, "kfac_precond_s": 0.2},
  {"fwd_s": 1, "bwd_s": 2, "opt_s": 0.1, "kfac_curv_a_s": 0.5, "kfac_curv_b_s": 0.5,
   "kfac_inv_s": 1, "kfac_precond_s": 0.2}]}
JSON
common=(--data "$work/corpus.txt" --model.n_layer=2 --model.d_model=32 --model.n_head=4
        --model.ctx=16 --train.batch=2 --train.micro_batches=2 --eval.every=0 --eval.batches=1
        --pipeline.stages=2 --pipeline.schedule=1f1b --optim.name=kfac --pipeline.pipefisher=true
        --pipeline.pipefisher_costs="$work/costs.json" --ckpt.dir="$work/ck")
mpi=("$mpirun" --allow-run-as-root --oversubscribe)
timeout 300 "${mpi[@]}" -np 4 "$clpipe" train "${common[@]}" --pipeline.replicas=2 --steps 4 \
	>"$work/a.out" 2>&1
check "[ $? -eq 0 ] && grep -aq 'pipefisher: K = 4' '$work/a.out'" "DP2 x PP2 runs a K = 4 cycle to step 4"
timeout 300 "${mpi[@]}" -np 2 "$clpipe" train "${common[@]}" --pipeline.replicas=1 --steps 6 \
	--resume >"$work/b.out" 2>&1
check "[ $? -eq 0 ] && grep -aq '^step 6/6' '$work/b.out'" "resumed as PP2 it trains to step 6"
check "grep -aq 'pipefisher: the K = 4 cycle of .*step-00000004 is not this layout.s (.*); the pass plans a new one' '$work/b.out' && grep -aq 'pipefisher: K = 2' '$work/b.out'" \
	"it says the stored cycle is another layout's and plans its own (K = 2)"
timeout 300 "${mpi[@]}" -np 2 "$clpipe" train "${common[@]}" --pipeline.replicas=1 --steps 8 \
	--resume >"$work/c.out" 2>&1
check "[ $? -eq 0 ] && grep -aq 'pipefisher: the K = 2 cycle of .*step-00000006' '$work/c.out' && grep -aq '^step 8/8' '$work/c.out'" \
	"a second resume runs the cycle its checkpoint carries"
[ $fail -ne 0 ] && { echo "--- b.out"; cat "$work/b.out"; echo "--- c.out"; cat "$work/c.out"; }
exit $fail
