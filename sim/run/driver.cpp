#include "sim/run/driver.hpp"

#include "sim/network/models/network_model.hpp"
#include "sim/run/gathered_records.hpp"
#include "sim/run/link_labels.hpp"
#include "sim/run/rank_loop.hpp"

#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <memory>
#include <sys/resource.h>

namespace sparsim {
namespace {

std::uint64_t peak_rss_bytes()
{
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;
}

// Aggregates the per-rank records of one iteration into results.csv rows.
void add_iteration_rows(int iteration, const std::vector<RankIteration>& ranks, const ExperimentConfig& config,
                        const PhaseNames& phases, const CostInputs& cost, const ClosedForm& model, RunOutput& out)
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

  const std::vector<std::string>& phase_names = phases.names();
  const std::vector<PhaseId> phase_order = phases.output_order();
  for (PhaseId phase : phase_order) {
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
  if (config.is_sparse()) {
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
    for (PhaseId phase : phase_order) {
      if (phase >= ranks[r].phases.size())
        continue;
      const PhaseStats& s = ranks[r].phases[phase];
      if (s.msgs_sent || s.msgs_recv || s.time > 0)
        out.rank_rows.push_back({iteration, static_cast<RankId>(r), phase_names[phase], s});
    }
}

} // namespace

RunOutput run_experiment(const ExperimentConfig& config, const RunOptions& options)
{
  const auto wall_start = std::chrono::steady_clock::now();

  const std::vector<std::size_t> rank_nodes = config.rank_nodes();
  const NetworkGraph graph = config.topology->graph(); // built once: the platform, routes and link labels
  std::unique_ptr<NetworkRun> own_network;
  if (!options.network)
    own_network = network_model(config.network.model)
                      .set_up({.ranks = config.ranks,
                               .options = config.network,
                               .topology = *config.topology,
                               .graph = graph,
                               .rank_nodes = rank_nodes,
                               .seed = config.seed});
  NetworkRun* const network = options.network ? options.network : own_network.get();
  ProcessGroup* const processes = network->processes();
  if (options.install_interrupt_handler)
    options.install_interrupt_handler();

  RunOutput out;
  out.routes = summarize_routes(*config.topology, graph, rank_nodes);
  out.cost_inputs = config.cost_inputs(&out.routes);
  out.closed_form = config.algorithm->closed_form(out.cost_inputs);

  Transport& transport = network->transport();
  World world(transport, config.ranks, config.workload.wire);
  RunState run{.config = config,
               .world = world,
               .threads = options.threads,
               .wall_start = wall_start,
               .wall_limit = options.wall_limit,
               .interrupted = options.interrupted,
               .processes = processes};
  world.set_one_rank_per_process(processes != nullptr);
  world.set_reduction_bandwidth(config.compute.charged_reduction_bandwidth());
  world.set_selection_bandwidth(config.compute.charged_selection_bandwidth());
  world.set_check_wire(config.check_wire);
  world.trace().trace_iteration(options.trace_iteration, config.ranks);
  run.selection_wall.assign(config.iterations, 0.0);
  run.selection_shared_wall.assign(config.iterations, 0.0);
  DenseVerifier dense_verifier(config, processes);
  std::unique_ptr<SparseVerifier> sparse_verifier;
  std::unique_ptr<SelectionStage> selection_stage;
  if (const SparseAllreduce* sparse = config.sparse_algorithm()) {
    sparse_verifier = std::make_unique<SparseVerifier>(config.ranks, config.workload.n, sparse->result_semantics(),
                                                       config.selects_within_collective());
    selection_stage = std::make_unique<SelectionStage>(config, processes ? processes->rank() : -1);
  }

  RunProgress display(options.show_progress, config.iterations, out.closed_form.messages, world, selection_stage.get());
  run.display = &display;
  const std::function<void(RankId)> rank_body = [&](RankId rank) {
    if (sparse_verifier)
      run_sparse_rank(run, *selection_stage, *sparse_verifier, dense_verifier, rank);
    else
      run_dense_rank(run, dense_verifier, rank);
    transport.rank_finished(rank);
  };
  const int finished_ranks = network->run_ranks(rank_body);
  if (finished_ranks != config.ranks)
    throw std::runtime_error(fmt::format("deadlock: {} of {} ranks never finished (a receive without a matching "
                                         "send, or a send without a matching receive)",
                                         config.ranks - finished_ranks, config.ranks));

  if (processes && !gather_records(run, *processes)) // the records are at process 0
    return out;

  out.verified = config.verify;
  if (!sparse_verifier)
    out.verification = "every rank's result equals the direct sum of all gradients";
  else if (config.selects_within_collective())
    out.verification = "every rank holds the same result, and it conserves the accs: the sum of the accs handed to "
                       "the collective equals the result plus the residuals it left";
  else if (config.sparse_algorithm()->result_semantics() == SparseAllreduce::ResultSemantics::reselected)
    out.verification = "every rank holds the same result (the re-selection tree is checked by the tests)";
  else
    out.verification = "every rank's result equals the sum of the local selections on its indices";
  out.verify_max_error = run.verify_max_error;
  out.completed_iterations = run.stopped_at >= 0 ? run.stopped_at : config.iterations;
  if (run.stopped_at >= 0)
    out.stop_reason = run.stopped_by_interrupt ? fmt::format("interrupted (SIGINT) before iteration {}", run.stopped_at)
                                               : fmt::format("the wall-clock limit of {} s passed before iteration {}",
                                                             options.wall_limit, run.stopped_at);
  out.interrupted = run.stopped_by_interrupt;
  for (int it = 0; it < out.completed_iterations; ++it)
    add_iteration_rows(it, run.records[it], config, world.phases(), out.cost_inputs, out.closed_form, out);
  for (const auto& row : out.rank_rows)
    out.messages += row.stats.msgs_sent;
  out.iteration_wall = run.iteration_wall;
  out.selection_wall.assign(run.selection_wall.begin(), run.selection_wall.begin() + out.completed_iterations);
  out.selection_shared_wall.assign(run.selection_shared_wall.begin(),
                                   run.selection_shared_wall.begin() + out.completed_iterations);
  out.real_run = processes != nullptr;
  if (!out.real_run) // a real run observes no link
    out.links = label_link_loads(network->link_loads().loads(), graph);
  out.network_fields = network->manifest_fields();
  if (const MeanFieldResidual* model = selection_stage ? selection_stage->mean_field() : nullptr)
    out.mean_field =
        RunOutput::MeanFieldMemory{MeanFieldResidual::kStateBytesPerEntry * config.workload.n, model->carried_cap(),
                                   model->largest_carried(), model->carried_evicted(), model->largest_piece_cache()};
  if (options.trace_iteration >= 0)
    out.trace = {options.trace_iteration, world.phases().names(), world.trace().take()};
  out.wall_time = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  out.peak_rss_bytes = peak_rss_bytes();
  return out;
}

} // namespace sparsim
