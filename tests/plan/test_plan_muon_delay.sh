#!/usr/bin/env bash
# The one-step-delayed Muon (muon.delay): PipeFisher (each matrix's Newton-Schulz as the step's
# bubble items, CLP_PF_WORK_MUON_DELAY) is a choice of clpipe plan. BERT-Large in micro-batches
# of 8 x 128 on two V100 and two P100: the plan picks it, predicts a shorter step than
# --pipefisher off (the Newton-Schulz in the optimizer step), and writes the config that runs it
# (pipeline.pipefisher, muon.delay, pipeline.pipefisher_costs = its cost table, whose
# kfac_inv_s holds the Newton-Schulz and opt_s none of it). With `train`: clpipe train runs such
# a config, a 2-stage plan of the tiny GPT-2 on two_speeds.json (pipeline.layout left out: that
# cluster's devices are not this machine's), two steps on two ranks.
# Usage: test_plan_muon_delay.sh CLPIPE PLAN_DATA WORKDIR [train]
set -u
clpipe=$1
data=$2
work=$3/plan-muon-delay
rm -rf "$work" && mkdir -p "$work"
fail=0
check() { if ! eval "$1"; then echo "FAIL: $2"; fail=1; else echo "ok: $2"; fi; }
args=(--model "$data/bert-large.toml" --cluster "$data/mix_2fast2slow.json"
	--profile "$data/bert-large_time_memory_v100.csv,$data/bert-large_time_memory_p100.csv"
	--optim.name=muon --muon.delay=true)
step() { sed -n 's/^plan .*: step \([0-9.e+]*\) ms.*/\1/p' "$1"; }

if [ "${4:-}" = train ]; then
	for i in $(seq 1 2000); do echo "the quick brown fox jumps over the lazy dog $((i % 13))."; done \
		>"$work/corpus.txt"
	cat >"$work/blocks.json" <<JSON
{"format": "clpipe-costs", "device_kind": "cpu", "stages": [
  {"fwd_s": 0.001, "bwd_s": 0.002, "blocks": "embedding"},
  {"fwd_s": 0.004, "bwd_s": 0.008, "blocks": "layer"},
  {"fwd_s": 0.002, "bwd_s": 0.004, "blocks": "head"}]}
JSON
	"$clpipe" plan --model "$data/tiny.toml" --cluster "$data/two_speeds.json" \
		--blocks "$work/blocks.json" --optim.name=muon --muon.delay=true --pipefisher on \
		--stages 2 --out "$work/tiny" >"$work/tiny.out" 2>&1
	check "[ $? -eq 0 ] && grep -q '^plan .*2 stages.*PipeFisher' '$work/tiny.out' &&
		grep -q '^pipefisher_costs = \"$work/tiny.costs.json\"' '$work/tiny.toml'" \
		"the tiny model's plan picks PipeFisher"
	timeout 300 mpirun --allow-run-as-root --oversubscribe -np 2 "$clpipe" train \
		--config "$work/tiny.toml" --pipeline.layout= --data.path="$work/corpus.txt" \
		--train.steps=2 --eval.every=0 --eval.batches=1 --no-ckpt >"$work/train.out" 2>&1
	check "[ $? -eq 0 ] && grep -q '^pipefisher: K = 1' '$work/train.out' &&
		grep -q 'step 2/2' '$work/train.out'" \
		"clpipe train runs the plan's config: the pass from its cost table, two steps"
	[ $fail -ne 0 ] && for f in tiny train; do echo "--- $f.out"; cat "$work/$f.out"; done
	exit $fail
fi

"$clpipe" plan "${args[@]}" --out "$work/pf" >"$work/pf.out" 2>&1
check "[ $? -eq 0 ] && grep -q '^plan .*, PipeFisher: step' '$work/pf.out'" \
	"the plan picks PipeFisher"
check "grep -q \"runs the delayed Muon's Newton-Schulz (muon.delay) in the schedule's bubbles\" \
	'$work/pf.out'" "it says what clpipe train runs"
