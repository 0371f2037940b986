#include "sim/run/wall_estimate.hpp"

#include "algorithms/registry.hpp"

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
  CostInputs inputs;
  inputs.ranks = config.ranks;
  inputs.n = config.workload.n;
  inputs.k = config.workload.k;
  inputs.wire = config.workload.wire;
  const double per_call = config.algorithm->closed_form(inputs).messages;
  const int warmup = config.is_sparse() ? std::min(config.iterations, config.selection.warmup_iterations) : 0;
  const int sparse_iterations = config.is_sparse() ? config.iterations - warmup : 0;
  const double ring = 2.0 * config.ranks * (config.ranks - 1); // the dense warm-up's ring allreduce

  WallEstimate estimate;
  estimate.messages_per_iteration = per_call;
  if (!config.is_sparse()) {
    estimate.messages = config.iterations * per_call;
    estimate.network = estimate.messages * seconds_per_message(config, false);
    return estimate;
  }
  estimate.messages = sparse_iterations * per_call + warmup * ring;
  estimate.network = sparse_iterations * per_call * seconds_per_message(config, true) +
                     warmup * ring * seconds_per_message(config, false);
  {
    const int usable = std::max(1, std::min(config.gradients->concurrent_generate() ? threads : 1, config.ranks));
    const double entries = static_cast<double>(config.workload.n) * config.ranks * sparse_iterations;
    estimate.selection_stage = entries * seconds_per_entry(config) / usable;
  }
  return estimate;
}

} // namespace sparsim
