#!/usr/bin/env bash
# The table "plan versus naive equal split" of docs/PLACEMENT.md: clpipe plan on the hwloc
# machines of tests/topology/data and the synthetic mixes of tests/plan/data, BERT-Large at
# micro-batch 8 x 128 from PipeFisher's per-layer profiles. Prints a Markdown table; the
# commands are the rows' (with --out PREFIX a run also writes the plan's files).
# Usage: tools/plan_table.sh [clpipe]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
clpipe=${1:-$root/build/tools/clpipe}
D=tests/plan/data
T=tests/topology/data
V=$D/bert-large_time_memory_v100.csv
P=$D/bert-large_time_memory_p100.csv
R=$D/bert-large_time_memory_rtx3090.csv
cd "$root"

row() { # name, then the arguments of clpipe plan
  local name=$1 out plan naive ratio layers only
  shift
  out=$("$clpipe" plan --model $D/bert-large.toml "$@")
  only=$("$clpipe" plan --model $D/bert-large.toml "$@" --schedules 1f1b | grep '^plan   ' |
         sed 's/.*step \([0-9.]*\) ms.*/\1/')
  plan=$(grep '^plan   ' <<<"$out" | sed 's/^plan *//')
  naive=$(grep '^naive ' <<<"$out" | sed 's/^naive *//')
  layers=$(grep -m1 'layers per stage' <<<"$out" | sed 's/.*layers per stage \(\[[^]]*\]\).*/\1/')
  ratio=$(sed -n 's/.*(\([0-9.]*x\))$/\1/p' <<<"$out")
  printf '| %s | %s ms%s | %s ms | %s ms | %s | %s %s |\n' "$name" \
    "$(sed 's/.*step \([0-9.]*\) ms.*/\1/' <<<"$naive")" \
    "$(grep -q 'OVER MEMORY' <<<"$naive" && echo ' (over memory)' || true)" "$only" \
    "$(sed 's/.*step \([0-9.]*\) ms.*/\1/' <<<"$plan")" "$ratio" \
    "$(sed 's/: step.*//' <<<"$plan")" "$layers"
}

echo "| cluster | naive equal split | plan, 1F1B only | plan | speed-up | plan chosen, layers per stage |"
echo "|---|---|---|---|---|---|"
row "POWER8, 4 x P100 (NVLink pairs, 2 sockets; hwloc XML)" \
  --topology $T/power8gpudistances.xml --devices $T/power8.devices.json --profile $P
row "four such POWER8 hosts (16 x P100)" \
  --topology $T/power8gpudistances.xml --devices $T/power8.devices.json --hosts 4 --profile $P
row "DGX-2, 16 x V100 (hwloc XML), 16 micro-batches" \
  --topology $T/nvidiaDGX2.xml --devices $T/dgx2.devices.json --profile $V --train.micro_batches=16
row "2 sockets, M2075 / K40m / Tahiti / 2 more (hwloc XML; synthetic speeds)" \
  --topology $T/32em64t-2n8c2t-pci-normalio.xml --devices $T/mixed.devices.json \
  --blocks $D/blocks_2012.json
row "two fast (V100) and two slow (P100)" --cluster $D/mix_2fast2slow.json --profile $V,$P
row "same, K-FAC (PipeFisher or the serial cycle rule)" --cluster $D/mix_2fast2slow.json \
  --profile $V,$P --optim.name=kfac
row "fast GPU with little memory (RTX 3090 speed, 4 GiB) + 3 x P100, micro-batch 32" \
  --cluster $D/mix_smallmem.json --profile $P,$R --train.batch=32
row "two sockets, 4 + 4 x V100 (4 GB/s across)" --cluster $D/two_sockets.json --profile $V
row "four hosts of two V100 + two P100" --cluster $D/four_hosts.json --profile $V,$P
row "geo-distributed: 8 x V100 in Belgium, NL, London, Iowa (GCP table)" \
  --cluster $D/geo8.json --profile $V
