// Topologies: exact alpha-beta times on the star, graph view == SimGrid routes, config errors, placement,
// the presets. Tests that build a platform create SimGrid's engine, so ctest runs each TEST in its own process.
#include "sim/network/simgrid/zone.hpp"
#include "topologies/network_graph.hpp"
#include "topologies/topology.hpp"
#include "topology_specs.hpp"

#include <chrono>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <random>
#include <set>
#include <simgrid/s4u.hpp>
#include <sstream>
#include <unistd.h>

namespace {

using nlohmann::json;
using sparsim::ConfigError;
using sparsim::JsonReader;
using sparsim::NetworkGraph;
using sparsim::Topology;
using sparsim::testing::first_nodes;
using sparsim::testing::small_dragonfly_spec;
using sparsim::testing::small_fat_tree_spec;
using sparsim::testing::star_spec;

const std::filesystem::path kConfigs = std::filesystem::path(SPARSIM_SOURCE_DIR) / "configs";

// The engine of this test process, with the exact alpha-beta network model.
simgrid::s4u::Engine& engine()
{
  static std::string args[] = {"test_topologies", "--log=root.thres:warning", "--cfg=network/model:CM02",
                               "--cfg=network/crosstraffic:0"};
  static char* argv[] = {args[0].data(), args[1].data(), args[2].data(), args[3].data(), nullptr};
  static int argc = 4;
  static simgrid::s4u::Engine instance(&argc, argv);
  return instance;
}

std::unique_ptr<Topology> load(const json& spec, const std::filesystem::path& config_dir = kConfigs)
{
  return sparsim::parse_topology(JsonReader(spec, "topology"), config_dir);
}

// Builds a topology's SimGrid platform and keeps the topology alive: the zone routes with it.
std::vector<simgrid::s4u::Host*> build(std::unique_ptr<Topology> topology)
{
  static std::vector<std::unique_ptr<Topology>> kept;
  auto hosts = sparsim::build_platform(*topology);
  kept.push_back(std::move(topology));
  return hosts;
}

// Checks that SimGrid's route between each pair is exactly Topology::route's (the same links in the same
// order and directions), a path of graph links from a to b with hop_count() links and the graph's latency.
// A node's route to itself is SimGrid's __loopback__ link, which the graph leaves out.
// With `shortest` false (a route that detours on purpose, as cross-rail routes through a node's fabric) a route
// may be longer than hop_count().
void expect_routes_match(const Topology& topology, const std::vector<simgrid::s4u::Host*>& hosts,
                         const std::vector<std::pair<std::size_t, std::size_t>>& pairs, bool shortest = true)
{
  const NetworkGraph graph = topology.graph();
  std::map<std::string, std::size_t> by_name;
  for (std::size_t i = 0; i < graph.edge_count(); ++i)
    by_name[graph.link(i).name] = i;
  for (const auto& [a, b] : pairs) {
    std::vector<simgrid::s4u::Link*> links;
    double latency = 0;
    hosts[a]->route_to(hosts[b], links, &latency);
    if (a == b) {
      ASSERT_EQ(links.size(), 1u);
      EXPECT_EQ(links[0]->get_name(), "__loopback__");
      EXPECT_EQ(graph.hop_count(a, b), 0);
      continue;
    }
    sparsim::HopList hops;
    topology.route(a, b, hops);
    std::vector<std::string> expected;
    for (const sparsim::Hop& hop : hops)
      expected.push_back(graph.link(hop.link).name + (hop.up ? "_UP" : "_DOWN"));
    std::vector<std::string> simulated;
    for (const auto* link : links)
      simulated.push_back(link->get_name());
    EXPECT_EQ(simulated, expected) << "route " << a << " -> " << b;
    std::size_t at = a;
    double graph_latency = 0;
    for (const auto* link : links) {
      const std::string& name = link->get_name();
      const bool up = name.ends_with("_UP");
      ASSERT_TRUE(up || name.ends_with("_DOWN")) << name;
      const auto it = by_name.find(name.substr(0, name.size() - (up ? 3 : 5)));
      ASSERT_NE(it, by_name.end()) << name;
      const NetworkGraph::Link& edge = graph.link(it->second);
      ASSERT_EQ(at, up ? edge.from : edge.to) << "route " << a << " -> " << b << " breaks at " << name;
      at = up ? edge.to : edge.from;
      graph_latency += edge.latency;
    }
    EXPECT_EQ(at, b);
    if (shortest)
      EXPECT_EQ(static_cast<int>(links.size()), graph.hop_count(a, b)) << "route " << a << " -> " << b;
    else
      EXPECT_GE(static_cast<int>(links.size()), graph.hop_count(a, b)) << "route " << a << " -> " << b;
    EXPECT_NEAR(latency, graph_latency, 1e-15);
  }
}

std::vector<std::pair<std::size_t, std::size_t>> all_pairs(std::size_t nodes)
{
  std::vector<std::pair<std::size_t, std::size_t>> pairs;
  for (std::size_t a = 0; a < nodes; ++a)
    for (std::size_t b = 0; b < nodes; ++b)
      pairs.emplace_back(a, b);
  return pairs;
}

std::vector<std::pair<std::size_t, std::size_t>> sampled_pairs(std::size_t nodes, std::size_t count)
{
  std::mt19937_64 rng(7);
  std::vector<std::pair<std::size_t, std::size_t>> pairs = {{0, 1}, {0, nodes - 1}, {nodes - 1, 0}, {3, 3}};
  while (pairs.size() < count)
    pairs.emplace_back(rng() % nodes, rng() % nodes);
  return pairs;
}

ConfigError config_error(const json& spec, const std::filesystem::path& config_dir = kConfigs)
{
  try {
    load(spec, config_dir);
  } catch (const ConfigError& error) {
    return error;
  }
  ADD_FAILURE() << "no ConfigError for " << spec.dump();
  return ConfigError("", "", "");
}

// --- Star: exact alpha-beta times -------------------------------------------------------------------------

TEST(TopologyStar, LoneMessageTakesTwoLatenciesPlusSizeOverBandwidth)
{
  engine();
  const auto hosts = build(load(star_spec(4)));
  const double sizes[] = {0, 1e6, 123456789};
  std::vector<double> times;
  simgrid::s4u::Actor::create("sender", hosts[0], [&] {
    for (double size : sizes) {
      const double start = simgrid::s4u::Engine::get_clock();
      simgrid::s4u::Comm::sendto_async(hosts[0], hosts[3], static_cast<std::uint64_t>(size))->wait();
      times.push_back(simgrid::s4u::Engine::get_clock() - start);
    }
  });
  engine().run();
  ASSERT_EQ(times.size(), 3u);
  for (std::size_t i = 0; i < times.size(); ++i) {
    const double expected = 2 * 1e-6 + sizes[i] / 10e9;
    EXPECT_NEAR(times[i], expected, 1e-9 * expected) << "size " << sizes[i];
  }
}

TEST(TopologyStar, SendAndReceiveOnOneNodeDoNotShareBandwidth)
{
  engine();
  const auto hosts = build(load(star_spec(3)));
  const double size = 1e8;
  double duplex_a = 0, duplex_b = 0, incast_a = 0, incast_b = 0;
  simgrid::s4u::Actor::create("sender", hosts[0], [&] {
    // 0 -> 1 and 1 -> 0 at once: split-duplex links, so each runs at full bandwidth.
    auto a = simgrid::s4u::Comm::sendto_async(hosts[0], hosts[1], size);
    auto b = simgrid::s4u::Comm::sendto_async(hosts[1], hosts[0], size);
    a->wait();
    duplex_a = simgrid::s4u::Engine::get_clock();
    b->wait();
    duplex_b = simgrid::s4u::Engine::get_clock();
    // 0 -> 2 and 1 -> 2 at once: both share node 2's down link.
    const double start = simgrid::s4u::Engine::get_clock();
    auto c = simgrid::s4u::Comm::sendto_async(hosts[0], hosts[2], size);
    auto d = simgrid::s4u::Comm::sendto_async(hosts[1], hosts[2], size);
    c->wait();
    incast_a = simgrid::s4u::Engine::get_clock() - start;
    d->wait();
    incast_b = simgrid::s4u::Engine::get_clock() - start;
  });
  engine().run();
  const double alone = 2e-6 + size / 10e9;
  EXPECT_NEAR(duplex_a, alone, 1e-9 * alone);
  EXPECT_NEAR(duplex_b, alone, 1e-9 * alone);
  const double shared = 2e-6 + 2 * size / 10e9;
  EXPECT_NEAR(incast_a, shared, 1e-9 * shared);
  EXPECT_NEAR(incast_b, shared, 1e-9 * shared);
}

TEST(TopologyStar, RouteSummaryIsUniform)
{
  engine();
  const auto summary = sparsim::summarize_routes(*load(star_spec(8)), first_nodes(8));
  EXPECT_DOUBLE_EQ(summary.latency_min, 2e-6);
  EXPECT_DOUBLE_EQ(summary.latency_max, 2e-6);
  EXPECT_DOUBLE_EQ(summary.bandwidth_min, 10e9);
  EXPECT_DOUBLE_EQ(summary.bandwidth_max, 10e9);
  EXPECT_EQ(summary.hops_max, 2);
}

// --- Graph view == SimGrid routes -------------------------------------------------------------------------

TEST(TopologyStar, GraphHopCountsMatchSimGridRoutes)
{
  engine();
  const auto topology = load(star_spec(6));
  const auto hosts = sparsim::build_platform(*topology);
  const NetworkGraph graph = topology->graph();
  EXPECT_EQ(graph.vertex_count(), 7u);
  EXPECT_EQ(graph.edge_count(), 6u);
  expect_routes_match(*topology, hosts, all_pairs(6));
}

TEST(TopologyFatTree, GraphHopCountsMatchSimGridRoutes)
{
  engine();
  const auto topology = load(small_fat_tree_spec());
  const auto hosts = sparsim::build_platform(*topology);
  const NetworkGraph graph = topology->graph();
  ASSERT_EQ(hosts.size(), 24u);
  expect_routes_match(*topology, hosts, all_pairs(24));
  // Nodes in different top-level subtrees climb to level 3 and back: 6 links.
  EXPECT_EQ(graph.hop_count(0, 23), 6);
  EXPECT_EQ(graph.hop_count(0, 1), 2);
}

TEST(TopologyDragonfly, GraphHopCountsMatchSimGridRoutes)
{
  engine();
  const auto topology = load(small_dragonfly_spec());
  const auto hosts = sparsim::build_platform(*topology);
  const NetworkGraph graph = topology->graph();
  ASSERT_EQ(hosts.size(), 90u);
  expect_routes_match(*topology, hosts, all_pairs(90));
}

TEST(TopologyPizDaint, GraphHopCountsMatchSimGridRoutes)
{
  engine();
  const auto topology = load({{"file", "platforms/piz_daint.json"}});
  const auto hosts = sparsim::build_platform(*topology);
  expect_routes_match(*topology, hosts, sampled_pairs(hosts.size(), 400));
}

TEST(TopologyFatTree, PresetGraphHopCountsMatchSimGridRoutes)
{
  engine();
  const auto topology = load({{"file", "platforms/fat_tree_4096.json"}});
  const auto hosts = sparsim::build_platform(*topology);
  expect_routes_match(*topology, hosts, sampled_pairs(hosts.size(), 400));
}

// --- Sizes and per-level figures --------------------------------------------------------------------------

TEST(TopologyCounts, NodesVerticesAndLinks)
{
  const auto star = load(star_spec(16));
  EXPECT_EQ(star->node_count(), 16u);

  const auto tree = load({{"file", "platforms/fat_tree_4096.json"}});
  EXPECT_EQ(tree->node_count(), 4096u);
  const NetworkGraph tree_graph = tree->graph();
  EXPECT_EQ(tree_graph.vertex_count(), 4096u + 3 * 256);
  EXPECT_EQ(tree_graph.edge_count(), 3 * 4096u);

  // 5 groups x 3 chassis x 3 routers x 2 nodes; links: node, green (3 per chassis), black (3 per router slot),
  // global (3 per group pair).
  const NetworkGraph dragonfly = load(small_dragonfly_spec())->graph();
  EXPECT_EQ(dragonfly.node_count(), 90u);
  EXPECT_EQ(dragonfly.vertex_count(), 90u + 45);
  EXPECT_EQ(dragonfly.edge_count(), 90u + 15 * 3 + 15 * 3 + 10 * 3);
}

// link_count() is the graph's link count without building it (multi-GPU nodes number their fabric after it).
TEST(TopologyCounts, LinkCountIsTheGraphsWithoutBuildingIt)
{
  json mesh_tree = small_fat_tree_spec();
  mesh_tree["node"] = {{"gpus", 4}, {"fabric", "mesh"}, {"bandwidth", "100GBps"}, {"latency", "200ns"}};
  json switch_dragonfly = small_dragonfly_spec();
  switch_dragonfly["node"] = {{"gpus", 2}, {"bandwidth", "100GBps"}, {"latency", "200ns"}};
  for (const json& spec : {star_spec(16), small_fat_tree_spec(), small_dragonfly_spec(), mesh_tree, switch_dragonfly,
                           json{{"file", "platforms/piz_daint.json"}}, json{{"file", "platforms/fat_tree_4096.json"}},
                           json{{"file", "platforms/rail_h100.json"}}, json{{"file", "platforms/slingshot.json"}}}) {
    SCOPED_TRACE(spec.dump());
    const auto topology = load(spec);
    EXPECT_EQ(topology->link_count(), topology->graph().edge_count());
  }
}

TEST(TopologyCounts, PerLevelFiguresReachTheLinks)
{
  auto expect_levels = [](const NetworkGraph& graph, const std::map<std::string, std::pair<double, double>>& levels) {
    std::set<std::string> seen;
    for (std::size_t i = 0; i < graph.edge_count(); ++i) {
      const NetworkGraph::Link& link = graph.link(i);
      ASSERT_TRUE(levels.contains(link.level)) << link.level;
      EXPECT_DOUBLE_EQ(link.bandwidth, levels.at(link.level).first) << link.name;
      EXPECT_DOUBLE_EQ(link.latency, levels.at(link.level).second) << link.name;
      seen.insert(link.level);
    }
    EXPECT_EQ(seen.size(), levels.size());
  };
  expect_levels(
      load(small_fat_tree_spec())->graph(),
      {{"fat_tree_L0", {12.5e9, 500e-9}}, {"fat_tree_L1", {12.5e9, 100e-9}}, {"fat_tree_L2", {25e9, 100e-9}}});
  expect_levels(load(small_dragonfly_spec())->graph(), {{"node", {5.25e9, 650e-9}},
                                                        {"intra_chassis", {5.25e9, 100e-9}},
                                                        {"intra_group", {3 * 5.25e9, 150e-9}},
                                                        {"global", {4.7e9, 400e-9}}});
}

TEST(TopologyCounts, ResolvedSpecsParseBackToThemselves)
{
  json odd = star_spec(5);
  odd["bandwidth"] = "1.234567890123Gbps";
  odd["latency"] = "0.1234567890123us";
  for (const json& spec :
       {star_spec(5), odd, small_fat_tree_spec(), small_dragonfly_spec(), json{{"file", "platforms/piz_daint.json"}}}) {
    const json resolved = load(spec)->to_json();
    EXPECT_EQ(load(resolved)->to_json(), resolved) << resolved.dump();
  }
}

// --- Config errors name the JSON path ---------------------------------------------------------------------

TEST(TopologyConfig, ErrorsNameTheJsonPath)
{
  json spec = star_spec(4);
  spec.erase("bandwidth");
  EXPECT_EQ(config_error(spec).path(), "topology.bandwidth");

  spec = star_spec(4);
  spec["bandwdith"] = "10GBps";
  EXPECT_EQ(config_error(spec).path(), "topology.bandwdith");

  spec = star_spec(4);
  spec["bandwidth"] = "10 Gbs";
  const ConfigError bad_unit = config_error(spec);
  EXPECT_EQ(bad_unit.path(), "topology.bandwidth");
  EXPECT_EQ(bad_unit.value(), "\"10 Gbs\"");

  EXPECT_EQ(config_error(star_spec(0)).path(), "topology.nodes");
  EXPECT_EQ(config_error({{"type", "torus"}}).path(), "topology.type");

  spec = small_dragonfly_spec();
  spec["chassis"] = 0;
  EXPECT_EQ(config_error(spec).path(), "topology.chassis");
  spec = small_dragonfly_spec();
  spec["links"]["global"].erase("latency");
  EXPECT_EQ(config_error(spec).path(), "topology.links.global.latency");
  spec = small_dragonfly_spec();
  spec["links"]["node"]["cables"] = 2;
  EXPECT_EQ(config_error(spec).path(), "topology.links.node.cables");

  spec = small_fat_tree_spec();
  spec["down"] = {4, 0, 3};
  EXPECT_EQ(config_error(spec).path(), "topology.down[1]");
  spec = small_fat_tree_spec();
  spec["up"] = {1, 2};
  EXPECT_EQ(config_error(spec).path(), "topology.up");
  spec = small_fat_tree_spec();
  spec["per_level"] = {json::object()};
  EXPECT_EQ(config_error(spec).path(), "topology.per_level");
}

TEST(TopologyConfig, MoreGroupsThanGlobalPortsIsAnError)
{
  // 3 x 3 routers x 2 ports = 18 global ports per group, 3 per other group: at most 7 groups.
  json spec = small_dragonfly_spec();
  spec["groups"] = 7;
  EXPECT_EQ(load(spec)->node_count(), 7u * 18);
  spec["groups"] = 8;
  const ConfigError error = config_error(spec);
  EXPECT_EQ(error.path(), "topology.groups");
  EXPECT_NE(std::string(error.what()).find("at most 7 groups"), std::string::npos) << error.what();
}

TEST(TopologyConfig, PlatformFiles)
{
  EXPECT_EQ(config_error({{"file", "platforms/piz_daint.json"}, {"type", "star"}}).path(), "topology.type");
  EXPECT_EQ(config_error({{"file", "platforms/none.json"}}).path(), "topology.file");
  EXPECT_EQ(config_error({{"file", "platforms/piz_daint.json"}, {"nodes", 3}}).path(), "topology.nodes");

  // Files resolve against the config's folder first; errors inside them name the file.
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("sparsim_topologies_{}", ::getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "mine.json") << star_spec(3).dump();
  json bad = small_dragonfly_spec();
  bad["groups"] = -1;
  std::ofstream(dir / "bad.json") << bad.dump();
  std::ofstream(dir / "broken.json") << "{\"type\": ";
  EXPECT_EQ(load({{"file", "mine.json"}}, dir)->node_count(), 3u);
  EXPECT_EQ(config_error({{"file", "bad.json"}}, dir).path(), "topology(bad.json).groups");
  EXPECT_EQ(config_error({{"file", "broken.json"}}, dir).path(), "topology.file");
  std::filesystem::remove_all(dir);
}

// --- Placement --------------------------------------------------------------------------------------------

TEST(TopologyPlacement, LinearAndRandom)
{
  const sparsim::Placement linear = sparsim::parse_placement(JsonReader(json::object(), "placement"));
  EXPECT_EQ(linear.type, "linear");
  EXPECT_EQ(sparsim::place_ranks(linear, 4, 10), (std::vector<std::size_t>{0, 1, 2, 3}));

  const json random_spec = {{"type", "random"}, {"seed", 42}};
  const sparsim::Placement random = sparsim::parse_placement(JsonReader(random_spec, "placement"));
  EXPECT_EQ(random.seed, 42u);
  const auto once = sparsim::place_ranks(random, 1000, 1000);
  EXPECT_EQ(once, sparsim::place_ranks(random, 1000, 1000));
  EXPECT_EQ(std::set<std::size_t>(once.begin(), once.end()).size(), 1000u);
  EXPECT_EQ(*std::max_element(once.begin(), once.end()), 999u);
  EXPECT_NE(once, sparsim::place_ranks({"random", 43}, 1000, 1000));
  // A prefix of the same permutation when fewer ranks are placed.
  const auto prefix = sparsim::place_ranks(random, 10, 1000);
  EXPECT_TRUE(std::equal(prefix.begin(), prefix.end(), once.begin()));
  // Pinned: the same on every standard library (mt19937_64 and our own Fisher-Yates draws).
  EXPECT_EQ(sparsim::place_ranks({"random", 1}, 6, 8), (std::vector<std::size_t>{4, 6, 3, 5, 1, 7}));

  EXPECT_THROW(sparsim::place_ranks(linear, 11, 10), std::invalid_argument);
  const json seeded_linear = {{"type", "linear"}, {"seed", 3}};
  try {
    sparsim::parse_placement(JsonReader(seeded_linear, "placement"));
    ADD_FAILURE() << "a seed on a linear placement was accepted";
  } catch (const ConfigError& error) {
    EXPECT_EQ(error.path(), "placement.seed");
  }
}

// --- Presets ----------------------------------------------------------------------------------------------

TEST(TopologyPizDaint, PresetHas4096NodesAndADotWithGlobalLinks)
{
  const auto topology = load({{"file", "platforms/piz_daint.json"}});
  EXPECT_EQ(topology->type(), "dragonfly");
  EXPECT_GE(topology->node_count(), 4096u);
  std::ostringstream dot;
  topology->graph().write_dot(dot);
  EXPECT_GT(dot.str().size(), 1000u);
  EXPECT_NE(dot.str().find("level=global"), std::string::npos);
}

TEST(TopologyPizDaint, LatenciesSpanSameRouterToAcrossGroups)
{
  engine();
  const auto topology = load({{"file", "platforms/piz_daint.json"}});
  const auto hosts = sparsim::build_platform(*topology);
  auto latency = [&](std::size_t a, std::size_t b) {
    std::vector<simgrid::s4u::Link*> links;
    double seconds = 0;
    hosts[a]->route_to(hosts[b], links, &seconds);
    return seconds;
  };
  EXPECT_NEAR(latency(0, 1), 1.3e-6, 1e-15);     // same router (blade)
  EXPECT_NEAR(latency(0, 4), 1.4e-6, 1e-15);     // same chassis
  EXPECT_NEAR(latency(0, 64), 1.45e-6, 1e-15);   // next chassis, same slot
  EXPECT_NEAR(latency(0, 68), 1.55e-6, 1e-15);   // next chassis, other slot
  EXPECT_NEAR(latency(0, 384), 1.7e-6, 1e-15);   // next group, both nodes on the routers of one global link
  EXPECT_NEAR(latency(44, 1648), 2.2e-6, 1e-15); // across groups, two intra-group hops on both sides
  const auto summary = sparsim::summarize_routes(*topology, first_nodes(hosts.size()));
  EXPECT_NEAR(summary.latency_min, 1.3e-6, 1e-15);
  EXPECT_GE(summary.latency_max, 2.0e-6);
  EXPECT_LE(summary.latency_max, 2.2e-6 + 1e-15);
  EXPECT_DOUBLE_EQ(summary.bandwidth_min, 4.7e9);
  EXPECT_LE(summary.hops_max, 7);
}

// The route summary of 4096 randomly placed ranks, computed from the topology's routes, equals the one
// SimGrid's routes give over the same pairs ((0, j) and (i, i+1), as summarize_routes visits them at this P).
TEST(TopologyPizDaint, RouteSummaryOfRandomPlacementEqualsSimGridRoutes)
{
  engine();
  const auto topology = load({{"file", "platforms/piz_daint.json"}});
  const auto nodes = sparsim::build_platform(*topology);
  const std::vector<std::size_t> rank_nodes = sparsim::place_ranks({"random", 1}, 4096, nodes.size());
  const auto summary = sparsim::summarize_routes(*topology, rank_nodes);

  double latency_min = 1e300, latency_max = 0, bandwidth_min = 1e300, bandwidth_max = 0;
  std::size_t hops_max = 0;
  auto visit = [&](std::size_t a, std::size_t b) {
    std::vector<simgrid::s4u::Link*> links;
    double latency = 0;
    nodes[rank_nodes[a]]->route_to(nodes[rank_nodes[b]], links, &latency);
    double bandwidth = 1e300;
    for (const auto* link : links)
      bandwidth = std::min(bandwidth, link->get_bandwidth());
    latency_min = std::min(latency_min, latency);
    latency_max = std::max(latency_max, latency);
    bandwidth_min = std::min(bandwidth_min, bandwidth);
    bandwidth_max = std::max(bandwidth_max, bandwidth);
    hops_max = std::max(hops_max, links.size());
  };
  for (std::size_t b = 1; b < rank_nodes.size(); ++b)
    visit(0, b);
  for (std::size_t a = 1; a + 1 < rank_nodes.size(); ++a)
    visit(a, a + 1);
  EXPECT_GT(summary.latency_max, summary.latency_min);
  EXPECT_EQ(summary.latency_min, latency_min);
  EXPECT_EQ(summary.latency_max, latency_max);
  EXPECT_EQ(summary.bandwidth_min, bandwidth_min);
  EXPECT_EQ(summary.bandwidth_max, bandwidth_max);
  EXPECT_EQ(static_cast<std::size_t>(summary.hops_max), hops_max);
}

// Topology::route equals SimGrid's route_to on sampled pairs of the other presets (one platform per engine).
TEST(TopologyStar, PresetRoutesEqualSimGridRoutes)
{
  engine();
  const auto topology = load({{"file", "platforms/star_16.json"}});
  expect_routes_match(*topology, sparsim::build_platform(*topology), all_pairs(16));
}

TEST(TopologyDragonfly, Aries16kPresetRoutesEqualSimGridRoutes)
{
  engine();
  const auto topology = load({{"file", "platforms/aries_16k.json"}});
  const auto hosts = sparsim::build_platform(*topology);
  expect_routes_match(*topology, hosts, sampled_pairs(hosts.size(), 400));
}

// The multi-GPU presets (a rail-optimized fat tree; a dragonfly with an NVLink mesh in each node) and the PXN-like
// cross-rail routes through a node's fabric: SimGrid's routes are route()'s.
TEST(TopologyMultiGpu, RailH100PresetRoutesEqualSimGridRoutes)
{
  engine();
  const auto topology = load({{"file", "platforms/rail_h100.json"}});
  const auto hosts = sparsim::build_platform(*topology);
  ASSERT_EQ(hosts.size(), 4096u);
  expect_routes_match(*topology, hosts, sampled_pairs(hosts.size(), 400));
}

TEST(TopologyMultiGpu, SlingshotPresetRoutesEqualSimGridRoutes)
{
  engine();
  const auto topology = load({{"file", "platforms/slingshot.json"}});
  const auto hosts = sparsim::build_platform(*topology);
  ASSERT_EQ(hosts.size(), 4096u);
  expect_routes_match(*topology, hosts, sampled_pairs(hosts.size(), 400));
}

TEST(TopologyMultiGpu, CrossRailThroughTheFabricRoutesEqualSimGridRoutes)
{
  engine();
  json spec = json::parse(std::ifstream(kConfigs / "platforms" / "rail_h100.json"));
  spec["node"]["cross_rail"] = "fabric";
  const auto topology = load(spec);
  // Across rails the route first crosses the fabric (2 links), so it is longer than the shortest path.
  expect_routes_match(*topology, sparsim::build_platform(*topology), sampled_pairs(4096, 400), false);
}

TEST(TopologyFatTree, PresetHas4096Nodes)
{
  engine();
  const auto topology = load({{"file", "platforms/fat_tree_4096.json"}});
  const auto hosts = sparsim::build_platform(*topology);
  EXPECT_EQ(hosts.size(), 4096u);
  const auto summary = sparsim::summarize_routes(*topology, first_nodes(hosts.size()));
  EXPECT_EQ(summary.hops_max, 6);
  EXPECT_DOUBLE_EQ(summary.bandwidth_min, 12.5e9);
}

} // namespace
