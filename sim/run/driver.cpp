#include "sim/run/driver.hpp"

#include "algorithms/registry.hpp"
#include "sim/run/link_labels.hpp"
#include "sim/run/selection.hpp"

#include <simgrid/s4u/Actor.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <optional>
#include <fmt/format.h>
#include <sys/resource.h>
#include <thread>

namespace sparsim {
namespace {

// Summing P floats in any order errs by at most (P-1) u sum|x| (u = 2^-24); the checks allow twice that.
double rounding_tolerance(int ranks, double abs_sum) { return ranks * 0x1.0p-23 * abs_sum + 1e-30; }

// Dense results against the direct sum of all ranks' gradients, computed once per iteration.
class DenseVerifier {
public:
  explicit DenseVerifier(const ExperimentConfig& config) : config_(config) {}

  // Returns max |result - reference| / tolerance over the vector (<= 1 passes).
  double check(int iteration, const DenseVector& result)
  {
    if (iteration != iteration_) {
      build_reference(iteration);
      iteration_ = iteration;
    }
    double worst = 0;
    for (std::size_t i = 0; i < result.values.size(); ++i)
      worst = std::max(worst, std::fabs(result.values[i] - sum_[i]) / rounding_tolerance(config_.ranks, abs_sum_[i]));
    return worst;
  }

private:
  void build_reference(int iteration)
  {
    const std::size_t n = config_.workload.n;
    sum_.assign(n, 0.0);
    abs_sum_.assign(n, 0.0);
    std::vector<float> gradient(n);
    for (RankId r = 0; r < config_.ranks; ++r) {
      config_.gradients->generate(r, iteration, gradient);
      for (std::size_t i = 0; i < n; ++i) {
        sum_[i] += gradient[i];
        abs_sum_[i] += std::fabs(gradient[i]);
      }
    }
  }

  const ExperimentConfig& config_;
  int iteration_ = -1;
  std::vector<double> sum_;
  std::vector<double> abs_sum_;
};

// Sparse results against the local selections: every rank holds the same U, and U's values are the sums
// of the local selections (on the union of their indices for union-sum algorithms).
class SparseVerifier {
public:
  SparseVerifier(int ranks, std::uint64_t n, SparseAllreduce::ResultSemantics semantics)
      : ranks_(ranks), n_(n), semantics_(semantics)
  {
  }

  // Each rank reports once per iteration; the last one checks. Returns the error ratio (<= 1 passes).
  double report(const SparseVector& selection, const std::shared_ptr<const SparseVector>& result)
  {
    if (reported_ == 0) {
      sum_.assign(n_, 0.0);
      abs_sum_.assign(n_, 0.0);
      selected_.assign(n_, false);
      first_result_ = result;
    } else if (result != first_result_ && !(*result == *first_result_)) {  // one shared U is trivially the same
      throw std::runtime_error("verification failed: ranks ended the iteration with different results");
    }
    for (std::size_t e = 0; e < selection.size(); ++e) {
      sum_[selection.indices[e]] += selection.values[e];
      abs_sum_[selection.indices[e]] += std::fabs(selection.values[e]);
      selected_[selection.indices[e]] = true;
    }
    if (++reported_ < ranks_)
      return 0;
    reported_ = 0;
    return check();
  }

private:
  double check() const
  {
    if (semantics_ == SparseAllreduce::ResultSemantics::reselected)
      return 0;
    double worst = 0;
    const SparseVector& result = *first_result_;
    for (std::size_t e = 0; e < result.size(); ++e) {
      const Index i = result.indices[e];
      if (!selected_[i])
        return 1e300;  // U holds an index nobody selected
      worst = std::max(worst, std::fabs(result.values[e] - sum_[i]) / rounding_tolerance(ranks_, abs_sum_[i]));
    }
    if (semantics_ == SparseAllreduce::ResultSemantics::union_sum &&
        static_cast<std::size_t>(std::count(selected_.begin(), selected_.end(), true)) != result.size())
      return 1e300;  // a selected index is missing from U
    return worst;
  }

