#!/usr/bin/env bash
# clpipe bench --compare: two device profiles side by side; a file that is not a profile is an
# error naming it. Usage: test_bench_compare.sh CLPIPE
set -u
clpipe=$1
work=$(mktemp -d /tmp/clpipe-compare-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail=0
check() { if eval "$1"; then echo "ok: $2"; else echo "FAIL: $2"; fail=1; fi; }

"$clpipe" bench --quick --only launch,bandwidth --json "$work/a.json" >/dev/null 2>&1
check "[ -s $work/a.json ]" "a device profile was written"
"$clpipe" bench --compare "$work/a.json" "$work/a.json" >"$work/out" 2>&1
rc=$?
cat "$work/out"
check "[ $rc = 0 ]" "exit code 0"
check "grep -q '^bandwidth.read' $work/out" "a bandwidth row"
check "grep -q '(x1 ' $work/out" "the ratio of a profile to itself is 1"
echo '{"format": "x"}' >"$work/bad.json"
"$clpipe" bench --compare "$work/a.json" "$work/bad.json" >"$work/err" 2>&1
rc=$?
check "[ $rc = 1 ] && grep -q 'bad.json: no \"devices\" array' $work/err" "a non-profile is named"
# --svg: the rooflines, with the kernels of clpipe bench nn --json placed on them
"$clpipe" bench nn --B 1 --T 16 --C 32 --H 2 --iters 1 --json "$work/k.json" >/dev/null 2>&1
check "grep -q '\"clpipe-kernel-profile\"' $work/k.json && grep -q '\"gemm\"' $work/k.json" \
	"bench nn --json wrote a kernel profile with the GEMMs"
"$clpipe" bench --compare "$work/a.json" "$work/a.json" --svg "$work/r.svg" \
	--kernels "$work/k.json" --kernels "$work/k.json" >"$work/out" 2>&1
rc=$?
tail -1 "$work/out"
check "[ $rc = 0 ] && tail -n1 $work/r.svg | grep -q '^</svg>'" "the roofline SVG was written"
check "[ \$(grep -c '<polyline class=\"roof\"' $work/r.svg) = 2 ]" "one roofline per device"
check "grep -q 'class=\"kernel\" data-device=\"1\"' $work/r.svg" \
	"the second kernel profile is placed on the second device"
sed 's/"device": "[^"]*"/"device": "no such device"/' "$work/k.json" >"$work/k2.json"
"$clpipe" bench --compare "$work/a.json" --svg "$work/r2.svg" --kernels "$work/k2.json" \
	>"$work/err" 2>&1
rc=$?
check "[ $rc = 1 ] && grep -q 'k2.json: device \"no such device\"' $work/err && [ ! -e $work/r2.svg ]" \
	"a kernel profile of another device is named, no SVG"
"$clpipe" bench --compare "$work/a.json" --kernels "$work/k.json" >"$work/err" 2>&1
check "[ $? != 0 ] && grep -q 'goes with --svg' $work/err" "--kernels without --svg is an error"
exit $fail
