// Star (flat) platform for analytic checks: every compute node has its own link to one central crossbar.
//
// Each node link is split-duplex (a send and a receive on one node do not share bandwidth) with one bandwidth
// and latency for all links, so a lone message of S bytes from node a to node b crosses exactly two links
// (a's link up, b's link down) and takes 2 * latency + S / bandwidth under SimGrid's CM02 model with
// crosstraffic off: the alpha-beta model, alpha = 2 * latency, beta = 1 / bandwidth.
//
// Config: {"type": "star", "nodes": 16, "bandwidth": "10GBps", "latency": "1us"}; all keys required (a
// default node count would either be too small for a run or waste memory on a large one).
//
// LIMITATIONS
// - The crossbar itself never limits bandwidth (infinite backplane); only the node links are shared.
// - Figures are free parameters, not a machine.
#include "topologies/builder.hpp"

#include <fmt/format.h>

namespace sparsim {
namespace {

class StarTopology : public Topology {
public:
  StarTopology(std::size_t nodes, LinkSpec link)
      : nodes_(nodes)
      , link_(link)
  {
  }

  std::string type() const override { return "star"; }
  std::size_t node_count() const override { return nodes_; }
  std::size_t link_count() const override { return nodes_; }

  NetworkGraph graph() const override
  {
    NetworkGraph graph(nodes_);
    const std::size_t crossbar = graph.add_router("crossbar");
    // Link i is node i's link: routing relies on this numbering.
    for (std::size_t i = 0; i < nodes_; ++i)
      graph.add_link({fmt::format("node{}_crossbar", i), i, crossbar, link_.bandwidth, link_.latency, "node"});
    return graph;
  }

  // Node a's link up, node b's link down.
  void route(std::size_t src, std::size_t dst, HopList& hops) const override
  {
    hops.push(src, true);
    hops.push(dst, false);
  }

  nlohmann::json to_json() const override
  {
    nlohmann::json spec = link_spec_json(link_);
    spec["type"] = "star";
    spec["nodes"] = nodes_;
    return spec;
  }

  std::string describe() const override
  {
    return fmt::format("star {} nodes, {} and {} per link", nodes_, format_bandwidth(link_.bandwidth),
                       format_duration(link_.latency));
  }

private:
  std::size_t nodes_;
  LinkSpec link_;
};

} // namespace

std::unique_ptr<Topology> parse_star(JsonReader& spec)
{
  const std::size_t nodes = read_count(spec, "nodes", kMaxNodes);
  const LinkSpec link = read_link_spec(spec);
  return std::make_unique<StarTopology>(nodes, link);
}

} // namespace sparsim
