#!/usr/bin/env bash
# The SMPI comparison of docs/benchmarks.md ("Against SMPI"): sparsim's dense_ring against SMPI's MPI_Allreduce
# with the logical ring (smpi/allreduce:lr), on the same platform (the Piz Daint preset, built by sparsim's own
# topology code in both), the same host per rank, and the same network model options.
#
# Usage: bench/smpi/run.sh [BUILD_DIR]    (default build-bench-smpi; configured with SPARSIM_BUILD_BENCHMARKS=ON)
# Environment: RANKS (default "64 256 1024"), N floats (default 4194304 = 2^22), REPEATS (default 3),
#              OUT (default BUILD_DIR/smpi_bench: configs, hostfiles, raw measurements in runs.csv).
# Prints a markdown table: median wall time and peak RSS of REPEATS runs of each, run alternately.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(realpath -m "${1:-$root/build-bench-smpi}")
ranks_list=${RANKS:-"64 256 1024"}
n=${N:-4194304}
repeats=${REPEATS:-3}
out=$(realpath -m "${OUT:-$build/smpi_bench}")
[[ -x /usr/bin/time ]] || { echo "run.sh needs GNU time: apt-get install -y time" >&2; exit 2; }

# Build the simulator, the platform plugin, the setup tool and the MPI program.
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSPARSIM_BUILD_BENCHMARKS=ON >/dev/null
cmake --build "$build" -j2 --target sparsim sparsim_smpi_platform sparsim_smpi_setup smpi_allreduce >/dev/null
sparsim=$build/sparsim
plugin=$build/bench/smpi/libsparsim_smpi_platform.so
setup=$build/bench/smpi/sparsim_smpi_setup
program=$build/bench/smpi/smpi_allreduce

mkdir -p "$out"
runs=$out/runs.csv
echo "ranks,n,tool,repeat,sim_time_s,wall_s,peak_rss_kb,peak_pss_kb,bandwidth_min_Bps" >"$runs"

# The process tree under $1 (one pid per line).
descendants() {
  local child
  echo "$1"
  for child in $(pgrep -P "$1"); do descendants "$child"; done
}

# Proportional set size (kB) of the process tree under $1: shared pages count once, however often they are mapped.
tree_pss() {
  local total=0 pid key value unit
  for pid in $(descendants "$1"); do
    while read -r key value unit; do
      [[ $key == Pss: ]] && total=$((total + value))
    done 2>/dev/null <"/proc/$pid/smaps_rollup" || true
  done
  echo "$total"
}

# Runs "$@" under GNU time, its output into $1; sets wall (s), rss (kB: the largest resident set of the process
# and its waited-for children, as getrusage reports it) and pss (kB: the largest PSS of the tree, sampled every
# 0.2 s).
timed() {
  local log=$1
  shift
  /usr/bin/time -f "%e %M" -o "$log.time" "$@" >"$log" 2>&1 &
  local pid=$! sample
  pss=0
  while kill -0 "$pid" 2>/dev/null; do
    sample=$(tree_pss "$pid")
    ((sample > pss)) && pss=$sample
    sleep 0.2
  done
  if ! wait "$pid"; then
    echo "failed: $* (see $log)" >&2
    exit 1
  fi
  read -r wall rss <"$log.time"
}

