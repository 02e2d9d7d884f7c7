#!/usr/bin/env bash
# Run a clpipe training job to its end unattended on an MPI without fault tolerance (Debian's
# Open MPI 4.1, most clusters' older MPIs), where one lost rank ends mpirun: when the job ends
# with a non-zero status, launch it again with --resume (from the last complete checkpoint:
# give the run a ckpt.dir and ckpt.every), up to --tries times in all. Steps since the last
# checkpoint are lost; the rest is kept. Under ULFM (a build against Open MPI 5, mpirun
# --with-ft ulfm) the survivors go on by themselves and this is needed only when no replica
# is whole (docs/PIPELINE.md, "Failures").
#   tools/supervise.sh [--tries N] -- mpirun -np 4 build/tools/clpipe train --ckpt.dir=ck ...
# It relaunches the same command over the same hosts; leaving out hosts that no longer answer
# (re-planning the layout) is not done. A fault injected for a test (CLPIPE_FAULT) happens in
# the first launch only. Exit: the last launch's status.
set -u
tries=5
while [ $# -gt 0 ]; do
  case $1 in
    --tries) tries=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: tools/supervise.sh [--tries N] -- mpirun ... clpipe train ..." >&2; exit 2; }
cmd=("$@")
case " ${cmd[*]} " in *" train "*) ;; *) echo "supervise: not a clpipe train command: ${cmd[*]}" >&2; exit 2 ;; esac

# checkpoints are on by default, but a run without --ckpt.dir gets a new runs/<date>-<time> each
# launch: the relaunch must name the directory the first launch wrote
case " ${cmd[*]} " in
  *" --ckpt.dir="*|*" --ckpt.dir "*) ;;
  *" --no-ckpt "*) echo "supervise: --no-ckpt leaves nothing to resume from: give --ckpt.dir DIR" >&2; exit 2 ;;
  *) echo "supervise: give the run's directory (--ckpt.dir DIR) so that a relaunch resumes from it" >&2; exit 2 ;;
esac

attempt=1
while :; do
  t0=$(date +%s)
  "${cmd[@]}"
  rc=$?
  [ $rc -eq 0 ] && { [ $attempt -gt 1 ] && echo "supervise: finished after $((attempt - 1)) relaunch(es)"; exit 0; }
  if [ $attempt -ge "$tries" ]; then
    echo "supervise: the job ended with status $rc in attempt $attempt of $tries; giving up" >&2
    exit $rc
  fi
  echo "supervise: the job ended with status $rc after $(( $(date +%s) - t0 )) s (attempt $attempt of $tries); relaunching with --resume" >&2
  attempt=$((attempt + 1))
  unset CLPIPE_FAULT
  # --resume=auto: a job lost before its first checkpoint starts again from step 0
  case " ${cmd[*]} " in *" --resume "*|*" --resume=auto "*|*" --ckpt.resume=true "*) ;; *) cmd+=(--resume=auto) ;; esac
done
