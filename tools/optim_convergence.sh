#!/usr/bin/env bash
# The optimizers to a validation target (docs/OPTIMIZERS.md): pipefisher_convergence.sh's corpus,
# model and global batch, AdamW, Muon, K-FAC, Shampoo and SOAP, each on one device and on the 2-rank 1F1B pipeline
# (mpirun --bind-to core), each over a small learning-rate grid:
#   AdamW  optim.lr in ADAMW_LRS (default 1e-3 3e-3 1e-2)
#   Muon   muon.lr in MUON_LRS (default 0.01 0.02 0.05 0.1; its AdamW tensors at optim.lr = 3e-3),
#          each with muon.delay in MUON_DELAYS (default false; "false true" adds the
#          one-step-delayed Muon, runs named ...-delay) and MUON_ARGS (default none; e.g.
#          "--muon.momentum=0.8")
#   K-FAC  kfac.lr in KFAC_LRS (default 1e-3 3e-3 1e-2; AdamW base, damping 0.03, optim.lr =
#          3e-3; PipeFisher on the pipeline, its K on one device)
#   Shampoo shampoo.lr in SHAMPOO_LRS (default 0.03 0.1 0.3; its AdamW tensors at optim.lr =
#          3e-3; SHAMPOO_ARGS, default --shampoo.interval=1: the roots every step)
#   SOAP   soap.lr in SOAP_LRS (default 3e-3 1e-2 3e-2; its AdamW tensors at optim.lr = 3e-3;
#          SOAP_ARGS, default none: soap.frequency 10); on the pipeline also with its eigenbasis
#          refreshes in the bubbles (pipeline.pipefisher, stale bases, soap.frequency = the
#          pass's K on costs measured at start-up; runs soap-pf-pipe-...) for soap.lr in
#          SOAP_PF_LRS (default SOAP_LRS)
# (a list of one blank, e.g. KFAC_LRS=" ", leaves that optimizer out)
# Prints the Markdown table of tools/pipefisher_plot.py (steps and training seconds to the
# target, the summed step times: start-up and evaluations left out) and writes
# $OUT/convergence.svg. Usage: [OPT_OUT=DIR] tools/optim_convergence.sh [--steps N]
# [--target LOSS] [extra clpipe train args].
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
steps=120 target=3.0
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
out=${OPT_OUT:-.cache/opt-conv}
mkdir -p "$out"
common=(--model.preset=gpt2 --model.n_layer=4 --model.d_model=64 --model.n_head=4
        --model.ctx=64 --data.path="$corpus" --train.batch=4 --train.micro_batches=4
        --train.steps="$steps" --optim.min_lr=3e-4 --optim.warmup=20 --eval.every=10
        --eval.batches=8 --pipeline.deadline=600)
runs=()
train() { # name, then clpipe train args; "pipe" in the name: the 2-rank 1F1B pipeline
  local name=$1; shift
  if [[ $name == *pipe* ]]; then
    mpirun --allow-run-as-root --oversubscribe --bind-to core --map-by core -np 2 \
      -x POCL_MAX_PTHREAD_COUNT=1 -x CLPIPE_CACHE_DIR -x POCL_CACHE_DIR \
      "$clpipe" train "${common[@]}" --pipeline.stages=2 --pipeline.schedule=1f1b \
      --train.log="$out/$name.jsonl" "$@" > "$out/$name.log" 2>&1 ||
      { tail -20 "$out/$name.log" >&2; exit 1; }
  else
    "$clpipe" train "${common[@]}" --train.log="$out/$name.jsonl" "$@" > "$out/$name.log" 2>&1 ||
      { tail -20 "$out/$name.log" >&2; exit 1; }
  fi
  runs+=("$name=$out/$name.jsonl")
}
# K-FAC with AdamW as its base (docs/KFAC.md's better variant here): PipeFisher on the pipeline
# first, its K then the one-device K-FAC's refresh interval (the same training, as the tests say)
for lr in ${KFAC_LRS:-1e-3 3e-3 1e-2}; do
  train "kfac-pipe-lr$lr" --optim.name=kfac --kfac.base=adamw --optim.lr=3e-3 --kfac.lr="$lr" \
    --kfac.damping=0.03 --pipeline.pipefisher=true "$@"
  K=$(sed -n 's/^pipefisher: K = \([0-9]*\).*/\1/p' "$out/kfac-pipe-lr$lr.log" | head -1)
  train "kfac-one-lr$lr" --optim.name=kfac --kfac.base=adamw --optim.lr=3e-3 --kfac.lr="$lr" \
    --kfac.damping=0.03 --kfac.interval="$K" "$@"
done
for where in one pipe; do
  for lr in ${ADAMW_LRS:-1e-3 3e-3 1e-2}; do
    train "adamw-$where-lr$lr" --optim.name=adamw --optim.lr="$lr" "$@"
  done
  for lr in ${MUON_LRS:-0.01 0.02 0.05 0.1}; do
    for delay in ${MUON_DELAYS:-false}; do
      # shellcheck disable=SC2086 # MUON_ARGS is a list of flags
      train "muon-$where-lr$lr$([ "$delay" = true ] && echo -delay)" --optim.name=muon \
        --optim.lr=3e-3 --muon.lr="$lr" --muon.delay="$delay" ${MUON_ARGS:-} "$@"
    done
  done
  for lr in ${SHAMPOO_LRS:-0.03 0.1 0.3}; do
    # shellcheck disable=SC2086 # SHAMPOO_ARGS is a list of flags
    train "shampoo-$where-lr$lr" --optim.name=shampoo --optim.lr=3e-3 --shampoo.lr="$lr" \
      ${SHAMPOO_ARGS:---shampoo.interval=1} "$@"
  done
  for lr in ${SOAP_LRS:-3e-3 1e-2 3e-2}; do
    # shellcheck disable=SC2086 # SOAP_ARGS is a list of flags
    train "soap-$where-lr$lr" --optim.name=soap --optim.lr=3e-3 --soap.lr="$lr" \
      ${SOAP_ARGS:-} "$@"
  done
done
# SOAP's refreshes in the pipeline's bubbles (the pass's K on costs measured at start-up)
for lr in ${SOAP_PF_LRS:-${SOAP_LRS:-3e-3 1e-2 3e-2}}; do
  # shellcheck disable=SC2086 # SOAP_ARGS is a list of flags
  train "soap-pf-pipe-lr$lr" --optim.name=soap --optim.lr=3e-3 --soap.lr="$lr" \
    --pipeline.pipefisher=true ${SOAP_ARGS:-} "$@"
  sed -n 's/^pipefisher: K = \([0-9]*\).*/soap-pf-pipe-lr'"$lr"': PipeFisher K = \1/p' \
    "$out/soap-pf-pipe-lr$lr.log" | head -1
done
python3 "$root/tools/pipefisher_plot.py" --target "$target" --svg "$out/convergence.svg" \
  --title "gpt2 4 x 64 on fortunes, 4 x 4 x 64 tokens a step" "${runs[@]}"
echo "commit $(git -C "$root" rev-parse --short HEAD); plot $out/convergence.svg"
