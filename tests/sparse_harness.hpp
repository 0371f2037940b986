// Runs a sparse allreduce in this process on a contention-free star, with given local selections, and
// returns what every rank got. SimGrid's engine can be created once per process: call run_sparse at most
// once per TEST (ctest runs each TEST, and each TEST_P instance, in its own process).
#pragma once

#include "algorithms/registry.hpp"
#include "sim/comm/communicator.hpp"
#include "sim/data/sparse.hpp"
#include "sim/data/wire_codec.hpp"
#include "sim/network/simgrid/engine.hpp"
#include "sim/network/simgrid/transport.hpp"
#include "sim/run/driver.hpp"

#include <fmt/format.h>
#include <simgrid/s4u.hpp>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace sparsim::testing {

constexpr double kStarLatency = 1e-6;  // per link: a route crosses two
constexpr double kStarBandwidth = 1e9; // bytes per second

// The counters of phase `name` among one rank's `phases` (by phase id, named by `names`); zero when the rank
// never entered it.
inline PhaseStats phase_named(const std::vector<std::string>& names, const std::vector<PhaseStats>& phases,
                              const std::string& name)
{
  for (std::size_t id = 0; id < names.size(); ++id)
    if (names[id] == name && id < phases.size())
      return phases[id];
  return {};
}

// Messages and bytes of all phases summed (time left at zero).
inline PhaseStats traffic_total(const std::vector<PhaseStats>& phases)
{
  PhaseStats total;
  for (const auto& p : phases) {
    total.msgs_sent += p.msgs_sent;
    total.msgs_recv += p.msgs_recv;
    total.bytes_sent += p.bytes_sent;
    total.bytes_recv += p.bytes_recv;
  }
  return total;
}

struct RankOutcome {
  SparseVector result;
  SparseReport report;
  PhaseStats total;               // all phases of the iteration summed
  std::vector<PhaseStats> phases; // by phase id (names in SparseRun::phase_names)
  double time = 0;                // simulated time of the call on this rank
};

struct SparseRun {
  std::vector<std::vector<RankOutcome>> iterations; // [iteration][rank]
  std::vector<std::string> phase_names;
  std::uint64_t shared_results_computed = 0; // results computed once for several ranks (SharedResults)
  PhaseStats phase(int iteration, int rank, const std::string& name) const
  {
    return phase_named(phase_names, iterations[iteration][rank].phases, name);
  }
};

// Creates an algorithm of interface A (SparseAllreduce, DenseAllreduce) from its config object.
template <class A> std::unique_ptr<A> make_algorithm_as(const nlohmann::json& spec, const char* kind)
{
  auto algorithm = parse_algorithm(JsonReader(spec, "algorithm"));
  auto* typed = dynamic_cast<A*>(algorithm.get());
  if (!typed)
    throw std::logic_error(std::string("not a ") + kind + " algorithm: " + spec.dump());
  algorithm.release();
  return std::unique_ptr<A>(typed);
}

// Creates a sparse algorithm from its config object, e.g. {"name": "topka", "allgather": "ring"}.
inline std::unique_ptr<SparseAllreduce> make_sparse_algorithm(const nlohmann::json& spec)
{
  return make_algorithm_as<SparseAllreduce>(spec, "sparse");
}

// Starts SimGrid's engine (CM02 without cross traffic) and builds the star: one host per rank, each with a
// split-duplex link of kStarBandwidth and kStarLatency (a route crosses two). Once per process.
inline std::vector<simgrid::s4u::Host*> star_hosts(int P)
{
  namespace sg4 = simgrid::s4u;
  start_engine();
  auto* zone = sg4::create_star_zone("star");
  std::vector<sg4::Host*> hosts;
  for (int i = 0; i < P; ++i) {
    auto* host = zone->create_host(fmt::format("h{}", i), 1e9);
    auto* link = zone->create_split_duplex_link(fmt::format("l{}", i), kStarBandwidth)->set_latency(kStarLatency);
    zone->add_route(host->get_netpoint(), nullptr, nullptr, nullptr, {{link, sg4::LinkInRoute::Direction::UP}}, true);
    hosts.push_back(host);
  }
  zone->seal();
  return hosts;
}

