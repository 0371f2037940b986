#!/usr/bin/env bash
# Runs the baseline set (scripts/baseline/configs) with an OLD and a NEW sparsim binary and compares the
# outputs byte for byte, to prove that a refactor keeps simulated results identical.
#
#   bash scripts/baseline/compare.sh --old-binary PATH [--new-binary PATH] [--quick] [--keep DIR] [--jobs N]
#   bash scripts/baseline/compare.sh REV [--new-binary PATH] [--quick] [--keep DIR] [--jobs N]
#
# REV: builds git revision REV's `sparsim` (git archive into a temporary folder, Ninja, Release, no tests) as
# the OLD binary. NEW defaults to this tree's build/sparsim. Exit status 0 only if every run is identical.
set -euo pipefail

usage() {
  sed -n '2,9s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
  exit "${1:-2}"
}
die() { echo "compare.sh: $*" >&2; exit 2; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
configs=$here/configs

# --- Arguments -------------------------------------------------------------------------------------------
rev="" old_bin="" new_bin="" quick=0 keep="" jobs=2
while (($#)); do
  case $1 in
    --old-binary) (($# >= 2)) || die "$1 needs a value"; old_bin=$2; shift 2 ;;
    --new-binary) (($# >= 2)) || die "$1 needs a value"; new_bin=$2; shift 2 ;;
    --keep) (($# >= 2)) || die "$1 needs a value"; keep=$2; shift 2 ;;
    --jobs) (($# >= 2)) || die "$1 needs a value"; jobs=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    -h | --help) usage 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) [[ -z $rev ]] || die "one REV only"; rev=$1; shift ;;
  esac
done
[[ -n $rev || -n $old_bin ]] || usage 2 >&2
[[ -z $rev || -z $old_bin ]] || die "give REV or --old-binary, not both"
[[ $jobs =~ ^[1-9][0-9]*$ ]] || die "--jobs takes a whole number >= 1"
new_bin=${new_bin:-$repo/build/sparsim}
executable() { [[ -f $1 && -x $1 ]] || die "$2 binary $1 is not an executable file"; }
executable "$new_bin" "the new"
[[ -z $old_bin ]] || executable "$old_bin" "the old"
have_jq=1
command -v jq > /dev/null || { have_jq=0; echo "compare.sh: jq not found: manifest.json fields are not compared" >&2; }

# --- Work folder: --keep DIR, or a temporary folder removed on exit --------------------------------------
if [[ -n $keep ]]; then
  [[ ! -e $keep || -z $(ls -A "$keep") ]] || die "--keep $keep: the folder exists and is not empty"
  mkdir -p "$keep"
  work=$(cd "$keep" && pwd)
else
  work=$(mktemp -d /tmp/sparsim-baseline.XXXXXX)
fi
cleanup() {
  # Stop the runs still going (their sparsim children first), by process id.
  local pid
  for pid in $(jobs -p); do
    pkill -TERM -P "$pid" 2> /dev/null || true
    kill -TERM "$pid" 2> /dev/null || true
  done
  [[ -n $keep ]] || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- REV mode: build the old revision's sparsim -----------------------------------------------------------
# The binary finds its presets through the source folder compiled into it, so that folder stays until exit.
if [[ -n $rev ]]; then
  commit=$(git -C "$repo" rev-parse --verify --quiet "$rev^{commit}") || die "$rev is not a git revision"
  echo "building $rev ($commit) in $work/rev (log: $work/rev-build.log)"
  mkdir -p "$work/rev/src"
  git -C "$repo" archive "$commit" | tar -x -C "$work/rev/src"
  if ! { cmake -S "$work/rev/src" -B "$work/rev/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
           -DSPARSIM_BUILD_TESTS=OFF && cmake --build "$work/rev/build" --target sparsim -j "$jobs"; } \
         > "$work/rev-build.log" 2>&1; then
    tail -n 30 "$work/rev-build.log" >&2
    die "the build of $rev failed (log above)"
  fi
  # Wherever that revision's CMake put the executable.
  old_bin=$(find "$work/rev/build" -name sparsim -type f -perm -u+x -print -quit)
  [[ -n $old_bin ]] || die "no sparsim executable in $work/rev/build"
fi
old_bin=$(realpath "$old_bin")
new_bin=$(realpath "$new_bin")

# --- The baseline set --------------------------------------------------------------------------------------
# runs/: every algorithm at P = 12 and 64 on a star, a 2:1 oversubscribed fat tree and Piz Daint, VGG-16
# calibrated gradients, 3 iterations; extra/: options the matrix leaves at their defaults; training/: the
# Fashion-MNIST closed loop; link_level/: runs under the link-level network model; sweep/: one small sweep
# whose summary.csv is compared.
# --quick: the P = 12 Piz Daint runs (every algorithm), the extras, training, link_level and the sweep.
cd "$configs"
if ((quick)); then
  runs=(runs/piz_daint_p12_*.json extra/*.json training/*.json link_level/*.json)
else
  # The P = 64 runs first, so that the job slots finish at about the same time.
  runs=(link_level/*_p256_*.json runs/*_p64_*.json)
  for config in extra/*.json runs/*.json training/*.json link_level/*.json; do
    [[ " ${runs[*]} " == *" $config "* ]] || runs+=("$config")
  done
fi
runs=("${runs[@]%.json}")
sweep=sweep/sweep
traced=runs/piz_daint_p12_oktopk  # also writes the timeline of its reuse iteration, trace.json (compared)

# --- Running: up to --jobs processes at a time, both binaries in one queue --------------------------------
# Each job leaves SIDE/NAME/ (outputs), SIDE/NAME.log and SIDE/NAME.rc (exit status).
run_job() {
  local side=$1 bin=$2 name=$3 out=$work/$1/$3 rc=0
  mkdir -p "$out"
  if [[ $name == "$sweep" ]]; then
    "$bin" sweep "$configs/$name.json" --out "$out" --jobs 1 --threads 1 > "$out.log" 2>&1 || rc=$?
  else
    local extra=()
    [[ $name != "$traced" ]] || extra=(--trace "$out/trace.json" --trace-iteration 1)
    "$bin" run "$configs/$name.json" --out "$out" --quiet --threads 1 "${extra[@]}" > "$out.log" 2>&1 || rc=$?
  fi
  echo "$rc" > "$out.rc"
}

echo "old: $old_bin"
echo "new: $new_bin"
echo "work folder: $work"
echo "running $((${#runs[@]} + 1)) runs (${#runs[@]} experiments and one sweep) with each binary, $jobs at a time"
start=$SECONDS
running=0
for name in "$sweep" "${runs[@]}"; do
  for side in old new; do
    if ((running >= jobs)); then
      wait -n || true
      running=$((running - 1))
    fi
    bin=$old_bin
    [[ $side == old ]] || bin=$new_bin
    run_job "$side" "$bin" "$name" &
    running=$((running + 1))
  done
done
wait
elapsed=$((SECONDS - start))

# --- Comparing ---------------------------------------------------------------------------------------------
# No CSV that sparsim writes has a wall-clock or memory column (checked at 36c352a: results.csv, ranks.csv,
# links.csv and summary.csv hold simulated quantities only; wall time and peak memory are in manifest.json),
# so nothing is stripped: the CSVs are compared whole. Should such a column appear, a warning names it.
host_columns='wall|rss|memory|elapsed|host'
# Of manifest.json only the simulated fields are compared (extracted into manifest.sim.json): not the wall
# times, peak memory, memory estimate, command line, git revision or resolved config (its paths differ).
manifest_fields='{closed_form, routes, simulated_messages, verification, training, iterations_completed,
                  partial, stop_reason}'

# Sets `detail` to where OLD and NEW first differ (empty when they are identical): the line, and the first
# differing column of a CSV or the text around the first differing character of another file.
first_difference() {
  local old=$1 new=$2 file=$3 report line a b i
  detail=""
  cmp -s -- "$old" "$new" && return 0
  report=$(cmp -- "$old" "$new" 2>&1) || true
  if [[ $report == *EOF* ]]; then
    # "cmp: EOF on FILE after byte B, line L" (or "... which is empty"): one file is the other's beginning.
    local shorter=new longer=old
    [[ $report != *"$old"* ]] || { shorter=old longer=new; }
    detail="$file: $shorter is empty, $longer is not"
    [[ ! $report =~ line\ ([0-9]+) ]] || detail="$file: $shorter ends after line ${BASH_REMATCH[1]}, $longer goes on"
    return 0
  fi
  [[ $report =~ line\ ([0-9]+) ]] || { detail="$file: $report"; return 0; }
  line=${BASH_REMATCH[1]}
  if [[ $file == *.csv ]]; then
    detail=$(awk -F, -v n="$line" -v file="$file" '
      FNR == 1 && FILENAME == ARGV[1] { for (i = 1; i <= NF; ++i) header[i] = $i }
      FNR == n && FILENAME == ARGV[1] { split($0, a, ","); nextfile }
      FNR == n && FILENAME == ARGV[2] {
        m = split($0, b, ","); c = 1
        while (c <= m && a[c] == b[c]) ++c
        key = ""
        for (i = 1; i < c && i <= 6; ++i) key = key (i > 1 ? "," : "") a[i]
        printf "%s line %d (%s...) column %s: old \"%s\" new \"%s\"", file, n, key, header[c], a[c], b[c]
        exit
      }' "$old" "$new")
  else
    a=$(sed -n "${line}p" "$old")
    b=$(sed -n "${line}p" "$new")
    i=0
    while ((i < ${#a})) && [[ ${a:i:1} == "${b:i:1}" ]]; do i=$((i + 1)); done
    i=$((i > 40 ? i - 40 : 0))
    detail="$file line $line: old \"...${a:i:100}\" new \"...${b:i:100}\""
  fi
}

# Compares one run's files; prints its line and returns 1 if they differ or a run failed.
compare_run() {
  local name=$1 side rc file header
  shift
  for side in old new; do
    read -r rc < "$work/$side/$name.rc"
    if ((rc != 0)); then
      echo "DIFFERENT  $name: the $side binary failed (exit $rc): $(grep -v '^\s*$' "$work/$side/$name.log" | tail -n 1)"
      return 1
    fi
  done
  for file in "$@"; do
    for side in old new; do
      [[ -f $work/$side/$name/$file ]] || { echo "DIFFERENT  $name: $file missing from the $side run"; return 1; }
    done
    if [[ $file == *.csv ]]; then
      read -r header < "$work/old/$name/$file"
      [[ ! ${header,,} =~ $host_columns ]] ||
        echo "warning: a column of $name/$file looks like wall time or memory ($header); compared as it is" >&2
    fi
    first_difference "$work/old/$name/$file" "$work/new/$name/$file" "$file"
    [[ -z $detail ]] || { echo "DIFFERENT  $name: $detail"; return 1; }
  done
  echo "identical  $name ($*)"
}

identical=0 different=0
for name in "${runs[@]}"; do
  files=(results.csv ranks.csv links.csv)
  [[ $name != "$traced" ]] || files+=(trace.json)
  if ((have_jq)); then
    for side in old new; do
      manifest=$work/$side/$name/manifest.json
      [[ ! -f $manifest ]] || jq -S "$manifest_fields" "$manifest" > "$work/$side/$name/manifest.sim.json" || :
    done
    files+=(manifest.sim.json)
  fi
  if compare_run "$name" "${files[@]}"; then identical=$((identical + 1)); else different=$((different + 1)); fi
done
if compare_run "$sweep" summary.csv; then identical=$((identical + 1)); else different=$((different + 1)); fi

echo "$identical identical, $different different (runs took $((elapsed / 60)) min $((elapsed % 60)) s)"
[[ -z $keep ]] || echo "outputs kept in $work"
((different == 0))
