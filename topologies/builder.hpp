// Shared plumbing of the topology builders (internal to topologies/).
//
// Each topology describes its network once, as a NetworkGraph, plus a routing function that names the graph
// links a message crosses. build_zone() turns that into a SimGrid NetZone of our own (a subclass of SimGrid's
// kernel NetZoneImpl: the one place in sparsim that uses SimGrid's kernel routing API), so the simulation and
// the graph view cannot disagree, routes cost O(hops) to compute and nothing is stored per node pair.
//
// LIMITATIONS
// - Relies on SimGrid's installed kernel headers (simgrid/kernel/routing/NetZoneImpl.hpp, 3.32); SimGrid 4.x
//   may change that interface, and this file is where to adapt.
// - Static routing only: a node pair always uses the same links.
// - A message from a node to itself crosses SimGrid's "__loopback__" link (FATPIPE; network/loopback-bw and
//   network/loopback-lat, 10 GB/s and 0 s by default), never a topology link.
#pragma once

#include "sim/base/json_reader.hpp"
#include "topologies/network_graph.hpp"
#include "topologies/topology.hpp"

#include <array>
#include <cstddef>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sparsim {

// Bandwidth (per direction) and latency of one class of links.
struct LinkSpec {
  BytesPerSecond bandwidth = 0;
  Seconds latency = 0;
};
// Reads the required "bandwidth" and "latency" keys of `reader`.
LinkSpec read_link_spec(JsonReader& reader);
// {"bandwidth": "5.25GBps", "latency": "650ns"}: unit strings that parse back to exactly the same values.
nlohmann::json link_spec_json(const LinkSpec& spec);

// Reads a count key in [1, max] (sizes are never zero).
std::size_t read_count(JsonReader& reader, std::string_view key, std::size_t max,
                       std::optional<std::int64_t> fallback = std::nullopt);
// Largest platform we build (compute nodes); a guard against typos that would exhaust memory.
constexpr std::size_t kMaxNodes = std::size_t{1} << 22;

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
// Appends the route from compute node `src` to compute node `dst` (src != dst) to `hops`.
using RouteFunction = std::function<void(std::size_t src, std::size_t dst, HopList& hops)>;

// Builds the SimGrid platform of `graph`: a zone named `zone_name` holding one host per compute node
// ("node<i>", 1 Gflop/s) and one split-duplex link per graph link, routed by `route`. The zone becomes the
// root zone, or a child of the root when one already exists. Returns the hosts in node order.
std::vector<simgrid::s4u::Host*> build_zone(const std::string& zone_name, const NetworkGraph& graph,
                                            RouteFunction route);

// The topology parsers, one per file; `spec` has had its "type" read already.
std::unique_ptr<Topology> parse_star(JsonReader& spec);
std::unique_ptr<Topology> parse_fat_tree(JsonReader& spec);
std::unique_ptr<Topology> parse_dragonfly(JsonReader& spec);

}  // namespace sparsim