  int ranks_;
  std::uint64_t n_;
  SparseAllreduce::ResultSemantics semantics_;
  int reported_ = 0;
  std::shared_ptr<const SparseVector> first_result_;
  std::vector<double> sum_;
  std::vector<double> abs_sum_;
  std::vector<bool> selected_;
};

std::uint64_t peak_rss_bytes()
{
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;
}

// What one rank records about one iteration.
struct RankIteration {
  std::vector<PhaseStats> phases;
  Seconds time = 0;
  std::uint64_t local_selected = 0;
  SparseReport sparse;
  std::uint64_t result_nnz = 0;
};

// Aggregates the per-rank records of one iteration into results.csv rows.
void add_iteration_rows(int iteration, const std::vector<RankIteration>& ranks, const ExperimentConfig& config,
                        const std::vector<std::string>& phase_names, const CostInputs& cost, const ClosedForm& model,
                        RunOutput& out)
{
  auto aggregate = [&](const std::string& phase, auto&& stats_of) {
    PhaseRow row;
    row.iteration = iteration;
    row.phase = phase;
    double sent_sum = 0, recv_sum = 0;
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      const PhaseStats s = stats_of(r);
      row.sim_time = std::max(row.sim_time, s.time);
      row.msgs_sent_max = std::max(row.msgs_sent_max, s.msgs_sent);
      row.bytes_sent_max = std::max(row.bytes_sent_max, static_cast<double>(s.bytes_sent));
      row.bytes_recv_max = std::max(row.bytes_recv_max, static_cast<double>(s.bytes_recv));
      sent_sum += static_cast<double>(s.bytes_sent);
      recv_sum += static_cast<double>(s.bytes_recv);
    }
    row.bytes_sent_mean = sent_sum / static_cast<double>(ranks.size());
    row.bytes_recv_mean = recv_sum / static_cast<double>(ranks.size());
    return row;
  };

  for (PhaseId phase = 0; phase < phase_names.size(); ++phase) {
    PhaseRow row = aggregate(phase_names[phase], [&](std::size_t r) {
      return phase < ranks[r].phases.size() ? ranks[r].phases[phase] : PhaseStats{};
    });
    if (row.sim_time > 0 || row.msgs_sent_max > 0)
      out.rows.push_back(row);
  }
  PhaseRow total = aggregate("total", [&](std::size_t r) {
    PhaseStats sum;
    for (const auto& s : ranks[r].phases) {
      sum.msgs_sent += s.msgs_sent;
      sum.msgs_recv += s.msgs_recv;
      sum.bytes_sent += s.bytes_sent;
      sum.bytes_recv += s.bytes_recv;
    }
    sum.time = ranks[r].time;
    return sum;
  });
  total.has_model = true;
  total.model_time = model.time;
  total.model_bytes_per_rank = model.bytes_sent_per_rank;
  if (config.algorithm_kind == "sparse") {
    total.has_sparse = true;
    total.k = cost.k;
    for (const auto& r : ranks) {
      total.local_selected_max = std::max(total.local_selected_max, r.local_selected);
      total.local_selected_sum += r.local_selected;
      total.global_selected = std::max(total.global_selected, r.sparse.global_selected);
      total.result_nnz = std::max(total.result_nnz, r.result_nnz);
      total.reevaluation = total.reevaluation || r.sparse.reevaluation;
    }
    const double P = config.ranks;
    total.lower_bound_bytes = cost.k * (P - 1) / P * (cost.wire.index_bytes + cost.wire.value_bytes);
  }
  out.rows.push_back(total);

  for (std::size_t r = 0; r < ranks.size(); ++r)
    for (PhaseId phase = 0; phase < ranks[r].phases.size(); ++phase) {
      const PhaseStats& s = ranks[r].phases[phase];
      if (s.msgs_sent || s.msgs_recv || s.time > 0)
        out.rank_rows.push_back({iteration, static_cast<RankId>(r), phase_names[phase], s});
    }
}

// Everything the rank actors share during a run.
struct RunState {
  const ExperimentConfig& config;
  World& world;
  std::vector<std::vector<RankIteration>> records;  // [iteration][rank]
  int threads = 1;                                  // for the selection stage
  double verify_max_error = 0;
  bool show_progress = true;
  std::chrono::steady_clock::time_point wall_start;
  std::chrono::steady_clock::time_point last_progress;
  std::vector<Seconds> iteration_wall;  // see RunOutput
  Seconds wall_limit = 0;               // 0: none
  int stopped_at = -1;                  // the first iteration not run (wall-clock limit), -1 while running

