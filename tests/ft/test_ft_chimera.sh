#!/usr/bin/env bash
# Chimera's twin as the holder of a lost stage (issue 28): Chimera on 2 ranks under ULFM (rank r
# holds stage r of the down pipeline and stage 1 - r of the up one), rank 1 raises SIGKILL on
# itself after step 3 (CLPIPE_FAULT=die:1:3), with a checkpoint every 2 steps. Rank 0 holds
# both stages (stage 1 as its up pipeline's twin copy), so it re-plans to 1 stage of 2 layers
# (1F1B: the twins are gone), takes every tensor from memory (step 3) and none from the step-2
# checkpoint, ends with exit 0 at step 8, logs the event, counts it in the summary, and leaves
# a checkpoint that loads. Reference: Chimera on 2 ranks to step 3 (checkpoint), resumed on one
# rank as 1 stage to step 8: nothing of the lost stage is lost, so the two must agree. The
# twins' copies are equal (each applies the same update to the same sum of its two halves: a
# two-term float sum is commutative), so the take-over holds what the checkpoint holds and the
# printed losses and gradient norms must be equal (the printing's rounding: 5e-5 nats, 5e-4 in
# the norm).
# With D = 4 (4 layers) and K = 2: rank 2's stage goes to rank 1, its twin's holder (the re-plan
# prefers that split to the as even [1, 1, 2]), so the 3 survivors go on as 1F1B [1, 2, 1]
# with every tensor from memory, and the reference is Chimera on 4 ranks to step 3 resumed
# over that layout (Chimera's micro-batches are a multiple of D: D of them).
# Usage: test_ft_chimera.sh CLPIPE MPIRUN WORKDIR [D K NEWLAYERS]
set -u
clpipe=$1
mpirun=$2
D=${4:-2}
K=${5:-1}
newlayers=${6:-[2]}
S=$((D - 1))
work=$3/chimera-$D-$K
rm -rf "$work" && mkdir -p "$work"
fail=0
check() { if ! eval "$1"; then echo "FAIL: $2"; fail=1; else echo "ok: $2"; fi; }

for i in $(seq 1 3000); do echo "the quick brown fox jumps over the lazy dog $((i % 17))."; done > "$work/corpus.txt"
common=(--data "$work/corpus.txt" --model.n_layer=$D --model.d_model=32 --model.n_head=4
        --model.ctx=16 --train.batch=2 --train.micro_batches="$D" --eval.every=0
        --eval.batches=1 --pipeline.deadline=60 --pipeline.deterministic=true)
mpi=("$mpirun" --with-ft ulfm --oversubscribe)

CLPIPE_FAULT=die:$K:3 timeout 300 "${mpi[@]}" -np "$D" "$clpipe" train "${common[@]}" \
	--pipeline.schedule=chimera --pipeline.stages="$D" --steps 8 --ckpt.every=2 \
	--ckpt.dir="$work/ck" >"$work/ft.out" 2>&1
rc=$?
check "[ $rc -eq 0 ]" "the run with rank $K of $D killed after step 3 ends with exit 0 (got $rc)"
check "grep -aq '^step 8/8 ' '$work/ft.out'" "it reaches its planned step count"
lay=$([ "$S" -eq 1 ] && echo "1 stage x 1 replica over 1 rank" || echo "$S stages x 1 replica over $S ranks")
events() { grep -a '^ft: rank [0-9] (host ' "$work/ft.out" | grep -F "lost rank $K (host" |
	grep -E "agreed on step 3, step 4 is (redone|next); new layout" |
	grep -F "new layout $lay, layers $newlayers; stage $K (layers $K-$K) re-planned; this rank held all its " |
	grep -F "tensors of the new layout in memory (step 3, Chimera's twin copies): none of their steps lost; recovered in" | wc -l; }
check "[ \$(events) -eq $S ]" \
	"every survivor logs the lost rank, the agreed step, the new layout, the twin copies and the seconds"
check "grep -aq '^failures survived: 1' '$work/ft.out'" "the summary counts the failure"
check "grep -a '^train on: ' '$work/ft.out' | grep -F -- '--pipeline.schedule=1f1b --pipeline.stages=$S' | grep -qF 'after step 3: $lay'" \
	"the summary's layout line says what the run went on in"
check "[ -f '$work/ck/step-00000008/manifest.json' ]" "the checkpoint of step 8 is complete"
"$clpipe" eval --ckpt "$work/ck" --eval.batches=1 >"$work/eval.out" 2>&1
check "[ $? -eq 0 ] && grep -aq 'val loss' '$work/eval.out'" "the checkpoint loads and evaluates"

timeout 300 "${mpi[@]}" -np "$D" "$clpipe" train "${common[@]}" --pipeline.schedule=chimera \
	--pipeline.stages="$D" --steps 3 --ckpt.dir="$work/ref" >"$work/ref1.out" 2>&1
check "[ $? -eq 0 ]" "the reference's first part runs"
timeout 300 "${mpi[@]}" -np "$S" "$clpipe" train "${common[@]}" --pipeline.schedule=1f1b \
	--pipeline.stages="$S" --pipeline.layers="$newlayers" --steps 8 --ckpt.dir="$work/ref" \
	--resume >"$work/ref2.out" 2>&1
check "[ $? -eq 0 ]" "the reference resumed on the survivor runs"
losses() { grep -ahE '^step [0-9]+/[0-9]+ \|' "$@" | sed -E 's/^step ([0-9]+)\/[0-9]+ /step \1 /; s/ \| [0-9]+ tok\/s.*//'; }
losses "$work/ft.out" >"$work/ft.loss"
losses "$work/ref1.out" "$work/ref2.out" >"$work/ref.loss"
check "[ \$(wc -l <'$work/ft.loss') -eq 8 ] && diff '$work/ft.loss' '$work/ref.loss'" \
	"losses and gradient norms of steps 1-8 equal Chimera to step 3 resumed over the survivors"
[ $fail -ne 0 ] && { echo "--- ft.out"; cat "$work/ft.out"; echo "--- ref2.out"; cat "$work/ref2.out"; }
exit $fail
