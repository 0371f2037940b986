// Dragonfly in the Cray XC (Aries) layout: groups of chassis of routers, `nodes` compute nodes per router.
//
// Wiring (Alverson et al., "Cray XC Series Network", Cray Inc. 2012; Faanes et al., "Cray Cascade", SC'12):
// - node link: each node to its router ("node");
// - intra_chassis (green, backplane): all-to-all between the routers of a chassis;
// - intra_group (black, copper): router r of chassis c to router r of every other chassis of its group;
// - global (blue, optical): `global_links` links between every pair of groups. Group g numbers its global
//   links m = k * (groups - 1) + (rank of the peer group among g's peers) and puts link m on the router in
//   chassis i % chassis, slot i / chassis, where i = m mod (chassis * routers): consecutive links land in
//   different chassis and the ports spread over all routers as in Cray's wiring, at most `global_ports` per
//   router (Aries: 10).
// Routing ("routing"), computed by this file in O(global_links) per message; nothing is stored per node pair:
// - "minimal" (the default; static, at most one global link): within a group, the green hop first, then the
//   black one; between groups, the global link k whose two routers are nearest to source and destination
//   (fewest intra-group hops), ties broken by a fixed hash of the node pair so that parallel global links
//   share the load;
// - "valiant" (Valiant's randomised routing as Kim et al., ISCA 2008, apply it to the dragonfly; link-level
//   model only): a message between two groups goes minimally to an intermediate group, drawn per message
//   from a hash of the message (the run's seed, its source, its number) among the other groups, then
//   minimally on to its destination: two global links, the load of any pattern spread over all groups. A
//   message between two routers of one group goes through an intermediate router of the group drawn the same
//   way (Aries' non-minimal routes inside a group, Alverson et al. 2012): up to four router-to-router hops
//   instead of two. With fewer than three groups (or routers in a group) there is no third to go through.
// - "adaptive" (UGAL-style, link-level model only): per message, when its transfer starts, the network model
//   compares the minimal route with `adaptive.candidates` Valiant routes (each drawn as above from the message
//   and the candidate's number) by the load on their links and takes the one predicted to finish first; a
//   Valiant one only when it beats the minimal route's time by more than the fraction `adaptive.bias`.
//   Defaults as Aries: it weighs two minimal and two non-minimal paths per packet (Alverson et al. 2012; one
//   minimal route per node pair here, so 1 + 2 candidates), and its default mode ADAPTIVE_0 has no bias
//   toward minimal (Cray's GNI routing modes as De Sensi et al., SC'19, describe them).
// Every link is split-duplex with its own bandwidth per direction.
//
// We build our own zone instead of SimGrid's create_dragonfly_zone (3.32) because that one puts every global
// link on chassis 0 (all traffic between two groups on one merged link, a hot spot), gives all levels one
// bandwidth/latency, shares its limiter link between both directions and segfaults, unchecked, with more groups
// than routers per chassis.
//
// Config: see docs/platforms.md and configs/platforms/piz_daint.json.
//
// LIMITATIONS
// - Under "minimal" adversarial patterns are slower than on Aries and hot links are not relieved; under
//   "valiant" uniform traffic pays two global links where one would do. "adaptive" chooses once per message
//   (Aries: per packet) with the load of every link of the candidates in view (Aries: local estimates); one
//   minimal route per node pair (Aries weighs two).
// - Valiant's intermediate is a group, entered and left at the routers nearest the route (Kim et al. draw an
//   intermediate router), and a message keeps its route for all its bytes (Aries chooses per packet).
// - Parallel cables between two routers ("cables", e.g. Aries' 3 black cables) are merged into one link with
//   cables x bandwidth; SimGrid shares it as one resource.
// - Global link placement is a fixed round-robin, not a particular machine's cabling.
// - A hop costs the latency of its link; router pipelines, packets and credits are not modelled (fluid flows).
#include "topologies/builder.hpp"

#include <algorithm>
#include <cstdint>
#include <fmt/format.h>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

