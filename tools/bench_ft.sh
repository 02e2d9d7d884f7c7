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
#   tools/bench_ft.sh shampoo    DP2 x PP2 under ULFM with Shampoo (its own state taken over)
#   tools/bench_ft.sh pipefisher DP2 x PP2 under ULFM with PipeFisher (a fixed cost table: K = 4,
#                                then 2): rank 3 killed after step 4, a cycle end
#   tools/bench_ft.sh skip       SkipPipe on 6 ranks (3 stages x 2 nodes, 3 layers): rank 3
#                                killed, paths re-planned over the 5 left
#   tools/bench_ft.sh chimera    Chimera on 2 ranks: rank 1 killed, rank 0 goes on from its twin
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
die=3
cat >"$work/costs.json" <<'EOF'
{"format": "clpipe-costs", "version": 1, "source": "bench_ft: fixed",
 "stages": [
  {"fwd_s": 1, "bwd_s": 2, "opt_s": 0.1, "kfac_curv_a_s": 0.5, "kfac_curv_b_s": 0.5,
   "kfac_inv_s": 1, "kfac_precond_s": 0.2},
  {"fwd_s": 1, "bwd_s": 2, "opt_s": 0.1, "kfac_curv_a_s": 0.5, "kfac_curv_b_s": 0.5,
   "kfac_inv_s": 1, "kfac_precond_s": 0.2}]}
EOF
ulfm_run() { local np=$1; shift; "$ulfm/bin/mpirun" --with-ft ulfm --oversubscribe -np "$np" stdbuf -oL \
          "$root/build-ulfm/tools/clpipe" train "$@" 2>&1 | stamp >"$work/out"; return "${PIPESTATUS[0]}"; }
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
  shampoo) CLPIPE_FAULT=die:3:3 ulfm_run 4 "${common[@]}" --pipeline.replicas=2 --optim.name=shampoo ;;
  pipefisher) die=4; CLPIPE_FAULT=die:3:4 ulfm_run 4 "${common[@]}" --pipeline.replicas=2 --optim.name=kfac \
          --pipeline.pipefisher=true --pipeline.pipefisher_costs="$work/costs.json" ;;
  skip) CLPIPE_FAULT=die:3:3 ulfm_run 6 "${common[@]}" --model.n_layer=3 --pipeline.schedule=skippipe \
          --skip.stage_nodes=[2,2,2] --optim.warmup=1 ;;
  chimera) CLPIPE_FAULT=die:1:3 ulfm_run 2 "${common[@]}" --pipeline.schedule=chimera ;;
  *) echo "usage: tools/bench_ft.sh ulfm|sup|pp2|replan|shampoo|pipefisher|skip|chimera" >&2; exit 2 ;;
esac
rc=${PIPESTATUS[0]}
kill=$(grep -ao 'CLPIPE_FAULT: .*at [0-9.]*' "$work/out" | grep -o '[0-9.]*$')
next=$(grep -aE "^[0-9.]+ step $((die + 1))/8 " "$work/out" | tail -1 | cut -d' ' -f1)
redone=$(grep -acE "^[0-9.]+ step $die/8 " "$work/out")
echo "$mode: exit $rc; kill to the next completed step ($((die + 1))): $(echo "$next - $kill" | bc) s;" \
     "step $die run $redone time(s) (completed steps lost: $((redone - 1)));" \
     "$(grep -ac 'failures survived' "$work/out") ULFM recovery summary" \
     "$(grep -ao '[0-9]* from [^ ]* (step [0-9]*: [0-9]* steps\? of theirs lost); recovered in [0-9.]* s' "$work/out" |
        sed 's/^/(re-plan: /; s/$/)/')"
