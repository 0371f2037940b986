#!/usr/bin/env bash
# The Slurm path of `sparsim sweep`, for real: installs Debian's slurm-wlm and munge when missing, starts a
# private munged, slurmctld and slurmd on localhost (a config written here, state in a temp folder), submits
# the array and gather scripts that `sparsim sweep --emit-slurm` writes, waits for them, and compares the
# gathered summary.csv byte for byte with a local `sparsim sweep` of the same file.
# Usage: bash tests/slurm/run_slurm_test.sh SPARSIM_BINARY      (exit 77: skipped, Slurm cannot be installed)
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"  # the daemons, for shells whose PATH lacks sbin
sparsim=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
sweep="$here/sweep.json"
skip() { echo "SKIPPED: $*"; exit 77; }
fail() { echo "FAILED: $*"; exit 1; }

# 1. Packages.
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    sudo -n true 2>/dev/null || skip "slurm-wlm/munge are missing and this user cannot install packages"
    SUDO="sudo -n"
  fi
  echo "installing slurm-wlm and munge"
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
      slurm-wlm munge >/dev/null; } || skip "apt-get could not install slurm-wlm and munge"
fi
[ "$(id -u)" -eq 0 ] || skip "the daemons of this test run as root (SlurmUser=root); run it as root"

# 2. A private cluster of one node: munged on its own socket and key, slurmctld and slurmd on free ports.
work=$(mktemp -d /tmp/sparsim-slurm.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  [ -n "${KEEP_SLURM_TEST:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/munge" "$work/state" "$work/spool"
chmod 700 "$work/munge"
mungekey --create --keyfile="$work/munge/munge.key" >/dev/null 2>&1 ||
  dd if=/dev/urandom of="$work/munge/munge.key" bs=128 count=1 status=none
chmod 600 "$work/munge/munge.key"
munged --force --foreground --socket="$work/munge/socket" --key-file="$work/munge/munge.key" \
  --pid-file="$work/munge/munged.pid" --log-file="$work/munge/munged.log" \
  --seed-file="$work/munge/munged.seed" >"$work/munge/stdout.log" 2>&1 &
pids+=($!)
# Each wait below polls for what it waits for, with a generous deadline (a loaded machine is slow to start
# daemons), and fails saying what did not happen.
deadline=$((SECONDS + 60))
until [ -S "$work/munge/socket" ] || [ $SECONDS -ge $deadline ]; do sleep 0.1; done
[ -S "$work/munge/socket" ] || { cat "$work/munge/"*.log; fail "munged did not start within 60 s"; }

free_port() {
  local port
  for port in $(shuf -i 20000-40000 -n 50); do
    ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && { echo "$port"; return; }
  done
  fail "no free port"
}
host=$(hostname -s)
export SLURM_CONF="$work/slurm.conf"
cat >"$SLURM_CONF" <<CONF
ClusterName=sparsimtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$work/munge/socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
MinJobAge=600
NodeName=$host NodeAddr=127.0.0.1 CPUs=2 RealMemory=2048 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
slurmctld -D -i -f "$SLURM_CONF" >"$work/slurmctld.stdout" 2>&1 &
pids+=($!)
slurmd -D -N "$host" -f "$SLURM_CONF" >"$work/slurmd.stdout" 2>&1 &
pids+=($!)
logs() { tail -n 30 "$work"/slurmctld.log "$work"/slurmd.log "$work"/*.stdout 2>/dev/null || true; }
node_up() { sinfo -h -N -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; }
deadline=$((SECONDS + 120))
until node_up || [ $SECONDS -ge $deadline ]; do sleep 0.3; done
node_up || { logs; fail "the slurm node did not come up within 120 s"; }
echo "slurm is up: $(sinfo -h -N -o '%N %T %c CPUs')"

# 3. Emit, submit the array (3 points per task) and the gather step after it; wait for both.
out="$work/sweep"
"$sparsim" sweep "$sweep" --out "$out" --emit-slurm --chunk 3
for script in sweep.sbatch gather.sbatch; do
  grep -q "^#SBATCH" "$out/$script" || fail "$out/$script has no #SBATCH lines"
done
array=$(sbatch --parsable "$out/sweep.sbatch" | cut -d';' -f1)
gather=$(sbatch --parsable --dependency="afterany:$array" "$out/gather.sbatch" | cut -d';' -f1)
echo "submitted array job $array and gather job $gather"
# Done when squeue answers and lists neither job; a squeue that fails (slurmctld busy) says nothing.
deadline=$((SECONDS + 240))
while :; do
  queued=$(squeue -h -j "$array,$gather" 2>/dev/null) && [ -z "$queued" ] && break
  [ $SECONDS -lt $deadline ] || { squeue || true; logs; fail "the jobs did not finish within 240 s"; }
  sleep 1
done
states=$(scontrol -o show job "$array" | grep -o 'JobState=[A-Z_]*' | sort | uniq -c)
echo "array tasks: $states"
tasks=$(scontrol -o show job "$array" | grep -c 'JobState=COMPLETED' || true)
[ "$tasks" -eq 3 ] || { logs; cat "$out"/slurm/*.out; fail "expected 3 completed array tasks (8 points, 3 per task)"; }
scontrol -o show job "$gather" | grep -q 'JobState=COMPLETED' || { cat "$out"/slurm/gather-*.out; fail "gather failed"; }
cat "$out"/slurm/gather-*.out

# 4. The same sweep locally; the summaries must be identical.
"$sparsim" sweep "$sweep" --out "$work/local" --jobs 2 >/dev/null 2>&1 || fail "the local sweep failed"
[ "$(wc -l <"$out/summary.csv")" -gt 8 ] || fail "the gathered summary.csv has too few rows"
cmp "$out/summary.csv" "$work/local/summary.csv" || fail "summary.csv from Slurm differs from the local sweep's"
echo "PASSED: summary.csv from the Slurm array ($(wc -l <"$out/summary.csv") lines) equals the local sweep's"
