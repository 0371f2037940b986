// The dragonfly's Valiant and adaptive routing (topology.routing "valiant" and "adaptive", the link-level
// model): every Valiant route is a path of
// the graph from source to destination through a third group (two global links), drawn per message and the
// same for the same message; messages within a group go through a third router of it; and the classic behaviour of Kim
// et al. (ISCA 2008) on a balanced dragonfly, measured on the link-level model: under adversarial traffic (every node
// of group g sends to group g + 1) minimal routing is held to the pair's one global link while Valiant
// spreads the load over all groups, several times faster; under uniform traffic (an all-to-all) minimal runs
// near the injection rate and Valiant, whose messages cross two global links, at about half of it; adaptive
// routing (UGAL, Jiang et al., ISCA 2009) close to the better of the two on both. The config rules: SimGrid's
// flows keep static routes, so "valiant" and "adaptive" need network.model "LinkLevel".
#include "config_errors.hpp"
#include "pattern_harness.hpp"
#include "topology_specs.hpp"

#include "sim/network/link_level/transport.hpp"
#include "sim/network/models/link_slots.hpp"
#include "sim/network/simgrid/parking.hpp"
#include "sim/network/simgrid/zone.hpp"
#include "sim/run/config.hpp"
#include "topologies/network_graph.hpp"
#include "topologies/topology.hpp"

#include <gtest/gtest.h>
#include <simgrid/s4u/NetZone.hpp>

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <iostream>
#include <set>

using namespace sparsim;
using namespace sparsim::testing;
using nlohmann::json;
using sparsim::testing::small_fat_tree_spec;

namespace {

const std::filesystem::path kConfigs = std::filesystem::path(SPARSIM_SOURCE_DIR) / "configs";

std::unique_ptr<Topology> load(json spec, const std::string& routing)
{
  spec["routing"] = routing;
  return parse_topology(JsonReader(spec, "topology"), kConfigs);
}

// A balanced dragonfly in Kim et al.'s sense (a = 2p = 2h): 9 groups of 8 routers (2 chassis x 4), 2 nodes
// per router, one global link between every pair of groups (8 per group, one per router). Node links 10 GB/s;
// the links inside a group 40 GB/s, so that they never limit; global links 20 GB/s, so that uniform traffic
// leaving a group (16 nodes x 128/143 of their rate) fits its 8 global links under minimal routing.
json balanced_dragonfly_spec()
{
  auto level = [](const char* bandwidth) { return json{{"bandwidth", bandwidth}, {"latency", "100ns"}}; };
  return {{"type", "dragonfly"},
          {"groups", 9},
          {"chassis", 2},
          {"routers", 4},
          {"nodes", 2},
          {"global_links", 1},
          {"links",
           {{"node", level("10GBps")},
            {"intra_chassis", level("40GBps")},
            {"intra_group", level("40GBps")},
            {"global", level("20GBps")}}}};
}
constexpr std::size_t kNodesPerGroup = 16;
constexpr std::size_t kGroups = 9;

// The hops walk the graph from `src` to `dst`; returns the groups (by router vertex names "g<G>c..r..") the
// route's global links join, in order.
std::vector<std::pair<std::string, std::string>> walk(const NetworkGraph& graph, std::size_t src, std::size_t dst,
                                                      const HopList& hops)
{
  std::vector<std::pair<std::string, std::string>> globals;
  std::size_t at = src;
  for (const Hop& hop : hops) {
    const NetworkGraph::Link& link = graph.link(hop.link);
    EXPECT_EQ(at, hop.up ? link.from : link.to) << "hop over " << link.name << " does not start where the last ended";
    at = hop.up ? link.to : link.from;
    if (link.level == "global") {
      auto group = [&](std::size_t vertex) {
        const std::string& name = graph.vertex_name(vertex);
        return name.substr(0, name.find('c'));
      };
      globals.emplace_back(group(hop.up ? link.from : link.to), group(at));
    }
  }
  EXPECT_EQ(at, dst) << "the route ends elsewhere";
  return globals;
}

// A route as text, "link+ link- ...", to compare routes and count distinct ones.
std::string route_text(const HopList& hops)
{
  std::string text;
  for (const Hop& hop : hops)
    text += fmt::format("{}{} ", hop.link, hop.up ? "+" : "-");
  return text;
}

// The makespan of a pattern on the link-level model over `topology`, ranks on its first P nodes, seed 1.
// `hosts`: the P actors' host (one, for this model).
double link_level_makespan(const Topology& topology, const std::vector<simgrid::s4u::Host*>& hosts,
                           const std::vector<PatternMessage>& messages)
{
  const int P = static_cast<int>(hosts.size());
  const NetworkGraph graph = topology.graph();
  ActorParking parking(P);
  LinkLevelTransport transport(P, parking, link_slot_specs(graph),
                               link_route(topology, first_nodes(static_cast<std::size_t>(P)), graph.edge_count(), 1));
  const auto arrivals = run_pattern(transport, hosts, messages);
  return *std::max_element(arrivals.begin(), arrivals.end());
}

} // namespace

