// The links as the network models and the link loads number them ("slots"): graph link i's up half is slot 2i,
// its down half 2i + 1, the loopback slot 2E (E graph links). "Up" runs from the graph link's `from` vertex to
// its `to` vertex (from a node to its router or switch, from a child switch to its parent), "down" back; a
// message between two ranks on one node crosses the loopback.
#pragma once

#include "sim/comm/link_loads.hpp"
#include "sim/network/link_level/link_model.hpp"
#include "sim/network/models/network_model.hpp"
#include "topologies/network_graph.hpp"
#include "topologies/topology.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sparsim {

// The number of slots of `graph`'s links: 2E + 1.
std::size_t link_slot_count(const NetworkGraph& graph);

// Each slot's bandwidth and latency for a network model that times messages itself: a graph link's two
// halves both have its bandwidth and latency; the loopback has SimGrid's defaults (network/loopback-bw
// 10 GB/s, network/loopback-lat 0 s) and never contends (FATPIPE).
std::vector<LinkSpec> link_slot_specs(const NetworkGraph& graph);

// The slots a message between two ranks crosses, from the topology's routes; ranks sit on `rank_nodes`. Where
// the topology routes per message (Valiant), a message's route follows from `seed`, its source rank and its
// number among the source's sends.
LinkRoute link_route(const Topology& topology, std::vector<std::size_t> rank_nodes, std::size_t link_count,
                     std::uint64_t seed = 0);

// A run's link loads: the site's link slots, counted along the topology's routes between its ranks.
LinkLoadCounter site_link_loads(const NetworkSite& site);

} // namespace sparsim
