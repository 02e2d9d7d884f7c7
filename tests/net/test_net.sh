#!/usr/bin/env bash
# Pipelines between hosts over Open MPI's TCP transport: each test builds its own lab of network
# namespaces (tools/netlab.sh, a name unique to this process), runs under `netlab.sh mpirun`
# with a timeout on every mpirun, and tears the lab down on exit, also after a failure.
# Exit 77 (ctest SKIP) with a message when the machine cannot build a lab.
#   test_net.sh equiv   NETLAB EXEC_EQUIV WORKDIR   2 hosts x 2 ranks, 1F1B D=4: bitwise equal
#                                                   to one device (tests/exec's comparison)
#   test_net.sh skip    NETLAB SKIP_EXEC  WORKDIR CLPIPE   SkipPipe paths, 6 ranks on 4 hosts:
#                                                   within 1e-4 of one process (tests/skipexec's);
#                                                   clpipe bench --cluster-out over the same hosts
#   test_net.sh labs    NETLAB -         WORKDIR   six labs built at once, two removed at once, thrice:
#                                                   each comes up with its hosts, and `down`
#                                                   of one never breaks another (ctest -j runs
#                                                   the net tests side by side)
#   test_net.sh supervise NETLAB CLPIPE   WORKDIR SUPERVISE [MPIRUN]   DP2 x PP2 over 2 hosts
#                                                   under tools/supervise.sh: host n1's ranks
#                                                   killed and its namespace deleted mid-run;
#                                                   the supervisor finds n1 gone, relaunches
#                                                   over n0 as PP2 x DP1 with --resume, the run
#                                                   ends at its planned step with the losses of
#                                                   a run resumed so without a failure. MPIRUN:
#                                                   an Open MPI 5 with ULFM (--with-ft ulfm),
#                                                   whose runtime ends the job when it loses a
#                                                   host, with exit 0
#   test_net.sh hostdown NETLAB CLPIPE    WORKDIR   every rank of one host killed at once: the
#                                                   job ends non-zero naming host and rank, the
#                                                   last checkpoint loads
set -u
mode=$1 netlab=$2 prog=$3
lab="${mode:0:1}$(($$ % 100000))"
work=$4/net-$mode
"$netlab" check || exit $?
rm -rf "$work" && mkdir -p "$work"
export CLPN_DIR=$work
trap '"$netlab" down "$lab"' EXIT
export POCL_MAX_PTHREAD_COUNT=1 OMPI_MCA_rmaps_base_oversubscribe=1

# cluster HOSTS SLOTS... : every pair limited to 50 MB/s (400 Mbit/s), the test's links
cluster() {
	local f=$work/cluster.json first=1
	{
		echo '{"format": "clpipe-cluster", "version": 1, "name": "net test",'
		echo ' "defaults": {"inter_host": {"latency_s": 1e-4, "bandwidth_Bps": 5e7}}, "hosts": ['
		local i=0
		for s in "$@"; do
			[ $first -eq 1 ] || echo ','
			first=0
			printf '{"name": "n%d", "devices": [%s]}' $i "$(yes '{}' | head -n "$s" | paste -sd,)"
			i=$((i + 1))
		done
		echo ']}'
	} >"$f"
	"$netlab" up "$lab" "$f" >/dev/null || { echo "FAIL: the lab did not come up"; exit 1; }
}

# crossed FROM TO: the run sent bytes over the rate-limited link FROM -> TO
crossed() {
	local b
	b=$("$netlab" bytes "$lab" "$1" "$2")
	echo "$1 -> $2: ${b:-0} bytes over the limited link"
	[ "${b:-0}" -gt 0 ] || { echo "FAIL: nothing crossed the link $1 -> $2"; exit 1; }
}

case $mode in
equiv)
	cluster 2 2
	timeout -k 10 400 "$netlab" mpirun "$lab" -np 4 "$prog" gpt2 1f1b 4 1 4 1 exact "$work" || exit 1
	crossed n0 n1 && crossed n1 n0
	exit 0
	;;