namespace sparsim {
namespace {

// Position of a router inside its group.
struct Slot {
  std::size_t chassis = 0;
  std::size_t router = 0;
};

// The dragonfly's shape and the numbering of its vertices and links, shared by graph() and the router.
struct DragonflyShape {
  std::size_t groups = 0, chassis = 0, routers = 0, nodes = 0;
  std::size_t global_links = 1; // per pair of groups

  std::size_t routers_per_group() const { return chassis * routers; }
  std::size_t router_count() const { return groups * routers_per_group(); }
  std::size_t node_count() const { return router_count() * nodes; }

  // Index of the unordered pair {a, b}, a < b, among the n * (n - 1) / 2 pairs of n items.
  static std::size_t pair_index(std::size_t a, std::size_t b, std::size_t n)
  {
    return a * (2 * n - a - 1) / 2 + b - a - 1;
  }
  static std::size_t pair_count(std::size_t n) { return n * (n - 1) / 2; }

  // Router (group, slot) is router number (group * chassis + chassis) * routers + router, vertex node_count() + that.
  std::size_t router_vertex(std::size_t group, Slot slot) const
  {
    return node_count() + (group * chassis + slot.chassis) * routers + slot.router;
  }

  // Links: node links first (link n belongs to node n), then intra-chassis, intra-group and global links.
  std::size_t green_base() const { return node_count(); }
  std::size_t black_base() const { return green_base() + groups * chassis * pair_count(routers); }
  std::size_t global_base() const { return black_base() + groups * routers * pair_count(chassis); }
  std::size_t link_count() const { return global_base() + pair_count(groups) * global_links; }

  std::size_t green_link(std::size_t group, std::size_t chassis_index, std::size_t r1, std::size_t r2) const
  {
    return green_base() + (group * chassis + chassis_index) * pair_count(routers) + pair_index(r1, r2, routers);
  }
  std::size_t black_link(std::size_t group, std::size_t router, std::size_t c1, std::size_t c2) const
  {
    return black_base() + (group * routers + router) * pair_count(chassis) + pair_index(c1, c2, chassis);
  }
  std::size_t global_link(std::size_t g1, std::size_t g2, std::size_t k) const
  {
    return global_base() + pair_index(g1, g2, groups) * global_links + k;
  }

  // The router of `group` that holds its k-th global link to `peer`.
  Slot gateway(std::size_t group, std::size_t peer, std::size_t k) const
  {
    const std::size_t m = (k * (groups - 1) + (peer < group ? peer : peer - 1)) % routers_per_group();
    return {m % chassis, m / chassis};
  }

  static std::size_t distance(Slot a, Slot b)
  {
    return (a.chassis != b.chassis ? 1 : 0) + (a.router != b.router ? 1 : 0);
  }

  // Inside one group: the green (intra-chassis) hop first, then the black (intra-group) one.
  void route_in_group(std::size_t group, Slot from, Slot to, HopList& hops) const
  {
    if (from.router != to.router)
      hops.push(green_link(group, from.chassis, std::min(from.router, to.router), std::max(from.router, to.router)),
                from.router < to.router);
    if (from.chassis != to.chassis)
      hops.push(black_link(group, to.router, std::min(from.chassis, to.chassis), std::max(from.chassis, to.chassis)),
                from.chassis < to.chassis);
  }

  // Where node `node` sits: its group and its router's slot there.
  struct Place {
    std::size_t group = 0;
    Slot slot;
  };
  Place place(std::size_t node) const
  {
    const std::size_t router = node / nodes;
    return {router / routers_per_group(), {(router / routers) % chassis, router % routers}};
  }

  // The global link between groups a and b with the fewest intra-group hops from `from` (in a) and to `to`
  // (in b; any router of b when null); the scan starts at `start`, so that ties spread over parallel links.
  std::size_t nearest_global(std::size_t a, Slot from, std::size_t b, const Slot* to, std::uint64_t start) const
  {
    start %= global_links;
    std::size_t best = start;
    std::size_t best_cost = std::numeric_limits<std::size_t>::max();
    for (std::size_t i = 0; i < global_links && best_cost > 0; ++i) {
      const std::size_t k = (start + i) % global_links;
      const std::size_t cost = distance(from, gateway(a, b, k)) + (to ? distance(gateway(b, a, k), *to) : 0);
      if (cost < best_cost) {
        best = k;
        best_cost = cost;
      }
    }
    return best;
  }