  // Called by rank 0 between the barriers that start `iteration`: stop there if the limit has passed.
  void check_wall_limit(int iteration)
  {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    if (wall_limit > 0 && elapsed > wall_limit && stopped_at < 0)
      stopped_at = iteration;
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
    const auto now = std::chrono::steady_clock::now();
    if (rank == 0)
      iteration_wall.push_back(std::chrono::duration<double>(now - wall_start).count());
    if (!show_progress || rank != 0 || (now - last_progress < std::chrono::seconds(2) && iteration + 1 != config.iterations))
      return;
    fmt::print(stderr, "  iteration {}/{} done: simulated {:.6g} s, wall {:.1f} s\n", iteration + 1,
               config.iterations, simgrid::s4u::Engine::get_clock(),
               std::chrono::duration<double>(now - wall_start).count());
    last_progress = now;
  }
};

// Starts an iteration with all ranks aligned at the same simulated time. Between two zero-cost barriers rank 0
// does what every rank must see before going on: the wall-clock limit decision and `prepare` (may be empty).
// Returns the iteration's start time, or nothing when the run stops before this iteration (every rank
// returns nothing for the same iteration). Counters need no reset: every message of an iteration is posted
// and harvested within it (a fast rank may post to a slow one before the slow one leaves the barrier).
template <class Prepare>
std::optional<Seconds> begin_iteration(RunState& run, Communicator& comm, int iteration, Prepare&& prepare)
{
  run.world.align_ranks();
  if (comm.rank() == 0) {
    run.check_wall_limit(iteration);
    if (run.stopped_at < 0)
      prepare();
  }
  run.world.align_ranks();
  if (run.stopped_at >= 0)
    return std::nullopt;
  comm.restart_phase_clock();
  comm.start_iteration(iteration);
  return simgrid::s4u::Engine::get_clock();
}

void end_iteration(RunState& run, Communicator& comm, Seconds start, RankIteration& record)
{
  comm.flush_phase_time();
  comm.finish_iteration();
  record.time = simgrid::s4u::Engine::get_clock() - start;
  record.phases = run.world.take_stats(comm.rank());
}

// Spends `duration` of simulated time in `phase` (nothing when it is zero).
void spend(Communicator& comm, std::string_view phase, Seconds duration)
{
  if (duration > 0) {
    auto scope = comm.phase(phase);
    simgrid::s4u::this_actor::sleep_for(duration);
  }
}

// The forward and backward pass that produce the iteration's gradient, before any communication (phase
// "compute"; nothing with compute.training "none").
void charge_training_step(const ComputeModel& model, Communicator& comm)
{
  spend(comm, "compute", model.forward_backward);
}

// One copy of the dense gradient between device and host (phase "staging"; nothing without staging).
void charge_staging_copy(const ExperimentConfig& config, Communicator& comm)
{
  spend(comm, "staging", config.compute.staging_copy_time(config.workload.n));
}

// The dense ring allreduce of the warm-up iterations.
std::unique_ptr<DenseAllreduce> make_dense_ring_allreduce()
{
  const nlohmann::json spec = {{"name", "dense_ring"}};
  auto algorithm = parse_algorithm(JsonReader(spec, "warmup"));
  return std::unique_ptr<DenseAllreduce>(dynamic_cast<DenseAllreduce*>(algorithm.release()));
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
  charge_staging_copy(config, comm);  // the gradient to the host
  DenseVector data;
  data.length = config.workload.n;
  if (config.workload.data == "real") {
    data.values.resize(data.length);
    config.gradients->generate(rank, it, data.values);
  }
  algorithm.allreduce(comm, data);
  charge_staging_copy(config, comm);  // the sum back to the device
  end_iteration(run, comm, start, run.records[it][rank]);
  if (rank == 0)
    config.gradients->apply_dense_update(it, data.values, config.ranks);
  if (config.verify)
    run.note_verification(verifier.check(it, data), rank, it);
  run.progress(rank, it);
  return true;
}

// The rank loop of a dense allreduce: gradient in, sum out.
void run_dense_rank(RunState& run, DenseVerifier& verifier, RankId rank)
{
  const auto& algorithm = dynamic_cast<const DenseAllreduce&>(*run.config.algorithm);
  Communicator comm(run.world, rank);
  for (int it = 0; it < run.config.iterations; ++it)
    if (!dense_iteration(run, comm, verifier, algorithm, it))
      return;
}

// The local side of a sparse iteration for every rank: acc = residual + gradient (or the gradient alone
// without a residual) and the local selection. It depends on nothing but the rank's own state, so it runs
// for all ranks at once, spread over host threads, while the simulation waits at zero simulated cost; the
// results do not depend on the number of threads.
class SelectionStage {
public:
  explicit SelectionStage(const ExperimentConfig& config)
      : config_(config)
      , keep_residual_(config.selection.residual == "dense")
      , residuals_(keep_residual_ ? config.ranks : 0)
      , selectors_(config.ranks, LocalSelector(config.selection))
      , prepared_(config.ranks)
  {
  }

