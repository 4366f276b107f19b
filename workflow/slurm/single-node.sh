#!/usr/bin/env bash
# A single-node SLURM cluster on this machine from Debian's packages, for trying the slurm profile
# and for the `slurm` tests: munged + slurmctld + slurmd on localhost, everything (config, state,
# logs, sockets) under one directory; /etc/slurm/slurm.conf becomes a symlink to its config while the
# cluster runs (SLURM's jobs look there: the executor plugin's job step drops $SLURM_CONF before its
# `srun`), and `start` refuses to touch a real /etc/slurm/slurm.conf.
#
#   workflow/slurm/single-node.sh install     # as root: apt-get install slurm-wlm munge (if missing)
#   workflow/slurm/single-node.sh start       # as root: write the config, start the daemons, wait
#   export SLURM_CONF="$BURNQED_SLURM_DIR/slurm.conf"
#   snakemake --profile workflow/profiles/slurm --slurm-status-command squeue <target>
#   workflow/slurm/single-node.sh stop        # stops the three daemons and waits until they are gone
#
# The node's size is declared, not measured (SlurmdParameters=config_overrides): by default 16 CPUs,
# 128 GB and 2 "gpu" GRES (gres.conf Count=, no device files), so rules that ask for 4 threads,
# 32 GB and a GPU are schedulable on a small box.  Nothing enforces them (no cgroups,
# TaskPlugin=task/none).  There is no slurmdbd, so no `sacct`: jobs stay visible to `squeue` /
# `scontrol show job` for MinJobAge (10 min), which the executor plugin's squeue status mode
# needs, and every finished job is written to SLURM's job completion log
# (JobCompType=jobcomp/filetxt, $DIR/jobcomp.log).
#
# Environment: BURNQED_SLURM_DIR (default $TMPDIR/burnqed-slurm, TMPDIR defaulting to /tmp), BURNQED_SLURM_CPUS (16),
# BURNQED_SLURM_MEM_MB (131072), BURNQED_SLURM_GPUS (2), BURNQED_SLURM_PORT (16817; slurmd uses +1).
set -euo pipefail

# Debian puts the daemons (slurmctld, slurmd, munged) in /usr/sbin and dpkg needs /sbin tools, but a
# plain `env -i` shell or cron may leave the sbin directories off PATH: then `install` would
# reinstall and `start` say "not installed".  Appended, so the caller's own installation (earlier on
# PATH) still wins.
PATH=${PATH:-/usr/bin:/bin}
for d in /usr/local/sbin /usr/sbin /sbin /usr/bin /bin; do
  case ":$PATH:" in *":$d:"*) ;; *) PATH="$PATH:$d" ;; esac
done
export PATH

DIR=${BURNQED_SLURM_DIR:-${TMPDIR:-/tmp}/burnqed-slurm}
CPUS=${BURNQED_SLURM_CPUS:-16}
MEM_MB=${BURNQED_SLURM_MEM_MB:-131072}
GPUS=${BURNQED_SLURM_GPUS:-2}
PORT=${BURNQED_SLURM_PORT:-16817}
NODE=$(hostname -s)
ETC_CONF=/etc/slurm/slurm.conf

die() { echo "single-node.sh: $*" >&2; exit 1; }
need_root() { [ "$(id -u)" -eq 0 ] || die "$1 needs root (it starts the SLURM daemons as root)"; }

# Stop the daemon whose pid file is $1 and wait (up to 20 s) until the process is gone.
stop_pid() {
  local pidfile=$1 pid
  [ -s "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "single-node.sh: $pidfile ($pid) ignored SIGTERM; sending SIGKILL" >&2
      kill -9 "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$pidfile"
}

case "${1:-}" in
install)
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null; then
    echo "slurm-wlm and munge are installed ($(slurmctld -V))"
    exit 0
  fi
  need_root install
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends slurm-wlm munge
  ;;