  // From router `from` of group a over global link k to group b: the hops inside a, then the global link.
  // Returns the router of b the route arrives at.
  Slot cross(std::size_t a, Slot from, std::size_t b, std::size_t k, HopList& hops) const
  {
    route_in_group(a, from, gateway(a, b, k), hops);
    hops.push(global_link(std::min(a, b), std::max(a, b), k), a < b);
    return gateway(b, a, k);
  }

  void route(std::size_t src, std::size_t dst, HopList& hops) const
  {
    const Place from = place(src), to = place(dst);
    hops.push(src, true);
    if (from.group == to.group) {
      route_in_group(from.group, from.slot, to.slot, hops);
    } else {
      const std::size_t k = nearest_global(from.group, from.slot, to.group, &to.slot, mix(src * node_count() + dst));
      route_in_group(to.group, cross(from.group, from.slot, to.group, k, hops), to.slot, hops);
    }
    hops.push(dst, false);
  }

  // Valiant: minimally to an intermediate drawn from `message` (a router of the group for a message within a
  // group, else a group), then minimally to the destination.
  void route_valiant(std::size_t src, std::size_t dst, std::uint64_t message, HopList& hops) const
  {
    const Place from = place(src), to = place(dst);
    const std::uint64_t draw = mix(message);
    const std::size_t src_router = src / nodes, dst_router = dst / nodes;
    if (from.group == to.group) {
      if (src_router == dst_router || routers_per_group() < 3) {
        route(src, dst, hops);
        return;
      }
      const std::size_t first = from.group * routers_per_group();
      const std::size_t via = other_than(draw, routers_per_group(), src_router - first, dst_router - first);
      const Slot middle{via / routers, via % routers};
      hops.push(src, true);
      route_in_group(from.group, from.slot, middle, hops);
      route_in_group(from.group, middle, to.slot, hops);
      hops.push(dst, false);
      return;
    }
    if (groups < 3) {
      route(src, dst, hops);
      return;
    }
    const std::size_t via = other_than(draw, groups, from.group, to.group);
    const std::size_t start = mix(draw); // ties among parallel global links, per message
    hops.push(src, true);
    const Slot entry =
        cross(from.group, from.slot, via, nearest_global(from.group, from.slot, via, nullptr, start), hops);
    const Slot arrival = cross(via, entry, to.group, nearest_global(via, entry, to.group, &to.slot, start), hops);
    route_in_group(to.group, arrival, to.slot, hops);
    hops.push(dst, false);
  }

  static std::uint64_t mix(std::uint64_t x) { return mix64(x); }

  // One of 0 .. count-1 other than a and b (a != b, count >= 3), chosen by `draw`: the intermediate.
  static std::size_t other_than(std::uint64_t draw, std::size_t count, std::size_t a, std::size_t b)
  {
    std::size_t chosen = draw % (count - 2);
    for (std::size_t skipped : {std::min(a, b), std::max(a, b)})
      if (chosen >= skipped)
        ++chosen;
    return chosen;
  }
};

struct DragonflyLinks {
  LinkSpec node, intra_chassis, intra_group, global;
  std::size_t intra_chassis_cables = 1, intra_group_cables = 1;
};

class DragonflyTopology : public Topology {
public:
  DragonflyTopology(DragonflyShape shape, std::size_t global_ports, DragonflyLinks links, std::string routing,
                    AdaptiveRouting adaptive)
      : shape_(shape)
      , global_ports_(global_ports)
      , links_(links)
      , routing_(std::move(routing))
      , valiant_(routing_ == "valiant")
      , adaptive_(adaptive)
  {
  }

