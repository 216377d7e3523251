# A throwaway one-node Slurm cluster on localhost, for tests: sourced, not run.
#   slurm_start DIR     munged + slurmctld + slurmd with generated key and slurm.conf under DIR;
#                       exports SLURM_CONF; returns 1 with SLURM_START_ERROR set when it cannot start
#   slurm_stop          stops what slurm_start started (only those pids)
# Configured for a container without systemd or cgroup delegation: proctrack/linuxproc, task/none,
# no cgroup plugins, no accounting, SlurmUser/SlurmdUser = the current user, ReturnToService=2.
# The node declares SLURM_TEST_CPUS CPUs (default 4, more than a small CI machine has: tasks share the
# cores) via SlurmdParameters=config_overrides. No GRES: the tests submit with --gres=none.

SLURM_TEST_PIDS=()

_slurm_free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

_slurm_wait_file() {  # path, seconds
  local i
  for ((i = 0; i < $2 * 10; i++)); do [ -e "$1" ] && return 0; sleep 0.1; done
  return 1
}

slurm_start() {
  local D="$1" user node cpus ctl_port d_port
  mkdir -p "$D"/{munge,state,spool,log}
  chmod 755 "$D/munge"
  user=$(id -un)
  node=$(hostname -s)
  cpus="${SLURM_TEST_CPUS:-4}"
  SLURM_START_ERROR=""

  # munge: a generated key, its own socket, pid, seed and log files.
  head -c 1024 /dev/urandom > "$D/munge/munge.key"
  chmod 400 "$D/munge/munge.key"
  munged --force --key-file="$D/munge/munge.key" --socket="$D/munge/munge.socket" --pid-file="$D/munge/munged.pid" \
    --seed-file="$D/munge/munged.seed" --log-file="$D/log/munged.log" 2> "$D/log/munged.stderr" || {
    SLURM_START_ERROR="munged did not start: $(tail -n 2 "$D/log/munged.stderr" "$D/log/munged.log" 2>/dev/null | tr '\n' ' ')"
    return 1
  }
  _slurm_wait_file "$D/munge/munged.pid" 10 && SLURM_TEST_PIDS+=("$(cat "$D/munge/munged.pid")")

  ctl_port=$(_slurm_free_port)
  d_port=$(_slurm_free_port)
  cat > "$D/slurm.conf" <<EOF
ClusterName=tessera-test
SlurmctldHost=${node}(127.0.0.1)
SlurmctldPort=${ctl_port}
SlurmdPort=${d_port}
SlurmUser=${user}
SlurmdUser=${user}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=${D}/munge/munge.socket
StateSaveLocation=${D}/state
SlurmdSpoolDir=${D}/spool/%n
SlurmctldPidFile=${D}/slurmctld.pid
SlurmdPidFile=${D}/slurmd.pid
SlurmctldLogFile=${D}/log/slurmctld.log
SlurmdLogFile=${D}/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
MailProg=/bin/true
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
SlurmdParameters=config_overrides
KillWait=5
MinJobAge=600
SchedulerParameters=sched_interval=2
NodeName=${node} NodeAddr=127.0.0.1 CPUs=${cpus} State=UNKNOWN
PartitionName=debug Nodes=${node} Default=YES MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF="$D/slurm.conf"

  slurmctld -f "$SLURM_CONF" -i 2> "$D/log/slurmctld.stderr" || {
    SLURM_START_ERROR="slurmctld did not start: $(tail -n 3 "$D/log/slurmctld.stderr" "$D/log/slurmctld.log" 2>/dev/null | tr '\n' ' ')"
    return 1
  }
  _slurm_wait_file "$D/slurmctld.pid" 10 && SLURM_TEST_PIDS+=("$(cat "$D/slurmctld.pid")")
  slurmd -f "$SLURM_CONF" -N "$node" 2> "$D/log/slurmd.stderr" || {
    SLURM_START_ERROR="slurmd did not start: $(tail -n 3 "$D/log/slurmd.stderr" "$D/log/slurmd.log" 2>/dev/null | tr '\n' ' ')"
    return 1
  }
  _slurm_wait_file "$D/slurmd.pid" 10 && SLURM_TEST_PIDS+=("$(cat "$D/slurmd.pid")")

  # Ready when the node is idle.
  local i state
  for ((i = 0; i < 60; i++)); do
    state=$(sinfo -h -N -o '%T' 2>/dev/null | head -n 1)
    [ "$state" = idle ] && return 0
    sleep 0.5
  done
  SLURM_START_ERROR="the node never became idle (state '${state}'): $(grep -iE 'error|fatal' "$D"/log/slurm*.log 2>/dev/null | tail -n 3 | tr '\n' ' ')"
  return 1
}

slurm_stop() {
  local i pid
  for ((i = ${#SLURM_TEST_PIDS[@]} - 1; i >= 0; i--)); do
    pid="${SLURM_TEST_PIDS[$i]}"
    kill "$pid" 2>/dev/null
  done
  for pid in "${SLURM_TEST_PIDS[@]}"; do
    for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
  done
  SLURM_TEST_PIDS=()
}
