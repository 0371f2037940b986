// Platform builders: the network a simulation runs on.
//
// A Topology is parsed from the config's "topology" object (or a platform file in configs/platforms/),
// builds the matching SimGrid NetZone, and offers a Boost.Graph view of the same network for analysis
// (hop counts, DOT export). The SimGrid zone is what the simulation uses; the graph must describe the
// same links (a test checks hop counts against SimGrid's own routes).
#pragma once

#include "sim/base/json_reader.hpp"
#include "sim/base/units.hpp"

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace simgrid::s4u {
class Host;
}

namespace sparsim {

class NetworkGraph;  // topologies/network_graph.hpp

// Contention-free figures of the routes between the placed ranks, read from SimGrid's routes.
struct RouteSummary {
  Seconds latency_min = 0;          // smallest end-to-end latency between two distinct ranks
  Seconds latency_max = 0;          // largest end-to-end latency (the alpha that paces a ring)
  BytesPerSecond bandwidth_min = 0; // smallest bottleneck bandwidth of a route (the 1/beta of a lone flow)
  BytesPerSecond bandwidth_max = 0; // largest bottleneck bandwidth of a route
  int hops_max = 0;                 // most links on one route
};

class Topology {
public:
  virtual ~Topology() = default;
  virtual std::string type() const = 0;          // "star", "fat_tree", "dragonfly"
  virtual std::size_t node_count() const = 0;    // compute nodes (ranks can be placed on these)
  // Builds the SimGrid platform. Call once, after the s4u::Engine exists; returns the compute nodes
  // in topology order (node i of the graph view is hosts[i]).
  virtual std::vector<simgrid::s4u::Host*> build() const = 0;
  // The same network as a graph of nodes, routers/switches and links.
  virtual NetworkGraph graph() const = 0;
  // The resolved spec with every default filled in (written into result manifests).
  virtual nlohmann::json to_json() const = 0;
  // One line for summaries: "dragonfly 4 groups x 6 chassis x 16 routers x 4 nodes (1536 nodes)".
  virtual std::string describe() const = 0;
};

// Reads the config's "topology" object. {"file": "platforms/x.json"} loads a platform file, resolved
// against `config_dir` and then against the installed configs/ folder.
std::unique_ptr<Topology> parse_topology(JsonReader topology, const std::filesystem::path& config_dir);

// Which node each rank runs on: "linear" (rank r on node r) or "random" (a seeded permutation).
struct Placement {
  std::string type = "linear";
  std::uint64_t seed = 0;
};
Placement parse_placement(JsonReader placement);
std::vector<std::size_t> place_ranks(const Placement& placement, int ranks, std::size_t node_count);

// Contention-free route figures between placed ranks, from SimGrid's route_to. All pairs for small P,
// otherwise the pairs (0, j) and (i, i+1), which cover the diameter on the symmetric topologies here.
RouteSummary summarize_routes(const std::vector<simgrid::s4u::Host*>& rank_hosts);

}  // namespace sparsim
