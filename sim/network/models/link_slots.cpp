#include "sim/network/models/link_slots.hpp"

#include <memory>

namespace sparsim {

std::size_t link_slot_count(const NetworkGraph& graph) { return 2 * graph.edge_count() + 1; }

std::vector<LinkSpec> link_slot_specs(const NetworkGraph& graph)
{
  std::vector<LinkSpec> specs;
  specs.reserve(link_slot_count(graph));
  for (std::size_t i = 0; i < graph.edge_count(); ++i) {
    const NetworkGraph::Link& link = graph.link(i);
    const LinkSpec half{.bandwidth = link.bandwidth, .latency = link.latency, .shared = true};
    specs.push_back(half); // up
    specs.push_back(half); // down
  }
  specs.push_back({.bandwidth = kLoopbackBandwidth, .latency = kLoopbackLatency, .shared = false});
  return specs;
}

LinkLoadCounter site_link_loads(const NetworkSite& site)
{
  return {site.ranks, link_route(site.topology, site.rank_nodes, site.graph.edge_count(), site.seed),
          link_slot_count(site.graph)};
}

LinkRoute link_route(const Topology& topology, std::vector<std::size_t> rank_nodes, std::size_t link_count,
                     std::uint64_t seed)
{
  // A message's identity: distinct for every (source, number) of one seed (ranks < 2^22, numbers < 2^40); the
  // topology hashes it.
  auto key = [seed](RankId source, std::uint64_t message) {
    return seed * 0x9E3779B97F4A7C15ULL ^ (static_cast<std::uint64_t>(source) << 40) ^ message;
  };
  auto slots_of = [link_count](const HopList& hops, std::vector<std::size_t>& slots) {
    for (const Hop& hop : hops)
      slots.push_back(2 * hop.link + (hop.up ? 0 : 1));
  };
  const auto nodes = std::make_shared<const std::vector<std::size_t>>(std::move(rank_nodes));
  LinkRoute route;
  route.per_message = topology.routes_per_message();
  route.find = [&topology, nodes, link_count, key, slots_of](RankId source, RankId dest, std::uint64_t message,
                                                             std::vector<std::size_t>& slots) {
    if ((*nodes)[source] == (*nodes)[dest]) {
      slots.push_back(2 * link_count);
      return;
    }
    HopList hops;
    topology.route_message((*nodes)[source], (*nodes)[dest], key(source, message), hops);
    slots_of(hops, slots);
  };
  const AdaptiveRouting adaptive = topology.adaptive_routing();
  if (adaptive.candidates == 0)
    return route;
  route.alternatives = adaptive.candidates;
  route.minimal_bias = adaptive.bias;
  route.alternative = [&topology, nodes, link_count, key, slots_of](RankId source, RankId dest, std::uint64_t message,
                                                                    std::size_t candidate,
                                                                    std::vector<std::size_t>& slots) {
    if ((*nodes)[source] == (*nodes)[dest]) {
      slots.push_back(2 * link_count);
      return;
    }
    // Each candidate its own draw: the message's key, hashed with the candidate's number.
    HopList hops;
    topology.route_nonminimal((*nodes)[source], (*nodes)[dest],
                              key(source, message) ^ (0xD1B54A32D192ED03ULL * (candidate + 1)), hops);
    slots_of(hops, slots);
  };
  return route;
}

} // namespace sparsim
