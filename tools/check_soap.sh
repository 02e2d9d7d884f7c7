#!/bin/bash
# SOAP against pytorch-optimizer's SOAP (pytorch_optimizer 4.1.0, pinned; tools/check_soap.py):
# writes a fresh fixture with the package, checks that the committed one
# (tests/nn/fixtures/soap_torch.json, which CI's test_soap_torch reads without torch) still is
# what it computes (within 1e-6), and runs the engine's test on the fresh one. Run by hand (not
# in CI: needs torch):  tools/check_soap.sh [build]
# Python: $CLPIPE_TORCH_PY, else .cache/hf-venv/bin/python (tools/check_hf.sh makes it), with
# `pip install pytorch-optimizer==4.1.0` in it.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
py=${CLPIPE_TORCH_PY:-.cache/hf-venv/bin/python}
"$py" -c "import torch, pytorch_optimizer" ||
  { echo "no torch with pytorch_optimizer: set CLPIPE_TORCH_PY, pip install pytorch-optimizer==4.1.0" >&2; exit 1; }
fresh=$(mktemp /tmp/clpipe-soap-XXXXXX.json)
trap 'rm -f "$fresh"' EXIT
"$py" tools/check_soap.py "$fresh"
"$py" tools/check_soap.py --compare tests/nn/fixtures/soap_torch.json "$fresh"
# the engine against the fresh fixture (CLP_SOAP_FIXTURE overrides the committed one)
cmake --build "$build" --target test_soap_torch >/dev/null
CLP_SOAP_FIXTURE="$fresh" "$build/tests/nn/test_soap_torch"
