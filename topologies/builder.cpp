#include "topologies/builder.hpp"

#include <fmt/format.h>
#include <initializer_list>
#include <simgrid/kernel/routing/NetPoint.hpp>
#include <simgrid/kernel/routing/NetZoneImpl.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Link.hpp>
#include <stdexcept>
#include <utility>

namespace sparsim {
namespace {

using simgrid::kernel::resource::StandardLinkImpl;
using simgrid::kernel::routing::NetPoint;
using simgrid::kernel::routing::NetZoneImpl;
using simgrid::kernel::routing::Route;

// Computation is not what sparsim simulates on these hosts; any positive speed will do.
constexpr double kHostSpeed = 1e9;

// Formats `value` with the fewest decimals in the largest of `units` (largest first) whose text parses back
// to exactly `value` ("650ns", "4.7GBps"); otherwise in the base unit, where the shortest form round-trips.
template <class Parse>
std::string exact_text(double value, std::initializer_list<std::pair<const char*, double>> units,
                       const char* base_unit, Parse parse)
{
  constexpr int kMaxDecimals = 9;
  for (const auto& [unit, scale] : units) {
    if (value != 0 && value < scale)
      continue;
    for (int decimals = 0; decimals <= kMaxDecimals; ++decimals) {
      std::string text = fmt::format("{:.{}f}{}", value / scale, decimals, unit);
      if (parse(text) == value)
        return text;
    }
  }
  return fmt::format("{}{}", value, base_unit);
}

// A NetZone whose routes come from a topology's routing function (see builder.hpp).
class TopologyZone : public NetZoneImpl {
public:
  TopologyZone(const std::string& name, RouteFunction route) : NetZoneImpl(name), route_(std::move(route)) {}

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
      route_(src->id(), dst->id(), hops);
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
  RouteFunction route_;
  std::vector<DuplexLink> links_;
  StandardLinkImpl* loopback_ = nullptr;
  Seconds loopback_latency_ = 0;
};

}  // namespace

LinkSpec read_link_spec(JsonReader& reader)
{
  LinkSpec spec;
  spec.bandwidth = reader.get_bandwidth("bandwidth");
  spec.latency = reader.get_duration("latency");
  return spec;
}

nlohmann::json link_spec_json(const LinkSpec& spec)
{
  const std::string bandwidth =
      exact_text(spec.bandwidth, {{"GBps", 1e9}, {"MBps", 1e6}, {"kBps", 1e3}, {"Bps", 1}}, "Bps",
                 [](const std::string& text) { return parse_bandwidth(text); });
  const std::string latency = exact_text(spec.latency, {{"s", 1}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}}, "s",
                                         [](const std::string& text) { return parse_duration(text); });
  return {{"bandwidth", bandwidth}, {"latency", latency}};
}

std::size_t read_count(JsonReader& reader, std::string_view key, std::size_t max, std::optional<std::int64_t> fallback)
{
  return static_cast<std::size_t>(reader.get_int(key, fallback, 1, static_cast<std::int64_t>(max)));
}

void HopList::push(std::size_t link, bool up)
{
  if (size_ == kCapacity)
    throw std::logic_error(fmt::format("HopList: a route longer than {} links", kCapacity));
  hops_[size_++] = Hop{link, up};
}

std::vector<simgrid::s4u::Host*> build_zone(const std::string& zone_name, const NetworkGraph& graph,
                                            RouteFunction route)
{
  if (!simgrid::s4u::Engine::has_instance())
    throw std::logic_error("build_zone: create the simgrid::s4u::Engine before building the platform");
  auto* engine = simgrid::s4u::Engine::get_instance();
  simgrid::s4u::NetZone* parent = engine->get_netzone_root();

  // The zone is owned by SimGrid's engine from here on (the root, or a child of the root).
  auto* zone = new TopologyZone(zone_name, std::move(route));
  if (parent)
    zone->set_parent(parent->get_impl());
  simgrid::s4u::NetZone* iface = zone->get_iface();

  std::vector<simgrid::s4u::Host*> hosts;
  hosts.reserve(graph.node_count());
  for (std::size_t i = 0; i < graph.node_count(); ++i) {
    hosts.push_back(iface->create_host(graph.vertex_name(i), kHostSpeed));
    if (hosts.back()->get_netpoint()->id() != i)
      throw std::logic_error("build_zone: host netpoints are not numbered in node order");
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
    throw std::logic_error("build_zone: the network model has no __loopback__ link (use CM02 or LV08)");
  zone->set_loopback(loopback->get_impl(), loopback->get_latency());
  iface->seal();
  return hosts;
}

}  // namespace sparsim
