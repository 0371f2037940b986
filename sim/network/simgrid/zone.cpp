#include "sim/network/simgrid/zone.hpp"

#include "topologies/network_graph.hpp"

#include <simgrid/kernel/routing/NetPoint.hpp>
#include <simgrid/kernel/routing/NetZoneImpl.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Link.hpp>

#include <stdexcept>

namespace sparsim {
namespace {

using simgrid::kernel::resource::StandardLinkImpl;
using simgrid::kernel::routing::NetPoint;
using simgrid::kernel::routing::NetZoneImpl;
using simgrid::kernel::routing::Route;

// Computation is not what sparsim simulates on these hosts; any positive speed will do.
constexpr double kHostSpeed = 1e9;

// A NetZone whose routes come from a topology's route() (see zone.hpp).
class TopologyZone : public NetZoneImpl {
public:
  TopologyZone(const std::string& name, const Topology& topology)
      : NetZoneImpl(name)
      , topology_(topology)
  {
  }

  void add_link(StandardLinkImpl* up, StandardLinkImpl* down, Seconds latency)
  {
    links_.push_back({up, down, latency});
  }
  void set_loopback(StandardLinkImpl* loopback, Seconds latency)
  {
    loopback_ = loopback;
    loopback_latency_ = latency;
  }

  void get_local_route(const NetPoint* src, const NetPoint* dst, Route* into, double* latency) override
  {
    Seconds total = 0;
    if (src->id() == dst->id()) {
      into->link_list_.push_back(loopback_);
      total = loopback_latency_;
    } else {
      HopList hops;
      topology_.route(src->id(), dst->id(), hops);
      for (const Hop& hop : hops) {
        const DuplexLink& link = links_[hop.link];
        into->link_list_.push_back(hop.up ? link.up : link.down);
        total += link.latency;
      }
    }
    if (latency)
      *latency += total;
  }

private:
  struct DuplexLink {
    StandardLinkImpl* up;
    StandardLinkImpl* down;
    Seconds latency;
  };
  const Topology& topology_;
  std::vector<DuplexLink> links_;
  StandardLinkImpl* loopback_ = nullptr;
  Seconds loopback_latency_ = 0;
};

} // namespace

std::vector<simgrid::s4u::Host*> build_platform(const Topology& topology)
{
  return build_platform(topology, topology.graph());
}

std::vector<simgrid::s4u::Host*> build_platform(const Topology& topology, const NetworkGraph& graph)
{
  if (!simgrid::s4u::Engine::has_instance())
    throw std::logic_error("build_platform: create the simgrid::s4u::Engine before building the platform");
  auto* engine = simgrid::s4u::Engine::get_instance();
  simgrid::s4u::NetZone* parent = engine->get_netzone_root();

  // The zone is owned by SimGrid's engine from here on (the root, or a child of the root).
  auto* zone = new TopologyZone(topology.type(), topology);
  if (parent)
    zone->set_parent(parent->get_impl());
  simgrid::s4u::NetZone* iface = zone->get_iface();

  std::vector<simgrid::s4u::Host*> hosts;
  hosts.reserve(graph.node_count());
  for (std::size_t i = 0; i < graph.node_count(); ++i) {
    hosts.push_back(iface->create_host(graph.vertex_name(i), kHostSpeed));
    if (hosts.back()->get_netpoint()->id() != i)
      throw std::logic_error("build_platform: host netpoints are not numbered in node order");
  }
  for (std::size_t i = 0; i < graph.edge_count(); ++i) {
    const NetworkGraph::Link& link = graph.link(i);
    auto* duplex = iface->create_split_duplex_link(link.name, link.bandwidth);
    duplex->set_latency(link.latency);
    duplex->seal();
    zone->add_link(duplex->get_link_up()->get_impl(), duplex->get_link_down()->get_impl(), link.latency);
  }
  const simgrid::s4u::Link* loopback = engine->link_by_name_or_null("__loopback__");
  if (!loopback)
    throw std::logic_error("build_platform: the network model has no __loopback__ link (use CM02 or LV08)");
  zone->set_loopback(loopback->get_impl(), loopback->get_latency());
  iface->seal();
  return hosts;
}

} // namespace sparsim
