#include "sim/run/memory.hpp"

#include "sim/gradients/mean_field.hpp"
#include "sim/run/rank_loop.hpp"
#include "sim/run/run_output.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <thread>
#include <unistd.h>

namespace sparsim {

MemoryEstimate estimate_memory(const ExperimentConfig& config)
{
  const double P = config.ranks;
  const double n = static_cast<double>(config.workload.n);
  const double k = static_cast<double>(config.workload.k);
  const double element = config.workload.wire.index_bytes + config.workload.wire.value_bytes;
  MemoryEstimate estimate;
  auto add = [&](std::string_view what, double bytes) {
    estimate.bytes += bytes;
    estimate.breakdown += fmt::format("{}{} {}", estimate.breakdown.empty() ? "" : " + ", what, format_bytes(bytes));
  };
  // The residuals and dense vectors (arrays of known size) and the collective's held memory (measured as peak
  // RSS, the allocator's share included): no margin needed.
  double exact = 0;
  if (config.is_sparse()) {
    // A collective that selects within itself (SparDL) keeps every rank's dense acc, residual or not.
    if (config.selection.residual == ResidualKind::dense || config.selects_within_collective()) {
      exact = P * n * 4;
      add(config.selects_within_collective() ? "accs (P*n floats)" : "residuals (P*n floats)", exact);
    }
    if (config.selection.residual == ResidualKind::mean_field) {
      // The shared distribution (12 bytes per entry), a plan's proposal and level per entry while it is built
      // (6 n) and up to two plans alive (an index and a proposal per entry that can pass the floor, 8 n each);
      // every rank's carried store up to its cap (an index and a value per entry).
      add("mean-field state and plans (34 n bytes)", 34 * n);
      add("carried stores (P * carried_cap * k pairs at most)", P * config.selection.carried_cap * k * 8);
      add("mean-field piece cache (512 n bytes, 512 MiB at most)",
          static_cast<double>(MeanFieldResidual::piece_cache_bound(config.workload.n)));
    }
    if (config.gradients->generates_candidates()) {
      // The iteration's mean and noise (2 n floats) and the candidate plan (an index, a mean and a noise per
      // entry that can pass the floor, at most n); per host thread, a batch of ranks' candidates in flight.
      add("candidate plan and shared part (20 n bytes)", 20 * n);
      add("candidate batches (2 threads, 8 ranks, 1.1 k, 16 bytes)", 2 * 8 * 1.1 * k * 16);
    } else {
      add("gradient buffer", n * 4);
    }
    // Every rank's selection lives through the iteration (shrunk to its size); slices travel as views of it
    // and U is shared.
    add("selections (P*k pairs)", P * k * element);
    // Reduced regions and the shared U: each at most the union of the selections.
    add("reduced regions and U", 2 * std::min(P * k, n) * element);
    // What the collective itself holds beyond them (pointers to gathered parts, per-region cuts): its own terms.
    for (const auto& term : config.sparse_algorithm()->held_memory(config.cost_inputs())) {
      add(term.what, term.bytes);
      exact += term.bytes;
    }
  } else if (config.workload.data == DataMode::real) {
    // Each rank's vector plus the blocks in flight (up to a whole vector per rank in recursive doubling).
    exact = 2 * P * n * 4;
    add("vectors (2*P*n floats)", exact);
  }
  if (config.verify) {
    // Dense results (and a sparse run's dense warm-up) against 2 n doubles; sparse results against sums kept
    // for U's indices (24 bytes per entry of U, at most the union of the selections) and 1.5 bits per index.
    if (!config.is_sparse() || config.selection.warmup_iterations > 0)
      add("dense verification (2 n doubles)", 2 * n * 8);
    if (config.is_sparse() && config.selects_within_collective())
      add("conservation check (3 n doubles)", 24 * n);
    else if (config.is_sparse())
      add("sparse verification (24 bytes per entry of U, 1.5 bits per index)", 24 * std::min(P * k, n) + 3 * n / 16);
  }
  // What every run holds besides its data, measured on this project's machine (docs/scale.md, "What the estimate
  // leaves out"): the program and its libraries; the platform, about 620 bytes per link (Piz Daint and aries_16k
  // alike); and per rank its stack as far as it reaches and its state in the transport, matcher and counters:
  // 13 KB for the dense ring (whose stack reaches 8 KiB), with the sparse collectives' stacks reaching 28 KiB.
  constexpr double kProgramBytes = 34e6;
  constexpr double kPlatformBytesPerLink = 620;
  const double per_rank = config.is_sparse() ? 33e3 : 13e3;
  add("program and libraries", kProgramBytes);
  if (config.topology)
    add("platform (620 bytes per link)", kPlatformBytesPerLink * static_cast<double>(config.topology->link_count()));
  add(fmt::format("ranks' stacks and state ({:.0f} KB per rank)", per_rank / 1e3), P * per_rank);
  // Every rank's record of every iteration lives to the end of the run (it becomes ranks.csv): the record, its
  // phases' counts and their rows, for about 4 phases a record (the dense ring has 2, Ok-Topk up to 9).
  constexpr double kPhasesPerRecord = 4;
  estimate.records_bytes =
      config.iterations * P *
      (static_cast<double>(sizeof(RankIteration)) + kPhasesPerRecord * (sizeof(PhaseStats) + sizeof(RankRow)));
  add("per-iteration records", estimate.records_bytes);
  // Heap the allocator keeps, actors, SimGrid's own state: Ok-Topk at P = 1024, n = 2^24, 1% peaked at 1.99 GiB
  // against 1.97 GiB for the terms above (docs/scale.md); the margin keeps the estimate on the safe side.
  add("margin (15% of all but the arrays and the collective's held memory)", 0.15 * (estimate.bytes - exact));
  return estimate;
}

double physical_memory_bytes()
{
  return static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

int machine_cores() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

void check_memory(const ExperimentConfig& config)
{
  const MemoryEstimate estimate = estimate_memory(config);
  const double available = 0.9 * physical_memory_bytes();
  if (estimate.bytes <= available)
    return;
  // Named after what takes most of it: the ranks, or a run's iterations when their records do.
  const bool records = estimate.records_bytes > 0.5 * estimate.bytes;
  throw ConfigError(records ? "iterations" : "ranks", std::to_string(records ? config.iterations : config.ranks),
                    fmt::format("a run that fits in memory: it needs about {} ({}), more than 90% of this "
                                "machine's {}{}",
                                format_bytes(estimate.bytes), estimate.breakdown, format_bytes(physical_memory_bytes()),
                                config.is_sparse() && config.selection.residual == ResidualKind::dense &&
                                        !config.selects_within_collective()
                                    ? "; selection.residual \"none\" keeps no residual (docs/scale.md)"
                                    : ""));
}

} // namespace sparsim
