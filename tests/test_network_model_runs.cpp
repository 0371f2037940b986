// Whole runs under both network models: every registered algorithm with calibrated VGG-16 gradients on the
// star, the oversubscribed fat tree preset and the Piz Daint dragonfly, once under SimGrid's flows (CM02, the
// reference) and once under the link-level model. Everything but time must be identical; the per-iteration
// time must agree (bench/network_models/run.sh covers larger P and n).
#include "sparsim_cli.hpp"
#include "topology_specs.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace {

using nlohmann::json;
using namespace sparsim::testing;

const char* const kAlgorithms[] = {"dense_ring",
                                   "dense_recursive_doubling",
                                   "dense_rabenseifner",
                                   "topka",
                                   "oktopk",
                                   "gtopk",
                                   "sparcml_ssar_recursive_double",
                                   "sparcml_ssar_split_allgather",
                                   "sparcml_dsar_split_allgather"};

using Platform = RunPlatform;
using Point = RunPoint;

// The relative tolerance on each iteration's time. The bounds are 5% (median) and 10% (worst) on the
// fat tree and the dragonfly; measured at P = 16 and 64 the worst is 0.72% (the dragonfly) and 0.02% (the
// others), so the test keeps a margin over what was measured rather than the bounds, and a regression
// shows. On the star the models differ only where messages of different sizes share a link (per-link equal
// shares against max-min): 0.02% measured.
double tolerance_of(Platform platform) { return platform == Platform::dragonfly ? 0.02 : 0.001; }

json config_for(const std::string& algorithm, Platform platform, int ranks, const std::string& model)
{
  json config = {{"name", "models"},
                 {"seed", 1},
                 {"ranks", ranks},
                 {"iterations", 2},
                 {"topology", run_platform_spec(platform, 64)},
                 {"algorithm", {{"name", algorithm}}},
                 {"workload", {{"n", 1 << 20}, {"density", 0.01}}},
                 {"gradients", {{"source", "calibrated"}, {"model", "vgg16"}}},
                 {"network", {{"model", model}}}};
  if (algorithm.rfind("dense", 0) == 0)
    config["workload"] = {{"n", 1 << 20}};
  return config;
}

// A CSV's rows without one column (the times), for equality.
std::vector<std::map<std::string, std::string>> without(std::vector<std::map<std::string, std::string>> rows,
                                                        const std::vector<std::string>& columns)
{
  for (auto& row : rows)
    for (const auto& column : columns)
      row.erase(column);
  return rows;
}

void expect_models_agree(const std::string& algorithm, Platform platform, int ranks)
{
  const std::string name = algorithm + "-" + std::to_string(static_cast<int>(platform)) + "-" + std::to_string(ranks);
  const CliResult flows = run_config(config_for(algorithm, platform, ranks, "CM02"), name + "-flows");
  const CliResult links = run_config(config_for(algorithm, platform, ranks, "LinkLevel"), name + "-links");
  ASSERT_EQ(flows.exit_code, 0) << flows.output;
  ASSERT_EQ(links.exit_code, 0) << links.output;

  // Everything but time is identical: bytes and messages per rank and phase, link loads, results.
  EXPECT_EQ(without(read_csv(flows.dir / "ranks.csv"), {"time_s"}),
            without(read_csv(links.dir / "ranks.csv"), {"time_s"}));
  EXPECT_EQ(read_text(flows.dir / "links.csv"), read_text(links.dir / "links.csv"));
  const auto flow_rows = read_csv(flows.dir / "results.csv");
  const auto link_rows = read_csv(links.dir / "results.csv");
  EXPECT_EQ(without(flow_rows, {"sim_time_s"}), without(link_rows, {"sim_time_s"}));

  // Each iteration's time within the tolerance.
  ASSERT_EQ(flow_rows.size(), link_rows.size());
  int iterations = 0;
  for (std::size_t i = 0; i < flow_rows.size(); ++i) {
    if (flow_rows[i].at("phase") != "total")
      continue;
    ++iterations;
    const double reference = std::stod(flow_rows[i].at("sim_time_s"));
    const double fast = std::stod(link_rows[i].at("sim_time_s"));
    EXPECT_NEAR(fast, reference, tolerance_of(platform) * reference) << "iteration " << flow_rows[i].at("iteration");
  }
  EXPECT_EQ(iterations, 2);
}

std::vector<Point> every_point()
{
  std::vector<Point> points;
  for (const char* algorithm : kAlgorithms)
    for (Platform platform : {Platform::star, Platform::fat_tree, Platform::dragonfly})
      points.push_back({algorithm, platform});
  return points;
}

class BothModels : public ::testing::TestWithParam<Point> {};

TEST_P(BothModels, SameTrafficAndTimeWithinToleranceAt16Ranks)
{
  expect_models_agree(GetParam().algorithm, GetParam().platform, 16);
}

INSTANTIATE_TEST_SUITE_P(Algorithms, BothModels, ::testing::ValuesIn(every_point()),
                         [](const ::testing::TestParamInfo<Point>& info) { return label(info.param); });

// 64 ranks: four routers' worth of nodes contend for the dragonfly's chassis links.
TEST(BothModels, OkTopkAt64RanksOnTheDragonfly) { expect_models_agree("oktopk", Platform::dragonfly, 64); }
TEST(BothModels, SparcmlAt64RanksOnTheDragonfly)
{
  expect_models_agree("sparcml_dsar_split_allgather", Platform::dragonfly, 64);
}

// Same config and seed, same results, for any number of selection threads under the link-level model (its
// clock never depends on the order in which SimGrid runs the actors).
TEST(LinkLevelModel, ResultsDoNotDependOnThreads)
{
  const json config = config_for("oktopk", Platform::dragonfly, 16, "LinkLevel");
  std::vector<std::string> results, ranks;
  for (int threads : {1, 2, 2}) {
    const CliResult run = run_config(config, "linklevel-threads" + std::to_string(results.size()),
                                     "--threads " + std::to_string(threads));
    ASSERT_EQ(run.exit_code, 0) << run.output;
    results.push_back(read_text(run.dir / "results.csv"));
    ranks.push_back(read_text(run.dir / "ranks.csv"));
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[1], results[2]);
  EXPECT_EQ(ranks[0], ranks[1]);
  EXPECT_EQ(ranks[1], ranks[2]);
}

} // namespace
