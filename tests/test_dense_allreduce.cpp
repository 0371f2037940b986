// The dense allreduces, end to end through the CLI: results equal the direct sum, simulated time equals the
// alpha-beta closed form on the contention-free star, and bytes per rank equal the algorithm's volume.
// The closed forms here are written out independently of algorithms/ (the oracle is the formula).
#include "sparsim_cli.hpp"

#include <cmath>
#include <gtest/gtest.h>

using namespace sparsim::testing;

namespace {

constexpr double kLatency = 1e-6;   // per link; a star route crosses two links
constexpr double kBandwidth = 10e9; // bytes per second
constexpr double kAlpha = 2 * kLatency;

nlohmann::json star_config(const std::string& algorithm, int ranks, long n)
{
  return {
      {"name", "test"},
      {"ranks", ranks},
      {"iterations", 2},
      {"seed", 7},
      {"topology", {{"type", "star"}, {"nodes", std::max(ranks, 2)}, {"bandwidth", "10GBps"}, {"latency", "1us"}}},
      {"algorithm", {{"name", algorithm}}},
      {"workload", {{"n", n}}},
      {"gradients", {{"source", "integers"}}},
  };
}

struct Case {
  int ranks;
  long n;
};

int log2_floor(int p)
{
  int l = 0;
  while ((2 << l) <= p)
    ++l;
  return l;
}

// Runs a config and checks the run verified its result against the direct sum, exactly.
std::vector<std::map<std::string, std::string>> run_verified(const nlohmann::json& config, const std::string& name)
{
  CliResult run = run_config(config, name);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  auto manifest = nlohmann::json::parse(read_text(run.dir / "manifest.json"));
  EXPECT_TRUE(manifest["verification"]["checked"].get<bool>());
  EXPECT_EQ(manifest["verification"]["max_error_over_tolerance"].get<double>(), 0.0); // integer data: exact
  return total_rows(run.dir);
}

} // namespace

TEST(DenseRing, MatchesClosedFormOnStar)
{
  for (Case c : {Case{2, 1000}, Case{3, 1000}, Case{4, 4096}, Case{7, 10007}, Case{16, 65536}, Case{33, 100000}}) {
    SCOPED_TRACE(testing::Message() << "P=" << c.ranks << " n=" << c.n);
    auto totals = run_verified(star_config("dense_ring", c.ranks, c.n), "ring");
    ASSERT_EQ(totals.size(), 2u);
    const double P = c.ranks;
    const double expected_time = 2 * (P - 1) * (kAlpha + (c.n / P) * 4 / kBandwidth);
    for (auto& row : totals) {
      EXPECT_NEAR(number(row, "sim_time_s"), expected_time, 0.005 * expected_time);
      // Every block is sent P-1 times per phase: the mean is exact; a rank's blocks round by < 1 element.
      EXPECT_DOUBLE_EQ(number(row, "bytes_sent_mean"), 2 * 4.0 * c.n * (P - 1) / P);
      EXPECT_DOUBLE_EQ(number(row, "bytes_recv_mean"), number(row, "bytes_sent_mean"));
      EXPECT_LE(std::fabs(number(row, "bytes_sent_max") - 2 * 4.0 * c.n * (P - 1) / P), 2 * 4 * (P - 1));
      EXPECT_EQ(number(row, "msgs_sent_max"), 2 * (P - 1));
    }
  }
}

TEST(DenseRecursiveDoubling, MatchesClosedFormOnStar)
{
  for (Case c : {Case{2, 1000}, Case{4, 4096}, Case{8, 1000}, Case{16, 20000}, Case{5, 1000}, Case{12, 3000}}) {
    SCOPED_TRACE(testing::Message() << "P=" << c.ranks << " n=" << c.n);
    auto totals = run_verified(star_config("dense_recursive_doubling", c.ranks, c.n), "rd");
    const int p2 = 1 << log2_floor(c.ranks);
    const bool folded = p2 != c.ranks;
    const double message = kAlpha + c.n * 4 / kBandwidth;
    const double expected_time = (log2_floor(c.ranks) + (folded ? 2 : 0)) * message;
    for (auto& row : totals) {
      EXPECT_NEAR(number(row, "sim_time_s"), expected_time, 0.005 * expected_time);
      EXPECT_DOUBLE_EQ(number(row, "bytes_sent_max"), (log2_floor(c.ranks) + (folded ? 1 : 0)) * 4.0 * c.n);
    }
  }
}

