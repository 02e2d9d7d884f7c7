#!/usr/bin/env bash
# PipeFisher's convergence benchmark (docs/KFAC.md, "Measured"): on the quickstart corpus
# (.cache/fortunes.txt, as tools/quickstart.sh builds it) the same small byte-level GPT-2 and the
# same global batch trained three ways: AdamW on one device, K-FAC on one device (the refresh on
# the critical path), K-FAC with PipeFisher in a 2-rank 1F1B pipeline (mpirun --bind-to core).
# Prints the steps and training time each needs to reach the target validation loss and writes
# .cache/pf-conv/convergence.svg (validation loss against step and against time).
# Usage: [PF_OUT=DIR] tools/pipefisher_convergence.sh [--steps N] [--target LOSS] [extra clpipe
# train args, e.g. --kfac.base=adamw]. Another target on the same logs: tools/pipefisher_plot.py.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
steps=300 target=2.5
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --target) target=$2; shift 2 ;;
    *) break ;;
  esac
done
. "$root/tools/env.sh"
cd "$root"
build_tree "$root/build"
clpipe=$root/build/tools/clpipe
corpus=$(fortunes_corpus)
out=${PF_OUT:-.cache/pf-conv} # another directory keeps earlier results
mkdir -p "$out"
common=(--model.preset=gpt2 --model.n_layer=4 --model.d_model=64 --model.n_head=4
        --model.ctx=64 --data.path="$corpus" --train.batch=4 --train.micro_batches=4
        --train.steps="$steps" --optim.lr=3e-3 --optim.min_lr=3e-4 --optim.warmup=20
        --kfac.lr=0.05 --kfac.damping=0.03 --eval.every=20
        --eval.batches=8 --pipeline.deadline=600 --no-ckpt)
one() { # one device, one thread per core left to PoCL
  local name=$1; shift
  "$clpipe" train "${common[@]}" --train.log="$out/$name.jsonl" "$@" > "$out/$name.log" 2>&1 ||
    { tail -20 "$out/$name.log" >&2; exit 1; }
}
# PipeFisher first: the pass's K (from costs measured at start-up) is the one-device K-FAC's too,
# so the two compute the same training and differ in time only
mpirun --allow-run-as-root --oversubscribe --bind-to core --map-by core -np 2 \
  -x POCL_MAX_PTHREAD_COUNT=1 -x CLPIPE_CACHE_DIR -x POCL_CACHE_DIR \
  "$clpipe" train "${common[@]}" --optim.name=kfac --pipeline.stages=2 \
  --pipeline.schedule=1f1b --pipeline.pipefisher=true --train.log="$out/pipefisher.jsonl" "$@" \
  > "$out/pipefisher.log" 2>&1 || { tail -20 "$out/pipefisher.log" >&2; exit 1; }
grep -h "^pipefisher: " "$out/pipefisher.log" || true
K=$(sed -n 's/^pipefisher: K = \([0-9]*\).*/\1/p' "$out/pipefisher.log" | head -1)
one kfac --optim.name=kfac --kfac.interval="$K" "$@"
one adamw --optim.name=adamw "$@"
python3 "$root/tools/pipefisher_plot.py" --target "$target" --svg "$out/convergence.svg" \
  --title "gpt2 4 x 64 on fortunes, 4 x 4 x 64 tokens a step" \
  "AdamW, 1 device=$out/adamw.jsonl" "K-FAC, 1 device=$out/kfac.jsonl" \
  "PipeFisher, 2-rank 1F1B=$out/pipefisher.jsonl"
echo "commit $(git -C "$root" rev-parse --short HEAD); plot $out/convergence.svg"
