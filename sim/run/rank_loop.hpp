// The rank loop: what one rank's actor does in each iteration (sim/run/driver.hpp starts one per rank).
//
// Each iteration starts with all ranks aligned at the same simulated time (two zero-cost barriers), so an
// iteration's time is that of the rank's work alone: the training step (phase "compute"), host staging,
// for sparse algorithms the local selection (phase "selection"), and the collective.
#pragma once

#include "sim/comm/communicator.hpp"
#include "sim/comm/process_group.hpp"
#include "sim/run/config.hpp"
#include "sim/run/progress.hpp"
#include "sim/run/selection_stage.hpp"
#include "sim/run/verification.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <fmt/format.h>
#include <vector>

namespace sparsim {

// What one rank records about one iteration.
struct RankIteration {
  std::vector<PhaseStats> phases;
  Seconds time = 0;
  std::uint64_t local_selected = 0;
  SparseReport sparse;
  std::uint64_t result_nnz = 0;
  // One rank per process (a real MPI run): the messages this rank sent each rank, as their receive counts
  // ([rank][phase], empty otherwise); process 0 adds them to the receivers' records (gather_records).
  std::vector<std::vector<PhaseStats>> delivered;
};

// Everything the rank actors share during a run.
struct RunState {
  const ExperimentConfig& config;
  World& world;
  std::vector<std::vector<RankIteration>> records = {}; // [iteration][rank], an entry per iteration started
  int threads = 1;                                      // for the selection stage
  double verify_max_error = 0;
  RunProgress* display = nullptr; // what the run shows on standard error (null: nothing)
  std::chrono::steady_clock::time_point wall_start;
  std::vector<Seconds> iteration_wall = {}; // see RunOutput
  std::vector<Seconds> selection_wall = {}; // see RunOutput; [iteration], sized by the driver
  std::vector<Seconds> selection_shared_wall = {};
  Seconds wall_limit = 0;                         // 0: none
  const std::atomic<bool>* interrupted = nullptr; // non-zero once the run is to stop (SIGINT)
  int stopped_at = -1; // the first iteration not run (wall-clock limit or interrupt), -1 while running
  bool stopped_by_interrupt = false;
  ProcessGroup* processes = nullptr; // one rank per process (a real MPI run), else null: every rank runs here

  // The rank that does, between the barriers that start an iteration, what every rank here must see: rank 0, or
  // with one rank per process that rank.
  RankId preparing_rank() const { return processes ? processes->rank() : 0; }

  // Called by the preparing rank between the barriers that start `iteration`: stop there if the limit has passed
  // or the run was interrupted.
  void check_stop(int iteration)
  {
    if (stopped_at >= 0)
      return;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    if (interrupted && interrupted->load()) {
      stopped_at = iteration;
      stopped_by_interrupt = true;
    } else if (wall_limit > 0 && elapsed > wall_limit) {
      stopped_at = iteration;
    }
  }

  void note_verification(double error, RankId rank, int iteration)
  {
    verify_max_error = std::max(verify_max_error, error);
    if (error > 1.0)
      throw std::runtime_error(fmt::format("verification failed: rank {} iteration {}: the result differs from the "
                                           "reference by {:.3g} times the rounding tolerance",
                                           rank, iteration, error));
  }
  void progress(RankId rank, int iteration)
  {
    if (rank != 0)
      return;
    iteration_wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count());
    if (display)
      display->iteration_finished(iteration, world.transport().now());
  }
};

// The dense ring allreduce of a sparse run's warm-up iterations (selection.warmup_iterations).
std::unique_ptr<DenseAllreduce> make_warmup_allreduce();

// The rank loop of a dense allreduce: gradient in, sum out.
void run_dense_rank(RunState& run, DenseVerifier& verifier, RankId rank);

// The rank loop of a sparse allreduce with error feedback: acc = residual + gradient; select locally;
// reduce; the residual keeps acc minus what the algorithm's rule says was consumed. Dense warm-up
// iterations (selection.warmup_iterations) run the dense ring and are checked by `warmup_verifier`.
void run_sparse_rank(RunState& run, SelectionStage& stage, SparseVerifier& verifier, DenseVerifier& warmup_verifier,
                     RankId rank);

} // namespace sparsim