skip)
	cluster 2 2 1 1
	timeout -k 10 300 "$netlab" mpirun "$lab" -np 6 "$prog" || exit 1
	crossed n0 n1 && crossed n1 n2 && crossed n2 n3
	# clpipe bench writes the links it measures as a cluster the simulator reads
	clpipe=$5
	timeout -k 10 120 "$netlab" mpirun "$lab" -np 6 "$clpipe" bench --only p2p --quick --quiet \
		--cluster-out "$work/measured.json" >"$work/bench.out" 2>&1 ||
		{ cat "$work/bench.out"; echo "FAIL: clpipe bench --cluster-out"; exit 1; }
	got=$(jq -c '[[.hosts[] | .name, (.devices | length)], [.links[] | select(.a | test(":") | not) | .a + "-" + .b]]' "$work/measured.json")
	want='[["n0",2,"n1",2,"n2",1,"n3",1],["n0-n1","n0-n2","n0-n3","n1-n2","n1-n3","n2-n3"]]'
	echo "measured cluster: $got"
	[ "$got" = "$want" ] || { echo "FAIL: the measured cluster's hosts and links (want $want)"; exit 1; }
	"$clpipe" sim --cluster "$work/measured.json" --stages 6 --microbatches 6 >"$work/sim.out" ||
		{ cat "$work/sim.out"; echo "FAIL: the simulator does not take the measured cluster"; exit 1; }
	exit 0
	;;
labs)
	lab="l$(($$ % 10000))" # and a letter: 6 characters at most
	trap 'for l in a b c d e f; do "$netlab" down "$lab$l"; done' EXIT
	printf '{"format": "clpipe-cluster", "version": 1, "hosts": [{"name": "n0"}, {"name": "n1"}, {"name": "n2"}]}' >"$work/c3.json"
	for round in 1 2 3; do
		pids=()
		for l in a b c d e f; do
			"$netlab" up "$lab$l" "$work/c3.json" >"$work/up-$l.out" 2>&1 &
			pids+=($!)
		done
		for i in 0 1 2 3 4 5; do
			wait "${pids[i]}" || { cat "$work"/up-*.out; echo "FAIL: round $round: lab #$i did not come up"; exit 1; }
		done
		for l in a b c d e f; do
			n=$(ip netns list | awk '{print $1}' | grep -c "^clpn-$lab$l-")
			[ "$n" -eq 4 ] || { echo "FAIL: round $round: lab $lab$l has $n namespaces (want 4)"; exit 1; }
			[ -f "/run/clpn-netlab/$lab$l.owner" ] || { echo "FAIL: round $round: lab $lab$l has no owner file"; exit 1; }
		done
		# remove two labs at once while the other two stay up
		"$netlab" down "${lab}a" & "$netlab" down "${lab}b" & wait
		for l in c d; do
			ip link show "clpn${lab}${l}br" >/dev/null 2>&1 && [ -f "/etc/netns/clpn-$lab$l-n0/hosts" ] &&
				[ "$(ip netns list | awk '{print $1}' | grep -c "^clpn-$lab$l-")" -eq 4 ] ||
				{ echo "FAIL: round $round: lab $lab$l lost its hosts when another lab went down"; exit 1; }
		done
		for l in c d e f; do "$netlab" down "$lab$l"; done
		echo "ok: round $round: six labs up at once, two removed at once, the others intact"
	done
	exit 0
	;;
hostdown|supervise) ;;
*) echo "test_net.sh: unknown mode '$mode'"; exit 2 ;;
esac

