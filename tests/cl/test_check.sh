#!/usr/bin/env bash
# clpipe check on this test's device: every case passes (exit 0, the JSON's counts agree with
# the summary); then the check itself is tested with faults put in on purpose:
#  - CLPIPE_CHECK_INJECT=attention,rope perturbs the device outputs of those two ops: exit 1,
#    the error names each of them once and nothing else, every one of their checks failed;
#  - every op injected at once: every line fails (no check is vacuous);
#  - a GELU program that does not build: error lines, exit 1 naming gelu;
#  - a GELU kernel made wrong by 0.1% (a copy of nn_act.cl read through CLPIPE_KERNEL_DIR, in a
#    private engine cache): exit 1 naming gelu, while the other ops of the same run pass.
# Usage: test_check.sh CLPIPE KERNEL_SRC_DIR [--device SPEC]
set -u
clpipe=$1 src=$2; shift 2
work=$(mktemp -d /tmp/clpipe-check-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail=0
check() { if eval "$1"; then echo "ok: $2"; else echo "FAIL: $2"; fail=1; fi; }
# jcheck NAME FILE: the JSON assertion NAME (below) on FILE; exit 0 when it holds
cat >"$work/j.py" <<'PY'
import json, sys
name, d = sys.argv[1], json.load(open(sys.argv[2]))
L = d["lines"]
two = ("attention", "rope")
tests = {
    "clean": lambda: d["failed_checks"] == 0 and d["cases"] > 200,
    "families": lambda: {"gemm", "attention", "layernorm", "rmsnorm", "gelu", "embed", "rope",
                         "xent", "adamw", "kfac_inverse", "convert", "blas1"}
        <= {l["op"] for l in L}
        and {l["geometry"] for l in L if l["op"] == "attention"} == {"cpu", "gpu"}
        and {"fp32", "bf16", "fp16"} <= {l["dtype"] for l in L}
        and any(l["what"].startswith("fd ") for l in L),
    "two": lambda: any(l["op"] in two for l in L)
        and all(l["ok"] != (l["op"] in two) for l in L),
    "every": lambda: d["checks"] > 100 and d["failed_checks"] == d["checks"],
}
ok = tests[name]()
if not ok:
    print(f"{name}: does not hold on {sys.argv[2]}: {d['checks']} checks, "
          f"{d['failed_checks']} failed, ops {d['failed_ops']!r}")
sys.exit(0 if ok else 1)
PY
jcheck() { python3 "$work/j.py" "$@"; }

"$clpipe" check "$@" --failures --json "$work/all.json" >"$work/out" 2>"$work/err"
echo "rc=$?" >>"$work/out"
cat "$work/out" "$work/err"
check "grep -q '^rc=0' $work/out" "clpipe check passes on this device"
check "grep -q 'all checks passed' $work/out" "the summary says so"
check "jcheck clean $work/all.json" "the JSON has the cases (over 200), none failed"
check "jcheck families $work/all.json" \
  "every op family, both attention geometries, three storage types, finite differences"

CLPIPE_CHECK_INJECT=attention,rope "$clpipe" check "$@" --quick --failures --json "$work/inj.json" \
  >"$work/out2" 2>"$work/err2"
echo "rc=$?" >>"$work/out2"
cat "$work/out2" "$work/err2"
check "grep -q '^rc=1' $work/out2" "injected attention and rope faults: exit 1"
check "grep -q 'FAILED ops: rope, attention$' $work/err2" \
  "the error names the two, once each, and nothing else"
check "jcheck two $work/inj.json" "every attention and rope check failed, every other passed"

# no check is vacuous: with every op injected, every line of the quick set fails
all=$("$clpipe" check --list | awk '{print $1}' | paste -sd, -)
CLPIPE_CHECK_INJECT=$all "$clpipe" check "$@" --quick --failures --json "$work/every.json" \
  >/dev/null 2>&1
check "jcheck every $work/every.json" "with every op injected every check fails (none is vacuous)"

mkdir -p "$work/kernels" "$work/cache"
# (GELU's source is nn_gelu.clh, which nn_act.cl and the packed GEMM's store include)
sed 's|return x / (1.0f + exp(-2.0f \* GELU_K|return 1.001f * x / (1.0f + exp(-2.0f * GELU_K|' \
  "$src/nn_gelu.clh" >"$work/kernels/nn_gelu.clh"
check "! cmp -s $src/nn_gelu.clh $work/kernels/nn_gelu.clh" \
  "the broken GELU kernel differs from the real one"
CLPIPE_KERNEL_DIR=$work/kernels CLPIPE_CACHE_DIR=$work/cache \
  "$clpipe" check "$@" --only gelu,layernorm --failures >"$work/out3" 2>"$work/err3"
echo "rc=$?" >>"$work/out3"
cat "$work/out3" "$work/err3"
check "grep -q '^rc=1' $work/out3" "a GELU kernel wrong by 0.1%: exit 1"
check "grep -q 'FAILED ops: gelu$' $work/err3" "the error names gelu and not layernorm"
check "grep -q '^gelu *tanh .*FAIL' $work/out3 && ! grep -q '^gelu *erf .*FAIL' $work/out3" \
  "the tanh form fails, the untouched erf form passes"

# a program that does not build (CLPIPE_FAIL_BUILD, in the private cache so that the failure is
# remembered nowhere else): its op's cases are error lines with the build error, the run goes
# on, exit 1 naming the op
CLPIPE_FAIL_BUILD=nn_act.cl CLPIPE_CACHE_DIR=$work/cache \
  "$clpipe" check "$@" --quick --only gelu,layernorm --failures >"$work/out4" 2>"$work/err4"
echo "rc=$?" >>"$work/out4"
check "grep -q '^rc=1' $work/out4 && grep -q 'FAILED ops: gelu$' $work/err4" \
  "a GELU program that does not build: exit 1 naming gelu"
check "grep -q '^gelu .* error .*FAIL' $work/out4 &&
       grep -q 'CLP_ERR_BUILD: building program nn_act.cl' $work/out4" \
  "its cases are error lines carrying the build error"
exit $fail
