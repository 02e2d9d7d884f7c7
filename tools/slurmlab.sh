#!/usr/bin/env bash
# A Slurm cluster in the network lab (tools/netlab.sh; docs/PIPELINE.md, "A Slurm cluster in
# the lab"): munged and slurmctld in the lab's controller namespace (clpn-LAB-m, 10.77.0.1, host
# name clpn-mpirun) and one slurmd per lab host, each in the host's namespace under the host's
# name (unshare --uts, slurmd -N HOST) with its own spool and scratch directories, log and pid
# file; a partition `lab` over them whose CPU counts are the hosts' devices in the cluster file;
# where slurmdbd and MariaDB are installed, accounting for sacct (both in the controller's
# namespace). Debian's slurm-wlm 22.05 runs several slurmd on one machine this way because each
# one has its own network namespace (its own address, the same port 6818).
#
#   tools/slurmlab.sh check               exit 0 if a cluster can be built here, else 77 with
#                                         a message naming what is missing
#   tools/slurmlab.sh up LAB CLUSTER      netlab.sh up LAB CLUSTER, then the daemons; returns
#                                         when every node is idle (at most 60 s)
#   tools/slurmlab.sh run LAB CMD...      a Slurm client command (sbatch, srun, squeue,
#                                         scontrol, scancel, sinfo, sacct) inside the lab
#   tools/slurmlab.sh wait LAB JOB SECS   until JOB has ended (polls squeue/scontrol, at most
#                                         SECS s); prints STATE EXITCODE
#   tools/slurmlab.sh down LAB            stop the daemons and remove the lab
# Everything lives under the lab's directory (${CLPN_DIR:-/tmp}/clpn-LAB/slurm); nothing listens
# outside the lab's namespaces (munge's socket is a file there, MariaDB listens on the
# controller namespace's loopback).
set -u
here=$(cd "$(dirname "$0")" && pwd)
netlab=$here/netlab.sh

die() { echo "slurmlab: $*" >&2; exit 1; }
valid_lab() { [[ $1 =~ ^[a-z0-9]{1,6}$ ]] || die "lab name '$1': 1 to 6 of [a-z0-9]"; }
sdir() { echo "${CLPN_DIR:-/tmp}/clpn-$1/slurm"; }

