#include "sim/run/wall_estimate.hpp"

#include "sim/base/units.hpp"
#include "sim/gradients/vector_math.hpp"
#include "sim/run/rank_loop.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <span>

namespace sparsim {
namespace {

// Between two rank counts of a model's measured costs (NetworkModel::message_costs) the cost is interpolated in
// log2 P; beyond the ends it is held.
Seconds seconds_per_message(int ranks, const NetworkModel& model, bool sparse_collective)
{
  const std::span<const MessageCost> costs = model.message_costs;
  auto cost = [&](const MessageCost& at) { return sparse_collective ? at.sparse : at.dense; };
  const auto above = std::find_if(costs.begin(), costs.end(), [&](const MessageCost& at) { return at.ranks >= ranks; });
  if (above == costs.begin())
    return cost(costs.front());
  if (above == costs.end())
    return cost(costs.back());
  const auto below = above - 1;
  const double t = (std::log2(ranks) - std::log2(below->ranks)) / (std::log2(above->ranks) - std::log2(below->ranks));
  return cost(*below) + t * (cost(*above) - cost(*below));
}

// Host seconds per selected pair of all ranks (P k per iteration) that a sparse collective merges, sums or
// re-selects on the host (gTopk's tree of merges, TopkA's union sum, Ok-Topk's region sums): about 20-40 ns
// measured at P = 512 to 2048 (docs/benchmarks.md).
constexpr Seconds kSecondsPerSelectedPair = 25e-9;

// Host seconds per gradient entry and rank on one thread in the selection stage (generation, error feedback,
// selection): the calibrated generator's transcendental functions run through vector_math, so its rate follows
// the widest instruction set (measured with the selection: 9 ns per entry with AVX-512; the generator alone
// 17 ns with AVX and 31 ns with SSE2 only, docs/benchmarks.md); the closed-form sources about 1 ns per entry,
// plus 2 ns when a dense residual is read and written.
Seconds seconds_per_entry(const ExperimentConfig& config)
{
  const std::string source = config.gradients->name();
  if (source == "calibrated") {
    switch (vector_math::widest_available()) {
    case vector_math::InstructionSet::avx512:
      return 10e-9;
    case vector_math::InstructionSet::avx:
      return 20e-9;
    case vector_math::InstructionSet::sse2:
      return 35e-9;
    }
  }
  if (source == "fashion_mnist_mlp")
    return 100e-9; // a forward and backward pass over the rank's batch per parameter
  return config.selection.residual == ResidualKind::dense ? 3e-9 : 1e-9;
}

// A rank's mean-field draws per k (one thread): 1 us up to P = 256, then down in log2 P to 0.45 us at P = 1024,
// held beyond (measured at P = 64, 256 and 1024, n = 2^18; docs/benchmarks.md).
Seconds mean_field_seconds_per_draw(int ranks)
{
  constexpr double kFew = 1e-6, kMany = 0.45e-6;
  const double t = std::clamp((std::log2(ranks) - 8.0) / 2.0, 0.0, 1.0);
  return kFew + t * (kMany - kFew);
}

} // namespace

WallEstimate estimate_wall_time(const ExperimentConfig& config, int threads, const NetworkModel& model)
{
  const CostInputs inputs = config.cost_inputs();
  const ClosedForm closed_form = config.algorithm->closed_form(inputs);
  WallEstimate estimate;
  estimate.messages_per_iteration = closed_form.messages;
  estimate.messages_upper_bound = closed_form.messages_upper_bound;
  if (!config.is_sparse()) {
    estimate.messages = config.iterations * closed_form.messages;
    estimate.network = estimate.messages * seconds_per_message(config.ranks, model, false);
    return estimate;
  }
  // Sparse: the dense warm-up iterations run the ring; the others the algorithm after the selection stage.
  const int warmup = std::min(config.iterations, config.selection.warmup_iterations);
  const int sparse_iterations = config.iterations - warmup;
  const double warmup_messages = warmup * make_warmup_allreduce()->closed_form(inputs).messages;
  const double sparse_messages = sparse_iterations * closed_form.messages;
  const double n = static_cast<double>(config.workload.n), k = static_cast<double>(config.workload.k);
  estimate.messages = warmup_messages + sparse_messages;
  estimate.network = warmup_messages * seconds_per_message(config.ranks, model, false) +
                     sparse_messages * seconds_per_message(config.ranks, model, true) +
                     sparse_iterations * config.ranks * k * kSecondsPerSelectedPair;
  const int usable = std::max(1, std::min(config.gradients->concurrent_generate() ? threads : 1, config.ranks));
  if (config.gradients->generates_candidates()) {
    // Per iteration: the shared part and plan on one thread (about 200 ns per entry, n = 2^24: 3.4 s), then
    // about 80 ns per candidate and rank (1.02 k of them for an exact top-k) over the threads (docs/benchmarks.md).
    // The mean-field residual: its plan and update about 2.3 us per entry, its draws about 1 us per k and rank up
    // to P = 256 and 0.45 us at P = 1024 (more ranks visit the entries whose pieces the plan keeps), both over
    // the threads (docs/benchmarks.md, "The plan's piece cache").
    if (config.selection.residual == ResidualKind::mean_field)
      estimate.selection_stage =
          sparse_iterations *
          (n * 200e-9 + (n * 2.3e-6 + config.ranks * k * mean_field_seconds_per_draw(config.ranks)) / usable);
    else
      estimate.selection_stage = sparse_iterations * (n * 200e-9 + config.ranks * 1.02 * k * 80e-9 / usable);
    return estimate;
  }
  const double entries = n * config.ranks * sparse_iterations;
  estimate.selection_stage = entries * seconds_per_entry(config) / usable;
  return estimate;
}

WallEstimate estimate_wall_time(const ExperimentConfig& config, int threads)
{
  return estimate_wall_time(config, threads, network_model(config.network.model));
}

std::string long_run_warning(const ExperimentConfig& config, const WallEstimate& wall, const WallEstimate& other)
{
  if (wall.total() <= kLongRun)
    return "";
  const std::string advice =
      other.total() < 0.5 * wall.total()
          ? fmt::format("; network.model \"{}\" would take about {}", network_model(config.network.model).compared_with,
                        format_wall_time(other.total()))
          : "";
  return fmt::format(
      "a long run (about {} of wall time{}){}; sparsim run --time-limit stops it cleanly with the "
      "iterations done",
      format_wall_time(wall.total()),
      config.is_sparse() ? fmt::format(", {} of it the selection stage", format_wall_time(wall.selection_stage)) : "",
      advice);
}

} // namespace sparsim
