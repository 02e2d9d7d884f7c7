#!/usr/bin/env bash
# One prepared check of a GPU (or any OpenCL device) through its vendor's OpenCL, in at most
# 9 minutes: first `clpipe check` (every op against the C references, each storage type and
# kernel shape), then list the devices, build every kernel, run the kernel and model tests on
# the device, the GEMM benchmark (own tiled kernel, CLBlast defaults, CLBlast as tuned), the
# device profile, and a short GPT-2-small training benchmark (tokens/s, device time split).
# Every result lands as JSON under one folder, with summary.json listing each step's exit code
# and seconds.
#
# Usage: tools/gpu_check.sh [--device SPEC] [--out DIR] [--dry-run]
#   --device SPEC  the device to check (selector grammar of `clpipe devices`; default "gpu")
#   --out DIR      results folder (default .cache/gpu-check-<date>-<time>)
#   --dry-run      run every step on the default device (PoCL on the CPU here) with tiny sizes:
#                  proves the script end to end without a GPU
# Needs: a built tree (this script builds ./build if missing), the vendor's ICD registered under
# /etc/OpenCL/vendors (docs/OPENCL.md), python3 for the summary. Exits non-zero when a step
# failed; the folder still holds everything that ran.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
device=gpu dry=0 out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device=$2; shift 2 ;;
    --device=*) device=${1#--device=}; shift ;;
    --out) out=$2; shift 2 ;;
    --out=*) out=${1#--out=}; shift ;;
    --dry-run) dry=1; shift ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_check: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
. "$root/tools/env.sh"
if [ "$dry" = 1 ] && [ "$device" = gpu ]; then device=${CLPIPE_DEVICE:-default}; fi
out=${out:-$root/.cache/gpu-check-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
clpipe=$root/build/tools/clpipe
[ -x "$clpipe" ] || { echo "== building $root/build"; build_tree "$root/build"; }
start=$(date +%s)
steps=()

# step NAME TIMEOUT_S COMMAND...: run with a time limit, output in NAME.txt, record rc and time
step() {
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s) rc
  echo "== $name (limit ${limit} s)"
  timeout "$limit" "$@" >"$out/$name.txt" 2>&1
  rc=$?
  tail -n 5 "$out/$name.txt" | sed 's/^/   /'
  steps+=("$name $rc $(( $(date +%s) - t0 ))")
  return 0
}

# 0. correctness first: every op of the engine against the built-in references on this device
if [ "$dry" = 1 ]; then chk=(--quick); else chk=(); fi
step check 90 "$clpipe" check --device "$device" --failures "${chk[@]}" --json "$out/check.json"

# 1. devices, with capabilities; OpenCL platforms as the ICD loader sees them
step devices 20 "$clpipe" devices --json
sed -n '/^{/,$p' "$out/devices.txt" > "$out/devices.json"
command -v clinfo >/dev/null && clinfo -l > "$out/clinfo.txt" 2>&1

# 2. every kernel built (and run once) on the device; the status table per program (mostly cache
# hits after the check, hence 60 s)
step kernels 60 "$clpipe" kernels --device "$device"

# 3. kernel and model tests on the device (the same set CI runs on rusticl)
tests='^(test_cl_runtime|test_cl_ops|test_cl_gemm|test_cl_fallback|test_nn_rng|test_nn_norm|test_nn_act|test_nn_embed|test_nn_attn|test_nn_xent|test_nn_optim|test_kfac_kernels|test_model_golden)$'
step tests 150 env CLPIPE_TEST_DEVICE="$device" CLPIPE_DEVICE="$device" \
  ctest --test-dir "$root/build" -R "$tests" -j2 --timeout 140 --output-junit "$out/tests.xml"

# 4. GEMM: own tiled kernel, CLBlast with its defaults, CLBlast (or the backend) as tuned
if [ "$dry" = 1 ]; then gemm=(--quick); else gemm=(--reps 7); fi
step gemm 60 "$clpipe" bench gemm --device "$device" --backends tiled,clblast-default,clblast \
  "${gemm[@]}" --json "$out/gemm.json"

# 5. the device profile: compute and bandwidth peaks, transfers, launch latency
if [ "$dry" = 1 ]; then prof=(--quick); else prof=(--repeats 5 --compute-ms 20); fi
step profile 60 "$clpipe" bench --device "$device" "${prof[@]}" --json "$out/device.json"