TEST(ValiantRouting, RoutesThroughAThirdGroupDrawnPerMessage)
{
  const auto topology = load(small_dragonfly_spec(), "valiant"); // 5 groups, parallel global links
  EXPECT_TRUE(topology->routes_per_message());
  EXPECT_EQ(topology->routing(), "valiant");
  const NetworkGraph graph = topology->graph();
  const std::size_t nodes = topology->node_count(), per_group = nodes / 5;
  for (std::size_t src = 0; src < nodes; src += 7)
    for (std::size_t dst = 3; dst < nodes; dst += 11) {
      if (src == dst)
        continue;
      SCOPED_TRACE(fmt::format("node {} to node {}", src, dst));
      const std::string src_group = fmt::format("g{}", src / per_group),
                        dst_group = fmt::format("g{}", dst / per_group);
      std::set<std::string> intermediates;
      for (std::uint64_t message = 0; message < 60; ++message) {
        HopList hops, again, minimal;
        topology->route_message(src, dst, message, hops);
        topology->route_message(src, dst, message, again);
        ASSERT_EQ(route_text(hops), route_text(again)) << "the same message got another route";
        const auto globals = walk(graph, src, dst, hops);
        if (src_group == dst_group) {
          // Through a third router of the group: at most four hops between routers, none global.
          EXPECT_TRUE(globals.empty());
          EXPECT_LE(hops.size(), 2u + 4u);
          if (src / 2 == dst / 2) { // one router: nothing to go through
            topology->route(src, dst, minimal);
            EXPECT_EQ(hops.size(), minimal.size());
          }
          intermediates.insert(route_text(hops)); // here: the distinct routes
          continue;
        }
        ASSERT_EQ(globals.size(), 2u) << "not two global links";
        EXPECT_EQ(globals[0].first, src_group);
        EXPECT_EQ(globals[0].second, globals[1].first);
        EXPECT_EQ(globals[1].second, dst_group);
        intermediates.insert(globals[0].second);
      }
      if (src_group != dst_group) {
        EXPECT_EQ(intermediates.size(), 3u) << "60 messages did not use each of the 3 other groups";
        EXPECT_EQ(intermediates.count(src_group) + intermediates.count(dst_group), 0u);
      } else if (src / 2 != dst / 2) {
        EXPECT_GT(intermediates.size(), 1u) << "every message took the same route";
      }
    }
}

TEST(ValiantRouting, MinimalRoutingIgnoresTheMessage)
{
  const auto topology = load(small_dragonfly_spec(), "minimal");
  EXPECT_FALSE(topology->routes_per_message());
  HopList by_pair, by_message;
  topology->route(0, 80, by_pair);
  topology->route_message(0, 80, 12345, by_message);
  EXPECT_EQ(route_text(by_pair), route_text(by_message));
}

