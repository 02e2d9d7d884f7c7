#!/usr/bin/env bash
# Issue 31: clpipe under a real Slurm (tools/slurmlab.sh: slurmctld and one slurmd per host of a
# network lab, two hosts of two CPUs). sbatch tools/slurm_train.sbatch trains a 2-stage x
# 2-replica pipeline over the two hosts, (1) by srun --mpi=pmix and (2) by mpirun inside the
# allocation: the job completes with exit code 0:0 (scontrol, sacct where slurmdbd and MariaDB
# are installed, and the completion log), every rank
# names its host and local rank, a checkpoint is written; (3) scancel mid-run (after step 3 is
# printed): the job ends CANCELLED, its last checkpoint loads (clpipe eval), and a resubmitted
# job with --resume continues from it to the end; (4) a node set down (scontrol update
# state=down) mid-run ends the job NODE_FAIL, srun naming the node, and (its slurmd being alive)
# with a checkpoint. Every wait polls with a deadline. Exit 77 (ctest SKIP) naming what is
# missing when Slurm, munge or the lab cannot be had.
# Usage: test_slurm.sh SLURMLAB SBATCH_SCRIPT CLPIPE WORKDIR
set -u
slurmlab=$1 script=$2 clpipe=$3
work=$4/slurm
lab="s$(($$ % 100000))"
fail=0
"$slurmlab" check || exit $?
rm -rf "$work" && mkdir -p "$work"
export CLPN_DIR=$work
# on a failure, the daemons' errors, then the lab goes
logs() {
	[ "$fail" -eq 0 ] && return
	grep -h 'error' "$work/clpn-$lab/slurm/log/"*.log 2>/dev/null | tail -20 | sed 's/^/  log | /'
}
trap 'logs; "$slurmlab" down "$lab"' EXIT
check() { if eval "$1"; then echo "ok: $2"; else echo "FAIL: $2"; fail=1; fi; }
sl() { "$slurmlab" run "$lab" "$@"; }

cat >"$work/cluster.json" <<'JSON'
{"format": "clpipe-cluster", "version": 1, "name": "slurm test",
 "defaults": {"inter_host": {"latency_s": 1e-4, "bandwidth_Bps": 5e7}},
 "hosts": [{"name": "n0", "devices": [{}, {}]}, {"name": "n1", "devices": [{}, {}]}]}
JSON
"$slurmlab" up "$lab" "$work/cluster.json" >/dev/null || { echo "FAIL: the Slurm cluster did not come up"; exit 1; }
echo "sinfo: $(sl sinfo -h -N -o '%N:%T:%c' | paste -sd ' ')"
check "sl srun --mpi=list 2>&1 | grep -qw pmix" "srun --mpi=list offers pmix"

for i in $(seq 1 3000); do echo "the quick brown fox jumps over the lazy dog $((i % 17))."; done >"$work/corpus.txt"
small=(--data "$work/corpus.txt" --model.n_layer=2 --model.d_model=32 --model.n_head=4
       --model.ctx=16 --train.batch=2 --train.micro_batches=2 --eval.every=0 --pipeline.deadline=120)

# submit DIR LAUNCH ARGS...: sbatch the script from DIR; prints the job id
submit() {
	local dir=$1 launch=$2
	shift 2
	mkdir -p "$dir"
	sl sbatch --parsable ${SBATCH_OPTS:-} --chdir="$dir" --export="ALL,CLPIPE=$clpipe,LAUNCH=$launch" "$script" "$@"
}

# until_step JOB OUT: the job's output has a line of its step 3 (at most 300 s)
until_step() {
	local end=$((SECONDS + 300))
	until grep -q '^step [3-9]/400\|^step [0-9][0-9]*[0-9]/400' "$2" 2>/dev/null; do
		[ $SECONDS -lt $end ] || { echo "FAIL: job $1 printed no step 3 in 300 s"; fail=1; sed 's/^/  | /' "$2"; exit 1; }
		sl squeue -h -j "$1" 2>/dev/null | grep -q . || { echo "FAIL: job $1 ended early"; fail=1; sed 's/^/  | /' "$2"; exit 1; }
		sleep 0.5
	done
}

# acct_check JOB "STATE EXITCODE" WHAT: sacct has the job so (slurmdbd records it a moment after
# the end: polled, at most 60 s); without slurmdbd, says so
acct=$(grep -c '^AccountingStorageType=accounting_storage/slurmdbd' "$work/clpn-$lab/slurm/slurm.conf")
[ "$acct" -eq 1 ] || echo "note: no sacct (slurmdbd or mariadb-server not installed): job states from scontrol and the completion log only"
acct_check() {
	[ "$acct" -eq 1 ] || return 0
	local end=$((SECONDS + 60)) got
	while :; do
		got=$(sl sacct -j "$1" -X -n -P -o State,ExitCode 2>/dev/null | tr '|' ' ' | sed 's/ by [0-9]*//')
		# STATE alone: any exit code (sacct gives a cancelled job its batch script's, 0:0)
		[ "$got" = "$2" ] || [ "${got%% *}" = "$2" ] && break
		[ $SECONDS -lt $end ] || break
		sleep 0.5
	done
	check "[ '$got' = '$2' ] || [ '${got%% *}' = '$2' ]" "$3: sacct -j $1 shows $2 (got '$got')"
}

