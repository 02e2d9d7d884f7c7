#!/usr/bin/env bash
# The PipeFisher simulation table of docs/KFAC.md: BERT-Base and BERT-Large on P100 and V100,
# 4 and 8 stages, GPipe, 1F1B and Chimera, from the per-layer profiles published with PipeFisher.
# Prints a Markdown table. Usage: tools/pipefisher_table.sh [clpipe] [profile dir] [batch]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
clpipe=${1:-$root/build/tools/clpipe}
prof=${2:-$root/../shared/profiles/pipefisher}
bs=${3:-32}
field() { sed -n "s/.*\"$1\": \([-0-9.e+]*\).*/\1/p" <<<"$2"; }
echo "| model | GPU | stages | schedule | step (ms) | with PipeFisher (ms) | added per step | utilisation | with PipeFisher | K | kept data per rank |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for model in bert-base bert-large; do
  for gpu in p100 v100; do
    for d in 4 8; do
      for sched in gpipe 1f1b chimera; do
        out=$("$clpipe" sim --schedule "$sched" --stages "$d" --microbatches "$d" \
              --profile "$prof/${model}_time_memory_${gpu}.csv" --batch "$bs" --pipefisher --json \
              | head -1)
        awk -v m="$model" -v g="${gpu^^}" -v d="$d" -v s="$sched" \
            -v b="$(field base_step_s "$out")" -v w="$(field step_s "$out")" \
            -v a="$(field added_s "$out")" -v ub="$(field base_utilisation "$out")" \
            -v u="$(field utilisation "$out")" -v k="$(field K "$out")" \
            -v f="$(field forced "$out")" -v kept="$(field peak_kept_bytes "$out")" 'BEGIN {
              printf "| %s | %s | %d | %s | %.1f | %.1f | %.1f ms (%.1f %%) | %.1f %% | %.1f %% | %d%s | %.2f GiB |\n",
                     m, g, d, s, b * 1e3, w * 1e3, a * 1e3, 100 * a / b, 100 * ub, 100 * u, k,
                     (f > 0 ? sprintf(" (%d items longer than any bubble)", f) : ""),
                     kept / 1073741824 }'
      done
    done
  done
done
