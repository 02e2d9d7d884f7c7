#!/bin/bash
# SOAP against Shampoo and AdamW with pytorch-optimizer's reference implementations
# (tools/soap_vs_shampoo.py; docs/OPTIMIZERS.md, "SOAP against Shampoo (PyTorch references)") on
# tools/optim_convergence.sh's model, corpus and batch. Run by hand (not in CI: needs torch, and
# ~10 minutes of 2 CPU cores):  tools/soap_vs_shampoo.sh [soap_vs_shampoo.py args]
# Python: $CLPIPE_TORCH_PY, else .cache/hf-venv/bin/python (tools/check_hf.sh makes it), with
# transformers and `pip install pytorch-optimizer==4.1.0` in it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/tools/env.sh"
cd "$root"
py=${CLPIPE_TORCH_PY:-.cache/hf-venv/bin/python}
"$py" -c "import torch, transformers, pytorch_optimizer" ||
  { echo "no torch with transformers and pytorch_optimizer: set CLPIPE_TORCH_PY, pip install pytorch-optimizer==4.1.0" >&2; exit 1; }
corpus=$(fortunes_corpus)
exec "$py" tools/soap_vs_shampoo.py --corpus "$corpus" "$@"
