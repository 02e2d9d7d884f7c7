#!/usr/bin/env bash
# The optimizers' work in the bubbles of tools/optim_convergence.sh's 2-rank 1F1B pipeline
# (same corpus, model and global batch; docs/OPTIMIZERS.md, "Where Muon's work runs"):
#  1. a trace of each of AdamW, Muon (optim.grad_clip 1.0, the default, and 0) and K-FAC with
#     PipeFisher (AdamW base, a whole cycle) and its bubble utilisation (tools/bubble_util.py:
#     optimizer work inside the idle gaps the forwards and backwards leave / the gaps);
#  2. with BIN_A set (e.g. a build of main), Muon's step time of BIN_A and of this tree's binary
#     alternated ROUNDS times (A B A B ...), each run's median step time (steps 2..N; the first
#     builds kernels), then each binary's median over its runs and B / A. BIN_A=off: A is this
#     binary with --pipeline.optim_prep=false (Muon's work after the norm, as before).
# Usage: [BIN_A=...] [ROUNDS=3] [STEPS=30] [OPT_OUT=DIR] [AB_ONLY=1] tools/optim_bubbles.sh
#        [extra clpipe train args, for every run]   (AB_ONLY: part 2 only)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/tools/env.sh"
cd "$root"
build_tree "$root/build"
bin=$root/build/tools/clpipe
corpus=$(fortunes_corpus)
out=${OPT_OUT:-.cache/opt-bubbles}
steps=${STEPS:-30} rounds=${ROUNDS:-3}
mkdir -p "$out"
common=(--model.preset=gpt2 --model.n_layer=4 --model.d_model=64 --model.n_head=4
        --model.ctx=64 --data.path="$corpus" --train.batch=4 --train.micro_batches=4
        --optim.min_lr=3e-4 --optim.warmup=20 --eval.every=0 --pipeline.deadline=600
        --pipeline.stages=2 --pipeline.schedule=1f1b)
pipe() { # binary, log name, then clpipe train args
  local b=$1 name=$2; shift 2
  rm -rf "$out/ck-$name"
  mpirun --allow-run-as-root --oversubscribe --bind-to core --map-by core -np 2 \
    -x POCL_MAX_PTHREAD_COUNT=1 -x CLPIPE_CACHE_DIR -x POCL_CACHE_DIR \
    "$b" train "${common[@]}" --ckpt.dir="$out/ck-$name" --train.log="$out/$name.jsonl" "$@" \
    > "$out/$name.log" 2>&1 || { tail -20 "$out/$name.log" >&2; exit 1; }
}
median_ms() { # a train.log: the median "ms" of its steps after the first
  python3 -c 'import json,sys,statistics as s
v=[d["ms"] for d in map(json.loads,open(sys.argv[1])) if d.get("event")=="step" and d["step"]>1]
print(f"{s.median(v):.2f}")' "$1"
}
muon=(--optim.name=muon --optim.lr=3e-3 --muon.lr=0.05)
if [ -z "${AB_ONLY:-}" ]; then
echo "== bubble utilisation (2-rank 1F1B, $steps steps; trace of the last steps)"
pipe "$bin" adamw --train.steps="$steps" --optim.lr=3e-3 --train.trace="$out/adamw.json" \
  --train.trace_steps=4 "$@"
pipe "$bin" muon --train.steps="$steps" "${muon[@]}" --train.trace="$out/muon.json" \
  --train.trace_steps=4 "$@"
pipe "$bin" muon-noclip --train.steps="$steps" "${muon[@]}" --optim.grad_clip=0 \
  --train.trace="$out/muon-noclip.json" --train.trace_steps=4 "$@"
pipe "$bin" kfac-pf --train.steps="$steps" --optim.name=kfac --kfac.base=adamw \
  --optim.lr=3e-3 --kfac.lr=3e-3 --kfac.damping=0.03 --pipeline.pipefisher=true \
  --train.trace="$out/kfac-pf.json" "$@"
python3 "$root/tools/bubble_util.py" --ranks "$out"/adamw.json "$out"/muon.json \
  "$out"/muon-noclip.json "$out"/kfac-pf.json
fi
[ -n "${BIN_A:-}" ] || exit 0
echo "== Muon step time, BIN_A = $BIN_A against $bin ($rounds rounds, alternated)"
a=() b=() abin=$BIN_A aflags=()
[ "$BIN_A" = off ] && abin=$bin aflags=(--pipeline.optim_prep=false)
for r in $(seq "$rounds"); do
  pipe "$abin" "ab-a$r" --train.steps="$steps" "${muon[@]}" "${aflags[@]}" "$@"
  a+=("$(median_ms "$out/ab-a$r.jsonl")")
  pipe "$bin" "ab-b$r" --train.steps="$steps" "${muon[@]}" "$@"
  b+=("$(median_ms "$out/ab-b$r.jsonl")")
  echo "round $r: A ${a[-1]} ms, B ${b[-1]} ms"
done
python3 -c 'import sys,statistics as s
a=[float(x) for x in sys.argv[1].split()]; b=[float(x) for x in sys.argv[2].split()]
print(f"median step: A {s.median(a):.2f} ms, B {s.median(b):.2f} ms, B / A = {s.median(b)/s.median(a):.3f}")' \
  "${a[*]}" "${b[*]}"