"$clpipe" plan "${args[@]}" --pipefisher off --out "$work/off" >"$work/off.out" 2>&1
check "[ $? -eq 0 ] && ! grep -q PipeFisher '$work/off.out'" "--pipefisher off plans without it"
a=$(step "$work/pf.out")
b=$(step "$work/off.out")
echo "predicted step: PipeFisher $a ms, off $b ms"
check "[ -n '$a' ] && [ -n '$b' ] && awk -v a='$a' -v b='$b' 'BEGIN { exit !(a < b) }'" \
	"PipeFisher predicts the shorter step"
# the printed check (the simulator's own pass on the written base schedule) gives the same step
chk=$(sed -n 's/^check: clpipe sim //p' "$work/pf.out")
# shellcheck disable=SC2086 # the check's words, as printed
"$clpipe" sim $chk >"$work/check.out" 2>&1
# the plan ranks by the steady state (two cycles less one); its first cycle is the cold one
c=$(sed -n 's/^ *steady state (two cycles less one): step [0-9.e+]* ms -> \([0-9.e+]*\) ms.*/\1/p' \
	"$work/check.out")
d=$(sed -n 's/^ *step [0-9.e+]* ms -> \([0-9.e+]*\) ms.*/\1/p' "$work/check.out")
f=$(sed -n 's/^ *step: steady state .*first cycle from idle ranks \([0-9.e+]*\) ms.*/\1/p' \
	"$work/pf.out")
echo "clpipe sim $chk: steady $c ms, first cycle $d ms; plan: steady $a ms, first cycle $f ms"
check "[ -n '$c' ] && [ '$c' = '$a' ]" "the printed clpipe sim check gives the plan's (steady) step"
check "[ -n '$d' ] && [ '$d' = '$f' ]" "and its first cycle"
check "grep -q '\"step_ranked_by\": \"steady state' '$work/pf.plan.json'" \
	"plan.json says which figure ranks"
t=$work/pf.toml
check "grep -q '^pipefisher = true' '$t' && grep -q '^delay = true' '$t' &&
	grep -q '^pipefisher_split = false' '$t' &&
	grep -q \"^pipefisher_costs = \\\"$work/pf.costs.json\\\"\" '$t'" \
	"the config runs it: pipeline.pipefisher, muon.delay, pipeline.pipefisher_costs"
# every device kind's entry too: each at its own rate (P100's, not the profile's K-FAC inversion)
check "[ \$(grep -Ec '\"kfac_inv_s\": [0-9.e-]*[1-9]' '$work/pf.costs.json') -eq \
	\$(grep -c '\"fwd_s\"' '$work/pf.costs.json') ] &&
	! grep -Eq '\"(opt|kfac_curv_a|kfac_curv_b|kfac_precond)_s\": [0-9.e-]*[1-9]' \
	'$work/pf.costs.json'" \
	"the cost table holds the Newton-Schulz as items, none in the optimizer step"
# the delayed directions live in the AdamW second moments: no memory of their own
check "! grep -q '\"kfac_bytes\"' '$work/pf.costs.json'" "no memory counted for the directions"
check "grep -Eq '\"opt_s\": [0-9.e-]*[1-9]' '$work/off.costs.json' && ! grep -q '^pipefisher = true' '$work/off.toml'" \
	"without PipeFisher the Newton-Schulz is optimizer-step time"
# plain Muon: the Newton-Schulz needs the step's gradients, never PipeFisher
"$clpipe" plan "${args[@]/--muon.delay=true/--muon.delay=false}" --pipefisher on \
	--out "$work/plain" >"$work/plain.out" 2>&1
check "[ $? -eq 0 ] && ! grep -q PipeFisher '$work/plain.out' &&
	! grep -q '^pipefisher = true' '$work/plain.toml'" "plain Muon stays without PipeFisher"
[ $fail -ne 0 ] && for f in pf off check plain; do echo "--- $f.out"; cat "$work/$f.out"; done
exit $fail
