// The rank driver: builds the platform, starts one SimGrid actor per rank and runs the iterations.
//
// Each iteration starts with all ranks aligned at the same simulated time (a zero-cost barrier), so an
// iteration's time is that of the collective alone. Per rank and phase it records messages, bytes and
// simulated time; the result rows aggregate them per (iteration, phase).
#pragma once

#include "algorithms/algorithm.hpp"
#include "sim/config.hpp"
#include "sim/link_load.hpp"
#include "sim/trace.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace simgrid::s4u {
class Engine;
class Host;
}  // namespace simgrid::s4u

namespace sparsim {

// One row of results.csv: a phase of one iteration (phase "total" for the whole iteration).
struct PhaseRow {
  int iteration = 0;
  std::string phase;
  Seconds sim_time = 0;  // max over ranks of the time spent in the phase
  std::uint64_t msgs_sent_max = 0;
  double bytes_sent_max = 0;
  double bytes_sent_mean = 0;
  double bytes_recv_max = 0;
  double bytes_recv_mean = 0;
  bool has_model = false;  // the closed form is given on "total" rows
  Seconds model_time = 0;
  double model_bytes_per_rank = 0;
  // Sparse algorithms, on "total" rows: selection counts and the COO lower bound 2k(P-1)/P words in bytes.
  bool has_sparse = false;
  std::uint64_t k = 0;
  std::uint64_t local_selected_max = 0;  // m: the largest local selection
  std::uint64_t local_selected_sum = 0;
  std::uint64_t global_selected = 0;     // g, where the algorithm re-selects globally
  std::uint64_t result_nnz = 0;
  bool reevaluation = false;
  double lower_bound_bytes = 0;
};

// One row of ranks.csv: one rank's traffic in one phase of one iteration.
struct RankRow {
  int iteration = 0;
  RankId rank = 0;
  std::string phase;
  PhaseStats stats;
};

struct RunOutput {
  std::vector<PhaseRow> rows;
  std::vector<RankRow> rank_rows;
  RouteSummary routes;
  CostInputs cost_inputs;
  ClosedForm closed_form;
  bool verified = false;        // the result was checked against a reference
  std::string verification;     // what was checked
  double verify_max_error = 0;  // largest |result - reference| / tolerance seen (<= 1 passes)
  Seconds wall_time = 0;
  std::vector<Seconds> iteration_wall;  // host seconds from the start of the run to rank 0's end of each iteration
  std::uint64_t peak_rss_bytes = 0;
  std::uint64_t messages = 0;   // simulated messages, all iterations
  int completed_iterations = 0;  // fewer than configured when the run stopped early (partial results)
  std::string stop_reason;       // why, for partial results
  std::vector<LinkRow> links;   // links.csv: the SimGrid links that carried bytes
  RunTrace trace;               // the traced iteration's timeline (none unless asked for)
};

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
