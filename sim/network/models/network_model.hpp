// The network models, behind one interface and chosen by name (network.model). A model owns everything that
// differs between models: how it is set up (SimGrid's platform and engine, or the link-level model's link
// table), the runtime its ranks run in (SimGrid actors or fibers), what the manifest records of its run, and
// its host cost per message for the wall-time estimate. Nothing outside this folder asks which model runs.
//
// The models (one file each): SimGrid's flow models "CM02", "LV08" and "SMPI" (simgrid_flows_model.cpp: every
// message one max-min flow, ranks as SimGrid actors; the reference) and "LinkLevel" (link_level_model.cpp: the
// project's per-link model, ranks as fibers or SimGrid actors; much faster at scale). docs/network-models.md
// compares them.
#pragma once

#include "sim/base/units.hpp"
#include "sim/comm/link_loads.hpp"
#include "sim/comm/process_group.hpp"
#include "sim/comm/transport.hpp"
#include "sim/network/options.hpp"
#include "topologies/network_graph.hpp"
#include "topologies/topology.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace sparsim {

// What a model is set up for: the run's ranks on the topology's nodes.
struct NetworkSite {
  int ranks = 0;
  const NetworkOptions& options;
  const Topology& topology;
  const NetworkGraph& graph;                  // topology.graph(), built once by the caller
  const std::vector<std::size_t>& rank_nodes; // [rank]: its node
  std::uint64_t seed = 0;                     // routes drawn per message (Valiant) follow it
};

// One run of a network model: the transport the ranks post their messages to and the runtime they run in.
class NetworkRun {
public:
  virtual ~NetworkRun() = default;
  virtual Transport& transport() = 0;
  // The bytes each link slot (link_slots.hpp) carried, counted by the transport on the routes messages took.
  virtual const LinkLoadCounter& link_loads() const = 0;
  // Runs body(rank) on every rank until no rank can run. Returns how many bodies returned: fewer than the ranks
  // when some waited forever (a deadlock). The first exception a rank throws ends the run and is rethrown,
  // naming the rank (rethrow_rank_failure). Call once.
  virtual int run_ranks(const std::function<void(RankId)>& body) = 0;
  // What the manifest records of this run beyond the config, as fields of one JSON object: what ran
  // (SimGrid's version and options only where SimGrid ran) and the model's counters.
  virtual nlohmann::json manifest_fields() const = 0;
  // The processes the ranks run in when this process runs only one of them (a real MPI run), else nullptr.
  virtual ProcessGroup* processes() { return nullptr; }
};

// Host seconds per posted message at a rank count, measured on this project's 2-core machine
// (docs/benchmarks.md, "Wall-time estimate"): dense (the ring with phantom data: the network alone) and sparse
// (the collectives' messages, their merges and sums taken out).
struct MessageCost {
  double ranks;
  Seconds dense;
  Seconds sparse;
};

// A network model as the config, validate and the estimates see it.
struct NetworkModel {
  std::string name;    // network.model
  std::string summary; // one line for sparsim validate
  // The values of network.runtime its ranks can run in; the first is the default.
  std::vector<std::string> runtimes;
  bool acknowledgement_traffic = false;       // network.crosstraffic may be true
  bool routes_per_message = false;            // it routes each message itself (Valiant and adaptive routing)
  std::span<const MessageCost> message_costs; // in increasing rank count
  // The model validate shows the estimate of beside this one's (the fast one for the reference, and back).
  std::string compared_with;
  // SimGrid's network model that times its messages, or for a model of its own the one it approximates
  // (the SMPI cross-check runs that one).
  std::string simgrid_model;
  std::function<std::unique_ptr<NetworkRun>(const NetworkSite&)> set_up;
};

// Every model, in the order docs/config.md lists them.
const std::vector<NetworkModel>& network_models();
// The model named `name` (std::out_of_range for another name; the config accepts only the registered ones).
const NetworkModel& network_model(const std::string& name);
std::vector<std::string> network_model_names();

} // namespace sparsim
