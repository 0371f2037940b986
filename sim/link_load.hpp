// links.csv: the bytes each SimGrid link carried, labelled with the topology's link level and direction.
//
// Graph link "X" of a topology is the split-duplex pair of SimGrid links "X_UP" (from the graph link's
// `from` vertex to its `to` vertex: from a node to its router or switch, from a child switch to its
// parent) and "X_DOWN" (back); each half is a row of its own, direction "up" or "down". Messages between
// two ranks on one node cross SimGrid's "__loopback__" link: level "loopback", no direction.
#pragma once

#include "sim/comm.hpp"
#include "topologies/network_graph.hpp"

#include <string>
#include <vector>

namespace sparsim {

struct LinkRow {
  std::string link;       // the SimGrid link's name
  std::string level;      // the graph link's level ("node", "intra_chassis", ..., "fat_tree_L0", "loopback")
  std::string direction;  // "up", "down", or "" for the loopback
  Bytes bytes = 0;        // over all iterations
  Bytes iteration_max = 0;  // in the iteration that loaded the link most
};

// One row per link that carried bytes, in the graph's link order (each link's up half, then its down half),
// the loopback last. Throws std::logic_error for a loaded link the graph does not know.
std::vector<LinkRow> label_link_loads(const World::LinkLoads& loads, const NetworkGraph& graph);

// The rows as links.csv text (header: link,level,direction,bytes,bytes_iteration_max).
std::string links_csv(const std::vector<LinkRow>& rows);

}  // namespace sparsim
