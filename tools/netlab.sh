#!/usr/bin/env bash
# A lab of hosts on one machine: network namespaces on a private bridge, with the links between
# them rate-limited as a clpipe-cluster file says, and an Open MPI launcher agent that starts
# each host's daemon inside its namespace (docs/PIPELINE.md, "A network of hosts on one machine").
#
#   tools/netlab.sh check                      exit 0 if a lab can be built here, else 77 with
#                                              a message naming what is missing
#   tools/netlab.sh up LAB CLUSTER [SLOTS]     build lab LAB (1-6 of [a-z0-9]) from CLUSTER's
#                                              hosts; SLOTS: ranks per host (default: its
#                                              number of devices)
#   tools/netlab.sh mpirun LAB [ARGS...]       mpirun ARGS over the lab's hosts (from the lab's
#                                              own namespace, TCP between hosts; messages up
#                                              to CLPN_TCP_EAGER bytes, default 4 MiB, eager)
#                                              (ARGS with a --hostfile: that one instead of
#                                              the lab's; CLPN_MPIRUN: the mpirun to run,
#                                              default the one on PATH)
#   tools/netlab.sh probe LAB HOST             exit 0 if HOST is up (its namespace runs a
#                                              command): tools/supervise.sh --probe
#   tools/netlab.sh pids LAB HOST [COMM]       processes running inside HOST (named COMM)
#   tools/netlab.sh bytes LAB FROM TO          bytes FROM has sent to TO over their limited link
#   tools/netlab.sh status LAB                 the lab's hosts, addresses and link limits
#   tools/netlab.sh down LAB                   remove everything lab LAB made
# `up` also removes labs whose owner (the process that called `up`) has exited without `down`.
#
# Only names starting with clpn (namespaces clpn-LAB-*, links clpnLAB*, /etc/netns/clpn-LAB-*,
# /run/clpn-netlab/LAB.*, the lock /run/clpn-netlab.lock, the directory ${CLPN_DIR:-/tmp}/clpn-LAB) are made or removed, and addresses are only ever
# given inside the lab's namespaces (10.77.0.0/24 on the lab's bridge; the bridge itself has
# none, nothing routes out of it). Each directed pair of hosts gets an HTB class at the sender
# limited to the cluster's bandwidth for that pair (a link entry between the two host names,
# else defaults.inter_host; "inf" or >= 10 GB/s: unlimited), the simulator's model of a link.
# Latency cannot be added: the kernel here has no netem (check prints whether it does).
set -u
SUBNET=10.77.0
MAXHOSTS=64
RUN=/run/clpn-netlab # LAB.owner, LAB.dir: who made each lab, and where its files are
LOCK=/run/clpn-netlab.lock # held by `up` and `down`, which share $RUN and /etc/netns

die() { echo "netlab: $*" >&2; exit 1; }
ns_of() { echo "clpn-$1-$2"; }
labdir() { echo "${CLPN_DIR:-/tmp}/clpn-$1"; }
# Hold $LOCK until this script exits. Labs are built side by side (ctest -j runs net.equiv and
# net.skip at once), and `down` removes $RUN and /etc/netns when they are empty: without the
# lock one lab's `down` (which `up` runs first) removed $RUN between another lab's
# `mkdir -p $RUN` and its write of LAB.owner.
lock() {
	exec 9>>"$LOCK" || die "cannot open the lock file $LOCK"
	flock 9 || die "cannot lock $LOCK"
}
valid_lab() { [[ $1 =~ ^[a-z0-9]{1,6}$ ]] || die "lab name '$1': 1 to 6 of [a-z0-9]"; }