  std::string type() const override { return "dragonfly"; }
  std::size_t node_count() const override { return shape_.node_count(); }

  std::size_t link_count() const override { return shape_.link_count(); }

  NetworkGraph graph() const override
  {
    const DragonflyShape& s = shape_;
    NetworkGraph graph(s.node_count());
    for (std::size_t g = 0; g < s.groups; ++g)
      for (std::size_t c = 0; c < s.chassis; ++c)
        for (std::size_t r = 0; r < s.routers; ++r)
          graph.add_router(fmt::format("g{}c{}r{}", g, c, r));

    // Links in the numbering of DragonflyShape: node, intra-chassis, intra-group, then global links.
    auto add = [&](std::size_t from, std::size_t to, const LinkSpec& spec, std::size_t cables, const char* level,
                   const std::string& suffix = "") {
      graph.add_link({fmt::format("{}_{}{}", graph.vertex_name(from), graph.vertex_name(to), suffix), from, to,
                      spec.bandwidth * static_cast<double>(cables), spec.latency, level});
    };
    for (std::size_t n = 0; n < s.node_count(); ++n)
      add(n, s.node_count() + n / s.nodes, links_.node, 1, "node");
    for (std::size_t g = 0; g < s.groups; ++g)
      for (std::size_t c = 0; c < s.chassis; ++c)
        for (std::size_t r1 = 0; r1 < s.routers; ++r1)
          for (std::size_t r2 = r1 + 1; r2 < s.routers; ++r2)
            add(s.router_vertex(g, {c, r1}), s.router_vertex(g, {c, r2}), links_.intra_chassis,
                links_.intra_chassis_cables, "intra_chassis");
    for (std::size_t g = 0; g < s.groups; ++g)
      for (std::size_t r = 0; r < s.routers; ++r)
        for (std::size_t c1 = 0; c1 < s.chassis; ++c1)
          for (std::size_t c2 = c1 + 1; c2 < s.chassis; ++c2)
            add(s.router_vertex(g, {c1, r}), s.router_vertex(g, {c2, r}), links_.intra_group, links_.intra_group_cables,
                "intra_group");
    for (std::size_t g1 = 0; g1 < s.groups; ++g1)
      for (std::size_t g2 = g1 + 1; g2 < s.groups; ++g2)
        for (std::size_t k = 0; k < s.global_links; ++k)
          add(s.router_vertex(g1, s.gateway(g1, g2, k)), s.router_vertex(g2, s.gateway(g2, g1, k)), links_.global, 1,
              "global", fmt::format("_{}", k));
    if (graph.edge_count() != s.link_count())
      throw std::logic_error("DragonflyTopology: link numbering out of step with the graph");
    return graph;
  }

  void route(std::size_t src, std::size_t dst, HopList& hops) const override { shape_.route(src, dst, hops); }
  bool routes_per_message() const override { return valiant_; }
  void route_message(std::size_t src, std::size_t dst, std::uint64_t message, HopList& hops) const override
  {
    if (valiant_)
      shape_.route_valiant(src, dst, message, hops);
    else
      shape_.route(src, dst, hops);
  }
  AdaptiveRouting adaptive_routing() const override { return adaptive_; }
  void route_nonminimal(std::size_t src, std::size_t dst, std::uint64_t message, HopList& hops) const override
  {
    shape_.route_valiant(src, dst, message, hops);
  }
  std::string routing() const override { return routing_; }

  nlohmann::json to_json() const override
  {
    nlohmann::json links = {{"node", link_spec_json(links_.node)},
                            {"intra_chassis", link_spec_json(links_.intra_chassis)},
                            {"intra_group", link_spec_json(links_.intra_group)},
                            {"global", link_spec_json(links_.global)}};
    links["intra_chassis"]["cables"] = links_.intra_chassis_cables;
    links["intra_group"]["cables"] = links_.intra_group_cables;
    nlohmann::json spec = {
        {"type", "dragonfly"},           {"groups", shape_.groups}, {"chassis", shape_.chassis},
        {"routers", shape_.routers},     {"nodes", shape_.nodes},   {"global_links", shape_.global_links},
        {"global_ports", global_ports_}, {"links", links},          {"routing", routing_}};
    if (adaptive_.candidates > 0)
      spec["adaptive"] = {{"candidates", adaptive_.candidates}, {"bias", adaptive_.bias}};
    return spec;
  }

