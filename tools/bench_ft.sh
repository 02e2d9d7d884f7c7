#!/usr/bin/env bash
# The time from a rank's kill to the next completed step, and the steps lost (docs/PIPELINE.md,
# "Failures"): a 2-layer d_model 32 model, 8 steps, a checkpoint every 2, rank 3 (1 for pp2)
# raising SIGKILL after step 3. Every output line is timestamped on arrival (clpipe under
# stdbuf -oL); the kill's time is the dying rank's own clock (its CLPIPE_FAULT line).
#   tools/bench_ft.sh ulfm   DP2 x PP2 under ULFM (build-ulfm, mpirun --with-ft ulfm)
#   tools/bench_ft.sh sup    DP2 x PP2 under Open MPI 4.1 (build) and tools/supervise.sh
#   tools/bench_ft.sh pp2    PP2 under ULFM (no other holder), pipeline.replan = false, and
#                            tools/supervise.sh
#   tools/bench_ft.sh replan PP2 under ULFM (no other holder): re-planned to 1 stage on the
#                            survivor, stage 1 reloaded from the checkpoint of step 2
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/tools/env.sh"
mode=${1:-ulfm}
ulfm=${CLPIPE_ULFM_HOME:-$root/.cache/ompi5}
work=$root/build/bench-ft/$mode
rm -rf "$work" && mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 POCL_MAX_PTHREAD_COUNT=1
for i in $(seq 1 3000); do echo "the quick brown fox jumps over the lazy dog $((i % 17))."; done > "$work/corpus.txt"
common=(--data "$work/corpus.txt" --model.n_layer=2 --model.d_model=32 --model.n_head=4 --model.ctx=16
        --train.batch=2 --train.micro_batches=2 --eval.every=0 --eval.batches=1 --pipeline.stages=2
        --pipeline.schedule=1f1b --pipeline.deadline=60 --steps 8 --ckpt.every=2 --ckpt.dir="$work/ck")
stamp() { while IFS= read -r l; do printf '%s %s\n' "$(date +%s.%N)" "$l"; done; }
case $mode in
  ulfm) CLPIPE_FAULT=die:3:3 "$ulfm/bin/mpirun" --with-ft ulfm --oversubscribe -np 4 stdbuf -oL \
          "$root/build-ulfm/tools/clpipe" train "${common[@]}" --pipeline.replicas=2 2>&1 | stamp >"$work/out" ;;
  sup)  CLPIPE_FAULT=die:3:3 "$root/tools/supervise.sh" -- mpirun --allow-run-as-root --oversubscribe -np 4 \
          stdbuf -oL "$root/build/tools/clpipe" train "${common[@]}" --pipeline.replicas=2 2>&1 | stamp >"$work/out" ;;
  pp2)  CLPIPE_FAULT=die:1:3 "$root/tools/supervise.sh" -- "$ulfm/bin/mpirun" --with-ft ulfm --oversubscribe -np 2 \
          stdbuf -oL "$root/build-ulfm/tools/clpipe" train "${common[@]}" --pipeline.replan=false 2>&1 |
          stamp >"$work/out" ;;
  replan) CLPIPE_FAULT=die:1:3 "$ulfm/bin/mpirun" --with-ft ulfm --oversubscribe -np 2 stdbuf -oL \
          "$root/build-ulfm/tools/clpipe" train "${common[@]}" 2>&1 | stamp >"$work/out" ;;
  *) echo "usage: tools/bench_ft.sh ulfm|sup|pp2|replan" >&2; exit 2 ;;
esac
rc=${PIPESTATUS[0]}
kill=$(grep -ao 'CLPIPE_FAULT: .*at [0-9.]*' "$work/out" | grep -o '[0-9.]*$')
next=$(grep -aE '^[0-9.]+ step 4/8 ' "$work/out" | tail -1 | cut -d' ' -f1)
redone=$(grep -acE '^[0-9.]+ step 3/8 ' "$work/out")
echo "$mode: exit $rc; kill to the next completed step (4): $(echo "$next - $kill" | bc) s;" \
     "step 3 run $redone time(s) (completed steps lost: $((redone - 1)));" \
     "$(grep -ac 'failures survived' "$work/out") ULFM recovery summary" \
     "$(grep -ao '[0-9]* from [^ ]* (step [0-9]*: [0-9]* steps\? of theirs lost); recovered in [0-9.]* s' "$work/out" |
        sed 's/^/(re-plan: /; s/$/)/')"
