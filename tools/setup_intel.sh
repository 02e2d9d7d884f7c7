#!/usr/bin/env bash
# Intel's oneAPI OpenCL runtime for CPUs, the third implementation the kernel and model tests run
# on (<test>.intel, tests/CMakeLists.txt). Called by `tools/setup.sh --intel` (tools/test.sh), not
# by the quickstart: it is ~830 MB from PyPI.
#  - installed once into a venv, .cache/intel-venv of the checkout or $CLPIPE_INTEL_VENV (quiet
#    when libintelocl.so is there);
#  - registered with the ICD loader without touching /etc/OpenCL/vendors: .cache/icd-intel holds
#    intel.icd (the absolute path of libintelocl.so) and copies of the system's .icd files, and only
#    the Intel tests run with OCL_ICD_VENDORS pointing there (the wheel's own
#    etc/OpenCL/vendors/intel-cpu.icd names a conda placeholder path that pip leaves as it is);
#  - LD_LIBRARY_PATH is left alone: libintelocl.so finds its libraries (TBB, SVML, its compiler)
#    through its RUNPATH ($ORIGIN), and the venv's lib/ also holds Intel's own libOpenCL.so.1,
#    which on the library path would replace the system's ICD loader in every process.
# A failed install is not an error: it says so, removes .cache/icd-intel, and CMake then skips
# the Intel tests with a message.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=2026.2.0 # intel-opencl-rt and intel-cmplr-lib-rt, the release the tests were proven on
venv=${CLPIPE_INTEL_VENV:-$root/.cache/intel-venv}
icd=$root/.cache/icd-intel
log=$root/.cache/setup-intel.log
mkdir -p "$root/.cache"

if [ ! -f "$venv/lib/libintelocl.so" ]; then
  echo "setup: installing Intel's OpenCL CPU runtime $version from PyPI into $venv (~830 MB)" >&2
  if ! { python3 -m venv "$venv" &&
         "$venv/bin/pip" install -q --disable-pip-version-check \
           "intel-opencl-rt==$version" "intel-cmplr-lib-rt==$version"; } >"$log" 2>&1 ||
     [ ! -f "$venv/lib/libintelocl.so" ]; then
    echo "setup: Intel's OpenCL runtime was not installed (see $log): the .intel tests will be skipped" >&2
    rm -rf "$icd"
    exit 0
  fi
  echo "setup: Intel's OpenCL runtime installed" >&2
fi

# the loader's directory, rebuilt each time (the system's ICDs may have changed since)
venv=$(cd "$venv" && pwd)
rm -rf "$icd.tmp" && mkdir -p "$icd.tmp" || exit 1
for f in /etc/OpenCL/vendors/*.icd; do
  [ -f "$f" ] && cp "$f" "$icd.tmp/"
done
echo "$venv/lib/libintelocl.so" > "$icd.tmp/intel-cpu.icd"
rm -rf "$icd" && mv "$icd.tmp" "$icd"
