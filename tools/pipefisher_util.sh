#!/usr/bin/env bash
# PipeFisher's utilisation measured from real traces (docs/KFAC.md, "Measured"): 2 ranks, each
# bound to its own core (mpirun --bind-to core), GPipe and 1F1B, the same small GPT-2 on the
# quickstart corpus, three optimizers: AdamW, K-FAC with the refresh on the critical path
# (optim.name = kfac) and K-FAC with PipeFisher (pipeline.pipefisher). The PipeFisher run goes
# first (the pass runs on costs measured at start-up and prints K); the other two then use the
# same K and trace the same window: K steps ending at a cycle end after the first cycle, so each
# trace holds exactly one factor refresh. Prints a Markdown table; the traces (Chrome JSON and
# SVG) are left in .cache/pf-util/.
# --scheds "chimera" and --np 4 measure other pipelines (extra args such as
# --pipeline.replicas=2 go to every run); --split adds a PipeFisher run with
# pipeline.pipefisher_split (each layer inverted and preconditioned by one holder of its stage).
# --costs FILE gives both PipeFisher runs the same cost table (pipeline.pipefisher_costs), so
# split and unsplit get their K from the same numbers.
# Usage: tools/pipefisher_util.sh [--steps N] [--scheds "gpipe 1f1b"] [--np 2] [--split] [--costs F]
#        [extra clpipe train args, e.g. --model.d_model=128]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
steps=30
scheds="gpipe 1f1b"
np=2
split=0
pfc=() # --costs FILE: both PipeFisher runs on this cost table instead of measuring their own
while :; do
  case "${1:-}" in
    --steps) steps=$2; shift 2 ;;
    --scheds) scheds=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --split) split=1; shift ;;
    --costs) pfc=(--pipeline.pipefisher_costs="$2"); shift 2 ;;
    *) break ;;
  esac
done
. "$root/tools/env.sh"
cd "$root"
build_tree "$root/build"
clpipe=$root/build/tools/clpipe
corpus=$(fortunes_corpus)
out=.cache/pf-util
mkdir -p "$out"
model=(--model.preset=gpt2 --model.n_layer=4 --model.d_model=64 --model.n_head=4 --model.ctx=64
       --data.path="$corpus" --train.batch=4 --train.micro_batches=4 --optim.lr=2e-3
       --optim.warmup=5 --kfac.lr=0.05 --kfac.damping=0.03 --eval.every=0 --eval.batches=2
       --pipeline.stages=2 --pipeline.deadline=600)
bind=(--bind-to core --map-by core)
[ "$np" -le "$(nproc)" ] || bind=(--bind-to none) # more ranks than cores: no binding
mpi=(mpirun --allow-run-as-root --oversubscribe "${bind[@]}" -np "$np"
     -x POCL_MAX_PTHREAD_COUNT=1 -x CLPIPE_CACHE_DIR -x POCL_CACHE_DIR)

# run NAME ARGS...: train, keep the output, print "utilisation ms_per_step"
run() {
  local name=$1; shift
  "${mpi[@]}" "$clpipe" train "${model[@]}" --train.trace="$out/$name.json" --no-ckpt "$@" \
    > "$out/$name.log" 2>&1 || { tail -20 "$out/$name.log" >&2; exit 1; }
  sed -n 's/.*trace of steps* \([0-9-]*\):.*; \([0-9.]*\) ms per step, compute utilisation \([0-9.]*\) %.*/\3 \2 \1/p' \
    "$out/$name.log" | tail -1
}

echo "| schedule | optimizer | K | traced steps | ms per step | compute utilisation |"
echo "|---|---|---|---|---|---|"
for sched in $scheds; do
  n=$steps
  while :; do
    read -r u ms win < <(run "$sched-pipefisher" --pipeline.schedule=$sched --optim.name=kfac \
      --pipeline.pipefisher=true --train.steps=$n "${pfc[@]}" "$@")
    K=$(sed -n 's/^pipefisher: K = \([0-9]*\).*/\1/p' "$out/$sched-pipefisher.log" | head -1)
    # the traced cycle must not be the first (its items are skipped)
    if [ $((n / K)) -ge 2 ]; then break; fi
    n=$((2 * K))
  done
  end=$((n / K * K))
  echo "| $sched | K-FAC + PipeFisher | $K | $win | $ms | $u % |"
  if [ "$split" = 1 ]; then
    ns=$n
    while :; do # its own K (costs measured again): trace a cycle after the first
      read -r u ms win < <(run "$sched-pipefisher-split" --pipeline.schedule=$sched \
        --optim.name=kfac --pipeline.pipefisher=true --pipeline.pipefisher_split=true \
        --train.steps=$ns "${pfc[@]}" "$@")
      Ks=$(sed -n 's/^pipefisher: K = \([0-9]*\).*/\1/p' "$out/$sched-pipefisher-split.log" | head -1)
      if [ $((ns / Ks)) -ge 2 ]; then break; fi
      ns=$((2 * Ks))
    done
    echo "| $sched | K-FAC + PipeFisher, split work | $Ks | $win | $ms | $u % |"
  fi
  read -r u ms win < <(run "$sched-kfac" --pipeline.schedule=$sched --optim.name=kfac \
    --kfac.interval=$K --train.steps=$n --train.trace_step=$end --train.trace_steps=$K "$@")
  echo "| $sched | K-FAC (refresh on the critical path) | $K | $win | $ms | $u % |"
  read -r u ms win < <(run "$sched-adamw" --pipeline.schedule=$sched --optim.name=adamw \
    --train.steps=$n --train.trace_step=$end --train.trace_steps=$K "$@")
  echo "| $sched | AdamW | - | $win | $ms | $u % |"
done
echo
echo "commit $(git -C "$root" rev-parse --short HEAD); traces in $out/ (open the .svg files)"
