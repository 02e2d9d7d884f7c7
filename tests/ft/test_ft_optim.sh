#!/usr/bin/env bash
# A replica takes over with an optimizer that keeps its own state (issue 28): DP2 x PP2 1F1B
# under ULFM, rank 3 (replica 1, stage 1) raises SIGKILL on itself after step DIE
# (CLPIPE_FAULT=die:3:DIE). The survivors agree on step DIE and go on as 2 stages x 1 replica
# over ranks 0 and 1 in the same processes: the new sessions take over, besides the weights and
# moments, the optimizer's own state (Shampoo's statistics, roots and inverses; K-FAC's factors,
# active and next inverses; PipeFisher's cycle resumes at the agreed step, a cycle end), through
# its checkpoint code (engine/train/session_ft_optim.c). They must end with exit 0 at step
# STEPS, log the event on every survivor, count it in the summary (with the layout the run went
# on in), and leave a checkpoint that loads. Reference: a run without a failure over the same
# survivors, DP2 x PP2 to step DIE (checkpoint), resumed as PP2 on 2 ranks to step STEPS.
# Tolerance: the take-over copies exactly what that checkpoint holds (fp32 weights, moments, the
# optimizer's own tensors, the data position, the step counts) and the layouts are the same, so
# the two runs compute the same sums in the same order (pipeline.deterministic): the printed
# losses and gradient norms must be equal (the printing's rounding: 5e-5 nats, 5e-4 in the norm).
# Usage: test_ft_optim.sh CLPIPE MPIRUN WORKDIR NAME DIE STEPS [train args...]
set -u
clpipe=$1
mpirun=$2
work=$3/optim-$4
die=$5
steps=$6
shift 6
rm -rf "$work" && mkdir -p "$work"
fail=0
check() { if ! eval "$1"; then echo "FAIL: $2"; fail=1; else echo "ok: $2"; fi; }

for i in $(seq 1 3000); do echo "the quick brown fox jumps over the lazy dog $((i % 17))."; done > "$work/corpus.txt"
# PipeFisher's cycle from a fixed cost table (measured costs would let K differ between runs)
cat >"$work/costs.json" <<'EOF'
{"format": "clpipe-costs", "version": 1, "source": "ft test: fixed",
 "stages": [
  {"fwd_s": 1, "bwd_s": 2, "opt_s": 0.1, "kfac_curv_a_s": 0.5, "kfac_curv_b_s": 0.5,
   "kfac_inv_s": 1, "kfac_precond_s": 0.2},
  {"fwd_s": 1, "bwd_s": 2, "opt_s": 0.1, "kfac_curv_a_s": 0.5, "kfac_curv_b_s": 0.5,
   "kfac_inv_s": 1, "kfac_precond_s": 0.2}]}
EOF
args=()
for a in "$@"; do args+=("${a//@COSTS@/$work/costs.json}"); done
common=(--data "$work/corpus.txt" --model.n_layer=2 --model.d_model=32 --model.n_head=4
        --model.ctx=16 --train.batch=2 --train.micro_batches=2 --eval.every=0
        --eval.batches=1 --pipeline.stages=2 --pipeline.schedule=1f1b --pipeline.deadline=60
        --pipeline.deterministic=true "${args[@]}")
mpi=("$mpirun" --with-ft ulfm --oversubscribe)

# the run with a failure
CLPIPE_FAULT=die:3:$die timeout 300 "${mpi[@]}" -np 4 "$clpipe" train "${common[@]}" \
	--pipeline.replicas=2 --steps "$steps" --ckpt.dir="$work/ck" >"$work/ft.out" 2>&1
rc=$?
check "[ $rc -eq 0 ]" "the run with rank 3 killed after step $die ends with exit 0 (got $rc)"
check "grep -aq '^step $steps/$steps ' '$work/ft.out'" "it reaches its planned step count"
check "[ \$(grep -ac 'ft: rank [0-9] (host .*lost rank 3 (host .*3 survivors agreed on step $die' '$work/ft.out') -eq 3 ]" \
	"every survivor logs the lost rank, its host and the agreed step"
check "grep -aq 'new layout 2 stages x 1 replica over 2 ranks; recovered in' '$work/ft.out'" \
	"the new layout is logged with the time it took"
check "grep -aq 'rank 2 .*leaves the run' '$work/ft.out'" "the rank whose replica lost a stage leaves"
check "grep -aq '^failures survived: 1' '$work/ft.out'" "the summary counts the failure"
check "grep -aq '^train on: .*after step $die: 2 stages x 1 replica over 2 ranks' '$work/ft.out'" \
	"the summary's layout line says what the run went on in"
check "[ -f '$work/ck/step-$(printf %08d "$steps")/manifest.json' ]" "the checkpoint of step $steps is complete"
"$clpipe" eval --ckpt "$work/ck" --eval.batches=1 >"$work/eval.out" 2>&1
check "[ $? -eq 0 ] && grep -aq 'val loss' '$work/eval.out'" "the checkpoint loads and evaluates"

# the same survivors without a failure: DP2 x PP2 to step DIE, then PP2 on 2 ranks
timeout 300 "${mpi[@]}" -np 4 "$clpipe" train "${common[@]}" --pipeline.replicas=2 --steps "$die" \
	--ckpt.dir="$work/ref" >"$work/ref1.out" 2>&1
check "[ $? -eq 0 ]" "the reference's first part runs"
timeout 300 "${mpi[@]}" -np 2 "$clpipe" train "${common[@]}" --pipeline.replicas=1 --steps "$steps" \
	--ckpt.dir="$work/ref" --resume >"$work/ref2.out" 2>&1
check "[ $? -eq 0 ]" "the reference resumed over the survivors runs"
losses() { grep -ahE '^step [0-9]+/[0-9]+ \|' "$@" | sed -E 's/^step ([0-9]+)\/[0-9]+ /step \1 /; s/ \| [0-9]+ tok\/s.*//'; }
losses "$work/ft.out" >"$work/ft.loss"
losses "$work/ref1.out" "$work/ref2.out" >"$work/ref.loss"
check "[ \$(wc -l <'$work/ft.loss') -eq $steps ] && diff '$work/ft.loss' '$work/ref.loss'" \
	"losses and gradient norms of steps 1-$steps equal the run without a failure over the same survivors"
[ $fail -ne 0 ] && { echo "--- ft.out"; cat "$work/ft.out"; echo "--- ref2.out"; cat "$work/ref2.out"; }
exit $fail
