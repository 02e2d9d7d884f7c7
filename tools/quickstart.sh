#!/usr/bin/env bash
# The main job on the default device: set up, build, then train a small byte-level model on a
# real corpus (the `fortunes` package) for a budget of steps (tools/quickstart.toml: about 4.5
# minutes on two idle cores, stopping earlier at 2.2 bits per byte), print the run summary and a
# sample from it; the loss curve is .cache/quickstart.svg. Extra arguments go to `clpipe train`
# and win over the file (e.g. --device 0, --steps 200, --model.n_layer=4).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/tools/setup.sh"
. "$root/tools/env.sh"
cd "$root"
echo "== building clpipe"
# a new user's build: a warning from a newer compiler must not stop it (tools/test.sh, CI and
# development builds make warnings errors)
CLPIPE_WERROR=${CLPIPE_WERROR:-OFF} build_tree "$root/build"
clpipe=$root/build/tools/clpipe
echo "== devices"
"$clpipe" devices
corpus=$(fortunes_corpus)
echo "== training ($(wc -c < "$corpus") bytes of text)"
rm -rf .cache/quickstart-ckpt .cache/quickstart.svg
start=$SECONDS
"$clpipe" train --config tools/quickstart.toml "$@"
echo "== a sample from the trained model (training took $((SECONDS - start)) s)"
"$clpipe" sample --ckpt .cache/quickstart-ckpt --prompt "The meaning of life is" --length 300 \
  --temperature 0.6
echo
echo "== the loss curve: $root/.cache/quickstart.svg (open it in a browser)"
