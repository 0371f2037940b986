// What a run produces, before it is written: results.csv rows, ranks.csv rows, links.csv rows, the traced
// iteration's timeline and the run's own figures (sim/output writes them).
#pragma once

#include "algorithms/algorithm.hpp"
#include "sim/comm/communicator.hpp"
#include "topologies/topology.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sparsim {

// One row of links.csv: one direction of a graph link (or the loopback), labelled with the link's level.
struct LinkRow {
  std::string link;        // the SimGrid link's name
  std::string level;       // the graph link's level ("node", "intra_chassis", ..., "fat_tree_L0", "loopback")
  std::string direction;   // "up", "down", or "" for the loopback
  Bytes bytes = 0;         // over all iterations
  Bytes iteration_max = 0; // in the iteration that loaded the link most
};

// The timeline of the traced iteration (sim/output/trace.hpp writes it as a Chrome trace).
struct RunTrace {
  int iteration = -1;                         // -1: no trace was recorded
  std::vector<std::string> phase_names;       // by PhaseId
  std::vector<std::vector<TraceSlice>> ranks; // [rank]
};

// One row of results.csv: a phase of one iteration (phase "total" for the whole iteration).
struct PhaseRow {
  int iteration = 0;
  std::string phase;
  Seconds sim_time = 0; // max over ranks of the time spent in the phase
  std::uint64_t msgs_sent_max = 0;
  double bytes_sent_max = 0;
  double bytes_sent_mean = 0;
  double bytes_recv_max = 0;
  double bytes_recv_mean = 0;
  bool has_model = false; // the closed form is given on "total" rows
  Seconds model_time = 0;
  double model_bytes_per_rank = 0;
  // Sparse algorithms, on "total" rows: selection counts and the COO lower bound 2k(P-1)/P words in bytes.
  bool has_sparse = false;
  std::uint64_t k = 0;
  std::uint64_t local_selected_max = 0; // m: the largest local selection
  std::uint64_t local_selected_sum = 0;
  std::uint64_t global_selected = 0; // g, where the algorithm re-selects globally
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
  bool verified = false;       // the result was checked against a reference
  std::string verification;    // what was checked
  double verify_max_error = 0; // largest |result - reference| / tolerance seen (<= 1 passes)
  Seconds wall_time = 0;
  std::vector<Seconds> iteration_wall; // host seconds from the start of the run to rank 0's end of each iteration
  std::vector<Seconds> selection_wall; // host seconds of each iteration spent in the selection stage (0: dense)
  std::vector<Seconds> selection_shared_wall; // the part of it spent on what ranks share (candidates' floor, plan)
  std::uint64_t peak_rss_bytes = 0;
  std::uint64_t messages = 0;   // simulated messages, all iterations
  int completed_iterations = 0; // fewer than configured when the run stopped early (partial results)
  std::string stop_reason;      // why, for partial results
  bool interrupted = false;     // stopped by SIGINT (RunOptions::interrupted), not by the wall-clock limit
  std::vector<LinkRow> links;   // links.csv: the SimGrid links that carried bytes
  bool real_run = false;        // ran on real MPI (sparsim-mpi): no links observed, no links.csv
  // The network model's own manifest fields: what ran (SimGrid's version only where SimGrid ran) and its
  // counters (the link-level model's rank_parks, adaptive routing's nonminimal_routes).
  nlohmann::json network_fields = nlohmann::json::object();
  RunTrace trace; // the traced iteration's timeline (none unless asked for)
  // selection.residual "mean_field": the shared state's bytes, and its carried stores (entries per rank at most,
  // the largest store offered, the entries evicted beyond the cap over the run).
  struct MeanFieldMemory {
    std::uint64_t state_bytes = 0, carried_cap = 0, carried_largest = 0, carried_evicted = 0, piece_cache_largest = 0;
  };
  std::optional<MeanFieldMemory> mean_field;
};

} // namespace sparsim
