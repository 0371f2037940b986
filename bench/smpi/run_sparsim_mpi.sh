#!/usr/bin/env bash
# sparsim's simulation against the same algorithm code run under SMPI (issue 40, part 2): every algorithm
# sparsim-mpi runs, on the same platform (sparsim's own topology code builds it for SMPI too, as run.sh does),
# the same host per rank and the same network model options. sparsim-mpi is built against SimGrid's MPI
# (target sparsim_mpi_smpi) and smpirun times its MPI calls with SMPI's model; sparsim times the same messages
# with its Communicator on SimGrid's flows. Both runs must move the same bytes per rank and phase (checked);
# the table compares their times per iteration and phase.
#
# Usage: bench/smpi/run_sparsim_mpi.sh [BUILD_DIR]   (default build-bench-smpi, configured with
#                                                      SPARSIM_BUILD_BENCHMARKS=ON)
# Environment: RANKS (default "16"), TOPOLOGIES (default "star fat_tree piz_daint"), ALGORITHMS (default: every
#              one sparsim-mpi runs), N (default 65536), ITERATIONS (default 3), BACKOFF (sparsim-mpi's
#              --poll-backoff: the longest simulated sleep between the empty polls of a wait, so the most a
#              wait can end late; default 1e-9 s, its smallest), PROTOCOL ("rendezvous", the default: SMPI's
#              sends never detached, as sparsim models every message; "smpi": SMPI's own eager sends below
#              64 KiB), OUT (default BUILD_DIR/smpi_sparsim_mpi).
# Prints a markdown table (OUT/table.md): per algorithm and phase, the slowest rank's time summed over the
# iterations; then OUT/summary.md: per topology and P, the median and largest deviation of SMPI from sparsim.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(realpath -m "${1:-$root/build-bench-smpi}")
ranks_list=${RANKS:-16}
topologies=${TOPOLOGIES:-"star fat_tree piz_daint"}
algorithms=${ALGORITHMS:-"dense_ring dense_rabenseifner dense_recursive_doubling topka gtopk oktopk gaussiank sparcml_ssar_recursive_double spardl"}
n=${N:-65536}
iterations=${ITERATIONS:-3}
backoff=${BACKOFF:-1e-9}
protocol=${PROTOCOL:-rendezvous}
case $protocol in
  rendezvous) # every message as sparsim models it: it moves once both sides are posted, the sender waits for it
    protocol_options=(--cfg=smpi/send-is-detached-thresh:0 --cfg=smpi/async-small-thresh:0) ;;
  smpi) protocol_options=() ;; # SMPI's defaults: sends below 64 KiB detached (eager), the sender does not wait
  *) echo "PROTOCOL is rendezvous or smpi" >&2; exit 2 ;;
esac
out=$(realpath -m "${OUT:-$build/smpi_sparsim_mpi}")

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSPARSIM_BUILD_BENCHMARKS=ON >/dev/null
cmake --build "$build" -j2 --target sparsim sparsim_smpi_platform sparsim_smpi_setup sparsim_mpi_smpi >/dev/null
sparsim=$build/sparsim
plugin=$build/bench/smpi/libsparsim_smpi_platform.so
setup=$build/bench/smpi/sparsim_smpi_setup
program=$build/bench/smpi/libsparsim_mpi_smpi.so

topology_json() { # TOPOLOGY RANKS
  case $1 in
    star) echo "{\"type\": \"star\", \"nodes\": $2, \"bandwidth\": \"10GBps\", \"latency\": \"1us\"}" ;;
    fat_tree) echo "{\"type\": \"fat_tree\", \"levels\": 2, \"down\": [4, $(($2 / 4))], \"up\": [1, 2], \"bandwidth\": \"10GBps\", \"latency\": \"1us\"}" ;;
    piz_daint) echo "{\"file\": \"$root/configs/platforms/piz_daint.json\"}" ;;
    *) echo "unknown topology $1" >&2; exit 2 ;;
  esac
}

# Per (iteration, phase): the slowest rank's time, from ranks.csv (rows that moved messages).
phase_times() { # ITERATION|PHASE,SECONDS
  awk -F, 'NR > 1 && $4 + $6 > 0 { key = $1 "|" $3; if (!(key in t) || $8 > t[key]) t[key] = $8 }
           END { for (key in t) print key "," t[key] }' "$1" | sort
}
counts() { awk -F, 'NR > 1 && $4 + $6 > 0 { print $1 "," $2 "," $3 "," $4 "," $5 "," $6 "," $7 }' "$1" | sort; }

