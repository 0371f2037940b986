// The sparse rank loop through the CLI: selection is charged by the compute model, threshold reuse makes the
// selected count drift (and the results report it), exact selection selects exactly k.
#include "sparsim_cli.hpp"

#include <gtest/gtest.h>

using namespace sparsim::testing;

namespace {

nlohmann::json topka_config(const nlohmann::json& compute, const std::string& policy)
{
  auto config = star_run_config("loop", 4, 6, "topka", 50000);
  config["selection"] = {{"policy", policy}, {"reevaluate_every", 3}};
  config["compute"] = compute;
  return config;
}

} // namespace

TEST(RankLoop, ExactSelectionIsChargedAtMemoryBandwidth)
{
  CliResult run = run_config(
      topka_config({{"selection", "memory_bandwidth"}, {"memory_bandwidth", "100GBps"}}, "exact"), "charged");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // One streaming pass over 50000 floats plus 500 pairs written, at 100 GB/s.
  const double expected = (4.0 * 50000 + 8.0 * 500) / 100e9;
  for (int it = 0; it < 6; ++it)
    EXPECT_NEAR(phase_time(run.dir, it, "selection"), expected, 1e-15) << "iteration " << it;
  for (auto& total : total_rows(run.dir)) {
    EXPECT_EQ(total["local_selected_max"], "500");
    EXPECT_EQ(total["local_selected_sum"], "2000");
  }
}

TEST(RankLoop, FreeSelectionTakesNoTime)
{
  CliResult run = run_config(topka_config({{"selection", "free"}}, "exact"), "free");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  for (int it = 0; it < 6; ++it)
    EXPECT_EQ(phase_time(run.dir, it, "selection"), -1); // no selection row at all
}

TEST(RankLoop, ThresholdReuseDriftsAndIsReported)
{
  CliResult run = run_config(topka_config({{"selection", "free"}}, "threshold_reuse"), "reuse");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto totals = total_rows(run.dir);
  ASSERT_EQ(totals.size(), 6u);
  bool drifted = false;
  for (auto& total : totals) {
    const int it = std::stoi(total["iteration"]);
    if (it % 3 == 0)
      EXPECT_EQ(total["local_selected_max"], "500") << "re-evaluation iteration " << it; // exact top-k
    else
      drifted = drifted || total["local_selected_max"] != "500";
  }
  EXPECT_TRUE(drifted) << "threshold reuse selected exactly k every iteration";
}

TEST(RankLoop, WarmupIterationsAreDenseRingAllreduces)
{
  auto config = topka_config({{"selection", "free"}}, "exact");
  config["selection"]["warmup_iterations"] = 2;
  CliResult run = run_config(config, "warmup");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  for (auto& total : total_rows(run.dir)) {
    const int it = std::stoi(total.at("iteration"));
    if (it < 2) {
      EXPECT_EQ(number(total, "bytes_sent_max"), 2 * 4.0 * 50000 * 3 / 4); // the ring's 2n(P-1)/P floats
      EXPECT_EQ(total.at("local_selected_max"), "0");
    } else {
      EXPECT_EQ(total.at("local_selected_max"), "500");
    }
  }
  auto manifest = nlohmann::json::parse(read_text(run.dir / "manifest.json"));
  EXPECT_LE(manifest["verification"]["max_error_over_tolerance"].get<double>(), 1.0);
}

// selection.residual "none" keeps no residual: the first sparse iteration after the warm-up (where the dense
// residual is still zero) is identical to a run with the residual; later ones select from the fresh gradient.
TEST(RankLoop, NoResidualMatchesTheFirstSparseIterationOnly)
{
  auto config = topka_config({{"selection", "free"}}, "exact");
  config["selection"]["warmup_iterations"] = 1;
  CliResult dense = run_config(config, "residual_dense");
  config["selection"]["residual"] = "none";
  CliResult none = run_config(config, "residual_none");
  ASSERT_EQ(dense.exit_code, 0) << dense.output;
  ASSERT_EQ(none.exit_code, 0) << none.output;
  auto rows_of = [](const std::filesystem::path& dir, int iteration) {
    std::vector<std::map<std::string, std::string>> rows;
    for (auto& row : read_csv(dir / "results.csv"))
      if (std::stoi(row.at("iteration")) == iteration)
        rows.push_back(row);
    return rows;
  };
  EXPECT_EQ(rows_of(dense.dir, 1), rows_of(none.dir, 1));
  int later_iterations_that_differ = 0;
  for (int it = 2; it < 6; ++it)
    later_iterations_that_differ += rows_of(dense.dir, it) != rows_of(none.dir, it);
  EXPECT_GT(later_iterations_that_differ, 0);
  auto manifest = nlohmann::json::parse(read_text(none.dir / "manifest.json"));
  EXPECT_LE(manifest["verification"]["max_error_over_tolerance"].get<double>(), 1.0);
  EXPECT_EQ(manifest["config"]["selection"]["residual"], "none");
}

TEST(RankLoop, NoResidualLeavesTheResidualOutOfTheMemoryEstimate)
{
  auto validate = [](const nlohmann::json& config, const std::string& name) {
    const auto dir = scratch_dir(name);
    std::ofstream(dir / "config.json") << config.dump(2);
    return run_cli("validate " + (dir / "config.json").string());
  };
  auto config = topka_config({{"selection", "free"}}, "exact");
  CliResult dense = validate(config, "estimate_dense");
  config["selection"]["residual"] = "none";
  CliResult none = validate(config, "estimate_none");
  ASSERT_EQ(dense.exit_code, 0) << dense.output;
  ASSERT_EQ(none.exit_code, 0) << none.output;
  EXPECT_NE(dense.output.find("residuals (P*n floats)"), std::string::npos) << dense.output;
  EXPECT_EQ(none.output.find("residuals"), std::string::npos) << none.output;
}

// The selection stage spreads ranks over host threads; the results must not depend on how many.
TEST(RankLoop, SelectionThreadsDoNotChangeResults)
{
  auto config = topka_config({{"selection", "memory_bandwidth"}}, "threshold_reuse");
  config["ranks"] = 7;
  config["topology"]["nodes"] = 7;
  std::vector<std::string> results, ranks;
  for (int threads : {1, 2, 3}) {
    const auto dir = scratch_dir("threads" + std::to_string(threads));
    std::ofstream(dir / "config.json") << config.dump(2);
    CliResult run = run_cli("run " + (dir / "config.json").string() + " --out " + (dir / "out").string() +
                            " --quiet --threads " + std::to_string(threads));
    ASSERT_EQ(run.exit_code, 0) << run.output;
    results.push_back(read_text(dir / "out" / "results.csv"));
    ranks.push_back(read_text(dir / "out" / "ranks.csv"));
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
  EXPECT_EQ(ranks[0], ranks[1]);
  EXPECT_EQ(ranks[0], ranks[2]);
}
