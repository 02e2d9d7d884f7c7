#!/usr/bin/env bash
# The simulator against a network: two hosts of a netlab (tools/netlab.sh) joined by a
# rate-limited link, one pipeline rank each. (1) `clpipe bench --only p2p` measures the link
# between the lab's hosts and writes it into a clpipe-cluster file (--cluster-out); (2) a 2-stage
# LLaMa-shaped model whose activation messages are 2 MiB (16 x 256 tokens x 128 wide, fp32) trains
# under GPipe and 1F1B with the last step traced; (3) `clpipe sim` runs the same schedule on the
# measured cluster with compute times calibrated from that trace and the message size of the
# model, and the two step times are printed side by side. (4) SkipPipe: four hosts in a chain of
# 4 stages (one each; the origin n0 also holds the head and loss), 6 micro-batches either through
# every stage (the full pipeline) or each skipping one of stages 1-3 (a path set, P = 3 of 4),
# both run with `clpipe train --pipeline.schedule=skippipe --skip.paths`, traced, and predicted
# by `clpipe skip simulate` on the measured links. After each traced run, tools/trace_links.py
# prints how much later than the simulator's link model its messages arrived (links.txt).
# The lab's hosts are namespaces of this machine, so their ranks' compute shares its cores
# (one PoCL thread a rank): the SkipPipe table also shows the prediction with the cores shared
# among the ops running at once (--shared-cores, processor sharing; calibration then takes each
# op's time alone from the trace). CLPN_SHARED_CORES=C makes that the main prediction
# everywhere (default 0: every host has cores of its own, which measured closer on a quiet
# machine, docs/PIPELINE.md).
# Needs root (tools/netlab.sh check).
# Usage: tools/bench_net.sh [MBIT ...]    link rates in Mbit/s (default: 50 100 200); the
#        SkipPipe comparison runs at the first rate. Output under .cache/bench-net/.
#        CLPN_SKIP_ONLY=1: only the SkipPipe comparison. CLPN_SKIP_LAYERS=L (default 4, one a
#        stage): a deeper model in it, the same messages: more compute against the links, as on
#        a slower machine.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/tools/env.sh"
cd "$root"
rates=("$@")
[ ${#rates[@]} -gt 0 ] || rates=(50 100 200)
netlab=$root/tools/netlab.sh
"$netlab" check
build_tree "$root/build"
clpipe=$root/build/tools/clpipe
corpus=$(fortunes_corpus)
out=$root/.cache/bench-net
mkdir -p "$out"
export CLPN_DIR=$out POCL_MAX_PTHREAD_COUNT=1
lab=b$(($$ % 10000))
trap '"$netlab" down "$lab"' EXIT
N=4 B=16 T=256 W=128
msg=$((B * T * W * 4))
model=(--model.preset=llama --model.n_layer=2 --model.d_model=$W --model.n_head=4 --model.ctx=$T
       --train.batch=$B --train.micro_batches=$N --eval.every=0 --eval.batches=1
       --pipeline.stages=2 --pipeline.bind=none --optim.warmup=1)
cores=${CLPN_SHARED_CORES:-0} share=$(nproc)
# calibrated TRACE STAGES OUT [CORES]: a cost table with the compute times of TRACE (alone, on
# CORES shared cores; default $cores, 0: as measured) and the model's message size
calibrated() {
	"$clpipe" sim --schedule gpipe --stages "$2" --microbatches $N --calibrate "$1" \
		--shared-cores "${4:-$cores}" --write-costs "$3.tmp" >/dev/null
	jq --argjson m $msg '.stages |= map(.out_bytes = $m)' "$3.tmp" >"$3"
	rm -f "$3.tmp"
}
# links TRACE CLUSTER WHAT: the trace's messages against FCFS links at the measured rate
links() {
	local bps
	bps=$(jq '[.links[].bandwidth_Bps] | add / length' "$2")
	{ echo "== $3"; python3 "$root/tools/trace_links.py" "$1" $msg "$bps"; } | tee -a "$out/links.txt" |
		sed -n 's/^rank.*->/   &/p'
}
pct() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%+.1f %%", 100 * (a - b) / b}'; }
table=$out/table.md
: >"$out/links.txt"
echo "| link | schedule | measured link | measured step | simulated step | gap | simulated, free links | simulated link share |" >"$table"
echo "|---|---|---|---|---|---|---|---|" >>"$table"
for mbit in "${rates[@]}"; do
	[ "${CLPN_SKIP_ONLY:-0}" = 1 ] && break
	Bps=$((mbit * 1000000 / 8))
	cat >"$out/lab.json" <<EOF
{"format": "clpipe-cluster", "version": 1, "name": "netlab $mbit Mbit/s",
 "defaults": {"inter_host": {"latency_s": 1e-4, "bandwidth_Bps": $Bps}},
 "hosts": [{"name": "n0", "devices": [{}]}, {"name": "n1", "devices": [{}]}]}
EOF
	"$netlab" up "$lab" "$out/lab.json" >/dev/null
	echo "== $mbit Mbit/s: the link as clpipe bench measures it"
	timeout -k 10 300 "$netlab" mpirun "$lab" -np 2 "$clpipe" bench --only p2p --quiet \
		--cluster-out "$out/measured-$mbit.json" | grep -E 'rank 0 <-> 1'
	link=$(jq -r '.links[0] | "\(.bandwidth_Bps * 8 / 1e6 | floor) Mbit/s, \(.latency_s * 1e6 | floor) us"' \
		"$out/measured-$mbit.json")
	for sched in gpipe 1f1b; do
		tr=$out/$sched-$mbit.json
		echo "== $mbit Mbit/s, $sched: measured (trace of step 4)"
		timeout -k 10 600 "$netlab" mpirun "$lab" -np 2 "$clpipe" train --data "$corpus" \
			"${model[@]}" --steps 4 --pipeline.schedule=$sched --train.trace="$tr" --no-ckpt |
			grep -E '^trace of' | tee "$out/$sched-$mbit.txt"
		meas=$(sed -E 's/.*; ([0-9.]+) ms per step.*/\1/' "$out/$sched-$mbit.txt")
		links "$tr" "$out/measured-$mbit.json" "$mbit Mbit/s, $sched"
		# compute times from the trace, the message size of the model, the measured link
		calibrated "$tr" 2 "$out/costs-$sched-$mbit.json"
		sim=("$clpipe" sim --schedule $sched --stages 2 --microbatches $N --grad-norm
		     --loss-reduce --costs "$out/costs-$sched-$mbit.json" --shared-cores $cores)
		"${sim[@]}" --cluster "$out/measured-$mbit.json" --compare "$tr" \
			--svg "$out/$sched-$mbit.svg" >"$out/sim-$sched-$mbit.txt"
		"${sim[@]}" >"$out/sim-free-$sched-$mbit.txt"
		simt=$(awk '/^step time/ {print $3}' "$out/sim-$sched-$mbit.txt")
		free=$(awk '/^step time/ {print $3}' "$out/sim-free-$sched-$mbit.txt")
		comm=$(awk '$1 == "0" && NF >= 4 {print $3; exit}' "$out/sim-$sched-$mbit.txt")
		gap=$(pct "$simt" "$meas")
		echo "   measured $meas ms, simulated $simt ms ($gap); free links $free ms"
		printf '| %s Mbit/s | %s | %s | %s ms | %.1f ms | %s | %.1f ms | %s %% |\n' "$mbit" \
			$sched "$link" "$meas" "$simt" "$gap" "$free" "$comm" >>"$table"
	done
	"$netlab" down "$lab"
done

# SkipPipe against the full pipeline on four hosts in a chain, at the first rate
mbit=${rates[0]}
Bps=$((mbit * 1000000 / 8))
jq -n --argjson b $Bps '{format: "clpipe-cluster", version: 1, name: "netlab chain of 4",
    defaults: {inter_host: {latency_s: 1e-4, bandwidth_Bps: $b}},
    hosts: [range(4) | {name: "n\(.)", devices: [{}]}]}' >"$out/lab4.json"
# paths: node i serves stage i; hops are [stage, node]
jq -n '{format: "clpipe-skip-paths", version: 1, stages: 4,
    rules: {path_len: 4, max_jump: 4, max_swaps: 0, memory: 0, balance: true, deadlock_free: true},
    nodes: [range(4) | {node: ., stage: .}],
    microbatches: [range(6) | {mb: ., origin: 0, hops: [[1, 1], [2, 2], [3, 3]]}]}' \
	>"$out/full_paths.json"
