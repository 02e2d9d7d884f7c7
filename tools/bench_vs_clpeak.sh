#!/bin/sh
# Run clpeak and `clpipe bench` on the same OpenCL device, one after the other, and print their
# figures side by side. Where the two use the same method (clpeak's read-only global bandwidth
# kernel, its dependent multiply-add compute kernel) clpipe's median over repeats should agree
# with clpeak's figure within clpipe's measured spread; the table says whether it does.
#
# usage: tools/bench_vs_clpeak.sh [--device N] [--clpipe PATH] [--out DIR] [--repeats N]
#                                [--rounds R]
#   --device N    clpipe device index (clpipe devices); default 0
#   --clpipe PATH the clpipe binary; default build/tools/clpipe
#   --out DIR     keep every tool's output there; default a temporary dir
#   --rounds R    alternate clpeak and clpipe R times for the same-method figures (default 3)
#   --repeats N   clpipe's timed runs per figure (default 10)
#
# clpeak is a benchmark-only dependency (Debian package `clpeak`), installed here with apt-get
# when missing; nothing in the build or the tests needs it. Needs python3 for the table.
set -eu

device=0
clpipe=build/tools/clpipe
out=
repeats=10
rounds=3
while [ $# -gt 0 ]; do
	case "$1" in
	--device) device=$2; shift 2 ;;
	--clpipe) clpipe=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--repeats) repeats=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	-h|--help) sed -n '2,18p' "$0"; exit 0 ;;
	*) echo "bench_vs_clpeak.sh: unknown option $1" >&2; exit 2 ;;
	esac
done

if ! command -v clpeak >/dev/null 2>&1; then
	echo "clpeak is not installed; installing the Debian package (benchmark-only)" >&2
	if [ "$(id -u)" -ne 0 ]; then
		echo "bench_vs_clpeak.sh: run as root or: sudo apt-get install clpeak" >&2
		exit 1
	fi
	apt-get install -y clpeak >/dev/null
fi
command -v python3 >/dev/null 2>&1 || { echo "bench_vs_clpeak.sh: needs python3" >&2; exit 1; }
[ -x "$clpipe" ] || { echo "bench_vs_clpeak.sh: no clpipe at $clpipe (build first)" >&2; exit 1; }
if [ -z "$out" ]; then
	out=$(mktemp -d)
	trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"

# clpeak names a device by platform and position within it; clpipe by its overall index.
"$clpipe" devices --write-devices "$out/devices.json" >/dev/null
set -- $(python3 - "$out/devices.json" "$device" <<'EOF'
import json, sys
devs = json.load(open(sys.argv[1]))["devices"]
i = int(sys.argv[2])
if i >= len(devs):
    sys.exit("bench_vs_clpeak.sh: no device %d (there are %d)" % (i, len(devs)))
d = devs[i]
p = d.get("platform_index", 0)
within = sum(1 for e in devs[:i] if e.get("platform_index", 0) == p)
# clpeak 1.1.2 reads 2^27 floats on CPUs and 2^29 on GPUs, at most half the largest allocation
cap = (1 << 27 if d["type"] == "cpu" else 1 << 29) * 4
mib = min(cap, d.get("max_alloc", cap * 2) // 2) >> 20
print(p, within, mib)
EOF
)
platform=$1 pdev=$2 bwmib=$3

echo "device $device: clpeak -p $platform -d $pdev; clpipe bench --device $device" \
     "(read buffer $bwmib MiB, as clpeak); $rounds rounds" >&2
# Compute and bandwidth, where the methods are the same: alternate the two tools so that both
# see the same machine (other processes change the figures from minute to minute).
r=1
while [ "$r" -le "$rounds" ]; do
	echo "round $r/$rounds: clpeak ..." >&2
	clpeak -p "$platform" -d "$pdev" --global-bandwidth --compute-sp >"$out/clpeak.$r.txt" 2>&1
	echo "round $r/$rounds: clpipe bench ..." >&2
	"$clpipe" bench --device "$device" --only compute,bandwidth --bw-mib "$bwmib" \
		--repeats "$repeats" --widths --json "$out/clpipe.$r.json" \
		>"$out/clpipe.$r.txt" 2>"$out/clpipe.$r.log"
	r=$((r + 1))
done
# Transfers and launch latency are measured differently; shown side by side once.
echo "transfers and launch latency: clpeak, clpipe bench ..." >&2
clpeak -p "$platform" -d "$pdev" --transfer-bandwidth --kernel-latency >"$out/clpeak.xfer.txt" 2>&1
"$clpipe" bench --device "$device" --only transfer,launch --repeats "$repeats" \
	--json "$out/clpipe.xfer.json" >"$out/clpipe.xfer.txt" 2>"$out/clpipe.xfer.log"

python3 "$(dirname "$0")/bench_vs_clpeak.py" "$out" "$rounds"