  // Prepares every rank's selection for `iteration` with up to `threads` host threads.
  void prepare(int iteration, int threads)
  {
    if (!config_.gradients->concurrent_generate())
      threads = 1;
    threads = std::max(1, std::min(threads, config_.ranks));
    std::vector<std::exception_ptr> failures(threads);
    auto work = [&](int first) {
      try {
        std::vector<float> gradient(config_.workload.n);
        for (RankId rank = first; rank < config_.ranks; rank += threads)
          prepare_rank(rank, iteration, gradient);
      } catch (...) {
        failures[first] = std::current_exception();
      }
    };
    std::vector<std::thread> helpers;
    for (int t = 1; t < threads; ++t)
      helpers.emplace_back(work, t);
    work(0);
    for (auto& helper : helpers)
      helper.join();
    for (auto& failure : failures)
      if (failure)
        std::rethrow_exception(failure);
  }

  // The rank's prepared selection, charged in simulated time by the compute model (phase "selection").
  SparseVector take_and_charge(Communicator& comm)
  {
    Prepared& prepared = prepared_[comm.rank()];
    const ComputeModel& model = config_.compute;
    Seconds cost = 0;
    if (model.selection == "memory_bandwidth")
      cost = static_cast<double>(prepared.traffic.bytes_read + prepared.traffic.bytes_written) / model.memory_bandwidth;
    else if (model.selection == "measured")
      cost = prepared.host_seconds * model.measured_scale;
    spend(comm, "selection", cost);
    return std::move(prepared.selection);
  }

  // Error feedback after the collective: the residual keeps acc minus what the algorithm consumed.
  void consume(RankId rank, const SparseVector& selection, const SparseVector& result,
               SparseAllreduce::ResidualRule rule)
  {
    if (keep_residual_)
      consume_selection(residuals_[rank], selection, result, rule);
  }

private:
  struct Prepared {
    SparseVector selection;
    SelectionTraffic traffic;
    Seconds host_seconds = 0;  // the host time the selection took (compute "measured")
  };

  void prepare_rank(RankId rank, int iteration, std::vector<float>& gradient)
  {
    config_.gradients->generate(rank, iteration, gradient);
    std::span<const float> acc = gradient;
    if (keep_residual_) {
      std::vector<float>& residual = residuals_[rank];
      residual.resize(config_.workload.n, 0.0f);
      for (std::size_t i = 0; i < residual.size(); ++i)
        residual[i] += gradient[i];
      acc = residual;
    }
    Prepared& prepared = prepared_[rank];
    prepared.traffic = {};
    const auto wall_start = std::chrono::steady_clock::now();
    prepared.selection = selectors_[rank].select(acc, config_.workload.k, iteration, prepared.traffic);
    prepared.host_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    // The kernels reserve generously; a selection lives through the iteration beside P - 1 others.
    prepared.selection.indices.shrink_to_fit();
    prepared.selection.values.shrink_to_fit();
  }