  std::string describe() const override
  {
    return fmt::format("dragonfly {} groups x {} chassis x {} routers x {} nodes ({} nodes), {} global links per "
                       "group pair{}",
                       shape_.groups, shape_.chassis, shape_.routers, shape_.nodes, node_count(), shape_.global_links,
                       routing_ == "minimal" ? "" : ", " + routing_ + " routing");
  }

private:
  DragonflyShape shape_;
  std::size_t global_ports_;
  DragonflyLinks links_;
  std::string routing_; // "minimal", "valiant" or "adaptive"
  bool valiant_;
  AdaptiveRouting adaptive_; // candidates 0 unless "adaptive"
};

// Reads one link class; `cables` (parallel cables merged into one link) only where allowed.
LinkSpec read_level(JsonReader& links, std::string_view key, std::size_t* cables = nullptr)
{
  JsonReader level = links.object(key);
  const LinkSpec spec = read_link_spec(level);
  if (cables)
    *cables = read_count(level, "cables", 64, 1);
  level.finish();
  return spec;
}

} // namespace

std::unique_ptr<Topology> parse_dragonfly(JsonReader& spec)
{
  DragonflyShape shape;
  shape.groups = read_count(spec, "groups", kMaxNodes);
  shape.chassis = read_count(spec, "chassis", kMaxNodes);
  shape.routers = read_count(spec, "routers", kMaxNodes);
  shape.nodes = read_count(spec, "nodes", kMaxNodes);
  shape.global_links = read_count(spec, "global_links", 1024, 1);
  // Aries: 10 optical (global) ports per router (Alverson et al. 2012).
  const std::size_t global_ports = read_count(spec, "global_ports", 1024, 10);

  if (shape.groups * shape.chassis > kMaxNodes || shape.groups * shape.chassis * shape.routers > kMaxNodes ||
      shape.node_count() > kMaxNodes)
    spec.fail("", fmt::format("{} x {} x {} x {}", shape.groups, shape.chassis, shape.routers, shape.nodes),
              fmt::format("at most {} compute nodes (groups x chassis x routers x nodes)", kMaxNodes));
  const std::size_t ports = shape.routers_per_group() * global_ports;
  if ((shape.groups - 1) * shape.global_links > ports)
    spec.fail("groups", shape.groups,
              fmt::format("at most {} groups: a group has {} routers x {} global_ports = {} global ports and "
                          "needs {} (global_links) per other group",
                          ports / shape.global_links + 1, shape.routers_per_group(), global_ports, ports,
                          shape.global_links));

  DragonflyLinks links;
  JsonReader levels = spec.object("links");
  links.node = read_level(levels, "node");
  links.intra_chassis = read_level(levels, "intra_chassis", &links.intra_chassis_cables);
  links.intra_group = read_level(levels, "intra_group", &links.intra_group_cables);
  links.global = read_level(levels, "global");
  levels.finish();
  const std::string routing = spec.get_enum("routing", kDragonflyRoutings, "minimal");
  AdaptiveRouting adaptive;
  if (routing == "adaptive") {
    JsonReader parameters = spec.optional_object("adaptive");
    adaptive.candidates = read_count(parameters, "candidates", 16, 2);
    adaptive.bias = parameters.get_number("bias", 0.0, 0.0, 1.0);
    parameters.finish();
  } else if (spec.has("adaptive")) {
    spec.fail("adaptive", spec.raw("adaptive"), "no \"adaptive\" parameters unless \"routing\" is \"adaptive\"");
  }
  return std::make_unique<DragonflyTopology>(shape, global_ports, links, routing, adaptive);
}

} // namespace sparsim
