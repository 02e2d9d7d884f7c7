#!/usr/bin/env bash
# SkipPipe's fixed-allocation benchmark (docs/SKIPPIPE.md, "Fixed-allocation benchmark"): on the
# paper experiment (tests/skip/data/paper.toml), for each of several fixed allocations of the 20
# nodes to the 6 stages, the iteration time of three baselines built from the paper's
# description (collision-aware search over a time-expanded graph, conflict-based search over one
# chain per origin, greedy), of the SkipPipe authors' own paths (on their allocation) and of
# clpipe's path scheduler, all scored by the same simulator, plain and with the authors'
# constants. Prints a Markdown table; `clpipe skip fixed` makes each pair of rows.
#
#   tools/skip_fixed_alloc.sh      # clpipe's, the authors', one per continent, random seeds 1-3
#   ITERATIONS=40000 SEEDS="1 2 3 4" tools/skip_fixed_alloc.sh
#
# Environment: ITERATIONS (20000: the scheduler's moves), SEEDS ("1 2 3": random valid
# allocations), SEED (1: the scheduler's seed), CLPIPE (build/tools/clpipe).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
clpipe=${CLPIPE:-$root/build/tools/clpipe}
d=tests/skip/data
iters=${ITERATIONS:-20000}
seeds=${SEEDS:-1 2 3}
run() {
	"$clpipe" skip fixed --config "$d/paper.toml" --iterations "$iters" --seed "${SEED:-1}" "$@"
}
echo "| allocation | cost model | collision-aware, time-expanded | conflict-based chains |" \
     "greedy | the authors' paths | clpipe | clpipe vs best baseline | clpipe run time |"
echo "|---|---|---|---|---|---|---|---|---|"
run
run --alloc-from "$d/authors_paths.json" --paths "$d/authors_paths.json"
run --layout "$d/continent_layout.json"
for s in $seeds; do
	run --alloc-random "$s"
done
