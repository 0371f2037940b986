// The rows of links.csv: the bytes each direction of each graph link carried, labelled with the link's level.
//
// Graph link "X" of a topology has two directions, each a row of its own: "X_UP" and "X_DOWN", the names of
// SimGrid's split-duplex halves (the slots of sim/network/models/link_slots.hpp). Messages between two ranks on
// one node cross the loopback: row "__loopback__", level "loopback", no direction.
#pragma once

#include "sim/comm/link_loads.hpp"
#include "sim/network/models/link_slots.hpp"
#include "sim/run/run_output.hpp"
#include "topologies/network_graph.hpp"

#include <vector>

namespace sparsim {

// One row per slot some message crossed, in the graph's link order (each link's up half, then its down
// half), the loopback last.
std::vector<LinkRow> label_link_loads(const std::vector<LinkLoad>& loads, const NetworkGraph& graph);

} // namespace sparsim
