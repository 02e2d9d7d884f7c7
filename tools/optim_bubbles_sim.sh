#!/usr/bin/env bash
# docs/OPTIMIZERS.md's table "An optimizer's work in the bubbles": each optimizer's periodic and
# per-step work placed by the PipeFisher pass (clpipe sim --pipefisher --pf-optim) on
# PipeFisher's published BERT-Large P100 profile, micro-batches of 32 x 128 tokens, as many
# micro-batches as stages, 1F1B and Chimera on 4 and 8 stages. K-FAC's times are the profile's;
# Shampoo's (25 coupled Newton iterations a root) and Muon's (5 Newton-Schulz steps) are
# counted from BERT-Large's shapes at each stage's GEMM rate (clp_pf_work_costs). "steady":
# the second of two cycles run back to back (the cold figure starts every rank idle, so work
# at a step's start is not hidden in the previous step's tail). Prints a Markdown table.
# Usage: tools/optim_bubbles_sim.sh [clpipe] [profile csv]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
clpipe=${1:-$root/build/tools/clpipe}
prof=${2:-$root/tests/plan/data/bert-large_time_memory_p100.csv}
[ -f "$prof" ] || prof=$root/../shared/profiles/pipefisher/bert-large_time_memory_p100.csv
field() { sed -n "s/.*\"$1\": \([-0-9.e+]*\).*/\1/p" <<<"$2"; }
echo "| schedule | stages | work | K | bound | step (ms) | with the work (ms) | added per step | steady: added per step | utilisation | with the work | items longer than every bubble (delayed Muon: forced before the OPT_STEP) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for sched in 1f1b chimera; do
  for d in 4 8; do
    while IFS='|' read -r label args; do
      # shellcheck disable=SC2086
      out=$("$clpipe" sim --schedule "$sched" --stages "$d" --microbatches "$d" \
            --profile "$prof" --batch 32 --pipefisher --json $args | head -1)
      awk -v s="$sched" -v d="$d" -v w="$label" -v k="$(field K "$out")" \
          -v lb="$(field bound "$out")" -v b="$(field base_step_s "$out")" \
          -v t="$(field step_s "$out")" -v a="$(field added_s "$out")" \
          -v ub="$(field base_utilisation "$out")" -v u="$(field utilisation "$out")" \
          -v f="$(field forced "$out")" -v sb="$(field steady_base_step_s "$out")" \
          -v sa="$(field steady_added_s "$out")" 'BEGIN {
            printf "| %s | %d | %s | %d | %s | %.1f | %.1f | %.1f ms (%.2f %%) | %.1f ms (%.2f %%) | %.1f %% | %.1f %% | %d |\n",
                   s, d, w, k, (lb > 0 ? lb : "-"), b * 1e3, t * 1e3, a * 1e3, 100 * a / b,
                   sa * 1e3, 100 * sa / sb, 100 * ub, 100 * u, f }'
    done <<'ROWS'
K-FAC (as clpipe train runs it)|--pf-optim kfac
K-FAC, split between holders|--pf-optim kfac --kfac-split
Shampoo, whole roots (pipeline.pipefisher_phases = false)|--pf-optim shampoo
Shampoo, roots in phases (as clpipe train runs it)|--pf-optim shampoo --kfac-split-bits 4
Shampoo, phases, refreshes only (no per-step work)|--pf-optim shampoo --kfac-split-bits 4 --no-pf-per-step
Shampoo, split between holders|--pf-optim shampoo --kfac-split
Muon (Newton-Schulz at its gradients' end)|--pf-optim muon
Muon, split between holders|--pf-optim muon --kfac-split
Muon, with the gradient-norm all-reduce (as clpipe train lowers)|--pf-optim muon --grad-norm
Muon, one step delayed (NS in the next step's bubbles)|--pf-optim muon-delay
Muon, one step delayed, NS in phases (one per NS step)|--pf-optim muon-delay --kfac-split-bits 4
Muon, one step delayed, split between holders|--pf-optim muon-delay --kfac-split
Muon, one step delayed, with the gradient-norm all-reduce|--pf-optim muon-delay --grad-norm
Muon, one step delayed, norm all-reduce, phases|--pf-optim muon-delay --grad-norm --kfac-split-bits 4
Muon, one step delayed, norm all-reduce, split|--pf-optim muon-delay --grad-norm --kfac-split
ROWS
  done
done
