#!/usr/bin/env bash
# docs/OPENCL.md's portability table, measured for several OpenCL implementations side by side in
# one run on the same machine (default: PoCL and Intel's CPU runtime, as registered by
# `tools/setup.sh --intel` in .cache/icd-intel). Each part runs for every implementation before
# the next part starts, so both see the same minutes of the machine's load:
#   1. programs built: `clpipe kernels --device D` from an empty engine cache (and an empty PoCL
#      cache), with its wall time;
#   2. GEMM: `clpipe bench gemm --backends packed` on its default shapes (the three training
#      products of each GPT-2-small linear layer, 4096 tokens, and square 512/1024/2048), each
#      against OpenBLAS on the host in the same run;
#   3. training: GPT-2 small (12 layers, d_model 768, 12 heads, context 256, vocabulary 50257),
#      batch 4, STEPS + 1 steps (the first builds kernels): median tokens/s of steps 2..;
#   4. `clpipe bench` against clpeak (tools/bench_vs_clpeak.sh, --rounds 1).
# Prints a summary and keeps every output in OUT (default .cache/bench-impls-<date>-<time>).
# Usage: tools/bench_impls.sh [--steps N] [--out DIR] [--quick] [--only PARTS] [PLATFORM ...]
#   PLATFORM: an OpenCL platform name as `clpipe devices --json` spells it (default "Portable
#   Computing Language" "Intel(R) OpenCL"); --quick: tiny sizes, to check the script itself;
#   --only: comma list of kernels,gemm,train,clpeak (default all).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
steps=3 out="" quick=0 only=kernels,gemm,train,clpeak
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --only) only=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    --*) echo "bench_impls.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || set -- "Portable Computing Language" "Intel(R) OpenCL"
. "$root/tools/env.sh"
clpipe=$root/build/tools/clpipe
[ -x "$clpipe" ] || { echo "bench_impls.sh: no $clpipe (build first: tools/test.sh)" >&2; exit 1; }
[ -z "${OCL_ICD_VENDORS:-}" ] && [ -d "$root/.cache/icd-intel" ] && export OCL_ICD_VENDORS=$root/.cache/icd-intel
out=${out:-$root/.cache/bench-impls-$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$out"
export POCL_MEMORY_LIMIT=${POCL_MEMORY_LIMIT:-16} # GPT-2 small needs more than PoCL's default

# each platform's device index (clpipe's overall numbering, which follows the ICDs' order)
"$clpipe" devices --write-devices "$out/devices.json" >/dev/null
idx=() names=("$@")
for p in "$@"; do
  i=$(python3 - "$out/devices.json" "$p" <<'PY'
import json, sys
devs = json.load(open(sys.argv[1]))["devices"]
print(next((i for i, d in enumerate(devs) if d.get("platform") == sys.argv[2]), -1))
PY
)
  [ "$i" -ge 0 ] || { echo "bench_impls.sh: no device of platform '$p' (OCL_ICD_VENDORS=${OCL_ICD_VENDORS:-})" >&2; exit 1; }
  idx+=("$i")
done
tag() { echo "dev$1"; }
part() { case ",$only," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
echo "== $(date -u +%H:%M:%S) devices: $(for k in "${!idx[@]}"; do printf '%s = %s; ' "${idx[$k]}" "${names[$k]}"; done)"
uptime | sed 's/^/   load: /'

part kernels && echo "== $(date -u +%H:%M:%S) 1. programs built from empty caches"
part kernels && for d in "${idx[@]}"; do
  rm -rf "$out/engine-$d" "$out/pocl-$d"
  s=$(date +%s%N)
  CLPIPE_CACHE_DIR=$out/engine-$d POCL_CACHE_DIR=$out/pocl-$d \
    "$clpipe" kernels --device "$d" >"$out/kernels.$(tag "$d").txt" 2>&1 || true
  e=$(date +%s%N)
  printf '   device %s: %s of %s programs ok, %d.%d s\n' "$d" \
    "$(grep -c ' ok ' "$out/kernels.$(tag "$d").txt" || true)" \
    "$(grep -cE ' (ok|FAILED)' "$out/kernels.$(tag "$d").txt" || true)" \
    $(((e - s) / 1000000000)) $(((e - s) / 100000000 % 10))
done

part gemm && echo "== $(date -u +%H:%M:%S) 2. GEMM (packed) against OpenBLAS"
q=(); [ $quick = 1 ] && q=(--quick)
part gemm && for d in "${idx[@]}"; do
  "$clpipe" bench gemm --device "$d" --backends packed "${q[@]}" --json "$out/gemm.$(tag "$d").json" \
    >"$out/gemm.$(tag "$d").txt" 2>&1 || echo "   device $d: bench gemm failed ($out/gemm.$(tag "$d").txt)"
done
part gemm && for d in "${idx[@]}"; do
  python3 - "$out/gemm.$(tag "$d").json" "$d" <<'PY' || true
import json, math, sys
recs = [r for r in json.load(open(sys.argv[1]))["records"] if r.get("backend") == "packed"]
if not recs:
    sys.exit(0)
rat = [r["ratio_to_openblas"] for r in recs]
gf = [r["gflops"] for r in recs]
g = math.exp(sum(map(math.log, rat)) / len(rat))
print(f"   device {sys.argv[2]}: packed {min(gf):.0f}-{max(gf):.0f} GFLOP/s, "
      f"{min(rat):.2f}-{max(rat):.2f} x OpenBLAS (geometric mean {g:.2f}) over {len(recs)} shapes")
PY
done

part train && echo "== $(date -u +%H:%M:%S) 3. training GPT-2 small, batch 4 x 256"
corpus=$root/.cache/bench-corpus.txt
[ -s "$corpus" ] || head -c 4000000 /dev/urandom | base64 > "$corpus"
if [ $quick = 1 ]; then
  model=(--model.preset=gpt2 --model.n_layer=2 --model.d_model=64 --model.n_head=4
         --model.ctx=64 --model.vocab=512 --train.batch=2 --train.seq=64)
else
  model=(--model.preset=gpt2 --model.n_layer=12 --model.d_model=768 --model.n_head=12
         --model.ctx=256 --model.vocab=50257 --train.batch=4 --train.seq=256)
fi
part train && for d in "${idx[@]}"; do
  log=$out/train.$(tag "$d").jsonl
  "$clpipe" train "${model[@]}" --data "$corpus" --steps $((steps + 1)) --optim.warmup=1 \
    --eval.every=0 --eval.batches=1 --train.device="$d" --train.log="$log" \
    >"$out/train.$(tag "$d").txt" 2>&1 || echo "   device $d: training failed ($out/train.$(tag "$d").txt)"
  python3 - "$log" "$d" <<'PY' || true
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"step"' in l]
rows = [r for r in rows if r.get("event") == "step"]
if rows[1:]:
    t = [r["tok_s"] for r in rows[1:]]
    print(f"   device {sys.argv[2]}: {statistics.median(t):.0f} tokens/s (median of steps 2..{len(rows)}, "
          f"{min(t):.0f}-{max(t):.0f}); losses", " ".join("%.4f" % r["loss"] for r in rows))
PY
done

part clpeak && echo "== $(date -u +%H:%M:%S) 4. clpipe bench against clpeak"
part clpeak && for d in "${idx[@]}"; do
  r=(--rounds 1); [ $quick = 1 ] && r=(--rounds 1 --repeats 3)
  "$root/tools/bench_vs_clpeak.sh" --device "$d" --clpipe "$clpipe" --out "$out/clpeak.$(tag "$d")" \
    "${r[@]}" >"$out/clpeak.$(tag "$d").txt" 2>&1 || echo "   device $d: bench_vs_clpeak.sh failed"
  echo "   device $d:"; sed 's/^/     /' "$out/clpeak.$(tag "$d").txt" | grep -v '^ *round\|^ *device\|^ *transfers' || true
done
uptime | sed 's/^/   load: /'
echo "== $(date -u +%H:%M:%S) done: $out"
