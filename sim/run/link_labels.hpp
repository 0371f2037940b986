// The rows of links.csv: the bytes each SimGrid link carried, labelled with the topology's link level and direction.
//
// Graph link "X" of a topology is the split-duplex pair of SimGrid links "X_UP" (from the graph link's
// `from` vertex to its `to` vertex: from a node to its router or switch, from a child switch to its
// parent) and "X_DOWN" (back); each half is a row of its own, direction "up" or "down". Messages between
// two ranks on one node cross SimGrid's "__loopback__" link: level "loopback", no direction.
#pragma once

#include "sim/comm/communicator.hpp"
#include "sim/run/run_output.hpp"
#include "topologies/network_graph.hpp"

#include <string>
#include <vector>

namespace sparsim {

// One row per link that carried bytes, in the graph's link order (each link's up half, then its down half),
// the loopback last. Throws std::logic_error for a loaded link the graph does not know.
std::vector<LinkRow> label_link_loads(const World::LinkLoads& loads, const NetworkGraph& graph);

}  // namespace sparsim