// Runs `iterations` iterations of `algorithm` on a star of P ranks. make_input(it, r) builds rank r's input of
// iteration it (in its actor, just before the call); after(it, r, out) sees the outcome. All ranks start each
// iteration together. A reduction bandwidth charges local work on received data (Communicator::charge_reduction),
// a selection bandwidth selections inside the collective (Communicator::charge_selection); 0 leaves it free.
template <class MakeInput, class After>
SparseRun run_iterations(const SparseAllreduce& algorithm, int P, std::size_t iterations, std::uint64_t n,
                         WireFormat wire, BytesPerSecond reduction_bandwidth, BytesPerSecond selection_bandwidth,
                         MakeInput make_input, After after)
{
  namespace sg4 = simgrid::s4u;
  const std::vector<sg4::Host*> hosts = star_hosts(P);
  sg4::Engine& engine = *sg4::Engine::get_instance();

  SimGridTransport transport(hosts);
  World world(transport, P, wire);
  world.set_check_wire(encodable(wire)); // every message encoded and checked, every Bundle's stated layout too
  world.set_reduction_bandwidth(reduction_bandwidth);
  world.set_selection_bandwidth(selection_bandwidth);
  SparseRun run;
  int finished = 0;
  run.iterations.assign(iterations, std::vector<RankOutcome>(P));
  for (int r = 0; r < P; ++r) {
    sg4::Actor::create("rank" + std::to_string(r), hosts[r], [&, r] {
      Communicator comm(world, r);
      auto state = algorithm.make_rank_state(r, P, n);
      for (std::size_t it = 0; it < iterations; ++it) {
        world.align_ranks(r);
        comm.restart_phase_clock();
        const double start = sg4::Engine::get_clock();
        RankOutcome& out = run.iterations[it][r];
        const SparseInput input = make_input(static_cast<int>(it), r);
        out.result = *algorithm.allreduce(comm, input, state.get(), out.report);
        comm.flush_phase_time();
        out.time = sg4::Engine::get_clock() - start;
        out.phases = world.take_stats(r);
        out.total = traffic_total(out.phases);
        after(static_cast<int>(it), r, out);
      }
      ++finished;
    });
  }
  engine.run();
  if (finished != P)
    throw std::runtime_error("deadlock: " + std::to_string(P - finished) + " ranks never finished");
  // Results computed once (Communicator::computed_once) must have been taken by every rank: an entry left over
  // means ranks asked with different payloads and each computed its own.
  if (world.shared_results().pending() != 0)
    throw std::runtime_error(std::to_string(world.shared_results().pending()) +
                             " shared results not taken by every rank");
  run.phase_names = world.phases().names();
  run.shared_results_computed = world.shared_results().computed();
  return run;
}

// selections[it][r] is rank r's local selection in iteration it. Iterations with it % reevaluate_every == 0 are
// threshold re-evaluation iterations.
inline SparseRun run_sparse(const SparseAllreduce& algorithm, const std::vector<std::vector<SparseVector>>& selections,
                            std::uint64_t n, std::uint64_t k, WireFormat wire = {}, int reevaluate_every = 1,
                            BytesPerSecond reduction_bandwidth = 0)
{
  const int P = static_cast<int>(selections.at(0).size());
  return run_iterations(
      algorithm, P, selections.size(), n, wire, reduction_bandwidth, 0,
      [&](int it, int r) {
        return SparseInput{.iteration = it,
                           .n = n,
                           .k = k,
                           .local_selection = std::make_shared<const SparseVector>(selections[it][r]),
                           .reevaluation = it % reevaluate_every == 0};
      },
      [](int, int, RankOutcome&) {});
}

// For a collective that selects within itself (SparDL): gradients[it][r] is rank r's dense gradient of iteration
// it, added into the rank's acc (zero at first) before the call; the acc the call leaves is the rank's residual,
// returned in residuals[it][r].
struct WithinCollectiveRun {
  SparseRun run;
  std::vector<std::vector<std::vector<float>>> residuals; // [iteration][rank]
};
inline WithinCollectiveRun run_within_collective(const SparseAllreduce& algorithm,
                                                 const std::vector<std::vector<std::vector<float>>>& gradients,
                                                 std::uint64_t k, WireFormat wire = {},
                                                 BytesPerSecond reduction_bandwidth = 0,
                                                 BytesPerSecond selection_bandwidth = 0)
{
  const int P = static_cast<int>(gradients.at(0).size());
  const std::uint64_t n = gradients.at(0).at(0).size();
  std::vector<std::vector<float>> accs(P, std::vector<float>(n, 0.0f));
  WithinCollectiveRun out;
  out.residuals.assign(gradients.size(), std::vector<std::vector<float>>(P));
  out.run = run_iterations(
      algorithm, P, gradients.size(), n, wire, reduction_bandwidth, selection_bandwidth,
      [&](int it, int r) {
        for (std::uint64_t i = 0; i < n; ++i)
          accs[r][i] += gradients[it][r][i];
        return SparseInput{.iteration = it,
                           .n = n,
                           .k = k,
                           .local_selection = std::make_shared<const SparseVector>(),
                           .reevaluation = true,
                           .acc = accs[r]};
      },
      [&](int it, int r, RankOutcome&) { out.residuals[it][r] = accs[r]; });
  return out;
}

} // namespace sparsim::testing
