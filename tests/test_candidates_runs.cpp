// Whole runs with the candidates generation against the same runs with the dense generation (the independent
// oracle: same model, every entry drawn): per-rank volumes and result sizes of Ok-Topk, TopkA, gTopk and SparCML
// at P = 64 over exact and threshold-reuse iterations, within 5%; and the same files for one and two threads.
#include "sparsim_cli.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

using namespace sparsim::testing;

namespace {

nlohmann::json run_config_for(const std::string& algorithm, const std::string& generation)
{
  return {{"name", algorithm + "_" + generation},
          {"seed", 3},
          {"ranks", 64},
          {"iterations", 4},
          {"topology", {{"file", std::string(SPARSIM_SOURCE_DIR) + "/configs/platforms/piz_daint.json"}}},
          {"algorithm", {{"name", algorithm}}},
          {"workload", {{"n", 1 << 20}, {"density", 0.01}}},
          {"gradients", {{"source", "calibrated"}, {"model", "vgg16"}, {"generation", generation}}},
          // Iterations 0 and 3 select the exact top-k, 1 and 2 reuse the threshold (Ok-Topk's policy).
          {"selection", {{"residual", "none"}, {"reevaluate_every", 3}}},
          {"network", {{"model", "LinkLevel"}}},
          {"simulation", {{"verify", false}}}};
}

struct Totals {
  double bytes_recv_max = 0;
  double bytes_recv_mean = 0;
  double result_nnz = 0;
};

// The "total" rows of results.csv, per iteration.
std::map<int, Totals> totals(const std::filesystem::path& dir)
{
  std::map<int, Totals> out;
  for (auto& row : read_csv(dir / "results.csv"))
    if (row["phase"] == "total")
      out[std::stoi(row["iteration"])] = {std::stod(row["bytes_recv_max"]), std::stod(row["bytes_recv_mean"]),
                                          std::stod(row["result_nnz"])};
  return out;
}

void expect_same_outcomes(const std::string& algorithm)
{
  const CliResult dense = run_config(run_config_for(algorithm, "dense"), algorithm + "-dense");
  ASSERT_EQ(dense.exit_code, 0) << dense.output;
  const CliResult scale = run_config(run_config_for(algorithm, "candidates"), algorithm + "-candidates");
  ASSERT_EQ(scale.exit_code, 0) << scale.output;
  const auto d = totals(dense.dir), s = totals(scale.dir);
  ASSERT_EQ(d.size(), 4u);
  ASSERT_EQ(s.size(), 4u);
  for (int it = 0; it < 4; ++it) {
    EXPECT_NEAR(s.at(it).bytes_recv_mean / d.at(it).bytes_recv_mean, 1.0, 0.05) << algorithm << " iteration " << it;
    EXPECT_NEAR(s.at(it).bytes_recv_max / d.at(it).bytes_recv_max, 1.0, 0.05) << algorithm << " iteration " << it;
    EXPECT_NEAR(s.at(it).result_nnz / d.at(it).result_nnz, 1.0, 0.05) << algorithm << " iteration " << it;
  }
}

} // namespace

TEST(CandidatesRuns, OktopkMatchesTheDenseGeneration) { expect_same_outcomes("oktopk"); }
TEST(CandidatesRuns, TopkaMatchesTheDenseGeneration) { expect_same_outcomes("topka"); }
TEST(CandidatesRuns, GtopkMatchesTheDenseGeneration) { expect_same_outcomes("gtopk"); }
TEST(CandidatesRuns, SparcmlMatchesTheDenseGeneration) { expect_same_outcomes("sparcml_dsar_split_allgather"); }

TEST(CandidatesRuns, SameResultsForAnyThreadCount)
{
  // The shared part, the plan and the histogram are built in fixed blocks, the ranks' draws are counter-based:
  // one thread or two give the same files.
  nlohmann::json config = run_config_for("oktopk", "candidates");
  config["ranks"] = 16;
  config["workload"]["n"] = 3 << 20; // three blocks of the shared part
  const CliResult one = run_config(config, "threads-1", "--threads 1");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const CliResult two = run_config(config, "threads-2", "--threads 2");
  ASSERT_EQ(two.exit_code, 0) << two.output;
  for (const char* file : {"results.csv", "ranks.csv", "links.csv"})
    EXPECT_EQ(read_text(one.dir / file), read_text(two.dir / file)) << file;
}
