#!/usr/bin/env bash
# sparsim-mpi against the simulation: the same config (a star of RANKS nodes, calibrated BERT gradients, small
# n) run by `sparsim run` and by `mpirun -np RANKS sparsim-mpi run` must give the same messages and bytes per
# iteration, rank and phase (ranks.csv; times differ: measured vs simulated), pass the verification, and
# write no links.csv. Mode "errors" checks bad input instead: a wrong -np, an algorithm and a variant the backend
# does not run and a bad option end every process with an error on rank 0, exit status 2, no hang.
# Usage: bash tests/mpi/run_mpi_test.sh SPARSIM SPARSIM_MPI WORKDIR RANKS 'ALGORITHM_JSON' [GPUS_PER_NODE
#                                        [SPARSIM_MPI_OPTION...]]
#        bash tests/mpi/run_mpi_test.sh SPARSIM SPARSIM_MPI WORKDIR errors
set -euo pipefail
sparsim=$(realpath "$1")
sparsim_mpi=$(realpath "$2")
dir=$3
fail() { echo "FAILED: $*"; exit 1; }
# As root (CI) Open MPI needs --allow-run-as-root; more processes than cores need --oversubscribe; shared memory
# (vader) within the host, without the kernel's cross-memory attach that containers often forbid.
# Under the sanitizer build (scripts/sanitize.sh) AddressSanitizer checks every process, but not for leaks: Open
# MPI's components leave allocations behind at MPI_Finalize, in plugins whose frames cannot be symbolized (so no
# suppression can name them); the leak check of the code sparsim-mpi shares runs in the simulator's tests.
mpirun=(timeout 600 mpirun --allow-run-as-root --oversubscribe --mca btl self,vader
        --mca btl_vader_single_copy_mechanism none -x ASAN_OPTIONS=detect_leaks=0)
config() { # NAME RANKS ALGORITHM_JSON [GPUS_PER_NODE]
  local gpus=${4:-1} node=""
  [ "$gpus" = 1 ] || node=", \"node\": {\"gpus\": $gpus, \"fabric\": \"switch\", \"bandwidth\": \"100GBps\", \"latency\": \"300ns\"}"
  cat > "$dir/$1.json" <<JSON
{"name": "$1", "seed": 7, "ranks": $2, "iterations": 3,
 "topology": {"type": "star", "nodes": $2, "bandwidth": "10GBps", "latency": "1us"$node},
 "algorithm": $3,
 "workload": {"n": 65536, "density": 0.01},
 "gradients": {"source": "calibrated", "model": "bert_base"}}
JSON
}
rm -rf "$dir"
mkdir -p "$dir"

if [ "$4" = errors ]; then
  # refused WHAT PROCESSES CONFIG EXPECTED_TEXT [SPARSIM_MPI_OPTION...]: every process exits 2, rank 0 prints
  # the error once, nothing is written.
  refused() {
    local what=$1 processes=$2 config=$3 expected=$4 status=0
    shift 4
    "${mpirun[@]}" -np "$processes" "$sparsim_mpi" run "$dir/$config.json" --out "$dir/out" "$@" \
      > "$dir/$config.log" 2>&1 || status=$?
    [ "$status" = 2 ] || fail "$what: exit status $status, expected 2 ($(cat "$dir/$config.log"))"
    grep -q -- "$expected" "$dir/$config.log" || fail "$what: no error saying '$expected': $(cat "$dir/$config.log")"
    [ "$(grep -c -- "$expected" "$dir/$config.log")" = 1 ] || fail "$what: the error is not printed by rank 0 only"
    [ ! -e "$dir/out/manifest.json" ] || fail "$what: a refused run wrote a manifest"
  }
  config eight 8 '{"name": "dense_ring"}'
  refused "-np 2 for 8 ranks" 2 eight "config error at ranks: got 8, expected the number of MPI processes (2)"
  refused "--poll-backoff -1e-6" 8 eight '--poll-backoff "-1e-6": expected 0 or seconds between 1e-9 and 1' \
    --poll-backoff -1e-6
  refused "--poll-backoff 1e-10" 8 eight '--poll-backoff "1e-10": expected 0 or seconds between 1e-9 and 1' \
    --poll-backoff 1e-10
  config split 4 '{"name": "sparcml_ssar_split_allgather"}'
  refused "SparCML's split allgather" 4 split 'config error at algorithm.name: got "sparcml_ssar_split_allgather"'
  config bruck 4 '{"name": "topka", "allgather": "recursive_doubling"}'
  sed -i 's/^ "workload"/ "selection": {"policy": "threshold_reuse"},\n "workload"/' "$dir/bruck.json"
  refused "TopkA's Bruck allgather of reused thresholds" 4 bruck \
    'config error at algorithm.allgather: got "recursive_doubling"'
  config teams 4 '{"name": "spardl", "teams": 2}'
  refused "SparDL with teams" 4 teams 'config error at algorithm.teams: got 2'
  echo "PASSED: bad input ends every process with exit status 2"
  exit 0
fi

ranks=$4
spec=$5
config check "$ranks" "$spec" "${6:-1}"
shift $(($# < 6 ? $# : 6))
"$sparsim" run "$dir/check.json" --out "$dir/sim" --quiet --threads 1
"${mpirun[@]}" -np "$ranks" "$sparsim_mpi" run "$dir/check.json" --out "$dir/mpi" --quiet "$@"
# Messages and bytes of every (iteration, rank, phase) that moved a message.
counts() { awk -F, 'NR > 1 && $4 + $6 > 0 { print $1 "," $2 "," $3 "," $4 "," $5 "," $6 "," $7 }' "$1" | sort; }
[ "$(counts "$dir/sim/ranks.csv" | wc -l)" -gt 0 ] || fail "the simulation moved no message"
diff <(counts "$dir/sim/ranks.csv") <(counts "$dir/mpi/ranks.csv") > "$dir/counts.diff" ||
  fail "ranks.csv counts differ (simulation <, MPI >): $(head -20 "$dir/counts.diff")"
grep -q '"checked": true' "$dir/mpi/manifest.json" || fail "the MPI run's result was not verified"
grep -q '"backend": "MPI"' "$dir/mpi/manifest.json" || fail "the manifest does not say the run was real"
[ ! -e "$dir/mpi/links.csv" ] || fail "a real run wrote links.csv"
case " $* " in
  *" --poll-backoff "*) grep -q '"waits": "poll, sleeping up to' "$dir/mpi/manifest.json" ||
    fail "the manifest does not record the poll backoff" ;;
esac
echo "PASSED: $ranks ranks of $spec$([ $# = 0 ] || echo " with $*"): $(counts "$dir/sim/ranks.csv" | wc -l) rank-phase rows identical, verified"
