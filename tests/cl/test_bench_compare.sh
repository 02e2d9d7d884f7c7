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
exit $fail
