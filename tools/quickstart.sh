#!/usr/bin/env bash
# The main job on the default device: set up, build, list the devices and run a short GEMM
# benchmark. (The training issue turns this into training a small model.)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/tools/setup.sh"
. "$root/tools/env.sh"
echo "== building clpipe"
build_tree "$root/build"
clpipe=$root/build/tools/clpipe
echo "== devices"
"$clpipe" devices
echo "== GEMM benchmark (short)"
"$clpipe" bench gemm --quick