jq -n '{format: "clpipe-skip-paths", version: 1, stages: 4,
    rules: {path_len: 3, max_jump: 4, max_swaps: 0, memory: 0, balance: true, deadlock_free: true},
    nodes: [range(4) | {node: ., stage: .}],
    microbatches: [range(6) | {mb: ., origin: 0,
                   hops: ([[[1, 1], [2, 2]], [[1, 1], [3, 3]], [[2, 2], [3, 3]]][. % 3])}]}' \
	>"$out/skip_paths.json"
"$netlab" up "$lab" "$out/lab4.json" >/dev/null
echo "== SkipPipe, 4 hosts, $mbit Mbit/s: the links as clpipe bench measures them"
timeout -k 10 300 "$netlab" mpirun "$lab" -np 4 "$clpipe" bench --only p2p --quiet \
	--cluster-out "$out/measured4.json" | grep -E 'bandwidth'
stable=$out/skip-table.md
echo "| 4 hosts, $mbit Mbit/s | measured step | simulated (own trace) | gap | simulated (full pipeline's trace) | with $share shared cores | gap |" >"$stable"
echo "|---|---|---|---|---|---|---|" >>"$stable"
for p in full skip; do
	tr=$out/skippipe-$p.json
	echo "== $p paths: measured (trace of step 3)"
	timeout -k 10 600 "$netlab" mpirun "$lab" -np 4 "$clpipe" train --data "$corpus" \
		--model.preset=llama --model.n_layer=${CLPN_SKIP_LAYERS:-4} --model.d_model=$W --model.n_head=4 \
		--model.ctx=$T --train.batch=$B --train.micro_batches=6 --eval.every=0 \
		--eval.batches=1 --pipeline.bind=none --optim.warmup=1 --steps 3 --no-ckpt \
		--pipeline.schedule=skippipe --skip.paths="$out/${p}_paths.json" --train.trace="$tr" |
		grep -E '^trace of' | tee "$out/skippipe-$p.txt"
	calibrated "$tr" 5 "$out/costs-skippipe-$p.json"
	calibrated "$tr" 5 "$out/costs-skippipe-$p-shared.json" $share
	links "$tr" "$out/measured4.json" "4 hosts, $p paths"
