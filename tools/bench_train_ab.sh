#!/usr/bin/env bash
# Two clpipe binaries side by side on tools/bench_train.sh's clpipe run (GPT-2-small shape,
# batch 4 x 256, AdamW, clipping): A, B, A, B ... in one script so that a loaded machine's
# noise falls on both, then each binary's median tokens/s over all its timed steps (the first
# step of a run builds kernels and is left out) and the ratio B / A.
# Usage: tools/bench_train_ab.sh BIN_A BIN_B [--rounds R] [--steps N] [--batch B]
#                                [--model gpt2|mid|tiny]
#   --model: gpt2 (default; 12 x 768, ctx 256, vocab 50257), mid (4 x 256, 4 heads, ctx 128,
#   vocab 50257: bench_train.sh --small's shape), tiny (1 x 64, 4 heads, ctx 64, vocab 257: the
#   tiny model of docs/OPENCL.md's portability table; default batch 2)
#   e.g. a build of main against this tree's: tools/bench_train_ab.sh ../main/build/tools/clpipe build/tools/clpipe
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,7p' "$0"; exit 2; }
a=$1 b=$2
shift 2
rounds=2 steps=4 batch= shape=gpt2
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --model) shape=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
corpus=$root/.cache/bench-corpus.txt
mkdir -p "$root/.cache"
[ -s "$corpus" ] || head -c 4000000 /dev/urandom | base64 > "$corpus"
case "$shape" in
  gpt2) model=(--model.preset=gpt2 --model.n_layer=12 --model.d_model=768 --model.n_head=12
               --model.ctx=256 --model.vocab=50257) ;;
  mid) model=(--model.preset=gpt2 --model.n_layer=4 --model.d_model=256 --model.n_head=4
              --model.ctx=128 --model.vocab=50257) ;;
  tiny) model=(--model.preset=gpt2 --model.n_layer=1 --model.d_model=64 --model.n_head=4
               --model.ctx=64 --model.vocab=257)
        batch=${batch:-2} ;;
  *) echo "unknown --model $shape (gpt2, mid or tiny)" >&2; exit 2 ;;
esac
batch=${batch:-4}
for r in $(seq "$rounds"); do
  for which in A B; do
    bin=$a; [ $which = B ] && bin=$b
    POCL_MAX_PTHREAD_COUNT=$(nproc) POCL_MEMORY_LIMIT=${POCL_MEMORY_LIMIT:-16} "$bin" train \
      "${model[@]}" --data "$corpus" --train.batch="$batch" --steps $((steps + 1)) \
      --optim.warmup=1 --eval.every=0 --eval.batches=1 --train.log="$work/$which-$r.jsonl" \
      > "$work/$which-$r.out" 2>&1 || { cat "$work/$which-$r.out" >&2; exit 1; }
    echo "round $r $which done"
  done
done
python3 - "$work" "$rounds" "$a" "$b" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
med = {}
for w, name in (("A", sys.argv[3]), ("B", sys.argv[4])):
    toks = []
    for r in range(1, rounds + 1):
        rows = [json.loads(l) for l in open(f"{work}/{w}-{r}.jsonl") if '"step"' in l]
        toks += [x["tok_s"] for x in rows if x.get("event") == "step"][1:]
    med[w] = statistics.median(toks)
    print(f"{w} {name}: median {med[w]:.1f} tokens/s over {len(toks)} steps "
          f"(range {min(toks):.1f} .. {max(toks):.1f})")
print(f"ratio B / A: {med['B'] / med['A']:.3f}")
PY
