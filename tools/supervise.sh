#!/usr/bin/env bash
# Run a clpipe training job to its end unattended where one lost rank or host ends mpirun:
# Debian's Open MPI 4.1 and most clusters' older MPIs (no fault tolerance), and Open MPI 5's
# ULFM when a whole host is lost (its runtime ends the job then, and mpirun exits 0:
# docs/PIPELINE.md, "Failures"). When the job ends before its planned step, launch it again
# with --resume (from the last complete checkpoint: give the run a --ckpt.dir), up to --tries
# times in all. Steps since the last checkpoint are lost; the rest is kept.
#   tools/supervise.sh [--tries N] [--probe CMD] [--lock-wait S] -- mpirun [--hostfile F] -np 4 clpipe train \
#       --ckpt.dir=ck ...
# Ended means: the newest complete checkpoint in --ckpt.dir is at the run's planned step
# (train.steps in the configuration it stores; a run writes one at its end). A zero exit
# status without it is a job ended early, and is relaunched. Before it looks, the supervisor
# waits (up to S seconds, default 600) until no process of the job holds the directory (its
# .clpipe-lock): ranks can outlive a launcher that has gone, and go on training; a relaunch
# while they run would be refused by clpipe.
# With --hostfile F (or --machinefile F) in the command, every relaunch first asks each host of
# F whether it answers: CMD with {host} replaced (default: ssh -o BatchMode=yes -o
# ConnectTimeout=10 {host} true; tools/netlab.sh probe LAB {host} in the network lab). Hosts
# that do not answer are left out: the relaunch gets a hostfile of the others, -np their
# slots, and the layout re-planned over them: the same pipeline.stages with as many replicas
# as fit (pipeline.replicas = ranks / stages), or, with fewer ranks than stages, one stage per
# rank and one replica (a checkpoint resumes in another layout). A fault injected for a test
# (CLPIPE_FAULT) happens in the first launch only. Exit: 0 when the run ended, else the last
# launch's status (1 when that was 0).
set -u
tries=5
lockwait=600
probe='ssh -o BatchMode=yes -o ConnectTimeout=10 {host} true'
while [ $# -gt 0 ]; do
  case $1 in
    --tries) tries=$2; shift 2 ;;
    --probe) probe=$2; shift 2 ;;
    --lock-wait) lockwait=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: tools/supervise.sh [--tries N] [--probe CMD] -- mpirun ... clpipe train ..." >&2; exit 2; }
[[ $lockwait =~ ^[0-9]+$ ]] || { echo "supervise: --lock-wait '$lockwait': seconds" >&2; exit 2; }
[[ $tries =~ ^[1-9][0-9]*$ ]] || { echo "supervise: --tries '$tries': a number of launches (1 or more)" >&2; exit 2; }
cmd=("$@")
case " ${cmd[*]} " in *" train "*) ;; *) echo "supervise: not a clpipe train command: ${cmd[*]}" >&2; exit 2 ;; esac

