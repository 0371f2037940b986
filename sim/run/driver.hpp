// The driver: builds the platform and the World, starts one rank actor per rank (sim/run/rank_loop.hpp) and
// turns what the ranks recorded into the run's rows (sim/run/run_output.hpp).
//
// Each iteration starts with all ranks aligned at the same simulated time (a zero-cost barrier), so an
// iteration's time is that of the collective alone. Per rank and phase it records messages, bytes and
// simulated time; the result rows aggregate them per (iteration, phase).
#pragma once

#include "algorithms/algorithm.hpp"
#include "sim/network/models/network_model.hpp"
#include "sim/run/config.hpp"
#include "sim/run/run_output.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace sparsim {

// Runs the experiment. Creates SimGrid's engine, so call it at most once per process.
// Throws ConfigError for problems found while building the platform, std::runtime_error for failures
// (deadlock, a result that fails verification).
struct RunOptions {
  bool show_progress = true;
  int threads = 1;        // host threads preparing the sparse ranks' gradients and selections (same results)
  Seconds wall_limit = 0; // host seconds; past it the run stops before its next iteration (0: no limit)
  // Once it holds true (set by the caller's SIGINT handler), the run stops before its next iteration.
  const std::atomic<bool>* interrupted = nullptr;
  // Installs the caller's SIGINT handler. SimGrid's engine puts its own in place when it starts (it exits at
  // once), so the driver calls this after setting up the network.
  std::function<void()> install_interrupt_handler;
  int trace_iteration = -1; // >= 0: record that iteration's timeline into RunOutput::trace
  // A network run of the caller's instead of the config's model: sparsim-mpi's real MPI run, which runs one rank
  // per process (NetworkRun::processes). Process 0 then gathers every rank's records and returns the run's
  // output; the other processes return an output without rows.
  NetworkRun* network = nullptr;
};
RunOutput run_experiment(const ExperimentConfig& config, const RunOptions& options);

} // namespace sparsim
