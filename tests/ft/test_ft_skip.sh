#!/usr/bin/env bash
# SkipPipe on 6 ranks under ULFM (issue 28): 3 stages x 2 nodes (skip.stage_nodes = [2,2,2],
# paths from the path scheduler), rank K raises SIGKILL on itself after step 2
# (CLPIPE_FAULT=die:K:2). Every stage still has a node, so the survivors go on in the same
# processes: each keeps its stage's weights and moments (a stage's nodes hold the same copy:
# its gradients are averaged over them), and the new session's path scheduler plans paths over
# the 5 nodes left (skip.stage_nodes = NEWNODES; losing an origin, a stage-0 node, leaves fewer
# micro-batches per step). They must end with exit 0 at step 6, log the event on every
# survivor, count it in the summary, and leave a checkpoint that loads.
# Reference: the paths depend on the node set, so the run to compare with is one without a
# failure over the same survivors from the same point: 6 nodes to step 2 (checkpoint), resumed
# over 5 ranks with skip.stage_nodes = NEWNODES to step 6 (the same path set: the scheduler is
# deterministic, seeded by skip.seed). Tolerance: the take-over copies what that checkpoint
# holds (a stage's copy on its surviving node is its saved copy: the nodes apply the same
# averaged gradient) and the dataflow order is the same under pipeline.deterministic, so the
# printed losses and gradient norms must be equal (the printing's rounding: 5e-5 nats, 5e-4 in
# the norm). A survivor that was already past step 2's update (in its stop-and-save exchange)
# when the loss reached it logs "step 3 is next" instead of "redone": the same state.
# Train arguments after NEWNODES (--optim.name=shampoo: its own state taken over too) go to
# every run.
# Usage: test_ft_skip.sh CLPIPE MPIRUN WORKDIR K NEWNODES [train args...]
set -u
clpipe=$1
mpirun=$2
K=$4
newnodes=$5
root=$3
shift 5
extra=("$@")
tag=""
[ ${#extra[@]} -gt 0 ] && tag=-$(printf '%s' "${extra[0]#--optim.name=}" | tr -c 'a-z0-9' '_')
work=$root/skip-$K$tag
rm -rf "$work" && mkdir -p "$work"
fail=0
check() { if ! eval "$1"; then echo "FAIL: $2"; fail=1; else echo "ok: $2"; fi; }

for i in $(seq 1 3000); do echo "the quick brown fox jumps over the lazy dog $((i % 17))."; done > "$work/corpus.txt"
common=(--data "$work/corpus.txt" --model.n_layer=3 --model.d_model=32 --model.n_head=4
        --model.ctx=16 --train.batch=2 --train.micro_batches=2 --eval.every=0
        --eval.batches=2 --pipeline.schedule=skippipe --optim.warmup=1 --pipeline.deadline=60
        --pipeline.deterministic=true "${extra[@]}")
mpi=("$mpirun" --with-ft ulfm --oversubscribe)
shown=$(printf '%s' "$newnodes" | sed 's/,/, /g')

CLPIPE_FAULT=die:$K:2 timeout 300 "${mpi[@]}" -np 6 "$clpipe" train "${common[@]}" \
	--skip.stage_nodes=[2,2,2] --steps 6 --ckpt.dir="$work/ck" >"$work/ft.out" 2>&1
rc=$?
check "[ $rc -eq 0 ]" "the run with rank $K of 6 killed after step 2 ends with exit 0 (got $rc)"
check "grep -aq '^step 6/6 ' '$work/ft.out'" "it reaches its planned step count"
events() { grep -a 'ft: rank [0-9] (host ' "$work/ft.out" | grep -F "lost rank $K (host" |
	grep -E "5 survivors agreed on step 2, step 3 is (redone|next); new layout" |
	grep -F "new layout SkipPipe, 3 stages over 5 nodes $shown per stage; recovered in" | wc -l; }
check "[ \$(events) -eq 5 ]" \
	"every survivor logs the lost rank, its host, the agreed step, the new layout and the seconds"
check "grep -aq '^skippipe: 5 nodes, 3 stages' '$work/ft.out'" "paths are planned over the 5 nodes left"
check "grep -aq '^failures survived: 1' '$work/ft.out'" "the summary counts the failure"
check "grep -a '^train on: ' '$work/ft.out' | grep -F \"'--skip.stage_nodes=$newnodes'\" | grep -qF 'after step 2: SkipPipe'" \
	"the summary's layout line says what the run went on in"
check "[ -f '$work/ck/step-00000006/manifest.json' ]" "the checkpoint of step 6 is complete"
"$clpipe" eval --ckpt "$work/ck" --eval.batches=2 --train.batch=2 >"$work/eval.out" 2>&1
check "[ $? -eq 0 ] && grep -aq 'val loss' '$work/eval.out'" "the checkpoint loads and evaluates"

timeout 300 "${mpi[@]}" -np 6 "$clpipe" train "${common[@]}" --skip.stage_nodes=[2,2,2] \
	--steps 2 --ckpt.dir="$work/ref" >"$work/ref1.out" 2>&1
check "[ $? -eq 0 ]" "the reference's first part runs"
timeout 300 "${mpi[@]}" -np 5 "$clpipe" train "${common[@]}" --skip.stage_nodes="$newnodes" \
	--steps 6 --ckpt.dir="$work/ref" --resume >"$work/ref2.out" 2>&1
check "[ $? -eq 0 ]" "the reference resumed over the survivors runs"
losses() { grep -ahE '^step [0-9]+/[0-9]+ \|' "$@" | sed -E 's/^step ([0-9]+)\/[0-9]+ /step \1 /; s/ \| [0-9]+ tok\/s.*//'; }
losses "$work/ft.out" >"$work/ft.loss"
losses "$work/ref1.out" "$work/ref2.out" >"$work/ref.loss"
check "[ \$(wc -l <'$work/ft.loss') -eq 6 ] && diff '$work/ft.loss' '$work/ref.loss'" \
	"losses and gradient norms of steps 1-6 equal the run without a failure over the same survivors"
[ $fail -ne 0 ] && { echo "--- ft.out"; cat "$work/ft.out"; echo "--- ref2.out"; cat "$work/ref2.out"; }
exit $fail
