// Multi-GPU nodes (topologies/multi_gpu.cpp) and the node-aware dense allreduce (algorithms/dense_hierarchical.cpp):
// the graph and routes of a node's fabric, placement over nodes, the route figures split by level, the config
// errors, and whole runs under both network models on a contention-free star of 4-GPU nodes, against the
// closed forms and with links.csv's intra_node level carrying exactly the intra-node bytes.
#include "sparsim_cli.hpp"

#include "sim/base/json_reader.hpp"
#include "sim/run/config.hpp"
#include "topologies/network_graph.hpp"
#include "topologies/topology.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace {

using nlohmann::json;
using namespace sparsim;
using namespace sparsim::testing;

// A star of 12 NICs, 3 nodes of 4 GPUs: the network 10 GB/s and 1 us per link, the fabric 100 GB/s and 200 ns.
json multi_gpu_star(const std::string& fabric = "switch")
{
  return {{"type", "star"},
          {"nodes", 12},
          {"bandwidth", "10GBps"},
          {"latency", "1us"},
          {"node", {{"gpus", 4}, {"fabric", fabric}, {"bandwidth", "100GBps"}, {"latency", "200ns"}}}};
}

std::unique_ptr<Topology> parse(const json& spec) { return parse_topology(JsonReader(spec, "topology"), "."); }

std::vector<std::pair<std::string, bool>> route_names(const Topology& topology, const NetworkGraph& graph,
                                                      std::size_t src, std::size_t dst)
{
  HopList hops;
  topology.route(src, dst, hops);
  std::vector<std::pair<std::string, bool>> names;
  for (const Hop& hop : hops)
    names.emplace_back(graph.link(hop.link).name, hop.up);
  return names;
}

using Names = std::vector<std::pair<std::string, bool>>;

TEST(MultiGpuTopology, SwitchFabricRoutesInsideTheNodeAndTheNetworkBetweenNodes)
{
  const auto topology = parse(multi_gpu_star());
  EXPECT_EQ(topology->node_count(), 12u);
  EXPECT_EQ(topology->gpus_per_node(), 4u);
  const NetworkGraph graph = topology->graph();
  ASSERT_EQ(graph.edge_count(), 24u); // 12 NIC links, then 12 fabric links
  for (std::size_t link = 12; link < 24; ++link) {
    EXPECT_EQ(graph.link(link).level, "intra_node");
    EXPECT_DOUBLE_EQ(graph.link(link).bandwidth, 100e9);
  }
  EXPECT_EQ(route_names(*topology, graph, 4, 7), (Names{{"gpu4_switch", true}, {"gpu7_switch", false}}));
  EXPECT_EQ(route_names(*topology, graph, 3, 4), (Names{{"node3_crossbar", true}, {"node4_crossbar", false}}));
  EXPECT_NE(topology->describe().find("3 nodes of 4 GPUs"), std::string::npos) << topology->describe();
  EXPECT_EQ(topology->to_json()["node"]["gpus"], 4);
  EXPECT_EQ(parse(topology->to_json())->to_json(), topology->to_json()); // the manifest's spec reads back
}

TEST(MultiGpuTopology, MeshFabricHasOneLinkPerPairOfANodesGpus)
{
  const auto topology = parse(multi_gpu_star("mesh"));
  const NetworkGraph graph = topology->graph();
  ASSERT_EQ(graph.edge_count(), 12u + 3 * 6);
  // Every pair of GPUs of a node: one link, named after the pair, crossed up from the lower GPU.
  for (std::size_t node = 0; node < 3; ++node)
    for (std::size_t a = 4 * node; a < 4 * node + 4; ++a)
      for (std::size_t b = a + 1; b < 4 * node + 4; ++b) {
        const std::string name = "gpu" + std::to_string(a) + "_gpu" + std::to_string(b);
        EXPECT_EQ(route_names(*topology, graph, a, b), (Names{{name, true}})) << a << " -> " << b;
        EXPECT_EQ(route_names(*topology, graph, b, a), (Names{{name, false}})) << b << " -> " << a;
      }
}