TEST(DenseRabenseifner, MatchesClosedFormOnStar)
{
  for (Case c : {Case{2, 1000}, Case{4, 4096}, Case{8, 8000}, Case{16, 65536}, Case{6, 6000}, Case{11, 5000}}) {
    SCOPED_TRACE(testing::Message() << "P=" << c.ranks << " n=" << c.n);
    auto totals = run_verified(star_config("dense_rabenseifner", c.ranks, c.n), "rab");
    const int p2 = 1 << log2_floor(c.ranks);
    const bool folded = p2 != c.ranks;
    const double halves = 4.0 * c.n * (p2 - 1) / p2; // bytes per phase
    double expected_time = 2 * log2_floor(c.ranks) * kAlpha + 2 * halves / kBandwidth;
    if (folded)
      expected_time += 2 * (kAlpha + c.n * 4 / kBandwidth);
    for (auto& row : totals) {
      EXPECT_NEAR(number(row, "sim_time_s"), expected_time, 0.005 * expected_time);
      EXPECT_LE(std::fabs(number(row, "bytes_sent_max") - (2 * halves + (folded ? 4.0 * c.n : 0))),
                4 * 2 * log2_floor(c.ranks));
    }
  }
}

TEST(DenseAllreduce, SingleRankIsANoOp)
{
  for (const char* algorithm : {"dense_ring", "dense_recursive_doubling", "dense_rabenseifner"}) {
    auto totals = run_verified(star_config(algorithm, 1, 100), "single");
    for (auto& row : totals) {
      EXPECT_EQ(number(row, "sim_time_s"), 0.0);
      EXPECT_EQ(number(row, "bytes_sent_max"), 0.0);
    }
  }
}

TEST(DenseAllreduce, MoreRanksThanElements)
{
  for (const char* algorithm : {"dense_ring", "dense_recursive_doubling", "dense_rabenseifner"})
    run_verified(star_config(algorithm, 9, 5), "tiny");
}

TEST(DenseAllreduce, UniformDataVerifiesWithinRounding)
{
  auto config = star_config("dense_ring", 6, 5000);
  config["gradients"]["source"] = "uniform";
  CliResult run = run_config(config, "uniform");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto manifest = nlohmann::json::parse(read_text(run.dir / "manifest.json"));
  EXPECT_LE(manifest["verification"]["max_error_over_tolerance"].get<double>(), 1.0);
}

TEST(DenseAllreduce, PhantomDataMovesTheSameBytes)
{
  auto real = star_config("dense_ring", 8, 12345);
  auto phantom = real;
  phantom["workload"]["data"] = "phantom";
  CliResult a = run_config(real, "real");
  CliResult b = run_config(phantom, "phantom");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_EQ(read_text(a.dir / "results.csv"), read_text(b.dir / "results.csv"));
}

TEST(DenseAllreduce, SameSeedSameBytes)
{
  auto config = star_config("dense_rabenseifner", 12, 30000);
  config["gradients"]["source"] = "uniform";
  CliResult a = run_config(config, "det-a");
  CliResult b = run_config(config, "det-b");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_EQ(read_text(a.dir / "results.csv"), read_text(b.dir / "results.csv"));
  EXPECT_EQ(read_text(a.dir / "ranks.csv"), read_text(b.dir / "ranks.csv"));
}

// On the dragonfly and fat-tree presets the same runs complete with the same volume, and no faster than the
// contention-free bound: every ring step takes at least the smallest route latency plus a block over the
// fastest route bandwidth (both read from the run's route summary).
TEST(DenseAllreduce, PresetsKeepVolumeAndAreNoFasterThanContentionFree)
{
  const int P = 64;
  const long n = 1 << 16;
  auto star = star_config("dense_ring", P, n);
  star["topology"]["nodes"] = P;
  CliResult on_star = run_config(star, "preset-star");
  ASSERT_EQ(on_star.exit_code, 0) << on_star.output;
  const auto star_totals = total_rows(on_star.dir);
  for (const char* preset : {"platforms/piz_daint.json", "platforms/fat_tree_4096.json"}) {
    SCOPED_TRACE(preset);
    auto config = star;
    config["topology"] = {{"file", std::string(SPARSIM_SOURCE_DIR) + "/configs/" + preset}};
    config["placement"] = {{"type", "random"}, {"seed", 3}}; // spread the ranks over groups and pods
    CliResult run = run_config(config, "preset");
    ASSERT_EQ(run.exit_code, 0) << run.output;
    const auto manifest = nlohmann::json::parse(read_text(run.dir / "manifest.json"));
    const double latency_min = manifest["routes"]["latency_min_s"];
    const double bandwidth_max = manifest["routes"]["bandwidth_max_Bps"];
    const double lower_bound = 2 * (P - 1) * (latency_min + (n / double(P)) * 4 / bandwidth_max);
    const auto totals = total_rows(run.dir);
    ASSERT_EQ(totals.size(), star_totals.size());
    for (std::size_t i = 0; i < totals.size(); ++i) {
      EXPECT_GE(number(totals[i], "sim_time_s"), lower_bound * (1 - 1e-9));
      for (const char* column : {"bytes_sent_max", "bytes_sent_mean", "bytes_recv_max", "msgs_sent_max"})
        EXPECT_EQ(totals[i].at(column), star_totals[i].at(column)) << column;
    }
  }
}