// Adversarial and uniform traffic on the balanced dragonfly, minimal against Valiant, on the link-level model.
TEST(ValiantRouting, ClassicDragonflyBehaviours)
{
  const int P = static_cast<int>(kGroups * kNodesPerGroup);
  const Bytes S = 1'000'000;
  std::vector<PatternMessage> adversarial, uniform;
  // Adversarial: each node sends S to its peer in the next group, as 16 messages of S/16 (a route is drawn per
  // message, so the load averages over them as packets' would); uniform: S to every other node.
  for (int r = 0; r < P; ++r) {
    for (int part = 0; part < 16; ++part)
      adversarial.push_back({r, static_cast<RankId>((r + static_cast<int>(kNodesPerGroup)) % P), S / 16, 0});
    for (int d = 0; d < P; ++d)
      if (d != r)
        uniform.push_back({r, d, S, 0});
  }
  start_engine();
  simgrid::s4u::create_full_zone("root");
  const std::vector<simgrid::s4u::Host*> hosts(P, build_single_host_platform("link_level"));
  auto makespan = [&](const std::string& routing, const std::vector<PatternMessage>& messages) {
    return link_level_makespan(*load(balanced_dragonfly_spec(), routing), hosts, messages);
  };
  const double adversarial_minimal = makespan("minimal", adversarial);
  const double adversarial_valiant = makespan("valiant", adversarial);
  const double adversarial_adaptive = makespan("adaptive", adversarial);
  const double uniform_minimal = makespan("minimal", uniform);
  const double uniform_valiant = makespan("valiant", uniform);
  const double uniform_adaptive = makespan("adaptive", uniform);
  std::cout << fmt::format("adaptive: adversarial {:.4g} s ({:.2f}x valiant), uniform {:.4g} s ({:.3f}x minimal)\n",
                           adversarial_adaptive, adversarial_adaptive / adversarial_valiant, uniform_adaptive,
                           uniform_adaptive / uniform_minimal);
  // Injection bound of the all-to-all: every node sends P - 1 messages over its 10 GB/s link.
  const double injection = static_cast<double>((P - 1) * S) / 10e9;
  std::cout << fmt::format("adversarial: minimal {:.4g} s, valiant {:.4g} s ({:.2f}x faster); uniform: minimal "
                           "{:.4g} s ({:.3f}x the injection bound), valiant {:.4g} s ({:.2f}x minimal)\n",
                           adversarial_minimal, adversarial_valiant, adversarial_minimal / adversarial_valiant,
                           uniform_minimal, uniform_minimal / injection, uniform_valiant,
                           uniform_valiant / uniform_minimal);
  // Adversarial, minimal: the 16 messages of a group share one 20 GB/s global link.
  EXPECT_NEAR(adversarial_minimal, 16.0 * S / 20e9, 0.02 * adversarial_minimal);
  // Valiant spreads them over the 7 other groups' links: several times faster.
  EXPECT_GT(adversarial_minimal / adversarial_valiant, 2.0);
  // Uniform, minimal: near the injection rate (the busiest global link carries 256 of the 1 MB messages,
  // 12.8 ms at 20 GB/s, under the 14.3 ms of injection).
  EXPECT_LT(uniform_minimal / injection, 1.1);
  // Valiant: two global links per message between groups, so about twice the global load (25.6 ms): about half
  // the throughput.
  EXPECT_GT(uniform_valiant / uniform_minimal, 1.6);
  EXPECT_LT(uniform_valiant / uniform_minimal, 2.4);
  // Adaptive: near the better of the two on both patterns (it may beat Valiant on the adversarial one, using
  // the direct global link beside the detours).
  EXPECT_LT(adversarial_adaptive, 1.25 * adversarial_valiant);
  EXPECT_LT(uniform_adaptive / injection, 1.1);
}

