#!/usr/bin/env bash
# Set up, build and run every test: the normal build (all labels), then the unit tests and a
# small OpenCL subset under AddressSanitizer + UndefinedBehaviorSanitizer.
# Usage: tools/test.sh [extra ctest arguments, e.g. -L unit]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# --intel: Intel's OpenCL CPU runtime for the .intel tests; --slurm: Slurm and munge too, for the
# slurm tests (tools/slurmlab.sh)
"$root/tools/setup.sh" --intel --slurm
. "$root/tools/env.sh"

start=$(date +%s)
echo "== layers"
"$root/tools/check_layers.sh"
echo "== build (RelWithDebInfo)"
build_tree "$root/build"
# -O3 finds warnings -O2 does not (GCC 12's -Wmaybe-uninitialized, issue 24): compile a Release
# tree with warnings fatal; it runs no tests, the RelWithDebInfo tree does
echo "== build (Release, warnings fatal, compile only)"
build_tree "$root/build-release" -DCMAKE_BUILD_TYPE=Release
echo "== tests"
(cd "$root/build" && ctest --output-on-failure -j"$jobs" --timeout 1200 "$@")

# the fault-tolerance tests (label ft) against PyPI's Open MPI 5 with ULFM: the command and the
# tests only (the 4.1 tree above ran the rest, and its own ft test, the supervisor's)
echo "== build (Open MPI 5 with ULFM: clpipe and test_ft_comm only) and ft tests"
if ulfm=$("$root/tools/setup.sh" --ulfm); then
  cmake -S "$root" -B "$root/build-ulfm" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCLPIPE_WERROR=ON \
    -DCLPIPE_MPI_HOME="$ulfm" >/dev/null
  cmake --build "$root/build-ulfm" -j"$jobs" --target clpipe test_ft_comm >/dev/null
  (cd "$root/build-ulfm" && ctest --output-on-failure -j"$jobs" --timeout 600 -L ft)
else
  echo "== ft tests under ULFM skipped: no Open MPI 5 with ULFM (tools/setup.sh --ulfm said why)"
fi

echo "== build (address + undefined sanitizers)"
build_tree "$root/build-asan" -DCLPIPE_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
echo "== sanitizer tests (unit, smoke)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1
# use_tls=0: LeakSanitizer (GCC 12) crashes scanning a dynamic-TLS block left by a library that
# was loaded and unloaded ("Tracer caught signal 11", "DTLS 9 at 0x8c3-0x18000019c5"): on a
# clean clone test_cl_runtime hit it once the PoCL cache held the earlier tests' kernels. Not
# scanning thread-local storage as roots can only report more leaks, never hide one.
export LSAN_OPTIONS=suppressions=$root/tests/sanitizers/lsan.supp:print_suppressions=0:use_tls=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# The sanitizer run sees PoCL's ICD only: Mesa's clover (mesa-opencl-icd, installed for the
# rusticl tests) leaks at load from a library unloaded before exit, which no suppression can name.
if [ -f /etc/OpenCL/vendors/pocl.icd ]; then
  mkdir -p "$root/.cache/icd-pocl" && cp /etc/OpenCL/vendors/pocl.icd "$root/.cache/icd-pocl/"
  export OCL_ICD_VENDORS=$root/.cache/icd-pocl
fi
# label nosan: a test too slow under the sanitizers for what it adds there (its code runs in others)
(cd "$root/build-asan" && ctest --output-on-failure -j"$jobs" --timeout 1200 -L 'unit|smoke' -LE nosan "$@")
echo "== all tests passed in $(( $(date +%s) - start )) s"
