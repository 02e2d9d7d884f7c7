#!/usr/bin/env bash
# docs/PIPELINE.md shows tools/slurm_train.sbatch whole, the script the slurm tests run: the
# ```bash block after "The whole script" must be the file, byte for byte.
# Usage: test_doc_script.sh DOC SCRIPT
set -u
doc=$1 script=$2
shown=$(awk '/^The whole script/ {f = 1} f && /^```bash$/ {b = 1; next} b && /^```$/ {exit} b {print}' "$doc")
if [ "$shown" != "$(cat "$script")" ]; then
	echo "FAIL: the script in $doc differs from $script:"
	diff <(echo "$shown") "$script"
	exit 1
fi
echo "ok: $doc shows $script as it is ($(echo "$shown" | wc -l) lines)"
