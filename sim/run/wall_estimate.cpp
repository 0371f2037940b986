#include "sim/run/wall_estimate.hpp"

#include "sim/run/rank_loop.hpp"

#include <algorithm>

namespace sparsim {
namespace {

// Host seconds per message posted (docs/benchmarks.md, "Wall-time estimate"): a dense ring with phantom data
// at P = 256 on the Piz Daint preset (the network alone); for the sparse collectives, which also merge, sum
// and verify what they receive, Ok-Topk with its selection stage taken out, at P = 256 under SimGrid's flows
// and at P = 256 to 4096 under the link-level model.
Seconds seconds_per_message(const ExperimentConfig& config, bool sparse_collective)
{
  const bool link_level = !config.network.simgrid_flows();
  if (sparse_collective)
    return link_level ? 8e-6 : 36e-6;
  return link_level ? 1.7e-6 : 3.1e-6;
}

// Host seconds per gradient entry and rank on one thread in the selection stage (generation, error feedback,
// selection): the calibrated generator about 20 M entries per second, the closed-form sources about 170 M.
Seconds seconds_per_entry(const ExperimentConfig& config)
{
  const std::string source = config.gradients->name();
  if (source == "calibrated")
    return 50e-9;
  if (source == "fashion_mnist_mlp")
    return 100e-9; // a forward and backward pass over the rank's batch per parameter
  return 6e-9;
}

} // namespace

WallEstimate estimate_wall_time(const ExperimentConfig& config, int threads)
{
  const CostInputs inputs = config.cost_inputs();
  const ClosedForm closed_form = config.algorithm->closed_form(inputs);
  WallEstimate estimate;
  estimate.messages_per_iteration = closed_form.messages;
  estimate.messages_upper_bound = closed_form.messages_upper_bound;
  if (!config.is_sparse()) {
    estimate.messages = config.iterations * closed_form.messages;
    estimate.network = estimate.messages * seconds_per_message(config, false);
    return estimate;
  }
  // Sparse: the dense warm-up iterations run the ring; the others the algorithm after the selection stage.
  const int warmup = std::min(config.iterations, config.selection.warmup_iterations);
  const int sparse_iterations = config.iterations - warmup;
  const double warmup_messages = warmup * make_warmup_allreduce()->closed_form(inputs).messages;
  const double sparse_messages = sparse_iterations * closed_form.messages;
  estimate.messages = warmup_messages + sparse_messages;
  estimate.network =
      warmup_messages * seconds_per_message(config, false) + sparse_messages * seconds_per_message(config, true);
  const int usable = std::max(1, std::min(config.gradients->concurrent_generate() ? threads : 1, config.ranks));
  if (config.gradients->generates_candidates()) {
    // Per iteration: the shared part and plan on one thread (about 200 ns per entry, n = 2^24: 3.4 s), then
    // about 80 ns per candidate and rank (1.02 k of them for an exact top-k) over the threads (docs/benchmarks.md).
    const double n = static_cast<double>(config.workload.n), k = static_cast<double>(config.workload.k);
    estimate.selection_stage = sparse_iterations * (n * 200e-9 + config.ranks * 1.02 * k * 80e-9 / usable);
    return estimate;
  }
  const double entries = static_cast<double>(config.workload.n) * config.ranks * sparse_iterations;
  estimate.selection_stage = entries * seconds_per_entry(config) / usable;
  return estimate;
}

} // namespace sparsim