mkdir -p "$out"
table=$out/table.md
echo "| topology | P | algorithm | phase | sparsim CM02 (us) | SMPI, $protocol (us) | SMPI / sparsim |" >"$table"
echo "|---|---|---|---|---|---|---|" >>"$table"
for topology in $topologies; do
  for ranks in $ranks_list; do
    for algorithm in $algorithms; do
      dir=$out/$topology-p$ranks-$algorithm
      rm -rf "$dir"
      mkdir -p "$dir"
      spec="{\"name\": \"$algorithm\"}"
      [ "$algorithm" = topka ] && spec="{\"name\": \"topka\", \"allgather\": \"ring\"}"
      cat >"$dir/config.json" <<JSON
{"name": "$algorithm", "seed": 7, "ranks": $ranks, "iterations": $iterations,
 "topology": $(topology_json "$topology" "$ranks"),
 "algorithm": $spec,
 "workload": {"n": $n, "density": 0.01},
 "gradients": {"source": "calibrated", "model": "bert_base"},
 "compute": {"selection": "free"}}
JSON
      "$sparsim" run "$dir/config.json" --out "$dir/sparsim" --quiet --threads 1
      mapfile -t network_options < <("$setup" "$dir/config.json" "$dir/hostfile")
      # No host CPU time injected between MPI calls (sparsim's compute charges are zero here too) and none in
      # MPI_Test or MPI_Iprobe: a wait's empty polls are separated by sparsim-mpi's own simulated sleeps (from
      # 1 ns doubling up to BACKOFF), so a wait ends at most BACKOFF after its completion.
      started=$(date +%s.%N)
      SPARSIM_SMPI_CONFIG=$dir/config.json smpirun -no-privatize -np "$ranks" -platform "$plugin" \
        -hostfile "$dir/hostfile" "${network_options[@]}" --cfg=smpi/simulate-computation:no --cfg=smpi/wtime:0 \
        --cfg=smpi/test:0 --cfg=smpi/iprobe:0 "${protocol_options[@]}" \
        "$program" run "$dir/config.json" --out "$dir/smpi" --quiet --poll-backoff "$backoff" >"$dir/smpi.log" 2>&1 ||
        { echo "smpirun failed: $dir/smpi.log" >&2; tail -5 "$dir/smpi.log" >&2; exit 1; }
      echo "$topology P=$ranks $algorithm: smpirun took $(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s of host time" >&2
      diff <(counts "$dir/sparsim/ranks.csv") <(counts "$dir/smpi/ranks.csv") >/dev/null ||
        { echo "$dir: the two runs moved different bytes" >&2; exit 1; }
      join -t, -j1 <(phase_times "$dir/sparsim/ranks.csv") <(phase_times "$dir/smpi/ranks.csv") |
        awk -F, -v t="$topology" -v p="$ranks" -v a="$algorithm" '
          { split($1, key, "|"); sim[key[2]] += $2; smpi[key[2]] += $3 }
          END { for (phase in sim) printf "| %s | %d | %s | %s | %.3f | %.3f | %.4f |\n", t, p, a, phase,
                  sim[phase] * 1e6, smpi[phase] * 1e6, (sim[phase] > 0 ? smpi[phase] / sim[phase] : 0) }' |
        sort >>"$table"
    done
  done
done
cat "$table"

# Per topology and P: how far SMPI's phase times fall from sparsim's (|SMPI / sparsim - 1|).
summary=$out/summary.md
{
  echo "| topology | P | phases | median deviation | largest deviation | that phase |"
  echo "|---|---|---|---|---|---|"
  awk -F'|' 'NR > 2 { gsub(/ /, "", $2); key = $2 "|" $3 + 0; d = $8 - 1; if (d < 0) d = -d
                      n[key]++; dev[key, n[key]] = d
                      if (d >= worst[key]) { worst[key] = d; where[key] = $4 $5 } }
             END { for (key in n) {
                     m = n[key]; for (i = 1; i <= m; i++) sorted[i] = dev[key, i]
                     for (i = 2; i <= m; i++) for (j = i; j > 1 && sorted[j - 1] > sorted[j]; j--) {
                       t = sorted[j]; sorted[j] = sorted[j - 1]; sorted[j - 1] = t }
                     median = m % 2 ? sorted[(m + 1) / 2] : (sorted[m / 2] + sorted[m / 2 + 1]) / 2
                     split(key, k, "|"); gsub(/^ +| +$/, "", where[key]); gsub(/ +/, " ", where[key])
                     printf "| %s | %d | %d | %.2f%% | %.2f%% | %s |\n", k[1], k[2], m, 100 * median, 100 * worst[key],
                       where[key] } }' "$table" | sort -t'|' -k2,2 -k3,3n
} >"$summary"
cat "$summary"