// Adaptive routing on the balanced dragonfly: a lone message (an empty network) takes the minimal route and
// arrives exactly when it does under minimal routing; the bias moves the choice toward minimal (bias 1: never
// a detour, the minimal makespan exactly); with 1 to 4 candidates the adversarial pattern stays near Valiant's
// time (more candidates do not help here: the choices made at one instant are greedy).
TEST(AdaptiveRouting, LoneMessageStaysMinimalAndTheBiasLeansTowardIt)
{
  const int P = static_cast<int>(kGroups * kNodesPerGroup);
  start_engine();
  simgrid::s4u::create_full_zone("root");
  const std::vector<simgrid::s4u::Host*> hosts(P, build_single_host_platform("link_level"));
  auto makespan = [&](const std::string& routing, const std::vector<PatternMessage>& messages, json adaptive) {
    json spec = balanced_dragonfly_spec();
    if (!adaptive.is_null())
      spec["adaptive"] = adaptive;
    return link_level_makespan(*load(spec, routing), hosts, messages);
  };
  for (const Bytes bytes : {Bytes{8}, Bytes{1'000'000}}) {
    const std::vector<PatternMessage> lone = {{3, 40, bytes, 0}}; // group 0 to group 2
    EXPECT_EQ(makespan("adaptive", lone, nullptr), makespan("minimal", lone, nullptr)) << bytes;
  }
  std::vector<PatternMessage> adversarial;
  for (int r = 0; r < P; ++r)
    for (int part = 0; part < 16; ++part)
      adversarial.push_back({r, static_cast<RankId>((r + static_cast<int>(kNodesPerGroup)) % P), 62'500, 0});
  const double minimal = makespan("minimal", adversarial, nullptr);
  const double unbiased = makespan("adaptive", adversarial, {{"bias", 0.0}});
  const double biased = makespan("adaptive", adversarial, {{"bias", 0.5}});
  const double never = makespan("adaptive", adversarial, {{"bias", 1.0}});
  const double one_candidate = makespan("adaptive", adversarial, {{"candidates", 1}});
  const double four_candidates = makespan("adaptive", adversarial, {{"candidates", 4}});
  std::cout << fmt::format("adversarial: minimal {:.4g} s; adaptive bias 0 {:.4g} s, bias 0.5 {:.4g} s, bias 1 "
                           "{:.4g} s; 1 candidate {:.4g} s, 2 (the default) as bias 0, 4 candidates {:.4g} s\n",
                           minimal, unbiased, biased, never, one_candidate, four_candidates);
  EXPECT_EQ(never, minimal);
  EXPECT_LE(unbiased, biased);
  EXPECT_LT(biased, minimal);
  const double valiant = makespan("valiant", adversarial, nullptr);
  for (const double candidates : {one_candidate, unbiased, four_candidates})
    EXPECT_LT(candidates, 1.25 * valiant);
}

// The fat tree's "random" routing: the route climbs to the same level as D-mod-k's (the same length) through
// parents drawn per message, the same for the same message, and spreads a pattern that D-mod-k stacks.
TEST(FatTreeRandomRouting, ClimbsAsHighAsDModKThroughParentsDrawnPerMessage)
{
  json spec = small_fat_tree_spec(); // 24 nodes, 3 levels
  spec["routing"] = "random";
  const auto topology = parse_topology(JsonReader(spec, "topology"), kConfigs);
  ASSERT_TRUE(topology->routes_per_message());
  const NetworkGraph graph = topology->graph();
  for (std::size_t src = 0; src < topology->node_count(); ++src)
    for (std::size_t dst = 0; dst < topology->node_count(); dst += 5) {
      if (src == dst)
        continue;
      SCOPED_TRACE(fmt::format("node {} to node {}", src, dst));
      HopList d_mod_k;
      topology->route(src, dst, d_mod_k);
      std::set<std::string> routes;
      for (std::uint64_t message = 0; message < 40; ++message) {
        HopList hops, again;
        topology->route_message(src, dst, message, hops);
        topology->route_message(src, dst, message, again);
        ASSERT_EQ(hops.size(), d_mod_k.size());
        walk(graph, src, dst, hops);
        ASSERT_EQ(route_text(hops), route_text(again)) << "the same message got another route";
        routes.insert(route_text(hops));
      }
      if (d_mod_k.size() > 2) {
        EXPECT_GT(routes.size(), 1u) << "every message took the same parents";
      }
    }
}

// Two levels, 4 leaves of 4 nodes, 4 top switches, every link 10 GB/s. Node 4L + i (i < 3) of leaf L sends 1 MB
// (as 16 messages) to node 4((L + 1 + i) mod 4) + L: every destination has residue L, so D-mod-k sends all
// three of a leaf's flows up its link to top switch L (3 MB over 10 GB/s); random parents spread them.
TEST(FatTreeRandomRouting, SpreadsWhatDModKStacks)
{
  json spec = {{"type", "fat_tree"}, {"levels", 2},           {"down", {4, 4}},
               {"up", {1, 4}},       {"bandwidth", "10GBps"}, {"latency", "100ns"}};
  const int P = 16;
  const Bytes S = 1'000'000;
  std::vector<PatternMessage> messages;
  for (int leaf = 0; leaf < 4; ++leaf)
    for (int i = 0; i < 3; ++i)
      for (int part = 0; part < 16; ++part)
        messages.push_back({4 * leaf + i, static_cast<RankId>(4 * ((leaf + 1 + i) % 4) + leaf), S / 16, 0});
  start_engine();
  simgrid::s4u::create_full_zone("root");
  const std::vector<simgrid::s4u::Host*> hosts(P, build_single_host_platform("link_level"));
  auto makespan = [&](const std::string& routing) {
    return link_level_makespan(*load(spec, routing), hosts, messages);
  };
  const double d_mod_k = makespan("d_mod_k"), random = makespan("random");
  std::cout << fmt::format("d_mod_k {:.4g} s, random {:.4g} s ({:.2f}x faster)\n", d_mod_k, random, d_mod_k / random);
  EXPECT_NEAR(d_mod_k, 3.0 * S / 10e9, 0.02 * d_mod_k);
  // At best the node links' 1 MB over 10 GB/s; the 48 messages of a leaf over its 4 uplinks come close.
  EXPECT_LT(random / d_mod_k, 0.6);
  EXPECT_GE(random, 1.0 * S / 10e9);
}

// "valiant" beside a platform file, inline, and refused with SimGrid's flows or on other topologies; the fat
// tree's "random" likewise.
TEST(ValiantRouting, ConfigRules)
{
  json config = {{"ranks", 4},
                 {"topology", {{"file", "platforms/piz_daint.json"}, {"routing", "valiant"}}},
                 {"algorithm", {{"name", "dense_ring"}}},
                 {"workload", {{"n", 4096}}},
                 {"network", {{"model", "LinkLevel"}}}};
  const ExperimentConfig accepted = parse_config(config, kConfigs);
  EXPECT_EQ(accepted.topology->routing(), "valiant");
  EXPECT_EQ(accepted.topology->to_json()["routing"], "valiant");
  json fat_tree = config;
  fat_tree["topology"] = {{"file", "platforms/fat_tree_4096.json"}, {"routing", "random"}};
  EXPECT_EQ(parse_config(fat_tree, kConfigs).topology->routing(), "random");
  json adaptive = config;
  adaptive["topology"] = {
      {"file", "platforms/piz_daint.json"}, {"routing", "adaptive"}, {"adaptive", {{"candidates", 3}}}};
  const auto adaptive_topology = parse_config(adaptive, kConfigs).topology;
  EXPECT_EQ(adaptive_topology->adaptive_routing().candidates, 3u);
  EXPECT_EQ(adaptive_topology->adaptive_routing().bias, 0.0);
  EXPECT_EQ(adaptive_topology->to_json()["adaptive"], json({{"candidates", 3}, {"bias", 0.0}}));
  json defaults = balanced_dragonfly_spec();
  defaults["routing"] = "adaptive";
  EXPECT_EQ(parse_topology(JsonReader(defaults, "topology"), kConfigs)->adaptive_routing().candidates, 2u);
  json valiant_star = star_spec(4);
  valiant_star["routing"] = "valiant";
  // Each refusal: the topology and network model put into the accepted config, and the value the error names.
  struct Refusal {
    const char* what;
    json topology;
    const char* model;
    const char* value;
  };
  const std::vector<Refusal> refusals = {
      {"valiant with SimGrid's flows", config["topology"], "CM02", "valiant"},
      {"an unknown routing", {{"file", "platforms/piz_daint.json"}, {"routing", "ugal"}}, "LinkLevel", "ugal"},
      {"adaptive with SimGrid's flows",
       {{"file", "platforms/piz_daint.json"}, {"routing", "adaptive"}},
       "CM02",
       "adaptive"},
      {"a dragonfly routing on a fat tree",
       {{"file", "platforms/fat_tree_4096.json"}, {"routing", "valiant"}},
       "LinkLevel",
       "d_mod_k"},
      {"random with SimGrid's flows",
       {{"file", "platforms/fat_tree_4096.json"}, {"routing", "random"}},
       "CM02",
       "random"},
      {"routing beside a star's file",
       {{"file", "platforms/star_16.json"}, {"routing", "valiant"}},
       "LinkLevel",
       "not a dragonfly or a fat tree"},
      {"routing on an inline star", valiant_star, "LinkLevel", "valiant"},
  };
  for (const Refusal& refusal : refusals) {
    SCOPED_TRACE(refusal.what);
    json bad = config;
    bad["topology"] = refusal.topology;
    bad["network"]["model"] = refusal.model;
    expect_config_error(bad, kConfigs, "topology.routing", refusal.value);
  }
  // Adaptive routing's parameters: only with it, and in range.
  json stray = config;
  stray["topology"]["adaptive"] = {{"bias", 0.5}};
  expect_config_error(stray, kConfigs, "topology.adaptive", "unless \"routing\" is \"adaptive\"");
  json inline_stray = config;
  inline_stray["topology"] = balanced_dragonfly_spec();
  inline_stray["topology"]["adaptive"] = {{"bias", 0.5}};
  expect_config_error(inline_stray, kConfigs, "topology.adaptive", "unless \"routing\" is \"adaptive\"");
  json out_of_range = inline_stray;
  out_of_range["topology"]["routing"] = "adaptive";
  out_of_range["topology"]["adaptive"] = {{"bias", 1.5}};
  expect_config_error(out_of_range, kConfigs, "topology.adaptive.bias", "1.5");
  out_of_range["topology"]["adaptive"] = {{"candidates", 0}};
  expect_config_error(out_of_range, kConfigs, "topology.adaptive.candidates", "0");
}
