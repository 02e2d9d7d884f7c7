#!/usr/bin/env bash
# Too little left to hold the model under ULFM: a 2-stage pipeline whose stages each fit the
# device (PoCL's POCL_MEMORY_LIMIT=1: 1 GiB, 0.9 usable after the 10 % the memory check keeps
# free; each stage needs about 0.55 GiB, the whole model about 1.1) loses rank 1 to SIGKILL
# after step 3. The survivor must find that it cannot hold the model alone (the memory check,
# before anything is allocated), say so naming the lost rank and stage and the memory it
# would need, exit non-zero by itself, and leave the last checkpoint (step 2) complete and
# loadable.
# Usage: test_ft_too_little.sh CLPIPE MPIRUN WORKDIR
set -u
clpipe=$1
mpirun=$2
work=$3/too-little
rm -rf "$work" && mkdir -p "$work"
fail=0
check() { if ! eval "$1"; then echo "FAIL: $2"; fail=1; else echo "ok: $2"; fi; }

# the limit is PoCL's: on another device (CLPIPE_DEVICE) the test cannot shrink it (skipped, 77)
if [ -n "${CLPIPE_DEVICE:-}" ] && [ "$CLPIPE_DEVICE" != 0 ] ||
	! POCL_MEMORY_LIMIT=1 "$clpipe" devices 2>&1 | grep -qE '^  0 .* 1\.0Gi'; then
	echo "skipped: device 0 is not PoCL's with POCL_MEMORY_LIMIT=1 (1.0Gi)"
	exit 77
fi
for i in $(seq 1 3000); do echo "the quick brown fox jumps over the lazy dog $((i % 17))."; done > "$work/corpus.txt"
common=(--data "$work/corpus.txt" --model.n_layer=4 --model.d_model=768 --model.n_head=4
        --model.d_ff=10240 --model.ctx=16 --train.batch=1 --train.micro_batches=2
        --eval.every=0 --eval.batches=1 --pipeline.schedule=1f1b --pipeline.deadline=60)

POCL_MEMORY_LIMIT=1 CLPIPE_FAULT=die:1:3 timeout 300 "$mpirun" --with-ft ulfm --oversubscribe \
	-np 2 -x POCL_MEMORY_LIMIT "$clpipe" train "${common[@]}" --pipeline.stages=2 --steps 6 \
	--ckpt.every=2 --ckpt.dir="$work/ck" >"$work/ft.out" 2>&1
rc=$?
check "[ $rc -ne 0 ] && [ $rc -ne 124 ]" "the run ends non-zero by itself (got $rc)"
check "grep -aq '^step 3/6 ' '$work/ft.out' && ! grep -aq '^step 4/6 ' '$work/ft.out'" \
	"it trained to step 3 and no further"
check "grep -aq 'lost rank 1 (host .*): no replica holds stage 1 (layers 2-3), and the 1 survivor cannot hold the model in any of 1 layout (the model does not fit: rank 0 needs .* GiB on its device .*; the last checkpoint under .*/ck stays intact' '$work/ft.out'" \
	"the survivor names the lost rank and stage, the memory it would need, and the checkpoint"
check "[ -f '$work/ck/step-00000002/manifest.json' ] && [ \$(ls '$work/ck' | wc -l) -eq 1 ]" \
	"the checkpoint of step 2 is complete and the only one"
"$clpipe" eval --ckpt "$work/ck" --eval.batches=1 >"$work/eval.out" 2>&1
check "[ $? -eq 0 ] && grep -aq 'val loss' '$work/eval.out'" "it loads and evaluates"
[ $fail -ne 0 ] && { echo "--- ft.out"; cat "$work/ft.out"; echo "--- eval.out"; cat "$work/eval.out"; }
[ $fail -eq 0 ] && rm -rf "$work/ck" # 0.8 GB
exit $fail
