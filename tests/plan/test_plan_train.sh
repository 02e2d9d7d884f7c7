#!/usr/bin/env bash
# clpipe train runs what clpipe plan writes: (1) plan this machine (--live) and train the written
# config for two steps on one rank; (2) pipeline.layout gives each of two ranks its device
# selector; (3) a layout for another rank count, or another host, is refused by name.
# Usage: test_plan_train.sh CLPIPE PLAN_DATA WORKDIR
set -u
clpipe=$1
data=$2
work=$3/plan-train
rm -rf "$work" && mkdir -p "$work"
fail=0
check() { if ! eval "$1"; then echo "FAIL: $2"; fail=1; else echo "ok: $2"; fi; }

for i in $(seq 1 2000); do echo "the quick brown fox jumps over the lazy dog $((i % 13))."; done > "$work/corpus.txt"
cat > "$work/blocks.json" <<JSON
{"format": "clpipe-costs", "device_kind": "cpu", "stages": [
  {"fwd_s": 0.001, "bwd_s": 0.002, "blocks": "embedding"},
  {"fwd_s": 0.004, "bwd_s": 0.008, "blocks": "layer"},
  {"fwd_s": 0.002, "bwd_s": 0.004, "blocks": "head"}]}
JSON
run=(--data.path="$work/corpus.txt" --train.steps=2 --eval.every=0 --eval.batches=1 --no-ckpt)

# 1. plan this machine, train the plan's config
"$clpipe" plan --model "$data/tiny.toml" --live --blocks "$work/blocks.json" \
	--out "$work/live" >"$work/plan.out" 2>&1
check "[ $? -eq 0 ] && [ -f '$work/live.toml' ] && [ -f '$work/live.layout.json' ]" \
	"clpipe plan --live writes the config and the layout"
timeout 300 "$clpipe" train --config "$work/live.toml" "${run[@]}" >"$work/train1.out" 2>&1
check "[ $? -eq 0 ] && grep -q 'step 2' '$work/train1.out'" "clpipe train runs the plan's config"

# 2. two ranks, a device selector each from the layout
cat > "$work/two.layout.json" <<JSON
{"format": "clpipe-layout", "ranks": [
  {"rank": 0, "device": "0", "stages": [{"stage": 0}]},
  {"rank": 1, "device": "cpu", "stages": [{"stage": 1}]}]}
JSON
mpi=(mpirun --allow-run-as-root --oversubscribe -np 2)
two=(--config "$data/tiny.toml" "${run[@]}" --pipeline.stages=2 --pipeline.layers='[3, 1]')
timeout 300 "${mpi[@]}" "$clpipe" train "${two[@]}" --pipeline.layout="$work/two.layout.json" \
	>"$work/train2.out" 2>&1
check "[ $? -eq 0 ] && grep -q 'step 2' '$work/train2.out'" "two ranks take their devices from the layout"

# 3. refused layouts
sed 's/"device": "cpu"/"device": "elsewhere:0"/' "$work/two.layout.json" >"$work/host.layout.json"
timeout 300 "${mpi[@]}" "$clpipe" train "${two[@]}" --pipeline.layout="$work/host.layout.json" \
	>"$work/train3.out" 2>&1
check "[ $? -ne 0 ] && grep -q 'rank 1 runs on host .*the layout puts it on elsewhere:0' '$work/train3.out'" \
	"a layout naming another host is refused"
sed 's/{"stage": 1}/{"stage": 0}/' "$work/two.layout.json" >"$work/stage.layout.json"
timeout 300 "${mpi[@]}" "$clpipe" train "${two[@]}" --pipeline.layout="$work/stage.layout.json" \
	>"$work/train4.out" 2>&1
check "[ $? -ne 0 ] && grep -q 'stage.layout.json' '$work/train4.out'" \
	"a layout that does not match the schedule is refused"
[ $fail -ne 0 ] && for f in plan train1 train2 train3 train4; do echo "--- $f.out"; cat "$work/$f.out"; done
exit $fail
