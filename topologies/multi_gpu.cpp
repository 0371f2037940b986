// Multi-GPU nodes: G GPUs per node joined by a fast intra-node fabric, each GPU with its own NIC into the
// network (GPUDirect-style: no staging through host memory).
//
// The network topology below (star, fat tree, dragonfly) is unchanged; its endpoints (its "nodes") become the
// GPUs' NICs, and G consecutive endpoints form one node: GPU g sits on node g / G, as local GPU g mod G. A GPU
// and its NIC are one compute vertex of the graph, so rank placement, routes and links.csv name GPUs. Inside a
// node the fabric ("fabric") is either
//   "switch": one intra-node switch (NVSwitch-like) with one link per GPU: a message between two GPUs of a node
//             crosses the sender's link up and the receiver's link down;
//   "mesh":   a direct link between every pair of the node's GPUs (NVLink-mesh-like): one link per message.
// Traffic between GPUs of different nodes takes the network's route between their NICs ("cross_rail":
// "network", the default), or, from GPU i to GPU j != i of another node, first the fabric to GPU j of its own
// node and then the network from that GPU's NIC ("fabric": NCCL's PXN, which keeps a rail-optimized network's
// traffic on one rail). Intra-node links are numbered after the network's and have level "intra_node".
//
// Config, inside any topology object or platform file: "node": {"gpus": 8, "fabric": "switch", "bandwidth":
// "450GBps", "latency": "300ns", "cross_rail": "network"}. gpus 1 is a node with one GPU and no fabric, which is
// every platform without "node".
//
// LIMITATIONS
// - The intra-node switch never limits bandwidth (as the star's crossbar): only the GPUs' links are shared.
// - A GPU's NIC link and its fabric link do not share anything (no PCIe switch between GPU, NIC and host).
// - No route goes through host memory: compute.staging charges a copy time per iteration instead.
#include "topologies/builder.hpp"

#include <fmt/format.h>

namespace sparsim {
namespace {

class MultiGpuTopology : public Topology {
public:
  MultiGpuTopology(std::unique_ptr<Topology> network, std::size_t gpus, std::string fabric, LinkSpec link,
                   std::string cross_rail)
      : network_(std::move(network))
      , gpus_(gpus)
      , fabric_(std::move(fabric))
      , link_(link)
      , cross_rail_(std::move(cross_rail))
      , network_links_(network_->link_count())
      , switch_fabric_(fabric_ == "switch")
      , cross_rail_through_fabric_(cross_rail_ == "fabric")
  {
  }

  std::string type() const override { return network_->type(); }
  std::size_t node_count() const override { return network_->node_count(); }
  std::size_t gpus_per_node() const override { return gpus_; }
  std::size_t rails() const override { return network_->rails(); }
  std::size_t link_count() const override
  {
    const std::size_t nodes = node_count() / gpus_;
    return network_links_ + nodes * (switch_fabric_ ? gpus_ : gpus_ * (gpus_ - 1) / 2);
  }

  NetworkGraph graph() const override
  {
    NetworkGraph graph = network_->graph();
    const std::size_t nodes = node_count() / gpus_;
    for (std::size_t node = 0; node < nodes; ++node) {
      const std::size_t first = node * gpus_;
      if (switch_fabric_) {
        // Link network_links_ + g is GPU g's link into its node's switch: routing relies on this numbering.
        const std::size_t fabric_switch = graph.add_router(fmt::format("node{}_switch", node));
        for (std::size_t g = first; g < first + gpus_; ++g)
          graph.add_link(
              {fmt::format("gpu{}_switch", g), g, fabric_switch, link_.bandwidth, link_.latency, "intra_node"});
      } else {
        // Pairs (a, b), a < b, in the order mesh_link() counts them.
        for (std::size_t a = first; a < first + gpus_; ++a)
          for (std::size_t b = a + 1; b < first + gpus_; ++b)
            graph.add_link({fmt::format("gpu{}_gpu{}", a, b), a, b, link_.bandwidth, link_.latency, "intra_node"});
      }
    }
    return graph;
  }

  void route(std::size_t src, std::size_t dst, HopList& hops) const override
  {
    if (same_node(src, dst))
      return route_in_node(src, dst, hops);
    network_->route(leave_node_from(src, dst, hops), dst, hops);
  }