# What is missing to build a lab here (empty when nothing is).
missing() {
	local m=() t="clpn-chk$$"
	[ "$(id -u)" = 0 ] || m+=("root (network namespaces need it)")
	command -v ip >/dev/null || m+=("the ip command (iproute2)")
	command -v tc >/dev/null || m+=("the tc command (iproute2)")
	command -v jq >/dev/null || m+=("jq")
	command -v mpirun >/dev/null || m+=("mpirun (Open MPI)")
	command -v unshare >/dev/null || m+=("the unshare command (util-linux)")
	command -v flock >/dev/null || m+=("the flock command (util-linux)")
	[ -w /etc/netns ] || [ -w /etc ] || m+=("a writable /etc/netns (the hosts' names)")
	if [ ${#m[@]} -eq 0 ]; then
		if ! ip netns add "$t" 2>/dev/null; then
			m+=("ip netns (creating a network namespace failed)")
		else
			ip link add "${t}b" type bridge 2>/dev/null || m+=("bridge support")
			ip link del "${t}b" 2>/dev/null
			if ! ip -n "$t" link add "${t}v" type veth peer name "${t}w" 2>/dev/null; then
				m+=("veth support")
			elif ! tc -n "$t" qdisc add dev "${t}v" root handle 1: htb default 1 2>/dev/null; then
				m+=("the htb queueing discipline")
			fi
			ip netns del "$t" 2>/dev/null
		fi
	fi
	printf '%s\n' "${m[@]}"
}

cmd_check() {
	local m
	m=$(missing)
	if [ -n "$m" ]; then
		echo "netlab: cannot build a lab here; missing: $(echo "$m" | paste -sd ';' | sed 's/;/; /g')"
		exit 77
	fi
	local t="clpn-chk$$" netem=no
	ip netns add "$t" && tc -n "$t" qdisc add dev lo root netem delay 1ms 2>/dev/null && netem=yes
	ip netns del "$t"
	echo "netlab: labs can be built here (netem: $netem)"
}

# Remove everything of lab $1; quiet, safe to run twice and on a half-built lab.
cmd_down() {
	local lab=$1 d ns
	d=$(labdir "$lab")
	# the directory the lab was made with (another CLPN_DIR)
	[ -f "$RUN/$lab.dir" ] && d=$(cat "$RUN/$lab.dir")
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^clpn-$lab-"); do
		local pids
		pids=$(ip netns pids "$ns" 2>/dev/null)
		[ -n "$pids" ] && kill -9 $pids 2>/dev/null
		ip netns del "$ns" 2>/dev/null
		rm -rf "/etc/netns/$ns"
	done
	ip link del "clpn${lab}br" 2>/dev/null
	for l in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^clpn${lab}v[0-9]+$"); do
		ip link del "$l" 2>/dev/null
	done
	rmdir /etc/netns 2>/dev/null
	rm -rf "$d"
	rm -f "$RUN/$lab.owner" "$RUN/$lab.dir"
	rmdir "$RUN" 2>/dev/null
	return 0
}

# Labs whose owner (the process that ran `up`) is gone: a run killed before its EXIT trap.
stale_labs() {
	local f pid start
	for f in "$RUN"/*.owner; do
		[ -f "$f" ] || continue
		read -r pid start <"$f"
		[ "$(awk '{print $22}' "/proc/$pid/stat" 2>/dev/null)" = "$start" ] && continue
		f=${f##*/}
		echo "${f%.owner}"
	done
}

# Bytes/s of the link from host $2 to host $3 in cluster $1 (empty: unlimited).
link_Bps() {
	jq -r --arg a "$2" --arg b "$3" '
	  def bw: if . == null then null elif . == "inf" then null else . end;
	  ([.links[]? | select((.a == $a and .b == $b) or
	                       ((.directed // false) == false and .a == $b and .b == $a))
	              | .bandwidth_Bps][0]) as $l |
	  (if $l != null then $l else (.defaults.inter_host.bandwidth_Bps // 1.25e10) end) | bw |
	  if . == null or . >= 1e10 then "" else (. | floor | tostring) end' "$1"
}

cmd_up() {
	local lab=$1 cluster=$2 slots=${3:-}
	local d br mns hosts n i j
	[ -f "$cluster" ] || die "cluster file '$cluster' does not exist"
	jq -e '.format == "clpipe-cluster"' "$cluster" >/dev/null 2>&1 ||
		die "$cluster: not a clpipe-cluster file (\"format\")"
	mapfile -t hosts < <(jq -r '.hosts[].name' "$cluster")
	n=${#hosts[@]}
	[ "$n" -ge 1 ] && [ "$n" -le $MAXHOSTS ] || die "$cluster: hosts: 1 to $MAXHOSTS hosts needed (got $n)"
	for h in "${hosts[@]}"; do
		[[ $h =~ ^[A-Za-z][A-Za-z0-9-]{0,11}$ ]] ||
			die "$cluster: host name '$h': a letter, then up to 11 of [A-Za-z0-9-]"
	done
	local m
	m=$(missing)
	[ -z "$m" ] || { echo "netlab: cannot build a lab here; missing: $m" >&2; exit 77; }
	lock
	d=$(labdir "$lab")
	br="clpn${lab}br"
	mns=$(ns_of "$lab" m)
	for old in $(stale_labs); do
		[[ $old =~ ^[a-z0-9]{1,6}$ ]] || continue
		echo "netlab: removing lab $old (its owner has exited)" >&2
		cmd_down "$old"
	done
	cmd_down "$lab"
	mkdir -p "$d" /etc/netns
	trap 'cmd_down "$lab"; exit 1' ERR
	set -E
	# the bridge (no address in the root namespace) and mpirun's namespace (.1)
	ip link add "$br" type bridge
	ip link set "$br" up
	local names=(m "${hosts[@]}") addrs=("$SUBNET.1")
	for ((i = 0; i < n; i++)); do addrs+=("$SUBNET.$((10 + i))"); done
	{
		echo "127.0.0.1 localhost"
		for ((i = 0; i < n; i++)); do echo "${addrs[i + 1]} ${hosts[i]}"; done
		echo "$SUBNET.1 clpn-mpirun"
	} >"$d/hosts"
	for ((i = 0; i <= n; i++)); do
		local ns v
		ns=$(ns_of "$lab" "${names[i]}")
		v="clpn${lab}v$i"
		ip netns add "$ns"
		mkdir -p "/etc/netns/$ns"
		cp "$d/hosts" "/etc/netns/$ns/hosts"
		ip link add "$v" type veth peer name clpn0 netns "$ns"
		ip link set "$v" master "$br"
		ip link set "$v" up
		ip -n "$ns" link set lo up
		ip -n "$ns" addr add "${addrs[i]}/24" dev clpn0
		ip -n "$ns" link set clpn0 up
	done
	# the owner (pid and start time of the caller), so that a later `up` removes this lab if
	# the caller is killed before it calls `down`
	mkdir -p "$RUN"
	echo "$PPID $(awk '{print $22}' "/proc/$PPID/stat")" >"$RUN/$lab.owner"
	echo "$d" >"$RUN/$lab.dir"
	# rate limits: at each sender, one HTB class per destination host
	: >"$d/links"
	for ((i = 0; i < n; i++)); do
		local ns
		ns=$(ns_of "$lab" "${hosts[i]}")
		# the shaper sees wire-size packets (not 64 KB GSO bursts), TCP keeps its window
		# over the gaps of a pipeline, and packets under 128 bytes (pure ACKs, Open MPI's
		# control messages) skip the limited class (on a real full-duplex link they would
		# not wait behind a queue of the other direction's data)
		ip -n "$ns" link set dev clpn0 gso_max_segs 1 2>/dev/null ||
			echo "netlab: cannot limit GSO on $ns (iproute2 too old): shaping is burstier" >&2
		ip netns exec "$ns" sysctl -q -w net.ipv4.tcp_slow_start_after_idle=0 2>/dev/null ||
			echo "netlab: cannot set tcp_slow_start_after_idle in $ns" >&2
		tc -n "$ns" qdisc add dev clpn0 root handle 1: htb default 1
		tc -n "$ns" class add dev clpn0 parent 1: classid 1:1 htb rate 100gbit quantum 60000
		tc -n "$ns" filter add dev clpn0 parent 1: protocol ip prio 1 u32 \
			match u16 0 0xff80 at 2 flowid 1:1
		for ((j = 0; j < n; j++)); do
			[ $i -eq $j ] && continue
			local bps
			bps=$(link_Bps "$cluster" "${hosts[i]}" "${hosts[j]}")
			echo "${hosts[i]} ${hosts[j]} ${bps:-inf}" >>"$d/links"
			[ -z "$bps" ] && continue
			tc -n "$ns" class add dev clpn0 parent 1: classid "1:$((10 + j))" htb \
				rate "$((bps * 8))bit" ceil "$((bps * 8))bit" quantum 1514
			tc -n "$ns" filter add dev clpn0 parent 1: protocol ip prio 2 u32 \
				match ip dst "${addrs[j + 1]}/32" flowid "1:$((10 + j))"
		done
	done
	# the hostfile (names resolve through each namespace's /etc/hosts) and the launcher agent
	: >"$d/hostfile"
	for ((i = 0; i < n; i++)); do
		local s=$slots
		[ -n "$s" ] || s=$(jq -r --argjson i "$i" '.hosts[$i].devices // [{}] | length' "$cluster")
		echo "${hosts[i]} slots=$s" >>"$d/hostfile"
	done
	cat >"$d/agent" <<EOF
#!/usr/bin/env bash
# Open MPI's rsh agent for lab $lab: AGENT [OPTIONS] HOST COMMAND... runs COMMAND in HOST's
# namespace, under its own host name (the environment is inherited, which ssh would not do).
while [ \$# -gt 0 ] && [ "\${1#-}" != "\$1" ]; do shift; done
h=\$1; shift
ns=clpn-$lab-\$h
[ -e /run/netns/\$ns ] || { echo "netlab agent: no host '\$h' in lab $lab" >&2; exit 1; }
exec ip netns exec "\$ns" unshare --uts /bin/sh -c "hostname \$h && \$*"
EOF
	chmod +x "$d/agent"
	trap - ERR
	set +E
	echo "$d"
}

# Messages up to CLPN_TCP_EAGER bytes (default 4 MiB; 0: Open MPI's defaults) go eagerly and
# fit in the kernel's socket buffers (CLPN_TCP_BUF bytes, default CLPN_TCP_EAGER; 0: the
# kernel's autotuning). A rendezvous needs the receiver's acknowledgement, which
# on Open MPI's one TCP connection per pair of ranks waits behind all the data queued in the
# other direction, so two large messages crossing between two hosts (1F1B, SkipPipe) would
# run one after the other; and with the kernel's autotuned buffers a message moves only while
# its sender calls MPI (docs/PIPELINE.md, "Why measured steps were longer than simulated").
cmd_mpirun() {
	local lab=$1 d eager=${CLPN_TCP_EAGER:-4194304} buf mca=() hf=()
	shift
	d=$(labdir "$lab")
	[ -f "$d/hostfile" ] || die "lab $lab is not up"
	case " $* " in *" --hostfile "*|*" --machinefile "*) ;; *) hf=(--hostfile "$d/hostfile") ;; esac
	buf=${CLPN_TCP_BUF:-$eager}
	[[ $eager =~ ^[0-9]+$ ]] || die "CLPN_TCP_EAGER '$eager': a number of bytes"
	[[ $buf =~ ^[0-9]+$ ]] || die "CLPN_TCP_BUF '$buf': a number of bytes"
	[ "$eager" -gt 0 ] && mca+=(--mca btl_tcp_eager_limit "$eager" --mca btl_tcp_rndv_eager_limit
				    "$eager" --mca btl_tcp_max_send_size "$eager")
	[ "$buf" -gt 0 ] && mca+=(--mca btl_tcp_sndbuf "$buf" --mca btl_tcp_rcvbuf "$buf")
	exec ip netns exec "$(ns_of "$lab" m)" "${CLPN_MPIRUN:-mpirun}" --allow-run-as-root "${hf[@]}" \
		--mca plm_rsh_agent "$d/agent" --mca plm_rsh_no_tree_spawn 1 \
		--mca btl tcp,self --mca btl_tcp_if_include "$SUBNET.0/24" \
		--mca oob_tcp_if_include "$SUBNET.0/24" "${mca[@]}" --bind-to none \
		-x POCL_MAX_PTHREAD_COUNT=1 "$@"
}

cmd_probe() {
	[ -e "/run/netns/$(ns_of "$1" "$2")" ] && timeout 10 ip netns exec "$(ns_of "$1" "$2")" true
}

cmd_pids() {
	local lab=$1 h=$2 comm=${3:-} p
	for p in $(ip netns pids "$(ns_of "$lab" "$h")" 2>/dev/null); do
		if [ -z "$comm" ] || [ "$(cat "/proc/$p/comm" 2>/dev/null)" = "$comm" ]; then echo "$p"; fi
	done
}

# Bytes host $2 sent to host $3 over their rate-limited link (empty: that link is unlimited).
cmd_bytes() {
	local lab=$1 j
	j=$(awk -v h="$3" '$1 == h {print NR - 1}' "$(labdir "$lab")/hostfile")
	[ -n "$j" ] || die "lab $lab has no host '$3'"
	tc -s -n "$(ns_of "$lab" "$2")" class show dev clpn0 classid "1:$((10 + j))" 2>/dev/null |
		awk '/Sent/ {print $2; exit}'
}

cmd_status() {
	local lab=$1 d ns
	d=$(labdir "$lab")
	[ -f "$d/hostfile" ] || { echo "lab $lab: down"; return 1; }
	echo "lab $lab: $d"
	for ns in $(ip netns list | awk '{print $1}' | grep "^clpn-$lab-"); do
		echo "  $ns $(ip -n "$ns" -4 -o addr show dev clpn0 | awk '{print $4}')" \
			"processes: $(ip netns pids "$ns" | wc -l)"
	done
	echo "  links (from to bytes/s):"
	sed 's/^/    /' "$d/links"
}

[ $# -ge 1 ] || die "usage: netlab.sh check | up LAB CLUSTER [SLOTS] | mpirun LAB ARGS | probe LAB HOST | pids LAB HOST [COMM] | bytes LAB FROM TO | status LAB | down LAB"
op=$1
shift
case $op in
check) cmd_check ;;
up) [ $# -ge 2 ] || die "usage: netlab.sh up LAB CLUSTER [SLOTS]"; valid_lab "$1"; cmd_up "$@" ;;
down) [ $# -eq 1 ] || die "usage: netlab.sh down LAB"; valid_lab "$1"; lock; cmd_down "$1" ;;
status) [ $# -eq 1 ] || die "usage: netlab.sh status LAB"; valid_lab "$1"; cmd_status "$1" ;;
mpirun) [ $# -ge 1 ] || die "usage: netlab.sh mpirun LAB ARGS"; valid_lab "$1"; cmd_mpirun "$@" ;;
bytes) [ $# -eq 3 ] || die "usage: netlab.sh bytes LAB FROM TO"; valid_lab "$1"; cmd_bytes "$@" ;;
probe) [ $# -eq 2 ] || die "usage: netlab.sh probe LAB HOST"; valid_lab "$1"; cmd_probe "$@" ;;
pids) [ $# -ge 2 ] || die "usage: netlab.sh pids LAB HOST [COMM]"; valid_lab "$1"; cmd_pids "$@" ;;
*) die "unknown operation '$op' (check, up, mpirun, probe, pids, bytes, status, down)" ;;
esac
