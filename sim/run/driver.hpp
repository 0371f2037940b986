// The rank driver: builds the platform, starts one SimGrid actor per rank and runs the iterations.
//
// Each iteration starts with all ranks aligned at the same simulated time (a zero-cost barrier), so an
// iteration's time is that of the collective alone. Per rank and phase it records messages, bytes and
// simulated time; the result rows aggregate them per (iteration, phase).
#pragma once

#include "algorithms/algorithm.hpp"
#include "sim/run/config.hpp"
#include "sim/run/run_output.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace simgrid::s4u {
class Engine;
class Host;
}  // namespace simgrid::s4u

namespace sparsim {

// Runs the experiment. Creates SimGrid's engine, so call it at most once per process.
// Throws ConfigError for problems found while building the platform, std::runtime_error for failures
// (deadlock, a result that fails verification).
struct RunOptions {
  bool show_progress = true;
  int threads = 1;         // host threads preparing the sparse ranks' gradients and selections (same results)
  Seconds wall_limit = 0;  // host seconds; past it the run stops before its next iteration (0: no limit)
  int trace_iteration = -1;  // >= 0: record that iteration's timeline into RunOutput::trace
};
RunOutput run_experiment(const ExperimentConfig& config, const RunOptions& options);

// Error feedback after a sparse allreduce: zeroes in `acc` (which becomes the residual) the entries of
// `selection` that were consumed: all of them, or only those that are in `result` (both sorted by index).
void consume_selection(std::vector<float>& acc, const SparseVector& selection, const SparseVector& result,
                       SparseAllreduce::ResidualRule rule);

// SimGrid command-line options for the config's network model.
std::vector<std::string> simgrid_options(const NetworkOptions& network);
// Starts SimGrid's engine with those options. The engine exists once per process: the first call creates
// it, later calls return it unchanged.
simgrid::s4u::Engine& start_engine(const NetworkOptions& network);
// Builds the config's platform in the engine and returns each rank's host (placement applied).
std::vector<simgrid::s4u::Host*> build_rank_hosts(const ExperimentConfig& config);

}  // namespace sparsim
