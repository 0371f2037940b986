// The link-level model's two rank runtimes, SimGrid's actors and the project's fibers, give byte-identical
// results: every registered algorithm on the star, the oversubscribed fat tree preset and the Piz Daint
// dragonfly (calibrated VGG-16 gradients for the sparse ones), plus the dragonfly's per-message routings. The
// manifest names the runtime, and SimGrid only where SimGrid ran.
#include "algorithms/registry.hpp"
#include "sparsim_cli.hpp"
#include "topology_specs.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using nlohmann::json;
using namespace sparsim::testing;

using Platform = RunPlatform;
using Point = RunPoint;

json config_for(const std::string& algorithm, Platform platform, const std::string& runtime)
{
  const bool dense = algorithm.rfind("dense", 0) == 0;
  json config = {{"name", "runtimes"},
                 {"seed", 3},
                 {"ranks", 16},
                 {"iterations", 3},
                 {"topology", run_platform_spec(platform, 16)},
                 {"algorithm", {{"name", algorithm}}},
                 {"workload", dense ? json{{"n", 1 << 18}} : json{{"n", 1 << 18}, {"density", 0.01}}},
                 {"network", {{"model", "LinkLevel"}, {"runtime", runtime}}}};
  if (!dense)
    config["gradients"] = {{"source", "calibrated"}, {"model", "vgg16"}};
  if (algorithm == "spardl")
    config["algorithm"]["teams"] = 2;
  return config;
}

// Runs `config` under both runtimes and compares every output file byte for byte.
void expect_runtimes_identical(json config, const std::string& name)
{
  config["network"]["runtime"] = "simgrid";
  const CliResult actors = run_config(config, name + "-actors");
  config["network"]["runtime"] = "fibers";
  const CliResult fibers = run_config(config, name + "-fibers");
  ASSERT_EQ(actors.exit_code, 0) << actors.output;
  ASSERT_EQ(fibers.exit_code, 0) << fibers.output;
  for (const char* file : {"results.csv", "ranks.csv", "links.csv"})
    EXPECT_EQ(read_text(actors.dir / file), read_text(fibers.dir / file)) << file;

  const json actors_manifest = json::parse(read_text(actors.dir / "manifest.json"));
  const json fibers_manifest = json::parse(read_text(fibers.dir / "manifest.json"));
  EXPECT_EQ(actors_manifest.at("config").at("network").at("runtime"), "simgrid");
  EXPECT_EQ(fibers_manifest.at("config").at("network").at("runtime"), "fibers");
  EXPECT_TRUE(actors_manifest.contains("simgrid_version"));
  EXPECT_FALSE(fibers_manifest.contains("simgrid_version"));
  EXPECT_FALSE(fibers_manifest.contains("simgrid_options"));
  EXPECT_EQ(actors_manifest.at("simulated_messages"), fibers_manifest.at("simulated_messages"));
}

// Under the sanitizers (scripts/sanitize.sh, 5-10x slower) the dragonfly alone: CI's minutes.
std::vector<Point> every_point()
{
#if defined(__SANITIZE_ADDRESS__)
  const std::vector<Platform> platforms = {Platform::dragonfly};
#else
  const std::vector<Platform> platforms = {Platform::star, Platform::fat_tree, Platform::dragonfly};
#endif
  std::vector<Point> points;
  for (const auto& entry : sparsim::algorithm_registry())
    for (Platform platform : platforms)
      points.push_back({entry.name, platform});
  return points;
}

class BothRuntimes : public ::testing::TestWithParam<Point> {};

TEST_P(BothRuntimes, ByteIdenticalResults)
{
  expect_runtimes_identical(config_for(GetParam().algorithm, GetParam().platform, "simgrid"), label(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Algorithms, BothRuntimes, ::testing::ValuesIn(every_point()),
                         [](const ::testing::TestParamInfo<Point>& info) { return label(info.param); });

// Routes chosen per message (Valiant) and when a transfer starts (adaptive), at 64 ranks where they detour.
TEST(BothRuntimes, ByteIdenticalUnderValiantAndAdaptiveRouting)
{
  for (const char* routing : {"valiant", "adaptive"}) {
    json config = config_for("oktopk", Platform::dragonfly, "simgrid");
    config["ranks"] = 64;
    config["topology"]["routing"] = routing;
    expect_runtimes_identical(config, std::string("oktopk-") + routing);
  }
}

// At 64 ranks gTopk's leaves enter "broadcast" while their parents are still in "reduction": the host runs
// those ranks in another order under each runtime, and the outputs list phases by their earliest entry in
// simulated time (PhaseNames::output_order), not by the host's order.
TEST(BothRuntimes, ByteIdenticalWhenPhasesStartInAnotherHostOrder)
{
  json config = config_for("gtopk", Platform::dragonfly, "simgrid");
  config["ranks"] = 64;
  config["compute"] = {{"training", "model"}, {"reduction", "memory_bandwidth"}};
  expect_runtimes_identical(config, "gtopk-64");
}

// Threshold reuse and the mean-field residual under the candidates generation: the rank loop's other paths.
TEST(BothRuntimes, ByteIdenticalWithThresholdReuseAndTheMeanFieldResidual)
{
  json config = config_for("oktopk", Platform::star, "simgrid");
  config["iterations"] = 4;
  config["gradients"]["generation"] = "candidates";
  config["selection"] = {{"residual", "mean_field"}, {"reevaluate_every", 2}};
  expect_runtimes_identical(config, "oktopk-mean-field");
}

TEST(BothRuntimes, FibersNeedTheLinkLevelModelAndASaneStack)
{
  json config = config_for("dense_ring", Platform::star, "fibers");
  config["network"]["model"] = "CM02";
  CliResult run = run_config(config, "fibers-cm02");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("network.runtime"), std::string::npos) << run.output;

  for (const char* stack : {"1KiB", "10 parsecs", "1TiB"}) {
    config = config_for("dense_ring", Platform::star, "fibers");
    config["network"]["fiber_stack"] = stack;
    run = run_config(config, "fibers-stack");
    EXPECT_EQ(run.exit_code, 2) << stack << ": " << run.output;
    EXPECT_NE(run.output.find("network.fiber_stack"), std::string::npos) << run.output;
  }
  config = config_for("dense_ring", Platform::star, "simgrid");
  config["network"]["fiber_stack"] = "64KiB";
  run = run_config(config, "actors-stack");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("network.fiber_stack"), std::string::npos) << run.output;
}

} // namespace