# 1, 2: a whole run by each launcher
for launch in srun mpirun; do
	d=$work/$launch
	job=$(submit "$d" "$launch" "${small[@]}" --steps 6 --ckpt.dir=ck)
	st=$("$slurmlab" wait "$lab" "$job" 300)
	out=$d/clpipe-$job.out
	sed 's/^/  | /' "$out" | grep -v '^  | step [1-5]/' | head -30
	check "[ '$st' = 'COMPLETED 0:0' ]" "$launch: job $job ends COMPLETED with exit code 0:0 (got $st)"
	check "grep -q 'JobId=$job .*JobState=COMPLETED' $work/clpn-$lab/slurm/jobcomp.txt" \
		"$launch: the completion log records job $job COMPLETED"
	acct_check "$job" "COMPLETED 0:0" "$launch"
	check "grep -q '^step 6/6' '$out'" "$launch: 6 steps trained"
	check "[ \$(grep -c 'local [01] of 2 on n[01]' '$out') -eq 4 ] && grep -q 'local 1 of 2 on n0' '$out' && grep -q 'local 1 of 2 on n1' '$out'" \
		"$launch: 4 ranks, 2 on each host, each picking its device by local rank"
	check "[ -f $d/ck/step-00000006/manifest.json ]" "$launch: checkpoint step 6 written"
	b=$("$(dirname "$slurmlab")/netlab.sh" bytes "$lab" n1 n0)
	check "[ \"\${b:-0}\" -gt 0 ]" "$launch: the replicas' gradient sums crossed the lab's link n1 -> n0 (${b:-0} bytes so far)"
done

# 3: scancel mid-run, the last checkpoint loads, a resubmitted job resumes
d=$work/cancel
job=$(submit "$d" srun "${small[@]}" --steps 400 --ckpt.dir=ck)
out=$d/clpipe-$job.out
until_step "$job" "$out"
sl scancel "$job"
st=$("$slurmlab" wait "$lab" "$job" 200)
sed 's/^/  | /' "$out" | grep -v '^  | step [0-9]*/' | tail -12
check "[ \"\${st%% *}\" = CANCELLED ]" "scancel: job $job ends CANCELLED (got $st)"
acct_check "$job" CANCELLED "scancel"
last=$(ls -d "$d"/ck/step-* 2>/dev/null | tail -1)
check "[ -n '$last' ] && [ -f '$last/manifest.json' ]" "scancel: a checkpoint was saved (${last##*/})"
if [ -n "$last" ]; then
	n=$((10#${last##*step-}))
	check "[ $n -ge 3 ] && [ $n -lt 400 ]" "scancel: it is mid-run (step $n of 400)"
	(cd "$d" && "$clpipe" eval --ckpt "$last" --data "$work/corpus.txt" --eval.batches=2 --train.batch=2) >"$d/eval.out" 2>&1
	check "[ $? -eq 0 ]" "the cancelled job's checkpoint loads: $(tail -1 "$d/eval.out")"
	job2=$(submit "$d" srun "${small[@]}" --steps $((n + 3)) --ckpt.dir=ck --resume)
	st=$("$slurmlab" wait "$lab" "$job2" 300)
	out2=$d/clpipe-$job2.out
	sed 's/^/  | /' "$out2" | grep -i 'resum' | head -3
	check "[ '$st' = 'COMPLETED 0:0' ] && grep -q 'resumed from ck/step-$(printf %08d $n) at step $n' '$out2' && grep -q '^step $((n + 3))/$((n + 3))' '$out2' && ! grep -q '^step $n/' '$out2'" \
		"resubmitted job $job2 resumes at step $((n + 1)) and ends COMPLETED ($st)"
fi

# 4: a node taken down mid-run ends the job (not requeued), naming the node
d=$work/nodedown
job=$(SBATCH_OPTS=--no-requeue submit "$d" srun "${small[@]}" --steps 400 --ckpt.dir=ck)
out=$d/clpipe-$job.out
until_step "$job" "$out"
sl scontrol update nodename=n1 state=down reason=clpipe-test
st=$("$slurmlab" wait "$lab" "$job" 200)
sed 's/^/  | /' "$out" | grep -v '^  | step [0-9]*/' | tail -6
why=$(sl scontrol show job "$job" | tr ' ' '\n' | grep -E '^(Reason|NodeList)=' | paste -sd ' ')
check "[ \"\${st%% *}\" = NODE_FAIL ] && grep -q 'srun: error: Node failure on n1' '$out'" \
	"node n1 down mid-run: job $job ends ${st%% *} (got $st; $why), srun names n1"
acct_check "$job" NODE_FAIL "node down"
last=$(ls -d "$d"/ck/step-* 2>/dev/null | tail -1)
check "[ -n '$last' ] && [ -f '$last/manifest.json' ]" \
	"node down: the ranks got SIGTERM and saved a checkpoint (${last##*/})"
sl scontrol update nodename=n1 state=resume
exit $fail
