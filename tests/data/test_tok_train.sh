#!/usr/bin/env bash
# Masked-LM training with a Hugging Face tokenizer: all-MiniLM-L6-v2's WordPiece (30522 ids)
# by directory; the first loss is about ln(30522) (the model's vocabulary is the tokenizer's),
# and eval of the checkpoint reopens the tokenizer from the stored config.
# Usage: test_tok_train.sh CLPIPE
set -u
clpipe=$1
fix=$(cd "$(dirname "$0")" && pwd)/fixtures/tok
work=$(mktemp -d /tmp/clpipe-toktrain-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail=0
check() { if eval "$1"; then echo "ok: $2"; else echo "FAIL: $2"; fail=1; fi; }

for i in $(seq 1 60); do cat "$fix/corpus.txt"; done > "$work/text.txt"
timeout 300 "$clpipe" train --model.preset=bert --model.n_layer=1 --model.d_model=32 \
  --model.n_head=2 --model.ctx=16 --train.batch=2 --train.steps=2 --eval.batches=1 \
  --data.tokenizer_path="$fix/minilm" --data.path="$work/text.txt" --ckpt.dir="$work/ck" \
  > "$work/train.out" 2>&1
rc=$?
tail -3 "$work/train.out"
check "[ $rc -eq 0 ]" "bert trains with MiniLM's tokenizer"
loss=$(grep -m1 -o 'step 1/2 | loss [0-9.]*' "$work/train.out" | awk '{print $5}')
check "awk -v l='$loss' 'BEGIN { exit !(l > 9.8 && l < 10.9) }'" "first loss $loss is about ln(30522) = 10.33"
stored=$(grep -o 'tokenizer = [^n]*hf' "$work"/ck/step-*/manifest.json | head -1)
check "[ -n '$stored' ]" "the stored config says hf: $stored"
timeout 300 "$clpipe" eval --ckpt "$work/ck" --eval.batches=1 > "$work/eval.out" 2>&1
check "[ $? -eq 0 ] && grep -q 'val loss' '$work/eval.out'" "eval reopens the tokenizer: $(tail -1 "$work/eval.out")"
exit $fail