# Median of the numbers on stdin.
median() { sort -g | awk '{v[NR] = $1} END {printf "%.12g\n", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

for ranks in $ranks_list; do
  # lr cuts the vector into P blocks of n/P and hands a remainder to another algorithm; dense_ring cuts it into
  # P near-equal blocks. With n a multiple of P both send the same messages. MPI counts are ints.
  if ((n % ranks != 0 || n >= 2147483648)); then
    echo "N=$n: needs a multiple of P=$ranks below 2^31" >&2
    exit 2
  fi
  dir=$out/p$ranks
  mkdir -p "$dir"
  # One iteration of the dense ring; phantom data (lengths only), as at scale.
  cat >"$dir/config.json" <<JSON
{
  "name": "smpi_compare_p$ranks",
  "ranks": $ranks,
  "iterations": 1,
  "topology": {"file": "$root/configs/platforms/piz_daint.json"},
  "algorithm": {"name": "dense_ring"},
  "workload": {"n": $n, "data": "phantom"},
  "gradients": {"source": "uniform"}
}
JSON
  # The same hosts in rank order, and the same network model options (CM02, no cross traffic).
  mapfile -t network_options < <("$setup" "$dir/config.json" "$dir/hostfile")
  smpi_options=(
    "${network_options[@]}"
    --cfg=smpi/allreduce:lr           # SMPI's logical ring
    --cfg=smpi/simulate-computation:no # no host CPU time injected between MPI calls
    --cfg=smpi/wtime:0                 # MPI_Wtime costs no simulated time
    --cfg=smpi/shared-malloc:global    # SMPI_SHARED_MALLOC buffers share their pages (see allreduce.c)
  )

  for ((repeat = 1; repeat <= repeats; ++repeat)); do
    rm -rf "$dir/sparsim_out"
    timed "$dir/sparsim.log" "$sparsim" run "$dir/config.json" --out "$dir/sparsim_out" --quiet
    sim=$(awk -F, 'NR == 1 {for (i = 1; i <= NF; ++i) col[$i] = i; next}
                   $col["phase"] == "total" {print $col["sim_time_s"]}' "$dir/sparsim_out/results.csv")
    bandwidth=$(sed -n 's/.*"bandwidth_min_Bps": *\([0-9.e+]*\).*/\1/p' "$dir/sparsim_out/manifest.json")
    echo "$ranks,$n,sparsim,$repeat,$sim,$wall,$rss,$pss,$bandwidth" >>"$runs"

    SPARSIM_SMPI_CONFIG=$dir/config.json timed "$dir/smpi.log" \
      smpirun -no-privatize -platform "$plugin" -hostfile "$dir/hostfile" "$program" "$n" "${smpi_options[@]}"
    sim=$(sed -n 's/^smpi_allreduce .* time_max=\([^ ]*\)$/\1/p' "$dir/smpi.log")
    echo "$ranks,$n,smpi,$repeat,$sim,$wall,$rss,$pss,$bandwidth" >>"$runs"
  done
done

# The tables: simulated times (the same in every repeat), then medians of wall time and memory over the repeats.
pick() { awk -F, -v p="$1" -v t="$2" -v c="$3" 'NR > 1 && $1 == p && $3 == t {print $c}' "$runs" | median; }
echo "| P | n | sparsim simulated (s) | SMPI simulated (s) | sparsim / SMPI | SMPI - sparsim (us) | 16 B envelope per message, 2(P-1) x 16 B / B_min (us) |"
echo "|---|---|---|---|---|---|---|"
for ranks in $ranks_list; do
  awk -v p="$ranks" -v n="$n" -v a="$(pick "$ranks" sparsim 5)" -v b="$(pick "$ranks" smpi 5)" \
    -v bw="$(pick "$ranks" sparsim 9)" \
    'BEGIN {printf "| %d | %d | %.9f | %.9f | %.6f | %.3f | %.3f |\n", p, n, a, b, a / b, (b - a) * 1e6,
            2 * (p - 1) * 16 / bw * 1e6}'
done
echo
echo "| P | sparsim wall (s) | SMPI wall (s) | wall sparsim / SMPI | sparsim peak RSS (MB) | SMPI peak RSS (MB) | sparsim peak PSS (MB) | SMPI peak PSS (MB) |"
echo "|---|---|---|---|---|---|---|---|"
for ranks in $ranks_list; do
  awk -v p="$ranks" -v wa="$(pick "$ranks" sparsim 6)" -v wb="$(pick "$ranks" smpi 6)" \
    -v ra="$(pick "$ranks" sparsim 7)" -v rb="$(pick "$ranks" smpi 7)" \
    -v qa="$(pick "$ranks" sparsim 8)" -v qb="$(pick "$ranks" smpi 8)" \
    'BEGIN {printf "| %d | %.2f | %.2f | %.3f | %.0f | %.0f | %.0f | %.0f |\n", p, wa, wb, wa / wb, ra / 1024, rb / 1024,
            qa / 1024, qb / 1024}'
done
echo
echo "$repeats repeats each, run alternately; raw measurements: $runs"
