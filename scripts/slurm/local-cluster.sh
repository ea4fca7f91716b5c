#!/usr/bin/env bash
# A single-node Slurm cluster of one's own, in one folder: munged, slurmctld and slurmd with
# their keys, state, spool, logs and configuration all under DIR, on two free local ports, run
# as the calling user (no systemd, no cgroups: proctrack/linuxproc, task/none), so that
# psi's job-array script can be submitted for real on a machine without a cluster, as the test
# suite does (Slurm.* in tests/test_slurm.cpp).
#
#   scripts/slurm/local-cluster.sh start DIR [OWNER_PID]
#       starts the cluster and prints `export SLURM_CONF=DIR/slurm.conf`; with OWNER_PID, a
#       watchdog stops it as soon as that process is gone, so a test that dies still leaves
#       no daemons behind
#   scripts/slurm/local-cluster.sh stop DIR
#       stops the cluster DIR holds (and its watchdog); safe to run twice
#
# Needs Debian's slurmctld, slurmd, slurm-client and munge (scripts/setup.sh installs them). Any
# failure to start says which daemon and why (its log's last lines), stops what was started and
# exits 1.
set -euo pipefail

usage() { echo "usage: scripts/slurm/local-cluster.sh start DIR [OWNER_PID] | stop DIR" >&2; exit 2; }
[ $# -ge 2 ] || usage
action=$1
dir=$2
owner=${3:-}

log_tail() { [ -f "$1" ] && sed 's/^/    /' <(tail -n 8 "$1"); true; }

# The pid a daemon wrote, if that process is still running.
live_pid() {
  local f=$1 pid
  [ -f "$f" ] || return 1
  pid=$(cat "$f" 2>/dev/null) || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

stop_cluster() {
  local d=$1 pid name
  if pid=$(live_pid "$d/watchdog.pid") && [ "$pid" != "$BASHPID" ]; then kill "$pid" 2>/dev/null || true; fi
  # Jobs first, so that no batch script outlives its slurmd; then the daemons.
  if live_pid "$d/slurmctld.pid" >/dev/null; then
    SLURM_CONF=$d/slurm.conf scancel --user="$(id -un)" 2>/dev/null || true
    for _ in $(seq 50); do
      [ -z "$(SLURM_CONF=$d/slurm.conf squeue -h 2>/dev/null)" ] && break
      sleep 0.1
    done
  fi
  for name in slurmd slurmctld munged; do
    pid=$(live_pid "$d/$name.pid") || continue
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
}

if [ "$action" = stop ]; then
  [ -d "$dir" ] || exit 0
  stop_cluster "$(cd "$dir" && pwd)"
  exit 0
fi
[ "$action" = start ] || usage
[ -z "$owner" ] || [[ "$owner" =~ ^[0-9]+$ ]] || usage

for tool in munged munge slurmctld slurmd sbatch squeue scontrol; do
  command -v "$tool" >/dev/null ||
    { echo "local-cluster: $tool not found: install Debian's munge, slurmctld, slurmd and slurm-client (scripts/setup.sh does)" >&2; exit 1; }
done

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
# munged refuses a key or socket folder that others can write to, and the socket path must fit
# in a sockaddr_un (108 bytes).
chmod 700 "$dir"
mkdir -p -m 700 "$dir/munge" "$dir/state" "$dir/spool" "$dir/log"
[ ${#dir} -lt 80 ] || { echo "local-cluster: $dir: path too long for munge's socket (keep it under 80 characters)" >&2; exit 1; }

fail() {
  echo "local-cluster: $1" >&2
  [ -n "${2:-}" ] && log_tail "$2" >&2
  stop_cluster "$dir"
  exit 1
}

# Two adjacent free ports: a connection that succeeds means the port is taken.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port=
for _ in $(seq 40); do
  p=$(( 20000 + (RANDOM * 32768 + RANDOM) % 40000 ))
  if port_free "$p" && port_free $((p + 1)); then port=$p; break; fi
done
[ -n "$port" ] || fail "no two free adjacent ports found on 127.0.0.1"

head -c 1024 /dev/urandom >"$dir/munge/munge.key"
chmod 600 "$dir/munge/munge.key"
munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
  --pid-file="$dir/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed" ||
  fail "munged did not start:" "$dir/log/munged.log"
munge -n -S "$dir/munge/munge.socket" | unmunge -S "$dir/munge/munge.socket" >/dev/null 2>&1 ||
  fail "munged started but cannot encode and decode a credential:" "$dir/log/munged.log"

node=$(hostname -s)
user=$(id -un)
cat >"$dir/slurm.conf" <<EOF
# Written by scripts/slurm/local-cluster.sh: one node, this user, everything under $dir.
ClusterName=psilocal
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
# Jobs start as soon as they can, not in 3-second rounds (a test waits on nine short tasks).
SchedulerParameters=batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
NodeName=$node NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
# A job that hangs is ended by Slurm after 30 minutes, not left running.
PartitionName=local Nodes=ALL Default=YES MaxTime=30 State=UP
EOF
export SLURM_CONF=$dir/slurm.conf

slurmctld -f "$SLURM_CONF" || fail "slurmctld did not start:" "$dir/log/slurmctld.log"
slurmd -f "$SLURM_CONF" || fail "slurmd did not start:" "$dir/log/slurmd.log"

if [ -n "$owner" ]; then
  setsid bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done; exec bash "$2" stop "$3"' \
    watchdog "$owner" "$(cd "$(dirname "$0")" && pwd)/$(basename "$0")" "$dir" </dev/null >/dev/null 2>&1 &
  echo $! >"$dir/watchdog.pid"
fi

# Ready when the node is idle: the controller answers and the node has registered.
for _ in $(seq 150); do
  state=$(sinfo -h -n "$node" -o %t 2>/dev/null || true)
  [ "$state" = idle ] && { echo "export SLURM_CONF=$SLURM_CONF"; exit 0; }
  live_pid "$dir/slurmctld.pid" >/dev/null || fail "slurmctld exited:" "$dir/log/slurmctld.log"
  live_pid "$dir/slurmd.pid" >/dev/null || fail "slurmd exited:" "$dir/log/slurmd.log"
  sleep 0.2
done
fail "node $node not idle after 30 s (state '${state:-none}'):" "$dir/log/slurmd.log"
