#!/usr/bin/env bash
# clpipe tune gemm: candidates run in child processes, verified, timed; the best is saved in the
# device's tuning file and then used. Usage: test_tune.sh CLPIPE
set -u
clpipe=$1
work=$(mktemp -d /tmp/clpipe-tune-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail=0
check() { if eval "$1"; then echo "ok: $2"; else echo "FAIL: $2"; fail=1; fi; }

# a private engine cache, so the tuned file lands here (PoCL's cache stays shared)
export CLPIPE_CACHE_DIR=$work/cache
"$clpipe" tune gemm --backend tiled --candidates 2 --timeout 600 >"$work/out" 2>&1
rc=$?
cat "$work/out"
check "[ $rc -eq 0 ]" "tune exits 0"
check "grep -q 'GFLOP/s' '$work/out' && grep -q '^best:' '$work/out'" "candidates verified and timed"
check "ls '$work/cache'/gemm-tuning-*.json >/dev/null 2>&1" "the tuning file is written"
check "grep -q '\"tiled\"' '$work/cache'/gemm-tuning-*.json" "it names the backend"
# the saved entry comes first from now on
CLPIPE_GEMM_BACKEND=tiled "$clpipe" bench gemm --backends tiled --shapes 64x64x64 >"$work/bench" 2>&1
check "grep -q 'gemm-tuning' '$work/bench'" "bench uses the tuned file: $(grep backends "$work/bench")"
# a broken tuning file is an error naming the file
echo '{"entries": [{"backend": "cublas"}]}' > "$work/bad.json"
CLPIPE_GEMM_TUNING=$work/bad.json "$clpipe" bench gemm --shapes 8x8x8 >"$work/bad" 2>&1
check "grep -q 'cublas' '$work/bad' && grep -q 'bad.json' '$work/bad'" "a bad tuning file is reported: $(tail -1 "$work/bad")"
exit $fail
