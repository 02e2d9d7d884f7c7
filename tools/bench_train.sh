#!/usr/bin/env bash
# Training throughput of clpipe against PyTorch on the CPU, in one run, on the same model, batch
# and optimizer: a GPT-2-small-shaped model (12 layers, d_model 768, 12 heads, context 256,
# vocabulary 50257, tied head), AdamW, gradient clipping. clpipe runs on the default device
# (PoCL on a CPU); PyTorch on the CPU with the same number of threads. Prints both tokens/s,
# the ratio, PyTorch's version, threads and BLAS, where clpipe's device time went, and its MFU
# against the device's FMA peak as clpipe bench measures it (issue 30).
#
# --precision bf16|fp16 (issue 18): clpipe in fp32 and in that precision (train.precision) one
# after the other, and PyTorch in fp32 and under bf16 autocast, each with its tokens/s and its
# activation memory, and the ratios to fp32. clpipe's activation memory is the engine's own
# figure (clpipe bench --model CONFIG --memory: the activation slot a micro-batch keeps from its
# forward to its backward, as the one-device stage allocates it, engine/model/stage_mem.c, held
# equal to real allocations by tests/plan/test_plan_mem.c; one slot here); PyTorch's is the
# bytes autograd saves for the backward in one step (parameters and their casts left out). A
# clpipe without train.precision, or whose 16-bit run fails, gets a line saying so; PyTorch is
# skipped with a message when it cannot be imported or installed.
# PyTorch: `pip install torch` (current release) into .cache/bench-venv; Debian's python3-torch
# through /usr/bin/python3 only when PyPI cannot be reached; CLPIPE_BENCH_PY names another.
# Usage: tools/bench_train.sh [--precision bf16|fp16] [--small] [--steps N] [--batch B]
#                             [--threads T] [extra clpipe train args]
#   --small: 4 layers, d_model 256, 4 heads, context 128: a quick check of the script itself.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
steps=4 batch=4 threads=$(nproc) precision="" small=0
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --precision) precision=$2; shift 2 ;;
    --precision=*) precision=${1#--precision=}; shift ;;
    --small) small=1; shift ;;
    *) break ;;
  esac
done
case "$precision" in
  ""|bf16|fp16) ;;
  *) echo "bench_train.sh: --precision $precision: expected bf16 or fp16" >&2; exit 2 ;;
esac
"$root/tools/setup.sh"
. "$root/tools/env.sh"
cd "$root"
build_tree "$root/build"

py=${CLPIPE_BENCH_PY:-.cache/bench-venv/bin/python}
if ! "$py" -c "import torch" 2>/dev/null; then
  echo "== installing PyTorch from PyPI into .cache/bench-venv (once)"
  py=.cache/bench-venv/bin/python
  if python3 -m venv .cache/bench-venv && .cache/bench-venv/bin/pip install -q torch numpy; then :; else
    echo "PyPI unreachable: falling back to Debian's python3-torch"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch >/dev/null || true
    py=/usr/bin/python3
  fi
fi
have_torch=1
"$py" -c "import torch" 2>/dev/null || have_torch=0

corpus=.cache/bench-corpus.txt
[ -s "$corpus" ] || head -c 4000000 /dev/urandom | base64 > "$corpus"
if [ "$small" = 1 ]; then
  L=4 C=256 H=4 T=128
else
  L=12 C=768 H=12 T=256
fi
V=50257
model=(--model.preset=gpt2 --model.n_layer=$L --model.d_model=$C --model.n_head=$H
       --model.ctx=$T --model.vocab=$V)
torch_model=(--layers $L --d-model $C --heads $H --ctx $T --vocab $V)

