#!/usr/bin/env bash
# Install what clpipe needs from Debian's packages, only what is missing; quiet when all is there.
# Run as root (CI) or with sudo available. Benchmark-only packages (clpeak, PyTorch) are
# installed by the benchmarks that use them, not here.
# --slurm (tools/test.sh passes it): also Slurm, munge, slurmdbd and MariaDB (for sacct), for the slurm tests'
# cluster in the network lab (tools/slurmlab.sh); a user's build does not need them.
set -euo pipefail

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
for a in "$@"; do
  case $a in
  --slurm) pkgs+=(slurmctld slurmd slurm-client munge slurmdbd mariadb-server) ;;
  *) echo "setup: unknown option '$a' (--slurm)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

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
