#!/usr/bin/env bash
# clpipe kernels with one program made to fail (CLPIPE_FAIL_BUILD): the kernels still run through
# the fallback (packed GEMM -> tiled), the status table marks the program FAILED, and the command
# exits 1 naming it with its device; a second run does not retry the build (remembered).
# Usage: test_kernels_fail.sh CLPIPE [--device SPEC]
set -u
clpipe=$1; shift
work=$(mktemp -d /tmp/clpipe-kfail-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail=0
check() { if eval "$1"; then echo "ok: $2"; else echo "FAIL: $2"; fail=1; fi; }

export CLPIPE_FAIL_BUILD=gemm_packed.cl CLPIPE_GEMM_BACKEND=packed
for run in 1 2; do
  "$clpipe" kernels "$@" >"$work/out$run" 2>"$work/err$run"
  echo "rc=$?" >>"$work/out$run"
  cat "$work/out$run" "$work/err$run"
done
check "grep -q '^rc=1' $work/out1" "exit code 1 when a program fails to build"
check "grep -q 'gemm_packed.cl *FAILED' $work/out1" "the status table marks gemm_packed.cl FAILED"
check "grep -q 'gemm (tiled)' $work/out1" "the GEMM ran through the tiled fallback"
check "grep -q 'program build(s) failed on device .*: gemm_packed.cl' $work/err1" "the error names the program and device"
check "grep -q 'compiler log:' $work/out1" "the compiler log is shown"
check "[ \$(grep -c 'warning: the packed GEMM does not build' $work/err1) = 1 ]" "one warning line"
check "grep -q 'gemm_packed.cl *FAILED(r)' $work/out2" "the second run remembers the failure"
check "grep -q 'nn_attn_bwd.cl *ok' $work/out1" "the other programs built"
exit $fail