missing() {
	local m=() c
	for c in slurmctld slurmd srun sbatch squeue scontrol scancel sinfo; do
		command -v "$c" >/dev/null || m+=("$c (Debian: slurmctld slurmd slurm-client)")
	done
	command -v munged >/dev/null || m+=("munged (Debian: munge)")
	command -v mungekey >/dev/null || m+=("mungekey (Debian: munge)")
	[ ${#m[@]} -gt 0 ] && printf '%s\n' "${m[@]}" | sort -u
	"$netlab" check >/dev/null 2>&1 || "$netlab" check 2>&1 | sed 's/^netlab: cannot build a lab here; missing: //'
}

cmd_check() {
	local m
	m=$(missing)
	if [ -n "$m" ]; then
		echo "slurmlab: cannot build a Slurm cluster here; missing: $(echo "$m" | paste -sd ';' | sed 's/;/; /g')"
		exit 77
	fi
	echo "slurmlab: a Slurm cluster can be built here ($(slurmd -V 2>&1))"
}

# in the controller's namespace, with the lab's configuration
in_ctl() {
	local s
	s=$(sdir "$LAB")
	SLURM_CONF=$s/slurm.conf ip netns exec "clpn-$LAB-m" "$@"
}

cmd_up() {
	local cluster=$1 d s hosts n i cpus
	local m
	m=$(missing)
	[ -z "$m" ] || { echo "slurmlab: cannot build a Slurm cluster here; missing: $m" >&2; exit 77; }
	d=$("$netlab" up "$LAB" "$cluster") || exit $?
	# the lab's owner is who called this script, not this script (netlab.sh up removes labs
	# whose owner has exited)
	echo "$PPID $(awk '{print $22}' "/proc/$PPID/stat")" >"/run/clpn-netlab/$LAB.owner"
	s=$d/slurm
	mkdir -p "$s/state" "$s/munge" "$s/log"
	chmod 755 "$s/munge"
	mapfile -t hosts < <(jq -r '.hosts[].name' "$cluster")
	n=${#hosts[@]}
	# accounting (sacct) when slurmdbd and MariaDB are installed: both in the controller's
	# namespace, the database on that namespace's loopback only
	local dbd=""
	command -v slurmdbd >/dev/null && command -v mariadbd >/dev/null &&
		command -v mariadb-install-db >/dev/null && dbd=yes
	mungekey -c -k "$s/munge/munge.key" -b 1024 >/dev/null 2>&1 || die "mungekey failed"
	chmod 400 "$s/munge/munge.key"
	{
		echo "# the Slurm cluster of lab $LAB (tools/slurmlab.sh)"
		echo "ClusterName=clpn$LAB"
		echo "SlurmctldHost=clpn-mpirun(10.77.0.1)"
		echo "SlurmUser=root"
		echo "AuthType=auth/munge"
		echo "CredType=cred/munge"
		echo "AuthInfo=socket=$s/munge/munge.socket"
		echo "StateSaveLocation=$s/state"
		echo "SlurmdSpoolDir=$s/spool/%n"
		# each node's own /tmp for jobs (PMIx makes its per-step directories there, under the
		# same name on every node): one path, bound in each slurmd's mount namespace to
		# $s/tmp/HOST
		echo "TmpFS=$s/nodetmp"
		echo "SlurmctldPidFile=$s/slurmctld.pid"
		echo "SlurmdPidFile=$s/slurmd.%n.pid"
		echo "SlurmctldLogFile=$s/log/slurmctld.log"
		echo "SlurmdLogFile=$s/log/slurmd.%n.log"
		echo "ProctrackType=proctrack/linuxproc"
		echo "TaskPlugin=task/none"
		echo "JobAcctGatherType=jobacct_gather/none"
		if [ -n "$dbd" ]; then
			echo "AccountingStorageType=accounting_storage/slurmdbd"
			echo "AccountingStorageHost=clpn-mpirun"
			# the munge socket of connections to slurmdbd (AuthInfo covers only the others)
			echo "AccountingStoragePass=$s/munge/munge.socket"
		else
			echo "AccountingStorageType=accounting_storage/none"
		fi
		echo "JobCompType=jobcomp/filetxt"
		echo "JobCompLoc=$s/jobcomp.txt"
		echo "SelectType=select/cons_tres"
		echo "SelectTypeParameters=CR_CPU"
		echo "SlurmdParameters=config_overrides"
		echo "MpiDefault=none"
		echo "ReturnToService=2"
		echo "MinJobAge=3600"
		# the seconds between SIGTERM and SIGKILL at scancel/time limit: clpipe saves then
		echo "KillWait=60"
		echo "MailProg=/bin/true"
		for ((i = 0; i < n; i++)); do
			cpus=$(jq -r --argjson i "$i" '.hosts[$i].devices // [{}] | length' "$cluster")
			echo "NodeName=${hosts[i]} NodeAddr=10.77.0.$((10 + i)) CPUs=$cpus RealMemory=1000 State=UNKNOWN"
			mkdir -p "$s/spool/${hosts[i]}" "$s/tmp/${hosts[i]}"
		done
		echo "PartitionName=lab Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
	} >"$s/slurm.conf"
	mkdir -p "$s/nodetmp"
	# munged and slurmctld in the controller's namespace (netlab.sh down kills what runs there)
	in_ctl munged --force --socket="$s/munge/munge.socket" --key-file="$s/munge/munge.key" \
		--pid-file="$s/munge/munged.pid" --log-file="$s/log/munged.log" \
		--seed-file="$s/munge/munged.seed" 2>>"$s/log/munged.log" || die "munged did not start ($s/log/munged.log)"
	[ -n "$dbd" ] && start_dbd "$s"
	in_ctl unshare --uts /bin/sh -c "hostname clpn-mpirun && exec slurmctld -f '$s/slurm.conf'" ||
		die "slurmctld did not start ($s/log/slurmctld.log)"
	for h in "${hosts[@]}"; do
		# nsenter, not ip netns exec: that mounts a new /sys, without the cgroup file systems
		# slurmd needs; the host's /etc/hosts comes from /etc/netns as with ip netns exec
		nsenter --net="/run/netns/clpn-$LAB-$h" unshare --uts --mount /bin/sh -c \
			"mount --bind /etc/netns/clpn-$LAB-$h/hosts /etc/hosts &&
			 mount --bind '$s/tmp/$h' '$s/nodetmp' && hostname $h &&
			 SLURM_CONF='$s/slurm.conf' exec slurmd -f '$s/slurm.conf' -N $h" ||
			die "slurmd $h did not start ($s/log/slurmd.$h.log)"
	done
	# every node idle, polled with a deadline
	local end=$((SECONDS + 60)) st
	while :; do
		st=$(in_ctl sinfo -h -N -o '%N %T' 2>/dev/null)
		[ -n "$st" ] && ! echo "$st" | grep -qv ' idle$' && [ "$(echo "$st" | wc -l)" -eq "$n" ] && break
		[ $SECONDS -lt $end ] || die "nodes not idle after 60 s: $(echo "$st" | paste -sd ' ') (logs: $s/log)"
		sleep 0.5
	done
	echo "$s"
}

# MariaDB (127.0.0.1 of the controller's namespace, data in $1/db) and slurmdbd; the cluster
# registered. Each wait polls with a deadline.
start_dbd() {
	local s=$1 end
	mariadb-install-db --datadir="$s/db" --user=root --skip-test-db >"$s/log/mariadb-install.log" 2>&1 ||
		die "mariadb-install-db failed ($s/log/mariadb-install.log)"
	in_ctl setsid mariadbd --no-defaults --datadir="$s/db" --user=root --bind-address=127.0.0.1 \
		--port=3306 --socket="$s/db.sock" --pid-file="$s/mariadb.pid" \
		--log-error="$s/log/mariadb.log" </dev/null >/dev/null 2>&1 &
	end=$((SECONDS + 60))
	until in_ctl mariadb --no-defaults -S "$s/db.sock" -u root -e "select 1" >/dev/null 2>&1; do
		[ $SECONDS -lt $end ] || die "MariaDB not up after 60 s ($s/log/mariadb.log)"
		sleep 0.5
	done
	in_ctl mariadb --no-defaults -S "$s/db.sock" -u root -e "CREATE USER 'slurm'@'127.0.0.1';
		GRANT ALL ON *.* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;" ||
		die "cannot create the database user"
	{
		echo "AuthType=auth/munge"
		echo "AuthInfo=socket=$s/munge/munge.socket"
		echo "DbdHost=clpn-mpirun"
		echo "DbdAddr=10.77.0.1"
		echo "SlurmUser=root"
		echo "StorageType=accounting_storage/mysql"
		echo "StorageHost=127.0.0.1"
		echo "StoragePort=3306"
		echo "StorageUser=slurm"
		echo "StorageLoc=slurm_acct_db"
		echo "PidFile=$s/slurmdbd.pid"
		echo "LogFile=$s/log/slurmdbd.log"
	} >"$s/slurmdbd.conf"
	chmod 600 "$s/slurmdbd.conf"
	in_ctl unshare --uts /bin/sh -c "hostname clpn-mpirun && exec slurmdbd" ||
		die "slurmdbd did not start ($s/log/slurmdbd.log)"
	end=$((SECONDS + 60))
	until in_ctl sacctmgr -i add cluster "clpn$LAB" >/dev/null 2>&1 ||
		in_ctl sacctmgr -n list cluster format=cluster 2>/dev/null | grep -qw "clpn$LAB"; do
		[ $SECONDS -lt $end ] || die "slurmdbd not answering after 60 s ($s/log/slurmdbd.log)"
		sleep 0.5
	done
}

# until job $1 has left the queue, at most $2 s; prints its state and exit code
cmd_wait() {
	local job=$1 secs=$2 end=$((SECONDS + $2)) st
	while :; do
		st=$(in_ctl scontrol show job "$job" 2>/dev/null | tr ' ' '\n' |
			sed -n 's/^JobState=//p; s/^ExitCode=//p' | paste -sd ' ')
		case ${st%% *} in
		COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | PREEMPTED | BOOT_FAIL | DEADLINE)
			echo "$st"; return 0 ;;
		esac
		[ $SECONDS -lt $end ] || { echo "${st:-UNKNOWN} (still so after $secs s)"; return 1; }
		sleep 0.5
	done
}

[ $# -ge 1 ] || die "usage: slurmlab.sh check | up LAB CLUSTER | run LAB CMD... | wait LAB JOB SECS | down LAB"
op=$1
shift
case $op in
check) cmd_check ;;
up) [ $# -eq 2 ] || die "usage: slurmlab.sh up LAB CLUSTER"; valid_lab "$1"; LAB=$1; cmd_up "$2" ;;
run) [ $# -ge 2 ] || die "usage: slurmlab.sh run LAB CMD..."; valid_lab "$1"; LAB=$1; shift; in_ctl "$@" ;;
wait) [ $# -eq 3 ] || die "usage: slurmlab.sh wait LAB JOB SECS"; valid_lab "$1"; LAB=$1; cmd_wait "$2" "$3" ;;
down) [ $# -eq 1 ] || die "usage: slurmlab.sh down LAB"; valid_lab "$1"; "$netlab" down "$1" ;;
*) die "unknown operation '$op' (check, up, run, wait, down)" ;;
esac
