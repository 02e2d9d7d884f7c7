#!/usr/bin/env bash
# SkipPipe under ULFM when a stage loses its only node (issue 28): skip.stage_nodes = [2,1,2] on
# 5 ranks, checkpoint every 2 steps, rank 2 (stage 1's only node) raises SIGKILL on itself after
# step 3 (CLPIPE_FAULT=die:2:3). No node holds stage 1's layers any more and re-planning a path
# set's stages is not done, so every survivor must say so, naming the lost rank, the stage and
# its layers and the checkpoint that stays, and exit non-zero by itself; the checkpoint of
# step 2 must be complete and evaluate (what tools/supervise.sh resumes from).
# Usage: test_ft_skip_none.sh CLPIPE MPIRUN WORKDIR
set -u
clpipe=$1
mpirun=$2
work=$3/skip-none
rm -rf "$work" && mkdir -p "$work"
fail=0
check() { if ! eval "$1"; then echo "FAIL: $2"; fail=1; else echo "ok: $2"; fi; }

for i in $(seq 1 3000); do echo "the quick brown fox jumps over the lazy dog $((i % 17))."; done > "$work/corpus.txt"
CLPIPE_FAULT=die:2:3 timeout 300 "$mpirun" --with-ft ulfm --oversubscribe -np 5 "$clpipe" train \
	--data "$work/corpus.txt" --model.n_layer=3 --model.d_model=32 --model.n_head=4 \
	--model.ctx=16 --train.batch=2 --train.micro_batches=2 --eval.every=0 --eval.batches=2 \
	--pipeline.schedule=skippipe --optim.warmup=1 --pipeline.deadline=60 \
	--skip.stage_nodes=[2,1,2] --steps 6 --ckpt.every=2 --ckpt.dir="$work/ck" >"$work/ft.out" 2>&1
rc=$?
check "[ $rc -ne 0 ]" "the run ends non-zero (got $rc)"
check "[ \$(grep -ac 'lost rank 2 (host [^)]*): no node of SkipPipe stage 1 (layers 1-1) is left: the survivors cannot hold the model; the last checkpoint under $work/ck stays intact' '$work/ft.out') -eq 4 ]" \
	"every survivor names the lost rank, the stage, its layers and the checkpoint that stays"
check "! grep -aq '^step 4/6' '$work/ft.out'" "no survivor trains on"
check "[ -f '$work/ck/step-00000002/manifest.json' ]" "the checkpoint of step 2 is complete"
"$clpipe" eval --ckpt "$work/ck" --eval.batches=2 --train.batch=2 >"$work/eval.out" 2>&1
check "[ $? -eq 0 ] && grep -aq 'val loss' '$work/eval.out'" "it evaluates"
[ $fail -ne 0 ] && { echo "--- ft.out"; cat "$work/ft.out"; }
exit $fail