# one clpipe run: its median tokens/s over steps 2.. (the first builds kernels) and its first
# step's loss on stdout; progress on stderr; an empty line when the run failed
clpipe_run() { # label log [clpipe train args]
  local label=$1 log=$2
  shift 2
  rm -f "$log"
  echo "== clpipe $label: $((steps + 1)) steps of $batch x $T tokens (the first builds kernels)" >&2
  if ! POCL_MAX_PTHREAD_COUNT=$threads POCL_MEMORY_LIMIT=${POCL_MEMORY_LIMIT:-16} \
    build/tools/clpipe train "${model[@]}" --data "$corpus" --train.batch="$batch" \
    --train.seq=$T --steps $((steps + 1)) --optim.warmup=1 --eval.every=0 --eval.batches=1 \
    --train.log="$log" --train.profile=true --no-ckpt "$@" | grep -v '^[a-z_0-9]* = \|^\[\|^#\|^$' >&2
  then
    echo ""
    return 0
  fi
  python3 - "$log" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"step"' in l]
rows = [r for r in rows if r.get("event") == "step"]
print(f'{statistics.median(r["tok_s"] for r in rows[1:])} {rows[0]["loss"]}' if rows[1:] else "")
PY
}

torch_run() { # [--autocast bf16]
  "$py" tools/bench_train_torch.py --batch "$batch" --steps "$steps" --threads "$threads" \
    "${torch_model[@]}" "$@" 2>/dev/null | tail -1
}

# MFU: training FLOP per token (6 x the weights' multiply-adds, LM head included, plus causal
# attention, 6 L T C) against the device's measured FMA peak (clpipe bench: the larger of its
# best compute formulation and, on a CPU device, the host's C FMA loop; median of 7)
mfu() { # tokens/s
  local prof=.cache/bench-train-peak.json
  POCL_MAX_PTHREAD_COUNT=$threads build/tools/clpipe bench --only compute --repeats 7 --quiet \
    --json "$prof" >/dev/null 2>&1 || { echo "MFU: clpipe bench failed: no peak"; return 0; }
  python3 - "$1" "$prof" $L $C $V $T <<'PY'
import json, sys
tok_s, prof = float(sys.argv[1]), json.load(open(sys.argv[2]))
L, C, V, T = map(int, sys.argv[3:7])
comp = prof["devices"][0]["compute"]
dev = (comp.get("independent_mad") or {}).get("gflops", {}).get("median", 0)
host = ((comp.get("host_fma") or {}).get("gflops") or {}).get("median", 0)
peak = max(dev, host)
flop = 6 * (12 * L * C * C + V * C) + 6 * L * T * C
print(f"MFU      {100 * tok_s * flop / 1e9 / peak:10.1f} % of the measured FMA peak "
      f"{peak:.1f} GFLOP/s (device best {dev:.1f}, host FMA loop {host:.1f}); "
      f"{flop / 1e9:.3f} GFLOP per token, {tok_s * flop / 1e9:.1f} GFLOP/s")
PY
}

if [ -z "$precision" ]; then
  clp=$(clpipe_run fp32 .cache/bench-train.jsonl "$@")
  [ -n "$clp" ] || { echo "clpipe train failed" >&2; exit 1; }
  clp=${clp%% *}
  mfu "$clp"
  if [ "$have_torch" = 0 ]; then
    echo "clpipe   $clp tokens/s (median of steps 2..); PyTorch not importable ($py): skipped"
    exit 0
  fi
  echo "== PyTorch: $steps steps after one warm-up, $threads threads"
  torch=$(torch_run)
  "$py" - "$clp" "$torch" <<'PY'
import json, sys
clp = float(sys.argv[1]); t = json.loads(sys.argv[2])
print(f"clpipe   {clp:10.1f} tokens/s (median of steps 2..)")
print(f"PyTorch  {t['tok_s']:10.1f} tokens/s (torch {t['version']}, {t['threads']} threads, BLAS {t['blas']})")
print(f"ratio clpipe / PyTorch: {clp / t['tok_s']:.2f}")
PY
  exit 0
fi

# ---- --precision: fp32 and the 16-bit precision side by side ----
cfg=$(mktemp /tmp/clpipe-bench-XXXXXX.toml)
trap 'rm -f "$cfg"' EXIT
printf '[model]\npreset = "gpt2"\nn_layer = %d\nd_model = %d\nn_head = %d\nctx = %d\nvocab = %d\n[train]\nbatch = %d\nseq = %d\n' \
  $L $C $H $T $V "$batch" $T > "$cfg"
