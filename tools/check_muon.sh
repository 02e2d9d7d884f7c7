#!/bin/bash
# Muon against the installed PyTorch's torch.optim.Muon (torch 2.9+; tools/check_muon.py):
# writes a fresh fixture with torch, checks that the committed one
# (tests/nn/fixtures/muon_torch.json, which CI's test_muon_torch reads without torch) still is
# what this torch computes (within 1e-6), and runs the engine's test on the fresh one. Run by
# hand (not in CI: needs torch):  tools/check_muon.sh [build]
# Python: $CLPIPE_TORCH_PY, else .cache/hf-venv/bin/python (tools/check_hf.sh makes it).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
py=${CLPIPE_TORCH_PY:-.cache/hf-venv/bin/python}
"$py" -c "import torch; torch.optim.Muon" || { echo "no torch with torch.optim.Muon: set CLPIPE_TORCH_PY" >&2; exit 1; }
fresh=$(mktemp /tmp/clpipe-muon-XXXXXX.json)
trap 'rm -f "$fresh"' EXIT
"$py" tools/check_muon.py "$fresh"
"$py" tools/check_muon.py --compare tests/nn/fixtures/muon_torch.json "$fresh"
# the engine against the fresh fixture (CLP_MUON_FIXTURE overrides the committed one)
cmake --build "$build" --target test_muon_torch >/dev/null
CLP_MUON_FIXTURE="$fresh" "$build/tests/nn/test_muon_torch"