  const ExperimentConfig& config_;
  bool keep_residual_;
  std::vector<std::vector<float>> residuals_;  // [rank], allocated at the first sparse iteration
  std::vector<LocalSelector> selectors_;       // [rank]: the reused thresholds
  std::vector<Prepared> prepared_;             // [rank]: this iteration's selections
};

// The rank loop of a sparse allreduce with error feedback: acc = residual + gradient; select locally;
// reduce; the residual keeps acc minus what the algorithm's rule says was consumed.
void run_sparse_rank(RunState& run, SelectionStage& stage, SparseVerifier& verifier, DenseVerifier& warmup_verifier,
                     RankId rank)
{
  const ExperimentConfig& config = run.config;
  const auto& algorithm = dynamic_cast<const SparseAllreduce&>(*config.algorithm);
  Communicator comm(run.world, rank);
  const std::uint64_t n = config.workload.n;
  const std::uint64_t k = config.workload.k;
  auto state = algorithm.make_rank_state(rank, config.ranks, n);

  // Dense warm-up iterations (iteration counters include them): a ring allreduce of the gradient itself.
  const auto warmup = make_dense_ring_allreduce();
  for (int it = 0; it < std::min(config.iterations, config.selection.warmup_iterations); ++it)
    if (!dense_iteration(run, comm, warmup_verifier, *warmup, it))
      return;

  for (int it = config.selection.warmup_iterations; it < config.iterations; ++it) {
    // Rank 0 prepares every rank's selection while the others wait at the second barrier.
    const std::optional<Seconds> begun = begin_iteration(run, comm, it, [&] { stage.prepare(it, run.threads); });
    if (!begun)
      return;
    const Seconds start = *begun;
    charge_training_step(config.compute, comm);
    charge_staging_copy(config, comm);  // the gradient to the host
    const auto selection = std::make_shared<const SparseVector>(stage.take_and_charge(comm));

    RankIteration& record = run.records[it][rank];
    const SparseInput input{it, n, k, selection, it % config.selection.reevaluate_every == 0};
    const std::shared_ptr<const SparseVector> result = algorithm.allreduce(comm, input, state.get(), record.sparse);
    charge_staging_copy(config, comm);  // the result, as a dense vector, back to the device
    end_iteration(run, comm, start, record);
    record.local_selected = selection->size();
    record.result_nnz = result->size();

    stage.consume(rank, *selection, *result, algorithm.residual_rule());
    if (rank == 0)
      config.gradients->apply_update(it, *result, config.ranks);
    if (config.verify)
      run.note_verification(verifier.report(*selection, result), rank, it);
    run.progress(rank, it);
  }
}

}  // namespace

void consume_selection(std::vector<float>& acc, const SparseVector& selection, const SparseVector& result,
                       SparseAllreduce::ResidualRule rule)
{
  const bool keep_lost = rule == SparseAllreduce::ResidualRule::selected_in_result;
  std::size_t in_result = 0;
  for (std::size_t e = 0; e < selection.size(); ++e) {
    const Index i = selection.indices[e];
    if (keep_lost) {
      while (in_result < result.size() && result.indices[in_result] < i)
        ++in_result;
      if (in_result == result.size() || result.indices[in_result] != i)
        continue;  // lost at the global selection: stays in the residual
    }
    acc[i] = 0.0f;
  }
}

std::vector<std::string> simgrid_options(const NetworkOptions& network)
{
  return {
      "--cfg=network/model:" + network.model,
      std::string("--cfg=network/crosstraffic:") + (network.crosstraffic ? "1" : "0"),
      "--log=root.thresh:warning",
      "--log=xbt_cfg.thresh:warning",
  };
}

simgrid::s4u::Engine& start_engine(const NetworkOptions& network)
{
  static std::unique_ptr<simgrid::s4u::Engine> engine;
  if (!engine) {
    // The engine takes argc/argv; hand it the network model options.
    std::vector<std::string> args = {"sparsim"};
    for (const auto& option : simgrid_options(network))
      args.push_back(option);
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    int argc = static_cast<int>(argv.size());
    engine = std::make_unique<simgrid::s4u::Engine>(&argc, argv.data());
  }
  return *engine;
}

std::vector<simgrid::s4u::Host*> build_rank_hosts(const ExperimentConfig& config)
{
  const std::vector<simgrid::s4u::Host*> nodes = config.topology->build();
  std::vector<simgrid::s4u::Host*> rank_hosts;
  for (std::size_t node : place_ranks(config.placement, config.ranks, nodes.size()))
    rank_hosts.push_back(nodes[node]);
  return rank_hosts;
}