# 6. a short GPT-2-small training run: tokens/s and where the device time went
corpus=$root/.cache/gpu-check-corpus.txt
[ -s "$corpus" ] || head -c 2000000 /dev/urandom | base64 > "$corpus"
if [ "$dry" = 1 ]; then
  model=(--model.preset=gpt2 --model.n_layer=2 --model.d_model=64 --model.n_head=4
         --model.ctx=64 --train.batch=2)
else
  model=(--model.preset=gpt2 --model.n_layer=12 --model.d_model=768 --model.n_head=12
         --model.ctx=256 --model.vocab=50257 --train.batch=8)
fi
step train 100 "$clpipe" train "${model[@]}" --data "$corpus" --train.device="$device" \
  --steps 6 --optim.warmup=1 --eval.every=0 --eval.batches=1 --train.log="$out/train.jsonl" \
  --train.profile=true --no-ckpt

python3 - "$out" "$device" "$dry" "$(( $(date +%s) - start ))" "${steps[@]}" <<'PY'
import json, os, re, statistics, sys, xml.etree.ElementTree as ET
out, device, dry, total = sys.argv[1], sys.argv[2], sys.argv[3] == "1", int(sys.argv[4])
steps = []
for s in sys.argv[5:]:
    name, rc, sec = s.split()
    steps.append({"step": name, "rc": int(rc), "seconds": int(sec),
                  "timed_out": int(rc) == 124, "output": name + ".txt"})
summary = {"device": device, "dry_run": dry, "seconds": total, "steps": steps}
# check: cases, failures and the failing ops of clpipe check
try:
    c = json.load(open(os.path.join(out, "check.json")))
    summary["check"] = {k: c[k] for k in ("cases", "checks", "failed_checks", "failed_ops")}
except (OSError, ValueError, KeyError) as e:
    summary["check"] = {"error": str(e)}
# kernels: the status line of each program
k = open(os.path.join(out, "kernels.txt"), errors="replace").read()
progs = re.findall(r"^  (\S+\.cl)\s+(ok cached|ok built|FAILED\(r\)|FAILED)\s+([\d.]+) s", k, re.M)
summary["programs"] = [{"program": p, "status": st, "seconds": float(t)} for p, st, t in progs]
kj = {"programs": summary["programs"]}
json.dump(kj, open(os.path.join(out, "kernels.json"), "w"), indent=2)
# tests: from ctest's JUnit file
try:
    root = ET.parse(os.path.join(out, "tests.xml")).getroot()
    cases = [{"test": c.get("name"), "seconds": float(c.get("time", 0)),
              "status": c.get("status", "run") if c.find("failure") is None else "failed"}
             for c in root.iter("testcase")]
    summary["tests"] = {"passed": sum(c["status"] != "failed" for c in cases),
                        "failed": [c["test"] for c in cases if c["status"] == "failed"]}
    json.dump(cases, open(os.path.join(out, "tests.json"), "w"), indent=2)
except (OSError, ET.ParseError) as e:
    summary["tests"] = {"error": str(e)}
# training: median tokens/s of steps 2.., and the device time split printed by --train.profile
try:
    rows = [json.loads(l) for l in open(os.path.join(out, "train.jsonl"))]
    rows = [r for r in rows if r.get("event") == "step"][1:]
    t = open(os.path.join(out, "train.txt"), errors="replace").read()
    split = [{"kernel": m[0], "calls": int(m[1]), "ms": float(m[2])}
             for m in re.findall(r"^  (\S+)\s+(\d+)\s+[\d.]+\s+([\d.]+)\s+[\d.]+%$", t, re.M)]
    summary["train"] = {"tok_s": statistics.median(r["tok_s"] for r in rows) if rows else None,
                        "ms_per_step": statistics.median(r["ms"] for r in rows) if rows else None,
                        "host_timed": "host clock" in t, "kernels": split}
    json.dump(summary["train"], open(os.path.join(out, "train.json"), "w"), indent=2)
except OSError as e:
    summary["train"] = {"error": str(e)}
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=2)
bad = [s["step"] for s in steps if s["rc"] != 0]
print(f"gpu_check: {len(steps)} steps in {total} s on device '{device}'"
      f"{' (dry run)' if dry else ''}; results in {out}")
print(f"  check {summary['check']}")
print(f"  programs {sum(p['status'].startswith('ok') for p in summary['programs'])}/"
      f"{len(summary['programs'])} built; tests {summary['tests']}")
print(f"  training {summary['train'].get('tok_s')} tokens/s")
if bad:
    print("  failed steps: " + ", ".join(bad))
sys.exit(1 if bad else 0)
PY