start)
  need_root start
  command -v slurmctld >/dev/null || die "slurm-wlm is not installed: run '$0 install' first"
  if [ -s "$DIR/slurmctld.pid" ] && kill -0 "$(cat "$DIR/slurmctld.pid")" 2>/dev/null; then
    die "a cluster is already running from $DIR (run '$0 stop' first)"
  fi
  if [ -e "$ETC_CONF" ] && ! [ -L "$ETC_CONF" ]; then
    die "$ETC_CONF exists and is not ours (a real SLURM installation?): not starting a second cluster"
  fi
  rm -rf "$DIR"
  mkdir -p "$DIR/state" "$DIR/spool" "$DIR/munge"
  chmod 755 "$DIR"
  # munge: our own key and socket, so a system munged (if any) is left alone.
  dd if=/dev/urandom bs=1 count=1024 of="$DIR/munge/munge.key" status=none
  chmod 400 "$DIR/munge/munge.key"
  munged --force --key-file="$DIR/munge/munge.key" --socket="$DIR/munge/munge.socket" \
    --pid-file="$DIR/munged.pid" --log-file="$DIR/munged.log" --seed-file="$DIR/munge/seed" </dev/null >>"$DIR/daemons.out" 2>&1
  cat >"$DIR/slurm.conf" <<EOF
# Written by workflow/slurm/single-node.sh: one node, localhost, no accounting database.
ClusterName=burnqed
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$DIR/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SlurmdParameters=config_overrides
GresTypes=gpu
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/jobcomp.log
MinJobAge=600
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB Gres=gpu:$GPUS State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  # slurmd drops a GPU without a device file: empty stand-in files play /dev/nvidiaN.
  mkdir -p "$DIR/dev"
  for ((g = 0; g < GPUS; g++)); do : >"$DIR/dev/gpu$g"; done
  echo "NodeName=$NODE Name=gpu File=$DIR/dev/gpu[0-$((GPUS - 1))]" >"$DIR/gres.conf"
  export SLURM_CONF="$DIR/slurm.conf"
  mkdir -p "$(dirname "$ETC_CONF")"
  ln -sfn "$SLURM_CONF" "$ETC_CONF"
  # The daemons must not hold the caller's stdout/stderr open (a test capturing them would hang).
  slurmctld -f "$SLURM_CONF" </dev/null >>"$DIR/daemons.out" 2>&1
  slurmd -f "$SLURM_CONF" </dev/null >>"$DIR/daemons.out" 2>&1
  for _ in $(seq 150); do
    state=$(sinfo -h -N -o %T 2>/dev/null || true)
    case "$state" in idle | inval* | drain*) break ;; esac
    sleep 0.2
  done
  if [ "$state" != idle ]; then
    tail -n 20 "$DIR/slurmctld.log" "$DIR/slurmd.log" >&2 || true
    "$0" stop
    die "node $NODE did not become idle within 30 s (state: '${state:-none}'); logs above"
  fi
  echo "SLURM is up: node $NODE ($CPUS CPUs, $MEM_MB MB, $GPUS gpu), partition debug"
  echo "export SLURM_CONF=$SLURM_CONF"
  ;;
stop)
  # slurmd first (it reports to slurmctld), then the controller, then munge.
  stop_pid "$DIR/slurmd.pid"
  stop_pid "$DIR/slurmctld.pid"
  stop_pid "$DIR/munged.pid"
  if [ -L "$ETC_CONF" ] && [ "$(readlink "$ETC_CONF")" = "$DIR/slurm.conf" ]; then rm -f "$ETC_CONF"; fi
  echo "SLURM stopped ($DIR kept: logs, jobcomp.log)"
  ;;
status)
  for d in munged slurmctld slurmd; do
    if [ -s "$DIR/$d.pid" ] && kill -0 "$(cat "$DIR/$d.pid")" 2>/dev/null; then
      echo "$d: running (pid $(cat "$DIR/$d.pid"))"
    else
      echo "$d: stopped"
    fi
  done
  ;;
*)
  die "usage: $0 install|start|stop|status"
  ;;
esac
