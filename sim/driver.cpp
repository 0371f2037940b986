#include "sim/driver.hpp"

#include <simgrid/s4u/Actor.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <fmt/format.h>
#include <sys/resource.h>

namespace sparsim {
namespace {

// Per-iteration reference sums for verification, computed once per iteration and freed when every rank
// has checked its result.
class Verifier {
public:
  Verifier(const ExperimentConfig& config) : config_(config) {}

  // Returns max |result - reference| / tolerance over the vector (<= 1 passes).
  double check(int iteration, const DenseVector& result)
  {
    if (iteration != iteration_) {
      build_reference(iteration);
      iteration_ = iteration;
    }
    double worst = 0;
    for (std::size_t i = 0; i < result.values.size(); ++i) {
      // Summing P floats in any order errs by at most (P-1) u sum|x| (u = 2^-24); allow twice that.
      const double tolerance = config_.ranks * 0x1.0p-23 * abs_sum_[i] + 1e-30;
      worst = std::max(worst, std::fabs(result.values[i] - sum_[i]) / tolerance);
    }
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

std::uint64_t peak_rss_bytes()
{
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;
}

// Aggregates the per-rank records of one iteration into results.csv rows.
void add_iteration_rows(int iteration, const std::vector<std::vector<PhaseStats>>& per_rank,
                        const std::vector<Seconds>& iteration_time, const std::vector<std::string>& phase_names,
                        const ClosedForm& model, RunOutput& out)
{
  const std::size_t ranks = per_rank.size();
  auto aggregate = [&](const std::string& phase, auto&& stats_of) {
    PhaseRow row;
    row.iteration = iteration;
    row.phase = phase;
    double sent_sum = 0, recv_sum = 0;
    for (std::size_t r = 0; r < ranks; ++r) {
      const PhaseStats s = stats_of(r);
      row.sim_time = std::max(row.sim_time, s.time);
      row.msgs_sent_max = std::max(row.msgs_sent_max, s.msgs_sent);
      row.bytes_sent_max = std::max(row.bytes_sent_max, static_cast<double>(s.bytes_sent));
      row.bytes_recv_max = std::max(row.bytes_recv_max, static_cast<double>(s.bytes_recv));
      sent_sum += static_cast<double>(s.bytes_sent);
      recv_sum += static_cast<double>(s.bytes_recv);
    }
    row.bytes_sent_mean = sent_sum / static_cast<double>(ranks);
    row.bytes_recv_mean = recv_sum / static_cast<double>(ranks);
    return row;
  };

  for (PhaseId phase = 0; phase < phase_names.size(); ++phase) {
    PhaseRow row = aggregate(phase_names[phase], [&](std::size_t r) {
      return phase < per_rank[r].size() ? per_rank[r][phase] : PhaseStats{};
    });
    if (row.sim_time > 0 || row.msgs_sent_max > 0)
      out.rows.push_back(row);
  }
  PhaseRow total = aggregate("total", [&](std::size_t r) {
    PhaseStats sum;
    for (const auto& s : per_rank[r]) {
      sum.msgs_sent += s.msgs_sent;
      sum.msgs_recv += s.msgs_recv;
      sum.bytes_sent += s.bytes_sent;
      sum.bytes_recv += s.bytes_recv;
    }
    sum.time = iteration_time[r];
    return sum;
  });
  total.has_model = true;
  total.model_time = model.time;
  total.model_bytes_per_rank = model.bytes_sent_per_rank;
  out.rows.push_back(total);

  for (std::size_t r = 0; r < ranks; ++r)
    for (PhaseId phase = 0; phase < per_rank[r].size(); ++phase) {
      const PhaseStats& s = per_rank[r][phase];
      if (s.msgs_sent || s.msgs_recv || s.time > 0)
        out.rank_rows.push_back({iteration, static_cast<RankId>(r), phase_names[phase], s});
    }
}

}  // namespace

std::vector<std::string> simgrid_options(const NetworkOptions& network)
{
  return {
      "--cfg=network/model:" + network.model,
      std::string("--cfg=network/crosstraffic:") + (network.crosstraffic ? "1" : "0"),
      "--log=root.thresh:warning",
      "--log=xbt_cfg.thresh:warning",
  };
}

RunOutput run_experiment(const ExperimentConfig& config, bool show_progress)
{
  const auto wall_start = std::chrono::steady_clock::now();

  // The engine takes argc/argv; hand it the network model options.
  std::vector<std::string> args = {"sparsim"};
  for (const auto& option : simgrid_options(config.network))
    args.push_back(option);
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  int argc = static_cast<int>(argv.size());
  simgrid::s4u::Engine engine(&argc, argv.data());

  // Platform and rank placement.
  const std::vector<simgrid::s4u::Host*> nodes = config.topology->build();
  const std::vector<std::size_t> node_of_rank = place_ranks(config.placement, config.ranks, nodes.size());
  std::vector<simgrid::s4u::Host*> rank_hosts;
  for (std::size_t node : node_of_rank)
    rank_hosts.push_back(nodes[node]);

  RunOutput out;
  out.routes = summarize_routes(rank_hosts);
  out.cost_inputs.ranks = config.ranks;
  out.cost_inputs.n = config.workload.n;
  out.cost_inputs.wire = config.workload.wire;
  out.cost_inputs.alpha = out.routes.latency_max;
  out.cost_inputs.seconds_per_byte = out.routes.bandwidth_min > 0 ? 1.0 / out.routes.bandwidth_min : 0.0;
  out.closed_form = config.algorithm->closed_form(out.cost_inputs);

  World world(rank_hosts, config.workload.wire);
  const auto& dense = dynamic_cast<const DenseAllreduce&>(*config.algorithm);
  Verifier verifier(config);

  // Records filled by the rank actors: [iteration][rank] -> per-phase stats, and iteration times.
  std::vector<std::vector<std::vector<PhaseStats>>> stats(
      config.iterations, std::vector<std::vector<PhaseStats>>(config.ranks));
  std::vector<std::vector<Seconds>> iteration_time(config.iterations, std::vector<Seconds>(config.ranks));
  std::exception_ptr failure;
  int finished_ranks = 0;
  auto last_progress = std::chrono::steady_clock::now();

  for (RankId rank = 0; rank < config.ranks; ++rank) {
    simgrid::s4u::Actor::create(fmt::format("rank{}", rank), rank_hosts[rank], [&, rank] {
      try {
        Communicator comm(world, rank);
        for (int it = 0; it < config.iterations; ++it) {
          world.align_ranks();
          comm.flush_phase_time();
          world.take_stats(rank);  // nothing outside iterations is counted
          const Seconds start = simgrid::s4u::Engine::get_clock();

          DenseVector data;
          data.length = config.workload.n;
          if (config.workload.data == "real") {
            data.values.resize(data.length);
            config.gradients->generate(rank, it, data.values);
          }
          dense.allreduce(comm, data);

          comm.flush_phase_time();
          iteration_time[it][rank] = simgrid::s4u::Engine::get_clock() - start;
          stats[it][rank] = world.take_stats(rank);
          if (config.verify) {
            const double error = verifier.check(it, data);
            out.verify_max_error = std::max(out.verify_max_error, error);
            if (error > 1.0)
              throw std::runtime_error(fmt::format("verification failed: rank {} iteration {} differs from the "
                                                   "direct sum by {:.3g} times the rounding tolerance",
                                                   rank, it, error));
          }
          if (show_progress && rank == 0) {
            const auto now = std::chrono::steady_clock::now();
            if (now - last_progress > std::chrono::seconds(2) || it + 1 == config.iterations) {
              fmt::print(stderr, "  iteration {}/{} done: simulated {:.6g} s, wall {:.1f} s\n", it + 1,
                         config.iterations, simgrid::s4u::Engine::get_clock(),
                         std::chrono::duration<double>(now - wall_start).count());
              last_progress = now;
            }
          }
        }
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
                                         "send)",
                                         config.ranks - finished_ranks, config.ranks));

  out.verified = config.verify;
  for (int it = 0; it < config.iterations; ++it)
    add_iteration_rows(it, stats[it], iteration_time[it], world.phase_names(), out.closed_form, out);
  for (const auto& row : out.rank_rows)
    out.messages += row.stats.msgs_sent;
  out.wall_time = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  out.peak_rss_bytes = peak_rss_bytes();
  return out;
}

}  // namespace sparsim
