// A Boost.Graph view of a platform: compute nodes, routers/switches and the links between them.
//
// Every topology describes its network once, as a NetworkGraph; the SimGrid zone is built from the same
// graph (sim/network/simgrid/zone.hpp), so a link of the graph is a link of the simulation: graph link "X"
// is the pair of SimGrid links "X_UP" (from `from` to `to`) and "X_DOWN" (back). Vertices
// 0..node_count()-1 are the compute nodes, in node order (SimGrid host "node<i>"); routers and switches
// follow.
//
// LIMITATIONS
// - Undirected: one edge stands for the two directions of a cable, each with the edge's bandwidth.
// - hop_count() follows the routing rule of the topologies here (minimal routes; on a dragonfly at most
//   one global link), not every shortest path of the bare graph.
#pragma once

#include "sim/base/units.hpp"

#include <boost/graph/adjacency_list.hpp>
#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

namespace sparsim {

class NetworkGraph {
public:
  struct Vertex {
    std::string name;
  };
  struct Link {
    std::string name; // SimGrid's links are name + "_UP" (from -> to) and name + "_DOWN" (to -> from)
    std::size_t from = 0;
    std::size_t to = 0;
    BytesPerSecond bandwidth = 0; // per direction
    Seconds latency = 0;
    std::string level; // "node", "intra_chassis", "intra_group", "global" or "fat_tree_L<i>"
  };

  // Creates the compute nodes "node0".."node<N-1>" as vertices 0..N-1.
  explicit NetworkGraph(std::size_t node_count);

  // Adds a router or switch; returns its vertex index.
  std::size_t add_router(std::string name);
  // Adds a link; returns its index (links are numbered in the order they are added).
  std::size_t add_link(Link link);

  std::size_t node_count() const { return node_count_; }
  std::size_t vertex_count() const { return boost::num_vertices(graph_); }
  std::size_t edge_count() const { return links_.size(); }
  const std::string& vertex_name(std::size_t vertex) const { return graph_[vertex].name; }
  const Link& link(std::size_t index) const { return graph_[links_.at(index)]; }

  // Links on a shortest path between two compute nodes (0 for a node and itself), by breadth-first search.
  // A path may cross at most one "global" link: a dragonfly's minimal routes never detour through a third
  // group, even where such a detour has fewer hops.
  int hop_count(std::size_t node_a, std::size_t node_b) const;

  // Graphviz DOT: vertices by name, edges with their name, level, bandwidth (B/s) and latency (s).
  void write_dot(std::ostream& out) const;

private:
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS, Vertex, Link>;
  Graph graph_;
  std::size_t node_count_;
  std::vector<Graph::edge_descriptor> links_;
};

} // namespace sparsim