act_bytes() { # precision -> the engine's activation slot in bytes (empty if unknown)
  build/tools/clpipe bench --model "$cfg" --train.precision="$1" --memory 2>/dev/null |
    awk '/^  activations/ {print $2}'
}
a32=$(act_bytes fp32)
a16=$(act_bytes "$precision")
c32=$(clpipe_run fp32 .cache/bench-train-fp32.jsonl "$@")
c16=""
if [ -z "$a16" ]; then
  echo "== clpipe $precision: this clpipe has no train.precision = $precision: skipped" >&2
else
  c16=$(clpipe_run "$precision" .cache/bench-train-$precision.jsonl --train.precision="$precision" "$@")
  [ -n "$c16" ] || echo "== clpipe $precision: the run failed (above): no figure" >&2
fi
t32="" t16=""
if [ "$have_torch" = 1 ]; then
  echo "== PyTorch fp32 and bf16 autocast: $steps steps after one warm-up, $threads threads" >&2
  t32=$(torch_run) || t32=""
  t16=$(torch_run --autocast bf16) || t16=""
else
  echo "== PyTorch not importable ($py): skipped" >&2
fi
python3 - "$precision" "$c32" "$c16" "$a32" "$a16" "$t32" "$t16" "$L" "$C" "$batch" "$T" <<'PY'
import json, sys
prec, c32, c16, a32, a16, t32, t16, L, C, B, T = sys.argv[1:]
num = lambda s: float(s) if s else None
(c32, l32), (c16, l16) = [(num(x.split()[0]), num(x.split()[1])) if x else (None, None)
                          for x in (c32, c16)]
a32, a16 = num(a32), num(a16)
t32 = json.loads(t32) if t32 else None
t16 = json.loads(t16) if t16 else None
mib = lambda b: f"{b / 1048576:.1f} MiB" if b is not None else "n/a"
tps = lambda v: f"{v:.1f}" if v is not None else "n/a"
ratio = lambda a, b: f"{a / b:.2f}" if a is not None and b else "n/a"
print(f"\nGPT-2-shaped model: {L} layers, d_model {C}, micro-batch {B} x {T}\n")
loss = lambda v: f"{v:.4f}" if v is not None else "n/a"
print("| run | tokens/s | activation memory | tokens/s vs fp32 | activations vs fp32 | first loss |")
print("|---|---|---|---|---|---|")
print(f"| clpipe fp32 | {tps(c32)} | {mib(a32)} | 1.00 | 1.00 | {loss(l32)} |")
print(f"| clpipe {prec} | {tps(c16)} | {mib(a16)} | {ratio(c16, c32)} | {ratio(a16, a32)} | {loss(l16)} |")
if t32:
    p32, p16 = t32["tok_s"], t16["tok_s"] if t16 else None
    q32, q16 = t32["act_bytes"], t16["act_bytes"] if t16 else None
    print(f"| PyTorch fp32 | {tps(p32)} | {mib(q32)} | 1.00 | 1.00 | |")
    print(f"| PyTorch bf16 autocast | {tps(p16)} | {mib(q16)} | {ratio(p16, p32)} | {ratio(q16, q32)} | |")
    print(f"\nclpipe / PyTorch tokens/s: fp32 {ratio(c32, p32)}, {prec} vs bf16 autocast "
          f"{ratio(c16, p16)} (torch {t32['version']}, {t32['threads']} threads, BLAS {t32['blas']})")
else:
    print("| PyTorch | skipped (not importable) | | | | |")
if l32 is not None and l16 is not None and abs(l16 - l32) > 0.01 * abs(l32):
    print(f"\nWARNING: clpipe {prec}'s first loss {l16:.4f} is {abs(l16 - l32) / abs(l32):.1%} "
          f"from fp32's {l32:.4f} (same initialisation and data: the rounding alone moves it "
          f"far less): the {prec} figures time a wrong computation")
print("clpipe activations: the engine's activation slot of one micro-batch (clpipe bench "
      "--memory); PyTorch's: what autograd saves for the backward in one step")
PY
