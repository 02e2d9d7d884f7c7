#!/usr/bin/env bash
# SkipPipe's partial-inference experiment, small (docs/SKIPPIPE.md, "Partial inference"): train
# the same byte-level GPT-2 on the fortunes corpus with SkipPipe paths that skip 0, 1 or 2 of the
# 3 stages after stage 0 (path_len 4, 3, 2), then evaluate each checkpoint on one device with
# 0, 1 or 2 of its 4 stages removed (each choice among stages 1..3, averaged; stage 0 holds the
# embedding and is never skipped in training) and print a Markdown table.
#
#   tools/skip_partial.sh                  # defaults below
#   STEPS=600 D_MODEL=128 tools/skip_partial.sh --model.n_layer=8   # extra args go to train
#
# Environment: STEPS (300), D_MODEL (64), NP (4 ranks: one node per stage), MB (6 micro-batches
# per step), EVAL_BATCHES (32), OUT (.cache/skip-partial), CLPIPE (build/tools/clpipe).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/tools/env.sh"
cd "$root"
clpipe=${CLPIPE:-$root/build/tools/clpipe}
steps=${STEPS:-300}
d_model=${D_MODEL:-64}
np=${NP:-4}
mb=${MB:-6}
eval_batches=${EVAL_BATCHES:-32}
out=${OUT:-.cache/skip-partial}
corpus=$(fortunes_corpus)
mkdir -p "$out"
export POCL_MAX_PTHREAD_COUNT=${POCL_MAX_PTHREAD_COUNT:-1}
export OMPI_MCA_btl=${OMPI_MCA_btl:-self,vader} OMPI_MCA_btl_vader_single_copy_mechanism=none
common=(--data "$corpus" --model.preset=gpt2 --model.n_layer=4 --model.d_model="$d_model"
        --model.n_head=4 --model.ctx=64 --train.batch=8 --train.steps="$steps"
        --optim.lr=3e-3 --optim.min_lr=3e-4 --optim.warmup=20 --eval.every=0
        --eval.batches="$eval_batches"
        --pipeline.schedule=skippipe --skip.stage_nodes=[1,1,1,1] --skip.memory=3
        --train.micro_batches="$mb")
# the micro-batches per step: with P stages per path every stage after 0 is visited
# mb (P - 1) / 3 times, so mb is a multiple of 3
for P in 4 3 2; do
	if [ ! -f "$out/P$P/manifest.json" ] && ! ls "$out/P$P"/step-*/manifest.json >/dev/null 2>&1; then
		echo "== training with path_len $P ($((4 - P)) of 3 stages skipped per path)"
		rm -rf "$out/P$P"
		mpirun --allow-run-as-root --oversubscribe -np "$np" "$clpipe" train "${common[@]}" \
			--skip.path_len=$P --ckpt.dir="$out/P$P" --train.log="$out/P$P.jsonl" "$@" \
			> "$out/P$P.train.out" 2>&1 || { tail -20 "$out/P$P.train.out"; exit 1; }
		grep -E '^eval at' "$out/P$P.train.out" | tail -1
	fi
done
val() { # checkpoint, stages removed -> validation loss
	"$clpipe" eval --ckpt "$1" --train.batch=8 --eval.batches="$eval_batches" \
		--sample.skip_stages="$2" 2>/dev/null | sed -n 's/^val loss \([0-9.]*\) nats.*/\1/p'
}
mean() { awk '{ s += $1; n++ } END { printf "%.4f", s / n }'; }
name() {
	case $1 in 4) echo "no skipping (P = 4)" ;; 3) echo "1 of 3 stages skipped (P = 3)" ;;
	           2) echo "2 of 3 stages skipped (P = 2)" ;; esac
}
sets=("[]" "[1]" "[2]" "[3]" "[1,2]" "[1,3]" "[2,3]")
declare -A loss
for P in 4 3 2; do
	for s in "${sets[@]}"; do loss[$P$s]=$(val "$out/P$P" "$s"); done
done
{
	echo "| trained with (per path) | all 4 stages | 1 of 4 removed (25 %) | 2 of 4 removed (50 %) |"
	echo "|---|---|---|---|"
	for P in 4 3 2; do
		one=$(for s in "[1]" "[2]" "[3]"; do echo "${loss[$P$s]}"; done | mean)
		two=$(for s in "[1,2]" "[1,3]" "[2,3]"; do echo "${loss[$P$s]}"; done | mean)
		echo "| $(name $P) | ${loss[$P[]]} | $one | $two |"
	done
	echo
	echo "| trained with | removed: none | 1 | 2 | 3 | 1, 2 | 1, 3 | 2, 3 |"
	echo "|---|---|---|---|---|---|---|---|"
	for P in 4 3 2; do
		row="| $(name $P) |"
		for s in "${sets[@]}"; do row="$row ${loss[$P$s]} |"; done
		echo "$row"
	done
} | tee "$out/table.md"