TEST(MultiGpuTopology, SpreadPlacementGoesRoundRobinOverTheNodes)
{
  const Placement spread{"spread", 0};
  EXPECT_EQ(place_ranks(spread, 12, 12, 4), (std::vector<std::size_t>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  EXPECT_EQ(place_ranks(spread, 5, 12, 4), (std::vector<std::size_t>{0, 4, 8, 1, 5}));
  EXPECT_EQ(place_ranks(spread, 4, 8, 1), (std::vector<std::size_t>{0, 1, 2, 3})); // one GPU per node: linear
  EXPECT_EQ(place_ranks({"linear", 0}, 12, 12, 4), place_ranks({"linear", 0}, 12, 12));
}

TEST(MultiGpuTopology, RouteFiguresSplitByWhetherTwoRanksShareANode)
{
  const auto topology = parse(multi_gpu_star());
  const RouteSummary consecutive = summarize_routes(*topology, place_ranks({"linear", 0}, 12, 12, 4));
  EXPECT_NEAR(consecutive.intra_node.latency_max, 400e-9, 1e-18);
  EXPECT_DOUBLE_EQ(consecutive.intra_node.bandwidth_min, 100e9);
  EXPECT_NEAR(consecutive.inter_node.latency_max, 2e-6, 1e-18);
  EXPECT_DOUBLE_EQ(consecutive.inter_node.bandwidth_min, 10e9);
  EXPECT_NEAR(consecutive.latency_max, 2e-6, 1e-18);
  EXPECT_DOUBLE_EQ(consecutive.bandwidth_min, 10e9);
  // Three ranks on three nodes: no pair shares a node.
  const RouteSummary spread = summarize_routes(*topology, place_ranks({"spread", 0}, 3, 12, 4));
  EXPECT_EQ(spread.intra_node.latency_max, 0);
  EXPECT_EQ(spread.intra_node.bandwidth_min, 0);
}

// A rail-optimized fat tree of 4 nodes of 2 GPUs: 4 leaves of 2 NICs, 2 spines; a scalable unit is 2 nodes
// and its 2 leaves, one per rail. GPU e = 2 node + rail sits on leaf 2 (node / 2) + rail.
json rail_tree(const std::string& cross_rail)
{
  return {{"type", "fat_tree"},
          {"levels", 2},
          {"down", {2, 4}},
          {"up", {1, 2}},
          {"rails", 2},
          {"bandwidth", "50GBps"},
          {"latency", "100ns"},
          {"node", {{"gpus", 2}, {"bandwidth", "450GBps"}, {"latency", "250ns"}, {"cross_rail", cross_rail}}}};
}

TEST(MultiGpuTopology, RailOptimizedFatTreePutsEachRailOfAUnitOnItsOwnLeaf)
{
  const auto topology = parse(rail_tree("network"));
  ASSERT_EQ(topology->node_count(), 8u);
  EXPECT_EQ(topology->rails(), 2u);
  const NetworkGraph graph = topology->graph();
  // Rail 0 of nodes 0 and 1 (GPUs 0 and 2) share leaf 0, rail 1 (GPUs 1 and 3) leaf 1; nodes 2 and 3 the next
  // unit's leaves 2 and 3.
  EXPECT_EQ(route_names(*topology, graph, 0, 2), (Names{{"node0_sw1_0", true}, {"node2_sw1_0", false}}));
  EXPECT_EQ(route_names(*topology, graph, 3, 1), (Names{{"node3_sw1_1", true}, {"node1_sw1_1", false}}));
  EXPECT_EQ(route_names(*topology, graph, 4, 6), (Names{{"node4_sw1_2", true}, {"node6_sw1_2", false}}));
  // Across rails (GPU 1 on rail 1 to GPU 2 on rail 0): up to a spine and down.
  EXPECT_EQ(route_names(*topology, graph, 1, 2).size(), 4u);
  // In the node: the fabric.
  EXPECT_EQ(route_names(*topology, graph, 0, 1), (Names{{"gpu0_switch", true}, {"gpu1_switch", false}}));
}

TEST(MultiGpuTopology, CrossRailThroughTheFabricKeepsTheNetworkOnTheDestinationsRail)
{
  const auto topology = parse(rail_tree("fabric"));
  const NetworkGraph graph = topology->graph();
  // GPU 1 (node 0, rail 1) to GPU 2 (node 1, rail 0): to GPU 0 through the fabric, then rail 0's leaf.
  EXPECT_EQ(route_names(*topology, graph, 1, 2),
            (Names{{"gpu1_switch", true}, {"gpu0_switch", false}, {"node0_sw1_0", true}, {"node2_sw1_0", false}}));
  // Same rail: no detour.
  EXPECT_EQ(route_names(*topology, graph, 0, 2), (Names{{"node0_sw1_0", true}, {"node2_sw1_0", false}}));
}

// ---- Config errors ----------------------------------------------------------------------------------------

// `model` is a network model, or "LinkLevel-simgrid" for the link-level model with ranks as SimGrid actors.
json run_config_for(const std::string& algorithm, int ranks, const std::string& model = "CM02")
{
  json network = {{"model", model}};
  if (model == "LinkLevel-simgrid")
    network = {{"model", "LinkLevel"}, {"runtime", "simgrid"}};
  return {{"name", "multi_gpu"},          {"ranks", ranks},
          {"topology", multi_gpu_star()}, {"algorithm", {{"name", algorithm}}},
          {"workload", {{"n", 4800}}},    {"network", network}};
}

std::string error_path(const json& config)
{
  try {
    parse_config(config, ".");
  } catch (const ConfigError& error) {
    return error.path();
  }
  return "(no error)";
}

TEST(MultiGpuConfig, BadValuesAreErrorsNamingThePath)
{
  json zero_gpus = run_config_for("dense_ring", 12);
  zero_gpus["topology"]["node"]["gpus"] = 0;
  EXPECT_EQ(error_path(zero_gpus), "topology.node.gpus");

  json not_a_divisor = run_config_for("dense_ring", 10);
  not_a_divisor["topology"]["node"]["gpus"] = 5;
  EXPECT_EQ(error_path(not_a_divisor), "topology.node.gpus");

  json bad_fabric = run_config_for("dense_ring", 12);
  bad_fabric["topology"]["node"]["fabric"] = "torus";
  EXPECT_EQ(error_path(bad_fabric), "topology.node.fabric");

  EXPECT_EQ(error_path(run_config_for("dense_ring", 13)), "ranks");

  json wrong_ranks_per_node = run_config_for("dense_hierarchical", 12);
  wrong_ranks_per_node["algorithm"]["ranks_per_node"] = 2;
  EXPECT_EQ(error_path(wrong_ranks_per_node), "algorithm.ranks_per_node");
  EXPECT_EQ(error_path(run_config_for("dense_hierarchical", 12)), "algorithm.ranks_per_node"); // default 1

  json part_of_a_node = run_config_for("dense_hierarchical", 10);
  part_of_a_node["algorithm"]["ranks_per_node"] = 4;
  EXPECT_EQ(error_path(part_of_a_node), "algorithm.ranks_per_node");

  json spread = run_config_for("dense_hierarchical", 12);
  spread["algorithm"]["ranks_per_node"] = 4;
  spread["placement"] = {{"type", "spread"}};
  EXPECT_EQ(error_path(spread), "placement.type");

  json rails_without_gpus = run_config_for("dense_ring", 8);
  rails_without_gpus["topology"] = rail_tree("network");
  rails_without_gpus["topology"].erase("node");
  EXPECT_EQ(error_path(rails_without_gpus), "topology.rails");

  json rails_not_gpus = run_config_for("dense_ring", 8);
  rails_not_gpus["topology"] = rail_tree("network");
  rails_not_gpus["topology"]["node"]["gpus"] = 4;
  EXPECT_EQ(error_path(rails_not_gpus), "topology.rails");

  json rails_not_dividing_leaves = run_config_for("dense_ring", 8);
  rails_not_dividing_leaves["topology"] = rail_tree("network");
  rails_not_dividing_leaves["topology"]["rails"] = 3;
  EXPECT_EQ(error_path(rails_not_dividing_leaves), "topology.rails");

  json fine = run_config_for("dense_hierarchical", 8);
  fine["algorithm"]["ranks_per_node"] = 4;
  EXPECT_EQ(error_path(fine), "(no error)");
}

// ---- Whole runs ---------------------------------------------------------------------------------------------

struct RunFigures {
  double time = 0;             // simulated time of the iteration's collective (results.csv, phase "total")
  double closed_form = 0;      // the closed form's time (the manifest)
  double intra_node_bytes = 0; // bytes on the links of level intra_node (links.csv, both directions)
  double network_bytes = 0;    // bytes on the other links
};

// Runs `config`; its result is checked against the direct sum unless its data are phantom (lengths only).
RunFigures run_and_read(const json& config, const std::string& name)
{
  const CliResult result = run_config(config, name);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  RunFigures figures;
  const json manifest = json::parse(read_text(result.dir / "manifest.json"));
  const bool phantom = config["workload"].value("data", "real") == "phantom";
  EXPECT_EQ(manifest["verification"]["checked"].get<bool>(), !phantom);
  EXPECT_LE(manifest["verification"]["max_error_over_tolerance"].get<double>(), 1.0);
  figures.closed_form = manifest["closed_form"]["time_s"].get<double>();
  for (const auto& row : read_csv(result.dir / "results.csv"))
    if (row.at("phase") == "total")
      figures.time = std::stod(row.at("sim_time_s"));
  for (const auto& row : read_csv(result.dir / "links.csv"))
    (row.at("level") == "intra_node" ? figures.intra_node_bytes : figures.network_bytes) += std::stod(row.at("bytes"));
  return figures;
}

class MultiGpuRun : public ::testing::TestWithParam<std::string> {};

// The ring on 4-GPU nodes, ranks consecutive: 3 of a node's 4 hops in the fabric, one in the network; every hop
// has its own links, so the network hop paces every step: 2(P-1)(alpha_e + (n/P) w beta_e), the closed form
// with the slowest route's figures.
TEST_P(MultiGpuRun, RingMatchesItsClosedFormAndKeepsNodeHopsInTheFabric)
{
  const std::string model = GetParam();
  const RunFigures ring = run_and_read(run_config_for("dense_ring", 12, model), "ring-" + model);
  EXPECT_NEAR(ring.time, ring.closed_form, 0.005 * ring.closed_form);
  // 2(P-1) steps of 12 messages of n/P = 400 floats: 9 in a fabric (two links each), 3 in the network (two).
  const double message_bytes = 400 * 4;
  EXPECT_EQ(ring.intra_node_bytes, 2 * 11 * 9 * 2 * message_bytes);
  EXPECT_EQ(ring.network_bytes, 2 * 11 * 3 * 2 * message_bytes);
}

// The node-aware allreduce: contention-free on this star (every GPU its own fabric link and its own NIC), so
// the simulated time is the closed form's, 2(G-1)(alpha_i + (n/G) w beta_i) + 2(N-1)(alpha_e + (n/(G N)) w
// beta_e); the intra-node phases cross only fabric links, the rails only the network.
TEST_P(MultiGpuRun, HierarchicalAllreduceMatchesItsClosedForm)
{
  const std::string model = GetParam();
  json config = run_config_for("dense_hierarchical", 12, model);
  config["algorithm"]["ranks_per_node"] = 4;
  const RunFigures hierarchical = run_and_read(config, "hierarchical-" + model);
  const double G = 4, N = 3, n = 4800, w = 4;
  const double expected = 2 * (G - 1) * (400e-9 + n / G * w / 100e9) + 2 * (N - 1) * (2e-6 + n / (G * N) * w / 10e9);
  EXPECT_NEAR(hierarchical.closed_form, expected, 1e-12 * expected);
  EXPECT_NEAR(hierarchical.time, expected, 1e-6 * expected);
  // Each rank sends 2(G-1) blocks of n/G in the fabric and 2(N-1) parts of n/(G N) on its rail; two links each.
  EXPECT_EQ(hierarchical.intra_node_bytes, 12 * 2 * (G - 1) * (n / G) * w * 2);
  EXPECT_EQ(hierarchical.network_bytes, 12 * 2 * (N - 1) * (n / (G * N)) * w * 2);
}

// The presets at P = 64 (8 H100 nodes of one scalable unit; 16 Slingshot nodes on 4 switches): the ring's slowest
// hop (across rails through a spine; between two switches of a group) has its own links, so the ring takes its
// closed form with the slowest route's figures, up to rounding (1e-9 relative, as the algorithm matrix; measured
// 3e-15; the issue asked for 0.5%).
TEST_P(MultiGpuRun, RingOnTheGpuPresetsMatchesItsClosedForm)
{
  for (const char* preset : {"platforms/rail_h100.json", "platforms/slingshot.json"}) {
    SCOPED_TRACE(preset);
    json config = run_config_for("dense_ring", 64, GetParam());
    config["topology"] = {{"file", preset}};
    config["workload"] = {{"n", 1 << 20}, {"data", "phantom"}};
    const RunFigures ring = run_and_read(config, std::string("preset-ring-") + GetParam() + preset[10]);
    EXPECT_NEAR(ring.time, ring.closed_form, 1e-9 * ring.closed_form);
    EXPECT_GT(ring.intra_node_bytes, 0);
  }
}

// SimGrid's flows, the link-level model with ranks as fibers (its default) and as SimGrid actors.
INSTANTIATE_TEST_SUITE_P(Models, MultiGpuRun, ::testing::Values("CM02", "LinkLevel", "LinkLevel-simgrid"));

} // namespace
