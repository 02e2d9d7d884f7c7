#!/usr/bin/env bash
# The main job on the default device: set up, build, then train a small byte-level model on a
# real corpus (the `fortunes` package) until its validation loss reaches 0.65 x the unigram
# baseline, and print a sample from it. Extra arguments go to `clpipe train`
# (e.g. --device 0, --model.n_layer=6).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/tools/setup.sh"
. "$root/tools/env.sh"
cd "$root"
echo "== building clpipe"
build_tree "$root/build"
clpipe=$root/build/tools/clpipe
echo "== devices"
"$clpipe" devices
corpus=$(fortunes_corpus)
echo "== training ($(wc -c < "$corpus") bytes of text)"
rm -rf .cache/quickstart-ckpt
"$clpipe" train --config tools/quickstart.toml "$@"
echo "== a sample from the trained model"
"$clpipe" sample --ckpt .cache/quickstart-ckpt --prompt "The meaning of life is" --length 300