  bool routes_per_message() const override { return network_->routes_per_message(); }
  void route_message(std::size_t src, std::size_t dst, std::uint64_t message, HopList& hops) const override
  {
    if (same_node(src, dst))
      return route_in_node(src, dst, hops);
    network_->route_message(leave_node_from(src, dst, hops), dst, message, hops);
  }
  AdaptiveRouting adaptive_routing() const override { return network_->adaptive_routing(); }
  void route_nonminimal(std::size_t src, std::size_t dst, std::uint64_t message, HopList& hops) const override
  {
    if (same_node(src, dst))
      return route_in_node(src, dst, hops);
    network_->route_nonminimal(leave_node_from(src, dst, hops), dst, message, hops);
  }
  std::string routing() const override { return network_->routing(); }

  nlohmann::json to_json() const override
  {
    nlohmann::json spec = network_->to_json();
    nlohmann::json node = link_spec_json(link_);
    node["gpus"] = gpus_;
    node["fabric"] = fabric_;
    node["cross_rail"] = cross_rail_;
    spec["node"] = node;
    return spec;
  }

  std::string describe() const override
  {
    return fmt::format("{}; {} nodes of {} GPUs, intra-node {} of {} and {} per link", network_->describe(),
                       node_count() / gpus_, gpus_, fabric_, format_bandwidth(link_.bandwidth),
                       format_duration(link_.latency));
  }

private:
  bool same_node(std::size_t a, std::size_t b) const { return a / gpus_ == b / gpus_; }

  // The GPU whose NIC a message from src to dst (on another node) leaves through: src itself, or under
  // "cross_rail": "fabric" the GPU of src's node on dst's rail, reached through the fabric (those hops appended).
  std::size_t leave_node_from(std::size_t src, std::size_t dst, HopList& hops) const
  {
    if (!cross_rail_through_fabric_ || src % gpus_ == dst % gpus_)
      return src;
    const std::size_t relay = src / gpus_ * gpus_ + dst % gpus_;
    route_in_node(src, relay, hops);
    return relay;
  }

  void route_in_node(std::size_t src, std::size_t dst, HopList& hops) const
  {
    if (switch_fabric_) {
      hops.push(network_links_ + src, true);
      hops.push(network_links_ + dst, false);
      return;
    }
    const std::size_t a = std::min(src, dst);
    const std::size_t b = std::max(src, dst);
    hops.push(mesh_link(a, b), src == a);
  }

  // The mesh link between GPUs a < b of one node: each node holds G(G-1)/2 links, pairs in lexicographic order.
  std::size_t mesh_link(std::size_t a, std::size_t b) const
  {
    const std::size_t node = a / gpus_;
    const std::size_t i = a % gpus_;
    const std::size_t j = b % gpus_;
    const std::size_t pairs_before_row = i * gpus_ - i * (i + 1) / 2; // pairs (i', .) with i' < i
    return network_links_ + node * (gpus_ * (gpus_ - 1) / 2) + pairs_before_row + (j - i - 1);
  }

  std::unique_ptr<Topology> network_;
  std::size_t gpus_;
  std::string fabric_;
  LinkSpec link_;
  std::string cross_rail_;    // "network" or "fabric"
  std::size_t network_links_; // the network's links come first; the intra-node links follow
  // fabric_ and cross_rail_ as flags, so that routing a message compares no strings.
  bool switch_fabric_;
  bool cross_rail_through_fabric_;
};

} // namespace

std::unique_ptr<Topology> with_multi_gpu_nodes(std::unique_ptr<Topology> network, JsonReader& node)
{
  constexpr std::size_t kMaxGpusPerNode = 64;
  const std::size_t gpus = read_count(node, "gpus", kMaxGpusPerNode);
  if (gpus == 1) {
    node.finish();
    return network;
  }
  const std::string fabric = node.get_enum("fabric", {"switch", "mesh"}, "switch");
  const LinkSpec link = read_link_spec(node);
  const std::string cross_rail = node.get_enum("cross_rail", {"network", "fabric"}, "network");
  node.finish();
  if (network->node_count() % gpus != 0)
    node.fail("gpus", std::to_string(gpus),
              fmt::format("a divisor of the network's {} endpoints ({}): each GPU has its own NIC, G consecutive "
                          "endpoints form a node",
                          network->node_count(), network->describe()));
  return std::make_unique<MultiGpuTopology>(std::move(network), gpus, fabric, link, cross_rail);
}

} // namespace sparsim
