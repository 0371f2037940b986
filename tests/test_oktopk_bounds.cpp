// Ok-Topk's volume bound in terms of the counts each iteration actually had (algorithms.md, "Cost"): with
// m the largest local selection and g the global selection, the busiest rank's data words (split, balance
// and allgatherv; metadata phases apart) stay at or under 2m + 4g(P-1)/P on every non-re-evaluation
// iteration, and under 6k(P-1)/P when m and g are at most k. Measured end to end through the CLI on real
// gradient sources, for P = 4..256, with threshold reuse (m drifts) and with exact selection (m = k).
#include "sparsim_cli.hpp"

#include <gtest/gtest.h>
#include <map>
#include <ostream>

using namespace sparsim::testing;

namespace {

struct Case {
  int ranks;
  std::string policy;
};
// Readable test parameters in ctest's names and gtest's output (instead of a byte dump with pointers).
void PrintTo(const Case& c, std::ostream* out) { *out << "P" << c.ranks << "_" << c.policy; }

class OkTopkBound : public ::testing::TestWithParam<Case> {};

} // namespace

TEST_P(OkTopkBound, WordsPerRankStayUnderTheBoundOfTheActualCounts)
{
  const auto [P, policy] = GetParam();
  const nlohmann::json config = {
      {"name", "bound"},
      {"ranks", P},
      {"iterations", 8},
      {"seed", 11},
      {"topology", {{"type", "star"}, {"nodes", P}, {"bandwidth", "10GBps"}, {"latency", "1us"}}},
      {"algorithm", {{"name", "oktopk"}, {"repartition_every", 4}}},
      {"workload", {{"n", 1 << 16}, {"density", 0.01}}},
      {"selection", {{"policy", policy}, {"reevaluate_every", 4}}},
      {"simulation", {{"verify", true}}},
  };
  CliResult run = run_config(config, "bound");
  ASSERT_EQ(run.exit_code, 0) << run.output;

  // Data bytes per (iteration, rank), sent and received.
  std::map<std::pair<int, int>, std::pair<double, double>> data;
  for (auto& row : read_csv(run.dir / "ranks.csv"))
    if (row["phase"] == "split" || row["phase"] == "balance" || row["phase"] == "allgatherv") {
      auto& d = data[{std::stoi(row["iteration"]), std::stoi(row["rank"])}];
      d.first += number(row, "bytes_sent");
      d.second += number(row, "bytes_recv");
    }
  int checked = 0;
  for (auto& total : total_rows(run.dir)) {
    if (total["reevaluation"] == "1")
      continue; // the re-evaluation iteration gathers every reduced region: amortised, reported apart
    const int it = std::stoi(total["iteration"]);
    const double m = number(total, "local_selected_max");
    const double g = number(total, "global_selected");
    const double k = number(total, "k");
    // 8-byte elements (2 words); P elements of slack for the ceil(T/P) blocks of the balancing.
    const double bound_bytes = 4 * (2 * m + 4 * g * (P - 1) / P) + 8.0 * P;
    for (int r = 0; r < P; ++r) {
      const auto [sent, received] = data[{it, r}];
      EXPECT_LE(sent, bound_bytes) << "iteration " << it << " rank " << r << " m=" << m << " g=" << g;
      EXPECT_LE(received, bound_bytes) << "iteration " << it << " rank " << r << " m=" << m << " g=" << g;
      if (m <= k && g <= k) {
        EXPECT_LE(sent, 4 * 6 * k * (P - 1) / P + 8.0 * P) << "iteration " << it << " rank " << r;
        EXPECT_LE(received, 4 * 6 * k * (P - 1) / P + 8.0 * P) << "iteration " << it << " rank " << r;
      }
    }
    ++checked;
  }
  EXPECT_EQ(checked, 6); // iterations 0 and 4 re-evaluate
}

INSTANTIATE_TEST_SUITE_P(Sizes, OkTopkBound,
                         ::testing::Values(Case{4, "threshold_reuse"}, Case{16, "threshold_reuse"},
                                           Case{64, "threshold_reuse"}, Case{256, "threshold_reuse"}, Case{4, "exact"},
                                           Case{16, "exact"}, Case{64, "exact"}, Case{256, "exact"}),
                         [](const auto& info) { return info.param.policy + "_P" + std::to_string(info.param.ranks); });

// The repartition's allreduce by Rabenseifner's algorithm sums the same quantiles as recursive doubling: the
// boundaries, and so every other phase's messages and bytes on every rank, are the same; only the repartition
// moves less (at most 2 (P-1) integers per virtual rank against log2(p2) (P-1)). P = 24 folds 8 pairs.
TEST(OkTopkRepartition, RabenseifnerSumsTheSameQuantilesWithLessVolume)
{
  const int P = 24;
  nlohmann::json config = {{"name", "repartition"},
                           {"seed", 5},
                           {"ranks", P},
                           {"iterations", 3},
                           {"topology", {{"type", "star"}, {"nodes", P}, {"bandwidth", "10GBps"}, {"latency", "1us"}}},
                           {"algorithm", {{"name", "oktopk"}, {"repartition_every", 1}}},
                           {"workload", {{"n", 1 << 18}, {"density", 0.01}}},
                           {"gradients", {{"source", "calibrated"}, {"model", "vgg16"}}},
                           {"network", {{"model", "LinkLevel"}}}};
  const CliResult doubling = run_config(config, "repartition-doubling");
  config["algorithm"]["repartition_allreduce"] = "rabenseifner";
  const CliResult halving = run_config(config, "repartition-halving");
  ASSERT_EQ(doubling.exit_code, 0) << doubling.output;
  ASSERT_EQ(halving.exit_code, 0) << halving.output;

  const auto doubling_rows = read_csv(doubling.dir / "ranks.csv");
  const auto halving_rows = read_csv(halving.dir / "ranks.csv");
  ASSERT_EQ(doubling_rows.size(), halving_rows.size());
  const double integers = P - 1, word = 8;
  int repartition_rows = 0;
  for (std::size_t i = 0; i < doubling_rows.size(); ++i) {
    auto a = doubling_rows[i], b = halving_rows[i];
    ASSERT_EQ(a.at("phase"), b.at("phase"));
    if (a.at("phase") != "repartition") {
      a.erase("time_s");
      b.erase("time_s");
      EXPECT_EQ(a, b) << "row " << i;
      continue;
    }
    ++repartition_rows;
    const int rank = std::stoi(a.at("rank"));
    if (rank < 16) // ranks 0..15 are the 8 folded pairs: their fold and unfold messages carry the whole vector
      continue;
    EXPECT_EQ(std::stod(a.at("bytes_sent")), 4 * integers * word) << "rank " << rank; // log2(16) rounds
    EXPECT_LE(std::stod(b.at("bytes_sent")), 2 * integers * word) << "rank " << rank;
    EXPECT_GE(std::stod(b.at("bytes_sent")), integers * word) << "rank " << rank;
  }
  EXPECT_EQ(repartition_rows, 3 * P);
  const auto doubling_results = read_csv(doubling.dir / "results.csv");
  const auto halving_results = read_csv(halving.dir / "results.csv");
  ASSERT_EQ(doubling_results.size(), halving_results.size());
  for (std::size_t i = 0; i < doubling_results.size(); ++i) {
    if (doubling_results[i].at("phase") == "total") {
      EXPECT_EQ(doubling_results[i].at("global_selected"), halving_results[i].at("global_selected"));
    }
  }
}