# the value of option $1 in cmd (--opt=V or --opt V), empty when absent
opt() {
  local i
  for ((i = 0; i < ${#cmd[@]}; i++)); do
    case ${cmd[i]} in
      "$1="*) echo "${cmd[i]#*=}"; return ;;
      "$1") echo "${cmd[i + 1]:-}"; return ;;
    esac
  done
}
# set option $1 to $2 in cmd (in place where it is, else after "train")
set_opt() {
  local i
  for ((i = 0; i < ${#cmd[@]}; i++)); do
    case ${cmd[i]} in
      "$1="*) cmd[i]="$1=$2"; return ;;
      "$1") cmd[i + 1]=$2; return ;;
    esac
  done
  for ((i = 0; i < ${#cmd[@]}; i++)); do
    [ "${cmd[i]}" = train ] && { cmd=("${cmd[@]:0:i+1}" "$1=$2" "${cmd[@]:i+1}"); return; }
  done
}

# checkpoints are on by default, but a run without --ckpt.dir gets a new runs/<date>-<time> each
# launch: the relaunch must name the directory the first launch wrote
ckdir=$(opt --ckpt.dir)
if [ -z "$ckdir" ]; then
  case " ${cmd[*]} " in
    *" --no-ckpt "*) echo "supervise: --no-ckpt leaves nothing to resume from: give --ckpt.dir DIR" >&2; exit 2 ;;
    *) echo "supervise: give the run's directory (--ckpt.dir DIR) so that a relaunch resumes from it" >&2; exit 2 ;;
  esac
fi
command -v jq >/dev/null || { echo "supervise: needs jq (to read the checkpoints' manifest.json)" >&2; exit 2; }

# the manifest of the newest complete checkpoint in ckdir (empty: none)
newest() { ls -d "$ckdir"/step-*/manifest.json 2>/dev/null | sort | tail -n 1; }
# stored SECTION KEY: a value of the configuration the newest checkpoint stores
stored() {
  local m
  m=$(newest)
  [ -n "$m" ] || return 0
  jq -r '.metadata.config // empty' "$m" 2>/dev/null |
    awk -F' *= *' -v s="[$1]" -v k="$2" '/^\[/ {sec = $0} sec == s && $1 == k {print $2}'
}
# "STEP PLANNED" of the newest complete checkpoint (empty: none)
progress() {
  local m step planned
  m=$(newest)
  [ -n "$m" ] || return 0
  step=$(jq -r '.step // empty' "$m" 2>/dev/null)
  planned=$(stored train steps)
  [ -n "$step" ] && [ -n "$planned" ] && echo "$step $planned"
}

hostfile_opt=--hostfile
hostfile=$(opt --hostfile)
[ -n "$hostfile" ] || { hostfile=$(opt --machinefile); hostfile_opt=--machinefile; }
[ -z "$hostfile" ] || [ -f "$hostfile" ] || { echo "supervise: $hostfile_opt '$hostfile' does not exist" >&2; exit 2; }
work=
trap '[ -n "$work" ] && rm -rf "$work"' EXIT

# Leave out the hosts of the hostfile that do not answer and re-plan the layout over the rest.
# Returns 1 (saying why) when no host answers.
replan() {
  local line host slots kept=() total=0 dropped=() np stages replicas nst nrep
  [ -n "$hostfile" ] || return 0
  while read -r line; do
    line=${line%%#*}
    [ -n "${line// /}" ] || continue
    host=${line%% *}
    slots=$(echo "$line" | sed -nE 's/.*slots=([0-9]+).*/\1/p')
    if eval "${probe//\{host\}/$host}" >/dev/null 2>&1; then
      kept+=("$line")
      total=$((total + ${slots:-1}))
    else
      dropped+=("$host")
    fi
  done <"$hostfile"
  [ ${#kept[@]} -gt 0 ] || { echo "supervise: no host of $hostfile answers (probe: $probe)" >&2; return 1; }
  [ ${#dropped[@]} -gt 0 ] || return 0
  [ -n "$work" ] || work=$(mktemp -d "${TMPDIR:-/tmp}/clpipe-supervise-XXXXXX")
  hostfile=$work/hostfile.$attempt
  printf '%s\n' "${kept[@]}" >"$hostfile"
  set_opt "$hostfile_opt" "$hostfile"
  # the layout the command asks for; else (a --config file) the one the checkpoint stores
  stages=$(opt --pipeline.stages) replicas=$(opt --pipeline.replicas)
  [ -n "$stages" ] || stages=$(stored pipeline stages)
  [ -n "$replicas" ] || replicas=$(stored pipeline replicas)
  stages=${stages:-1} replicas=${replicas:-1}
  if [ "$total" -ge "$stages" ]; then
    nst=$stages nrep=$((total / stages))
    [ "$nrep" -gt "$replicas" ] && nrep=$replicas
  else
    nst=$total nrep=1
  fi
  np=$((nst * nrep))
  if [ -n "$(opt -np)" ]; then set_opt -np "$np"; elif [ -n "$(opt -n)" ]; then set_opt -n "$np"; fi
  set_opt --pipeline.stages "$nst"
  set_opt --pipeline.replicas "$nrep"
  echo "supervise: host(s) ${dropped[*]} do not answer (probe: $probe): relaunching over" \
       "$(printf '%s\n' "${kept[@]}" | awk '{print $1}' | paste -sd' ') ($total slots):" \
       "$nst stage(s) x $nrep replica(s), -np $np (was $stages x $replicas)" >&2
}

attempt=1
while :; do
  t0=$(date +%s)
  "${cmd[@]}"
  rc=$?
  if [ -f "$ckdir/.clpipe-lock" ] && ! flock -n "$ckdir/.clpipe-lock" true; then
    echo "supervise: the launcher has ended but ranks of the job still hold $ckdir: waiting up to $lockwait s for them" >&2
    flock -w "$lockwait" "$ckdir/.clpipe-lock" true ||
      echo "supervise: they still hold it after $lockwait s" >&2
  fi
  p=$(progress)
  if [ $rc -eq 0 ] && [ -n "$p" ] && [ "${p% *}" = "${p#* }" ]; then
    [ $attempt -gt 1 ] && echo "supervise: finished after $((attempt - 1)) relaunch(es)"
    exit 0
  fi
  why="ended with status $rc"
  [ $rc -eq 0 ] && why="exited 0 before its planned step (newest checkpoint: ${p:-none}; Open MPI 5's mpirun exits 0 when its runtime ends a job that lost a host)"
  if [ $attempt -ge "$tries" ]; then
    echo "supervise: the job $why in attempt $attempt of $tries; giving up" >&2
    [ $rc -eq 0 ] && rc=1
    exit $rc
  fi
  echo "supervise: the job $why after $(( $(date +%s) - t0 )) s (attempt $attempt of $tries); relaunching with --resume" >&2
  attempt=$((attempt + 1))
  unset CLPIPE_FAULT
  replan || exit 1
  # --resume=auto: a job lost before its first checkpoint starts again from step 0
  case " ${cmd[*]} " in *" --resume "*|*" --resume=auto "*|*" --ckpt.resume=true "*) ;; *) cmd+=(--resume=auto) ;; esac
done
