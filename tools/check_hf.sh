#!/bin/bash
# Live comparison with the installed Hugging Face transformers, both ways (tools/check_hf.py):
# models written by save_pretrained for every family and layout evaluated and sampled by clpipe
# with no --model flags, and clpipe checkpoints opened by from_pretrained, each loss within 1e-5
# relative and each greedy continuation token for token. Run by hand (not in CI: needs torch):
#   tools/check_hf.sh [build/tools/clpipe]
# Python: $CLPIPE_HF_PY, else .cache/hf-venv (made on first use with pip install torch
# transformers from PyPI).
set -euo pipefail
cd "$(dirname "$0")/.."
clpipe=${1:-build/tools/clpipe}
py=${CLPIPE_HF_PY:-.cache/hf-venv/bin/python}
if ! "$py" -c "import torch, transformers" 2>/dev/null; then
	echo "== installing torch and transformers from PyPI into .cache/hf-venv (once)"
	python3 -m venv .cache/hf-venv
	.cache/hf-venv/bin/pip install -q torch transformers safetensors
	py=.cache/hf-venv/bin/python
fi
corpus=$(mktemp /tmp/clpipe-check-hf-XXXXXX.txt)
trap 'rm -f "$corpus"' EXIT
for i in $(seq 40); do cat tests/hf/corpus.txt; done >"$corpus"
TRANSFORMERS_VERBOSITY=error "$py" tools/check_hf.py "$clpipe" "$corpus"
