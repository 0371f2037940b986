#include "sim/run/rank_loop.hpp"

#include "algorithms/registry.hpp"
#include "sim/run/gathered_records.hpp"

#include <chrono>
#include <fmt/format.h>
#include <optional>

namespace sparsim {
namespace {

// Starts an iteration with all ranks aligned at the same simulated time. Between two zero-cost barriers the
// preparing rank (rank 0, or each process's own) does what every rank here must see before going on: the wall-clock
// limit decision and `prepare` (may be empty). Returns the iteration's start time, or nothing when the run stops before
// this iteration (every rank returns nothing for the same iteration). Counters need no reset: every message of an
// iteration is posted and harvested within it (a fast rank may post to a slow one before the slow one leaves the
// barrier).
template <class Prepare>
std::optional<Seconds> begin_iteration(RunState& run, Communicator& comm, int iteration, Prepare&& prepare)
{
  run.world.align_ranks(comm.rank());
  if (comm.rank() == run.preparing_rank()) {
    run.check_stop(iteration);
    if (run.stopped_at < 0) {
      run.records.emplace_back(run.config.ranks); // this iteration's records, grown as iterations start
      prepare();
    }
  }
  run.world.align_ranks(comm.rank());
  if (run.stopped_at >= 0)
    return std::nullopt;
  comm.restart_phase_clock();
  comm.start_iteration(iteration);
  return comm.now();
}

void end_iteration(RunState& run, Communicator& comm, Seconds start, RankIteration& record)
{
  comm.flush_phase_time();
  comm.finish_iteration();
  record.time = comm.now() - start;
  record.phases = run.world.take_stats(comm.rank());
  if (run.processes) // the receive counts this rank's sends delivered (Transport::carries_phase)
    for (RankId r = 0; r < run.config.ranks; ++r)
      record.delivered.push_back(r == comm.rank() ? std::vector<PhaseStats>() : run.world.take_stats(r));
}

// The forward and backward pass that produce the iteration's gradient, before any communication (phase
// "compute"; nothing with compute.training "none").
void charge_training_step(const ComputeModel& model, Communicator& comm)
{
  comm.spend("compute", model.forward_backward);
}

// One copy of the dense gradient between device and host (phase "staging"; nothing without staging).
void charge_staging_copy(const ExperimentConfig& config, Communicator& comm)
{
  comm.spend("staging", config.compute.staging_copy_time(config.workload.n));
}

// One dense iteration: the rank's gradient in, the sum out (and into a closed-loop source).
// Returns false when the run stopped before the iteration.
bool dense_iteration(RunState& run, Communicator& comm, DenseVerifier& verifier, const DenseAllreduce& algorithm,
                     int it)
{
  const ExperimentConfig& config = run.config;
  const RankId rank = comm.rank();
  const std::optional<Seconds> begun = begin_iteration(run, comm, it, [] {});
  if (!begun)
    return false;
  const Seconds start = *begun;
  charge_training_step(config.compute, comm);
  charge_staging_copy(config, comm); // the gradient to the host
  DenseVector data;
  data.length = config.workload.n;
  if (config.workload.data == DataMode::real) {
    data.values.resize(data.length);
    config.gradients->generate(rank, it, data.values);
  }
  algorithm.allreduce(comm, data);
  charge_staging_copy(config, comm); // the sum back to the device
  end_iteration(run, comm, start, run.records[it][rank]);
  if (rank == 0)
    config.gradients->apply_dense_update(it, data.values, config.ranks);
  if (config.verify)
    run.note_verification(verifier.check(it, data), rank, it);
  run.progress(rank, it);
  return true;
}

} // namespace

std::unique_ptr<DenseAllreduce> make_warmup_allreduce()
{
  const nlohmann::json spec = {{"name", "dense_ring"}};
  auto algorithm = parse_algorithm(JsonReader(spec, "warmup"));
  return std::unique_ptr<DenseAllreduce>(dynamic_cast<DenseAllreduce*>(algorithm.release()));
}

void run_dense_rank(RunState& run, DenseVerifier& verifier, RankId rank)
{
  const DenseAllreduce& algorithm = run.config.dense_algorithm();
  Communicator comm(run.world, rank);
  for (int it = 0; it < run.config.iterations; ++it)
    if (!dense_iteration(run, comm, verifier, algorithm, it))
      return;
}

void run_sparse_rank(RunState& run, SelectionStage& stage, SparseVerifier& verifier, DenseVerifier& warmup_verifier,
                     RankId rank)
{
  const ExperimentConfig& config = run.config;
  const SparseAllreduce& algorithm = *config.sparse_algorithm();
  Communicator comm(run.world, rank);
  const std::uint64_t n = config.workload.n;
  const std::uint64_t k = config.workload.k;
  auto state = algorithm.make_rank_state(rank, config.ranks, n);
  const bool within_collective = config.selects_within_collective();
  std::vector<float> acc_before; // a real run's check of a within-collective selection: this rank's acc

  // Dense warm-up iterations (iteration counters include them): a ring allreduce of the gradient itself.
  const auto warmup = make_warmup_allreduce();
  for (int it = 0; it < std::min(config.iterations, config.selection.warmup_iterations); ++it)
    if (!dense_iteration(run, comm, warmup_verifier, *warmup, it))
      return;

  for (int it = config.selection.warmup_iterations; it < config.iterations; ++it) {
    // The preparing rank prepares the selection of every rank here while the others wait at the second barrier.
    const std::optional<Seconds> begun = begin_iteration(run, comm, it, [&] {
      const auto wall_before = std::chrono::steady_clock::now();
      stage.prepare(it, run.threads);
      run.selection_wall[it] = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_before).count();
      run.selection_shared_wall[it] = stage.shared_seconds();
      if (config.verify && within_collective) { // the accs the collective will be handed, before it changes them
        if (run.processes)                      // this process's rank only: gathered with the iteration's check
          acc_before.assign(stage.acc_for_collective(rank).begin(), stage.acc_for_collective(rank).end());
        else
          verifier.record_accs([&](RankId r) { return std::span<const float>(stage.acc_for_collective(r)); });
      }
    });
    if (!begun)
      return;
    const Seconds start = *begun;
    charge_training_step(config.compute, comm);
    charge_staging_copy(config, comm); // the gradient to the host
    const auto selection = std::make_shared<const SparseVector>(stage.take_and_charge(comm));

    RankIteration& record = run.records[it][rank];
    const SparseInput input{.iteration = it,
                            .n = n,
                            .k = k,
                            .local_selection = selection,
                            .reevaluation = it % config.selection.reevaluate_every == 0,
                            .exactly_k = !within_collective && config.selection.exact_top_k(),
                            .acc = stage.acc_for_collective(rank)};
    const std::shared_ptr<const SparseVector> result = algorithm.allreduce(comm, input, state.get(), record.sparse);
    charge_staging_copy(config, comm); // the result, as a dense vector, back to the device
    end_iteration(run, comm, start, record);
    record.local_selected = selection->size();
    record.result_nnz = result->size();

    stage.consume(rank, *selection, result, algorithm.residual_rule(), record.sparse.reevaluation);
    if (rank == 0)
      config.gradients->apply_update(it, *result, config.ranks);
    if (config.verify)
      run.note_verification(run.processes
                                ? gathered_sparse_report(*run.processes, run.world.wire(), verifier, *selection, result,
                                                         acc_before, stage.acc_for_collective(rank))
                                : verifier.report(*selection, result, stage.acc_for_collective(rank)),
                            rank, it);
    run.progress(rank, it);
  }
}

} // namespace sparsim
