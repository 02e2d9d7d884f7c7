#!/usr/bin/env bash
# A real 2-rank 1F1B step against the simulator's prediction for it: train a small model with
# two ranks, each bound to its own core, trace the last step, calibrate the simulator's compute
# times from that trace (the mean device time of each stage's forward and backward), simulate
# the same schedule, and print both step times, utilisations and the gap; an SVG puts the two
# timelines one above the other.
# Usage: tools/bench_sim_vs_real.sh [--microbatches N] [extra clpipe train args]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
N=4
[ "${1:-}" = --microbatches ] && { N=$2; shift 2; }
"$root/tools/setup.sh"
. "$root/tools/env.sh"
cd "$root"
build_tree "$root/build"
clpipe=$root/build/tools/clpipe
corpus=$(fortunes_corpus)
out=.cache/sim-vs-real
mkdir -p "$out"
echo "== measured: 2 ranks, 1F1B, $N micro-batches, each rank on its own core"
POCL_MAX_PTHREAD_COUNT=1 mpirun --allow-run-as-root --bind-to core -np 2 "$clpipe" train \
  --data "$corpus" --model.n_layer=4 --model.d_model=192 --model.n_head=6 --model.ctx=128 \
  --train.batch=8 --train.micro_batches="$N" --steps 6 --eval.every=0 --eval.batches=1 --no-ckpt \
  --pipeline.stages=2 --pipeline.schedule=1f1b --pipeline.bind=none \
  --train.trace="$out/measured.json" "$@" | grep -E "^trace of|^step 6"
echo "== simulated: the same schedule, compute times calibrated from that trace"
"$clpipe" sim --schedule 1f1b --stages 2 --microbatches "$N" --calibrate "$out/measured.json" \
  --compare "$out/measured.json" --svg "$out/sim-vs-real.svg" --trace "$out/simulated.json" \
  | tee "$out/sim.txt"
echo "timelines: $out/sim-vs-real.svg"