RunOutput run_experiment(const ExperimentConfig& config, const RunOptions& options)
{
  const bool show_progress = options.show_progress;
  const auto wall_start = std::chrono::steady_clock::now();

  simgrid::s4u::Engine& engine = start_engine(config.network);
  const std::vector<simgrid::s4u::Host*> rank_hosts = build_rank_hosts(config);

  RunOutput out;
  out.routes = summarize_routes(rank_hosts);
  out.cost_inputs.ranks = config.ranks;
  out.cost_inputs.n = config.workload.n;
  out.cost_inputs.k = config.workload.k;
  out.cost_inputs.wire = config.workload.wire;
  out.cost_inputs.alpha = out.routes.latency_max;
  out.cost_inputs.seconds_per_byte = out.routes.bandwidth_min > 0 ? 1.0 / out.routes.bandwidth_min : 0.0;
  out.closed_form = config.algorithm->closed_form(out.cost_inputs);

  World world(rank_hosts, config.workload.wire);
  RunState run{config, world, {}, options.threads, 0, show_progress, wall_start, wall_start, {}, options.wall_limit, -1};
  world.set_reduction_bandwidth(config.compute.charged_reduction_bandwidth());
  world.trace_iteration(options.trace_iteration);
  run.records.assign(config.iterations, std::vector<RankIteration>(config.ranks));
  DenseVerifier dense_verifier(config);
  std::unique_ptr<SparseVerifier> sparse_verifier;
  std::unique_ptr<SelectionStage> selection_stage;
  if (const auto* sparse = dynamic_cast<const SparseAllreduce*>(config.algorithm.get())) {
    sparse_verifier = std::make_unique<SparseVerifier>(config.ranks, config.workload.n, sparse->result_semantics());
    selection_stage = std::make_unique<SelectionStage>(config);
  }

  std::exception_ptr failure;
  int finished_ranks = 0;
  for (RankId rank = 0; rank < config.ranks; ++rank) {
    simgrid::s4u::Actor::create(fmt::format("rank{}", rank), rank_hosts[rank], [&, rank] {
      try {
        if (sparse_verifier)
          run_sparse_rank(run, *selection_stage, *sparse_verifier, dense_verifier, rank);
        else
          run_dense_rank(run, dense_verifier, rank);
        ++finished_ranks;
      } catch (...) {
        if (!failure)
          failure = std::current_exception();
        simgrid::s4u::Actor::kill_all();
      }
    });
  }
  engine.run();

  if (failure)
    std::rethrow_exception(failure);
  if (finished_ranks != config.ranks)
    throw std::runtime_error(fmt::format("deadlock: {} of {} ranks never finished (a receive without a matching "
                                         "send, or a send without a matching receive)",
                                         config.ranks - finished_ranks, config.ranks));

  out.verified = config.verify;
  if (!sparse_verifier)
    out.verification = "every rank's result equals the direct sum of all gradients";
  else if (dynamic_cast<const SparseAllreduce&>(*config.algorithm).result_semantics() ==
           SparseAllreduce::ResultSemantics::reselected)
    out.verification = "every rank holds the same result (the re-selection tree is checked by the tests)";
  else
    out.verification = "every rank's result equals the sum of the local selections on its indices";
  out.verify_max_error = run.verify_max_error;
  out.completed_iterations = run.stopped_at >= 0 ? run.stopped_at : config.iterations;
  if (run.stopped_at >= 0)
    out.stop_reason = fmt::format("the wall-clock limit of {} s passed before iteration {}", options.wall_limit,
                                  run.stopped_at);
  for (int it = 0; it < out.completed_iterations; ++it)
    add_iteration_rows(it, run.records[it], config, world.phase_names(), out.cost_inputs, out.closed_form, out);
  for (const auto& row : out.rank_rows)
    out.messages += row.stats.msgs_sent;
  out.iteration_wall = run.iteration_wall;
  out.links = label_link_loads(world.link_loads(), config.topology->graph());
  if (options.trace_iteration >= 0)
    out.trace = {options.trace_iteration, world.phase_names(), world.take_trace()};
  out.wall_time = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  out.peak_rss_bytes = peak_rss_bytes();
  return out;
}

}  // namespace sparsim
