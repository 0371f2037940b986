// Runs a dense allreduce in this process on the contention-free star of sparse_harness.hpp, with given
// vectors, and returns what every rank got. SimGrid's engine can be created once per process: call run_dense
// at most once per TEST (ctest runs each TEST, and each TEST_P instance, in its own process).
#pragma once

#include "sparse_harness.hpp"

#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace sparsim::testing {

struct DenseRankOutcome {
  std::vector<float> result;
  PhaseStats total;               // all phases summed
  std::vector<PhaseStats> phases; // by phase id (names in DenseRun::phase_names)
  double time = 0;                // simulated time of the call on this rank
};

struct DenseRun {
  std::vector<DenseRankOutcome> ranks;
  std::vector<std::string> phase_names;
  PhaseStats phase(int rank, const std::string& name) const
  {
    return phase_named(phase_names, ranks[rank].phases, name);
  }
};

// Creates a dense algorithm from its config object, e.g. {"name": "dense_ring"}.
inline std::unique_ptr<DenseAllreduce> make_dense_algorithm(const nlohmann::json& spec)
{
  return make_algorithm_as<DenseAllreduce>(spec, "dense");
}

// vectors[r] is rank r's vector (all of one length). All ranks start together. A reduction bandwidth charges
// local work on received data (Communicator::charge_reduction); 0 leaves it free.
inline DenseRun run_dense(const DenseAllreduce& algorithm, const std::vector<std::vector<float>>& vectors,
                          BytesPerSecond reduction_bandwidth = 0)
{
  namespace sg4 = simgrid::s4u;
  const int P = static_cast<int>(vectors.size());
  const std::vector<sg4::Host*> hosts = star_hosts(P);
  SimGridTransport transport(hosts);
  World world(transport, P, WireFormat{});
  world.set_reduction_bandwidth(reduction_bandwidth);
  DenseRun run;
  run.ranks.assign(P, {});
  int finished = 0;
  for (int r = 0; r < P; ++r) {
    sg4::Actor::create("rank" + std::to_string(r), hosts[r], [&, r] {
      Communicator comm(world, r);
      world.align_ranks(r);
      comm.restart_phase_clock();
      const double start = sg4::Engine::get_clock();
      DenseVector data{vectors[r].size(), vectors[r]};
      algorithm.allreduce(comm, data);
      comm.flush_phase_time();
      DenseRankOutcome& out = run.ranks[r];
      out.time = sg4::Engine::get_clock() - start;
      out.result = std::move(data.values);
      out.phases = world.take_stats(r);
      out.total = traffic_total(out.phases);
      ++finished;
    });
  }
  sg4::Engine::get_instance()->run();
  if (finished != P)
    throw std::runtime_error("deadlock: " + std::to_string(P - finished) + " ranks never finished");
  run.phase_names = world.phases().names();
  return run;
}

} // namespace sparsim::testing
