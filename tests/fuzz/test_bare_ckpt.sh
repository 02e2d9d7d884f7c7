#!/usr/bin/env bash
# docs/CHECKPOINTS.md: a bare model.safetensors copied out of a checkpoint opens on its own:
# `clpipe eval --ckpt model.safetensors` checks the model's identity, parameter hash included,
# against the file's own metadata (issue 14: the writer left identity.params out, so eval
# refused the file as "another model ... hash (missing)"). Usage: test_bare_ckpt.sh CLPIPE WORKDIR
set -u
clpipe=$1
work=$2/bare-ckpt
rm -rf "$work" && mkdir -p "$work/copy"
for i in $(seq 1 2000); do echo "a bare checkpoint file opens on its own $((i % 13))."; done >"$work/corpus.txt"
"$clpipe" train --data "$work/corpus.txt" --model.n_layer=2 --model.d_model=32 --model.n_head=4 \
	--model.ctx=16 --train.batch=2 --steps 2 --eval.every=0 --eval.batches=1 \
	--ckpt.dir="$work/ck" --ckpt.every=1 >"$work/train.out" 2>&1 || { cat "$work/train.out"; exit 1; }
cp "$work"/ck/step-00000002/model.safetensors "$work/copy/" || exit 1
"$clpipe" eval --ckpt "$work/copy/model.safetensors" --data "$work/corpus.txt" --eval.batches=1 \
	>"$work/eval.out" 2>&1
rc=$?
cat "$work/eval.out"
[ $rc -eq 0 ] && grep -q 'val loss' "$work/eval.out"