# supervise: see the top; the lab's hosts answer `netlab.sh probe`
if [ "$mode" = supervise ]; then
	supervise=$5 ulfm=${6:-}
	ft=()
	[ -n "$ulfm" ] && { export CLPN_MPIRUN=$ulfm; ft=(--with-ft ulfm); }
	fail=0
	check() { if ! eval "$1"; then echo "FAIL: $2"; fail=1; else echo "ok: $2"; fi; }
	cluster 2 2
	cp "$CLPN_DIR/clpn-$lab/hostfile" "$work/hostfile"
	for i in $(seq 1 3000); do echo "the quick brown fox jumps over the lazy dog $((i % 17))."; done >"$work/corpus.txt"
	common=(--data "$work/corpus.txt" --model.n_layer=2 --model.d_model=32 --model.n_head=4
		--model.ctx=16 --train.batch=2 --train.micro_batches=2 --steps 8 --eval.every=0
		--eval.batches=1 --pipeline.schedule=1f1b --pipeline.deadline=120
		--pipeline.deterministic=true --ckpt.every=2)
	CLPIPE_FAULT=stop:3:3 timeout -k 10 500 "$supervise" --tries 3 --probe "$netlab probe $lab {host}" -- \
		"$netlab" mpirun "$lab" --hostfile "$work/hostfile" "${ft[@]}" -np 4 -x CLPIPE_FAULT \
		"$prog" train "${common[@]}" --pipeline.stages=2 --pipeline.replicas=2 \
		--ckpt.dir="$work/ck" --train.log="$work/train.jsonl" >"$work/sup.out" 2>&1 &
	job=$!
	stopped=
	for _ in $(seq 1 1200); do
		kill -0 $job 2>/dev/null || break
		for p in $("$netlab" pids "$lab" n1 clpipe); do
			[ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" = T ] && stopped=1
		done
		[ -n "$stopped" ] && break
		sleep 0.2
	done
	check "[ -n '$stopped' ]" "rank 3 on n1 stopped itself after step 3"
	# the host goes: everything in its namespace killed, the namespace deleted
	victims=$(ip netns pids "clpn-$lab-n1" | paste -sd' ')
	[ -n "$victims" ] && kill -9 $victims
	ip netns del "clpn-$lab-n1"
	wait $job
	rc=$?
	check "[ $rc -eq 0 ]" "the supervised run ends with exit 0 (got $rc)"
	check "[ -f '$work/ck/step-00000008/manifest.json' ]" "the checkpoint of step 8 is complete"
	"$prog" eval --ckpt "$work/ck" --eval.batches=1 >"$work/eval.out" 2>&1
	check "[ $? -eq 0 ] && grep -aq 'val loss' '$work/eval.out'" "the checkpoint loads and evaluates"
	mpi=(mpirun --allow-run-as-root --oversubscribe)
	[ -n "$ulfm" ] && mpi=("$ulfm" --allow-run-as-root --oversubscribe)
	# ref K: the same without a failure, DP2 x PP2 to step K, resumed as PP2 on 2 ranks to step
	# 8 (on this machine's own transport: the sums are the same, pipeline.deterministic)
	ref() {
		timeout 300 "${mpi[@]}" -np 4 "$prog" train "${common[@]}" --pipeline.stages=2 \
			--pipeline.replicas=2 --steps "$1" --ckpt.dir="$work/ref$1" >"$work/ref$1a.out" 2>&1 &&
		timeout 300 "${mpi[@]}" -np 2 "$prog" train "${common[@]}" --pipeline.stages=2 \
			--pipeline.replicas=1 --ckpt.dir="$work/ref$1" --resume >"$work/ref$1b.out" 2>&1 &&
		"$prog" eval --ckpt "$work/ref$1" --eval.batches=1 >"$work/ref$1.eval" 2>&1
	}
	val() { grep -a 'val loss' "$1" | sed 's/^eval of [^ ]* //'; }
	losses() { grep -ahE '^step [3-8]/8 \|' "$1" | sed -E 's/ \| [0-9]+ tok\/s.*//' | tail -6; }
	if [ -z "$ulfm" ]; then
		check "grep -aq 'supervise: host(s) n1 do not answer' '$work/sup.out'" "the supervisor finds n1 gone"
		check "grep -aq '1 replica(s), -np 2 (was 2 x 2)' '$work/sup.out'" \
			"and relaunches over n0 as 2 stages x 1 replica on 2 ranks"
		check "grep -aq 'resumed from .*step-00000002 at step 2' '$work/sup.out'" "the relaunch resumed from step 2"
		check "grep -aq '^step 8/8 ' '$work/sup.out' && grep -aq 'supervise: finished after 1 relaunch' '$work/sup.out'" \
			"it reached its planned step count after one relaunch"
		ref 2
		check "[ $? -eq 0 ]" "the run resumed so without a failure runs"
		check "[ \$(losses '$work/sup.out' | wc -l) -eq 6 ] && diff <(losses '$work/sup.out') <(losses '$work/ref2b.out')" \
			"the losses of steps 3-8 after the relaunch equal the run resumed so without a failure"
	else
		# Open MPI 5.0's runtime ends the job when it loses n1's daemon, and mpirun exits 0;
		# n0's ranks, which ULFM told of the loss and which hold every stage, go on without
		# their launcher (their output gone with it, their train.log kept) until they finish
		# or their own daemon ends them, one or both, at a moment nobody chooses: the
		# survivors' recovery at the agreed step 3 (exactly ref 3), a relaunch from the
		# checkpoint of step 2 (exactly ref 2) or from a later one the survivors wrote, or
		# one survivor ended first and the other re-planning to one stage with the lost one
		# reloaded from the newest checkpoint (a mix of states up to ckpt.every steps
		# apart). At these learning rates (up to 8e-5) a step moves the validation loss by
		# about 0.004 nats (5.5535 at step 1 to 5.5222 at step 8), so every outcome is within
		# 0.01 of ref 3; a run that lost its training (0.03 away) fails.
		ref 2 && ref 3
		check "[ $? -eq 0 ]" "the two runs without a failure run"
		got=$(val "$work/eval.out") r2=$(val "$work/ref2.eval") r3=$(val "$work/ref3.eval")
		echo "final val: $got; after a relaunch from step 2: $r2; after the survivors' recovery at step 3: $r3"
		grep -aq 'supervise: finished after 1 relaunch' "$work/sup.out" &&
			check "grep -aq 'supervise: host(s) n1 do not answer' '$work/sup.out'" "the relaunch left n1 out"
		num() { echo "$1" | sed -E 's/^val loss ([0-9.]+).*/\1/'; }
		check "awk -v a='$(num "$got")' -v b='$(num "$r3")' 'BEGIN { d = a - b; exit !(a > 0 && d < 0.01 && d > -0.01) }'" \
			"the final checkpoint evaluates within 0.01 nats of the run without a failure"
		check "grep -aq '\"event\":\"eval\",\"step\":8' '$work/train.jsonl' && [ \$(grep -ao '\"event\":\"step\",\"step\":[1-8],' '$work/train.jsonl' | sort -u | wc -l) -eq 8 ]" \
			"train.log has every step 1-8 and the final evaluation (appended across the recovery)"
	fi
	[ $fail -ne 0 ] && { echo "--- sup.out"; cat "$work/sup.out"; echo "--- train.jsonl (what the ranks logged, also without their launcher)"; cat "$work/train.jsonl"; }
	exit $fail
fi

# hostdown: 2 hosts x 2 ranks, D=2 x R=2 (ranks 2, 3 on n1); checkpoints every 2 steps; rank 3
# stops itself after step 3 (so the job is surely still running), then n1's ranks are killed
fail=0
check() { if ! eval "$1"; then echo "FAIL: $2"; fail=1; else echo "ok: $2"; fi; }
cluster 2 2
for i in $(seq 1 3000); do echo "the quick brown fox jumps over the lazy dog $((i % 17))."; done >"$work/corpus.txt"
CLPIPE_FAULT=stop:3:3 timeout --verbose -k 10 300 "$netlab" mpirun "$lab" -np 4 -x CLPIPE_FAULT "$prog" train \
	--data "$work/corpus.txt" --model.n_layer=2 --model.d_model=32 --model.n_head=4 \
	--model.ctx=16 --train.batch=2 --train.micro_batches=2 --steps 8 --eval.every=0 \
	--eval.batches=1 --pipeline.stages=2 --pipeline.replicas=2 --pipeline.schedule=1f1b \
	--pipeline.deadline=120 --ckpt.dir="$work/ck" --ckpt.every=2 >"$work/train.out" 2>&1 &
job=$!
# wait (at most 240 s) until rank 3 has stopped itself, then kill every clpipe rank on n1 at once
stopped=
for _ in $(seq 1 1200); do
	kill -0 $job 2>/dev/null || break
	for p in $("$netlab" pids "$lab" n1 clpipe); do
		[ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" = T ] && stopped=1
	done
	[ -n "$stopped" ] && break
	sleep 0.2
done
check "[ -n '$stopped' ]" "rank 3 on n1 stopped itself after step 3"
victims=$("$netlab" pids "$lab" n1 clpipe | paste -sd' ')
check "[ \$(echo $victims | wc -w) -eq 2 ]" "n1 runs two ranks (pids: $victims)"
[ -n "$victims" ] && kill -9 $victims
wait $job
rc=$?
check "[ $rc -ne 0 ] && ! grep -q '^timeout: sending signal' '$work/train.out'" \
	"losing host n1 ends the job with a non-zero status before the timeout (got $rc)"
check "grep -Eq 'rank [23] .*on node n1' '$work/train.out'" "the message names the host and a rank"
check "[ -f '$work/ck/step-00000002/manifest.json' ]" "the checkpoint of step 2 is complete"
"$prog" eval --ckpt "$work/ck" --eval.batches=1 >"$work/eval.out" 2>&1
check "[ $? -eq 0 ] && grep -q 'val loss' '$work/eval.out'" "the last checkpoint loads and evaluates"
[ $fail -ne 0 ] && { echo "--- train.out"; cat "$work/train.out"; }
exit $fail
