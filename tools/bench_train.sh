#!/usr/bin/env bash
# Training throughput of clpipe against PyTorch on the CPU, in one run, on the same model, batch
# and optimizer: a GPT-2-small-shaped model (12 layers, d_model 768, 12 heads, context 256,
# vocabulary 50257, tied head), AdamW, gradient clipping. clpipe runs on the default device
# (PoCL on a CPU); PyTorch on the CPU with the same number of threads. Prints both tokens/s,
# the ratio, PyTorch's version, threads and BLAS, and where clpipe's device time went.
# PyTorch: `pip install torch` (current release) into .cache/bench-venv; Debian's python3-torch
# through /usr/bin/python3 only when PyPI cannot be reached.
# Usage: tools/bench_train.sh [--steps N] [--batch B] [--threads T] [extra clpipe train args]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
steps=4 batch=4 threads=$(nproc)
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    *) break ;;
  esac
done
"$root/tools/setup.sh"
. "$root/tools/env.sh"
cd "$root"
build_tree "$root/build"

py=.cache/bench-venv/bin/python
if ! "$py" -c "import torch" 2>/dev/null; then
  echo "== installing PyTorch from PyPI into .cache/bench-venv (once)"
  if python3 -m venv .cache/bench-venv && .cache/bench-venv/bin/pip install -q torch numpy; then :; else
    echo "PyPI unreachable: falling back to Debian's python3-torch"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch >/dev/null
    py=/usr/bin/python3
  fi
fi

corpus=.cache/bench-corpus.txt
[ -s "$corpus" ] || head -c 4000000 /dev/urandom | base64 > "$corpus"
log=.cache/bench-train.jsonl
model=(--model.preset=gpt2 --model.n_layer=12 --model.d_model=768 --model.n_head=12
       --model.ctx=256 --model.vocab=50257)
echo "== clpipe: $((steps + 1)) steps of $batch x 256 tokens (the first builds kernels)"
POCL_MAX_PTHREAD_COUNT=$threads POCL_MEMORY_LIMIT=${POCL_MEMORY_LIMIT:-16} \
  build/tools/clpipe train "${model[@]}" --data "$corpus" --train.batch="$batch" \
  --steps $((steps + 1)) --optim.warmup=1 --eval.every=0 --eval.batches=1 \
  --train.log="$log" --train.profile=true "$@" | grep -v '^[a-z_0-9]* = \|^\[\|^#\|^$'
clp=$("$py" - "$log" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"step"' in l]
rows = [r for r in rows if r.get("event") == "step"][1:]
print(statistics.median(r["tok_s"] for r in rows))
PY
)
echo "== PyTorch: $steps steps after one warm-up, $threads threads"
torch=$("$py" tools/bench_train_torch.py --batch "$batch" --steps "$steps" --threads "$threads" 2>/dev/null | tail -1)
"$py" - "$clp" "$torch" <<'PY'
import json, sys
clp = float(sys.argv[1]); t = json.loads(sys.argv[2])
print(f"clpipe   {clp:10.1f} tokens/s (median of steps 2..)")
print(f"PyTorch  {t['tok_s']:10.1f} tokens/s (torch {t['version']}, {t['threads']} threads, BLAS {t['blas']})")
print(f"ratio clpipe / PyTorch: {clp / t['tok_s']:.2f}")
PY
