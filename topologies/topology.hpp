// Topologies: the network a simulation runs on, described once and independent of any network model.
//
// A Topology is parsed from the config's "topology" object (or a platform file in configs/platforms/) and
// describes its network as a NetworkGraph (compute nodes, routers or switches, links with level, bandwidth
// and latency; each link is split-duplex: one direction "up" from the link's `from` vertex to its `to`
// vertex, one "down") plus a route function computed from coordinates (no table per node pair). A network
// model builds its platform from these two (the SimGrid flow model: sim/network/simgrid/zone.hpp); a test
// checks that SimGrid's routes are exactly route()'s.
//
// LIMITATIONS
// - Static minimal routing by default: a node pair always uses the same links. The dragonfly's "valiant"
//   routing (topology.routing, link-level model only) picks a route per message, its "adaptive" routing lets
//   the network model pick one by load among the minimal route and a few Valiant ones.
// - A message from a node to itself crosses no topology link (SimGrid's "__loopback__" link).
#pragma once

#include "sim/base/json_reader.hpp"
#include "sim/base/units.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace sparsim {

class NetworkGraph; // topologies/network_graph.hpp

// One step of a route: graph link `link`, crossed from link.from to link.to (up) or back (!up).
struct Hop {
  std::size_t link = 0;
  bool up = true;
};
// The links of one route, in order; fixed capacity so that routing allocates nothing.
class HopList {
public:
  static constexpr std::size_t kCapacity = 32;
  void push(std::size_t link, bool up);
  std::size_t size() const { return size_; }
  const Hop* begin() const { return hops_.data(); }
  const Hop* end() const { return hops_.data() + size_; }

private:
  std::array<Hop, kCapacity> hops_{};
  std::size_t size_ = 0;
};

// Contention-free figures of the routes between the placed ranks.
struct RouteSummary {
  Seconds latency_min = 0;          // smallest end-to-end latency between two distinct ranks
  Seconds latency_max = 0;          // largest end-to-end latency (the alpha that paces a ring)
  BytesPerSecond bandwidth_min = 0; // smallest bottleneck bandwidth of a route (the 1/beta of a lone flow)
  BytesPerSecond bandwidth_max = 0; // largest bottleneck bandwidth of a route
  int hops_max = 0;                 // most links on one route
  // With multi-GPU nodes, the same figures split by whether the two ranks share a node (zero where no pair
  // does): the intra-node fabric's and the network's.
  struct Level {
    Seconds latency_max = 0;
    BytesPerSecond bandwidth_min = 0;
  };
  Level intra_node;
  Level inter_node;
};

// Adaptive routing (the dragonfly's topology.routing "adaptive"): per message, the network model compares the
// minimal route with `candidates` non-minimal ones by the load on their links when the message starts, and
// takes a non-minimal one only when its predicted time is below (1 - bias) times the minimal route's.
struct AdaptiveRouting {
  std::size_t candidates = 0; // 0: not adaptive
  double bias = 0;
};

class Topology {
public:
  virtual ~Topology() = default;
  virtual std::string type() const = 0; // "star", "fat_tree", "dragonfly"
  // Compute vertices, where ranks are placed: nodes, or with multi-GPU nodes (topologies/multi_gpu.cpp) GPUs,
  // each with its own NIC; GPU g then sits on node g / gpus_per_node().
  virtual std::size_t node_count() const = 0;
  virtual std::size_t gpus_per_node() const { return 1; }
  // A rail-optimized network's rails (NIC i of every node on rail i; topologies/fat_tree.cpp), 1 otherwise.
  virtual std::size_t rails() const { return 1; }
  // The network as a graph of nodes, routers/switches and links (compute node i is graph vertex i).
  virtual NetworkGraph graph() const = 0;
  // graph().edge_count(), without building the graph.
  virtual std::size_t link_count() const = 0;
  // Appends to `hops` the route from compute node `src` to compute node `dst` (src != dst), in order.
  // Example, the star of star.cpp (link i is node i's link to the crossbar): route(2, 5) is
  // {link 2 up, link 5 down}, i.e. "node2_crossbar_UP", "node5_crossbar_DOWN" in SimGrid's names.
  virtual void route(std::size_t src, std::size_t dst, HopList& hops) const = 0;
  // The route of one message, identified by `message` (a hash of the run's seed, the source rank and the
  // source's count of sends: the same message always gets the same route). Topologies whose routes depend only
  // on the node pair (minimal routing, the default) return route(src, dst); routes_per_message() says which.
  virtual bool routes_per_message() const { return false; }
  virtual void route_message(std::size_t src, std::size_t dst, std::uint64_t /*message*/, HopList& hops) const
  {
    route(src, dst, hops);
  }
  // Adaptive routing's parameters (candidates 0 unless topology.routing is "adaptive"), and its non-minimal
  // candidate routes: route_nonminimal(src, dst, message, hops) for the message keys of its candidates.
  virtual AdaptiveRouting adaptive_routing() const { return {}; }
  virtual void route_nonminimal(std::size_t src, std::size_t dst, std::uint64_t message, HopList& hops) const
  {
    route_message(src, dst, message, hops);
  }
  // The routing rule, as topology.routing names it: "minimal" unless the topology chooses another.
  virtual std::string routing() const { return "minimal"; }
  // The resolved spec with every default filled in (written into result manifests).
  virtual nlohmann::json to_json() const = 0;
  // One line for summaries: "dragonfly 4 groups x 6 chassis x 16 routers x 4 nodes (1536 nodes)".
  virtual std::string describe() const = 0;
};

// Reads the config's "topology" object. {"file": "platforms/x.json"} loads a platform file, resolved
// against `config_dir` and then against the installed configs/ folder.
std::unique_ptr<Topology> parse_topology(JsonReader topology, const std::filesystem::path& config_dir);

// Which compute vertex (node, or GPU of a multi-GPU node) each rank runs on: "linear" (rank r on vertex r: the
// ranks of a node are consecutive), "spread" (round-robin over the nodes: rank r on node r mod N, as its GPU
// r / N, with N = node_count / gpus_per_node; "linear" where nodes have one GPU) or "random" (a seeded
// permutation of the vertices).
struct Placement {
  std::string type = "linear";
  std::uint64_t seed = 0;
};
Placement parse_placement(JsonReader placement);
std::vector<std::size_t> place_ranks(const Placement& placement, int ranks, std::size_t node_count,
                                     std::size_t gpus_per_node = 1);

// Contention-free route figures between ranks placed on `rank_nodes` (distinct nodes): latency summed over
// the route's links in order, bandwidth the route's smallest. All pairs for small P, otherwise the pairs
// (0, j) and (i, i+1), which cover the diameter on the symmetric topologies here.
RouteSummary summarize_routes(const Topology& topology, const std::vector<std::size_t>& rank_nodes);
// The same with the topology's graph already built (a large platform's graph takes a while to build).
RouteSummary summarize_routes(const Topology& topology, const NetworkGraph& graph,
                              const std::vector<std::size_t>& rank_nodes);

} // namespace sparsim
