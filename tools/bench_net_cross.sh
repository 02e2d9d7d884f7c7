#!/usr/bin/env bash
# Why a pipeline's messages took longer over the lab than the simulator's links say: two hosts
# at MBIT Mbit/s (default 50), 2 MiB messages (the size of tools/bench_net.sh's activations),
# timed by tools/netcross/cross.c in three situations,
#   one way        rank 0 -> 1 alone                           ideal: occupancy L (bytes / rate)
#   crossing       1 -> 0 posted 150 ms after 0 -> 1            ideal: L and 150 + L
#   sender busy    0 -> 1, then rank 0 makes no MPI call for 300 ms     ideal: L
# each under five setups side by side: the lab as tools/netlab.sh makes it; the same with the
# lab's shaping as it was before (old-shaping: GSO on, ACKs queued with the data, slow start
# after idle); with the kernel's autotuned socket buffers (CLPN_TCP_BUF=0); with Open MPI's
# defaults (CLPN_TCP_EAGER=0: 64 KB eager limit, rendezvous above it, autotuned buffers); and
# with both as before (mpi-defaults+old-shaping: the lab of the first measurements).
# Prints the mean [min, max] arrival over REPS repetitions after a first one that opens the
# connection. Needs root and mpicc (tools/netlab.sh check).
# Usage: tools/bench_net_cross.sh [MBIT [REPS]]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mbit=${1:-50} reps=${2:-8}
netlab=$root/tools/netlab.sh
"$netlab" check
out=$root/.cache/bench-net-cross
mkdir -p "$out"
export CLPN_DIR=$out
mpicc -std=c11 -D_POSIX_C_SOURCE=200809L -O2 -o "$out/cross" tools/netcross/cross.c
lab=c$(($$ % 10000))
trap '"$netlab" down "$lab"' EXIT
Bps=$((mbit * 1000000 / 8))
cat >"$out/lab.json" <<JSON
{"format": "clpipe-cluster", "version": 1, "name": "netlab $mbit Mbit/s",
 "defaults": {"inter_host": {"latency_s": 1e-4, "bandwidth_Bps": $Bps}},
 "hosts": [{"name": "n0", "devices": [{}]}, {"name": "n1", "devices": [{}]}]}
JSON
bytes=2097152
# the link's occupancy: each 1448 bytes of payload is a 1514-byte frame at the shaper
occ=$(awk -v b=$bytes -v r=$Bps 'BEGIN {printf "%.0f", 1000 * b * 1514 / 1448 / r}')
# stats COLUMN: mean [min, max] of rep lines 2.. (column 4: 0->1, 7: 1->0)
stats() {
	awk -v c="$1" 'NR > 1 {v = $c + 0; s += v; n++; if (n == 1 || v < lo) lo = v; if (n == 1 || v > hi) hi = v}
		END {printf "%.0f [%.0f, %.0f]", s / n, lo, hi}'
}
echo "2 MiB at $mbit Mbit/s: occupancy L = $occ ms (with TCP/IP/Ethernet headers)"
printf '| setup | one way (ideal %s) | crossing: 0->1 (ideal %s) | crossing: 1->0 (ideal %s) | sender busy 300 ms (ideal %s) |\n' \
	"$occ" "$occ" "$((150 + occ))" "$occ" >"$out/table.md"
echo "|---|---|---|---|---|" >>"$out/table.md"
for setup in netlab old-shaping autotuned-buffers mpi-defaults mpi-defaults+old-shaping; do
	"$netlab" up "$lab" "$out/lab.json" >/dev/null
	eager=4194304 buf=4194304
	case $setup in autotuned*) buf=0 ;; mpi-defaults*) eager=0 buf=0 ;; esac
	if [[ $setup = *old-shaping ]]; then
		for h in n0 n1; do
			ip -n "clpn-$lab-$h" link set dev clpn0 gso_max_segs 65535
			tc -n "clpn-$lab-$h" filter del dev clpn0 parent 1: prio 1
			ip netns exec "clpn-$lab-$h" sysctl -q -w net.ipv4.tcp_slow_start_after_idle=1
		done
	fi
	run() { CLPN_TCP_EAGER=$eager CLPN_TCP_BUF=$buf timeout -k 5 120 "$netlab" mpirun "$lab" -np 2 \
		"$out/cross" $bytes "$@" $((reps + 1)) | grep '^rep'; }
	one=$(run -1 0 | tr -d ',' | stats 4)
	crossing=$(run 150 0 | tr -d ',')
	busy=$(run -1 300 | tr -d ',' | stats 4)
	printf '| %s | %s | %s | %s | %s |\n' $setup "$one" "$(stats 4 <<<"$crossing")" \
		"$(stats 7 <<<"$crossing")" "$busy" >>"$out/table.md"
	"$netlab" down "$lab"
done
cat "$out/table.md"
