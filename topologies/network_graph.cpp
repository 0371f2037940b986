#include "topologies/network_graph.hpp"

#include <boost/graph/graphviz.hpp>
#include <deque>
#include <fmt/format.h>
#include <stdexcept>
#include <utility>

namespace sparsim {

NetworkGraph::NetworkGraph(std::size_t node_count)
    : graph_(node_count)
    , node_count_(node_count)
{
  for (std::size_t i = 0; i < node_count; ++i)
    graph_[i].name = fmt::format("node{}", i);
}

std::size_t NetworkGraph::add_router(std::string name) { return boost::add_vertex(Vertex{std::move(name)}, graph_); }

std::size_t NetworkGraph::add_link(Link link)
{
  if (link.from >= vertex_count() || link.to >= vertex_count() || link.from == link.to)
    throw std::logic_error(fmt::format("NetworkGraph: link {} has bad ends {} and {}", link.name, link.from, link.to));
  const std::size_t from = link.from;
  const std::size_t to = link.to;
  links_.push_back(boost::add_edge(from, to, std::move(link), graph_).first);
  return links_.size() - 1;
}

int NetworkGraph::hop_count(std::size_t node_a, std::size_t node_b) const
{
  if (node_a >= node_count_ || node_b >= node_count_)
    throw std::out_of_range(fmt::format("hop_count({}, {}): only {} nodes", node_a, node_b, node_count_));
  if (node_a == node_b)
    return 0;
  // Breadth-first search over (vertex, global links used so far) states, so that a path crosses at most one
  // global link.
  const std::size_t n = vertex_count();
  std::vector<int> distance(2 * n, -1);
  std::deque<std::size_t> queue{node_a};
  distance[node_a] = 0;
  while (!queue.empty()) {
    const std::size_t state = queue.front();
    queue.pop_front();
    const std::size_t vertex = state % n;
    const std::size_t globals = state / n;
    if (vertex == node_b)
      return distance[state];
    for (auto [edge, end] = boost::out_edges(vertex, graph_); edge != end; ++edge) {
      const std::size_t next_globals = globals + (graph_[*edge].level == "global" ? 1 : 0);
      if (next_globals > 1)
        continue;
      const std::size_t next = next_globals * n + boost::target(*edge, graph_);
      if (distance[next] < 0) {
        distance[next] = distance[state] + 1;
        queue.push_back(next);
      }
    }
  }
  return -1;
}

void NetworkGraph::write_dot(std::ostream& out) const
{
  auto write_link = [this](std::ostream& os, Graph::edge_descriptor edge) {
    const Link& link = graph_[edge];
    os << fmt::format("[label=\"{}\", level={}, bandwidth={}, latency={}]", link.name, link.level, link.bandwidth,
                      link.latency);
  };
  boost::write_graphviz(out, graph_, boost::default_writer(), write_link, boost::default_writer(),
                        boost::get(&Vertex::name, graph_));
}

} // namespace sparsim
