#!/usr/bin/env bash
# `clpipe skip schedule --authors` and the authors' row of `clpipe skip compare` schedule on the
# same allocation (made with the plain cost model) with the same seed and moves, so they report
# the same iteration time.
set -euo pipefail
clpipe=$1
cfg=$2
small=(--iterations 150 --alloc-iterations 40 --baseline-iterations 50 --random 1 --json)
a=$("$clpipe" skip schedule --config "$cfg" --authors --pipelines 0 "${small[@]}" |
	sed -n 's/^ *"iteration_s": *\([0-9.e+-]*\).*/\1/p')
b=$("$clpipe" skip compare --config "$cfg" "${small[@]}" |
	awk '/"model": "authors"/ {on = 1} on && /"scheduler_s"/ {gsub(/[",]/, ""); print $2; exit}')
echo "schedule --authors: $a s; compare, authors' row: $b s"
[ -n "$a" ] && [ "$a" = "$b" ] || { echo "they differ" >&2; exit 1; }