done
"$netlab" down "$lab"
for p in full skip; do
	meas=$(sed -E 's/.*; ([0-9.]+) ms per step.*/\1/' "$out/skippipe-$p.txt")
	own=$("$clpipe" skip simulate --paths "$out/${p}_paths.json" --cluster "$out/measured4.json" \
		--costs "$out/costs-skippipe-$p.json" --shared-cores $cores |
		awk '/^iteration/ {print $2 * 1000}')
	fromfull=$("$clpipe" skip simulate --paths "$out/${p}_paths.json" \
		--cluster "$out/measured4.json" --costs "$out/costs-skippipe-full.json" \
		--shared-cores $cores | awk '/^iteration/ {print $2 * 1000}')
	shared=$("$clpipe" skip simulate --paths "$out/${p}_paths.json" \
		--cluster "$out/measured4.json" --costs "$out/costs-skippipe-$p-shared.json" \
		--shared-cores $share | awk '/^iteration/ {print $2 * 1000}')
	eval "meas_$p=$meas own_$p=$own ff_$p=$fromfull"
	printf '| %s | %s ms | %.1f ms | %s | %.1f ms | %.1f ms | %s |\n' "$([ $p = full ] && echo "full pipeline (P = 4)" || echo "path set (P = 3)")" \
		"$meas" "$own" "$(pct "$own" "$meas")" "$fromfull" "$shared" \
		"$(pct "$shared" "$meas")" >>"$stable"
done
gain() { awk -v f="$1" -v s="$2" 'BEGIN {printf "%.1f %%", 100 * (1 - s / f)}'; }
printf '| gain of the path set | %s | %s | | %s |\n' "$(gain "$meas_full" "$meas_skip")" \
	"$(gain "$own_full" "$own_skip")" "$(gain "$ff_full" "$ff_skip")" >>"$stable"
echo
cat "$table"
echo
cat "$stable"
