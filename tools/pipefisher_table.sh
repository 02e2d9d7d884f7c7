#!/usr/bin/env bash
# The PipeFisher simulation table of docs/KFAC.md: BERT-Base and BERT-Large on P100 and V100,
# 4 and 8 stages, GPipe, 1F1B and Chimera, from the per-layer profiles published with PipeFisher.
# Each row runs the pass twice: as the executor runs it today ("before": every holder of a stage
# inverts and preconditions all of it) and with --kfac-split (inversions and preconditioning
# split between a stage's holders, long inversions in phases, mid-step factor all-reduces).
# Prints a Markdown table. Usage: tools/pipefisher_table.sh [clpipe] [profile dir] [batch]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
clpipe=${1:-$root/build/tools/clpipe}
# the profiles: the directory given, else PipeFisher's published set beside the repo, else the
# copies a clone has (tests/plan/data, tests/sim/data: bert-large on all three GPUs, bert-base
# on P100); rows without a profile are left out
dirs=(${2:-$root/../shared/profiles/pipefisher $root/tests/plan/data $root/tests/sim/data})
profile_of() { for d in "${dirs[@]}"; do [ -f "$d/$1" ] && { echo "$d/$1"; return; }; done; return 0; }
bs=${3:-32}
field() { sed -n "s/.*\"$1\": \([-0-9.e+]*\).*/\1/p" <<<"$2"; }
# one half of a row: "bound | K | added | utilisation"
half() {
  awk -v b="$(field base_step_s "$1")" -v a="$(field added_s "$1")" \
      -v u="$(field utilisation "$1")" -v k="$(field K "$1")" -v lb="$(field bound "$1")" \
      -v f="$(field forced "$1")" 'BEGIN {
        printf "%s | %d%s | %.1f ms (%.2f %%) | %.1f %%", (lb > 0 ? lb : "-"), k,
               (f > 0 ? sprintf(" (%d forced)", f) : ""), a * 1e3, 100 * a / b, 100 * u }'
}
echo "| model | GPU | stages | schedule | step (ms) | utilisation | bound | K | added per step | with PipeFisher | bound, split | K, split | added per step, split | with PipeFisher, split | kept data per rank |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for model in bert-base bert-large; do
  for gpu in p100 v100; do
    for d in 4 8; do
      prof=$(profile_of "${model}_time_memory_${gpu}.csv")
      [ -n "$prof" ] || continue
      for sched in gpipe 1f1b chimera; do
        args=(sim --schedule "$sched" --stages "$d" --microbatches "$d"
              --profile "$prof" --batch "$bs" --pipefisher --json)
        old=$("$clpipe" "${args[@]}" | head -1)
        new=$("$clpipe" "${args[@]}" --kfac-split | head -1)
        awk -v m="$model" -v g="${gpu^^}" -v d="$d" -v s="$sched" \
            -v b="$(field base_step_s "$old")" -v ub="$(field base_utilisation "$old")" \
            -v h1="$(half "$old")" -v h2="$(half "$new")" \
            -v kept="$(field peak_kept_bytes "$new")" 'BEGIN {
              printf "| %s | %s | %d | %s | %.1f | %.1f %% | %s | %s | %.2f GiB |\n",
                     m, g, d, s, b * 1e3, 100 * ub, h1, h2, kept / 1073741824 }'
      done
    done
  done
done
