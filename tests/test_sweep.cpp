// Sweeps through the CLI: every point runs, summary.csv gathers them, --resume skips complete points and
// redoes incomplete ones, and the rebuilt summary is identical to an uninterrupted run's.
#include "sparsim_cli.hpp"

#include <gtest/gtest.h>
#include <set>

using namespace sparsim::testing;

namespace {

nlohmann::json tiny_sweep()
{
  return {
      {"name", "tiny"},
      {"base",
       {{"ranks", 4},
        {"iterations", 2},
        {"topology", {{"type", "star"}, {"nodes", 8}, {"bandwidth", "10GBps"}, {"latency", "1us"}}},
        {"algorithm", {{"name", "topka"}}},
        {"workload", {{"n", 5000}, {"density", 0.02}}}}},
      {"axes",
       {{"ranks", {2, 3, 8}},
        {"@algorithm",
         {{{"algorithm.name", "dense_ring"}, {"workload.data", "phantom"}}, {{"algorithm.name", "oktopk"}}}}}},
  };
}

CliResult run_sweep_cli(const nlohmann::json& sweep, const std::filesystem::path& dir, const std::string& flags)
{
  std::ofstream(dir / "sweep.json") << sweep.dump(2);
  CliResult r = run_cli("sweep " + (dir / "sweep.json").string() + " --out " + (dir / "out").string() + " " + flags);
  r.dir = dir / "out";
  return r;
}

}  // namespace

TEST(Sweep, RunsEveryPointAndResumes)
{
  const auto dir = scratch_dir("sweep");
  CliResult first = run_sweep_cli(tiny_sweep(), dir, "--jobs 2");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const auto rows = read_csv(first.dir / "summary.csv");
  std::set<std::string> points;
  for (auto& row : rows)
    points.insert(row.at("point"));
  EXPECT_EQ(points.size(), 6u);
  for (auto& row : rows)
    EXPECT_EQ(row.at("axis:ranks"), row.at("ranks"));  // the axis value reached the run
  const std::string summary = read_text(first.dir / "summary.csv");

  // Resume: nothing to run; then a point that lost its manifest (killed half-way) is run again.
  CliResult again = run_sweep_cli(tiny_sweep(), dir, "--resume");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("6 complete already, 0 to run"), std::string::npos) << again.output;
  std::filesystem::remove(first.dir / "points" / "0003" / "manifest.json");
  CliResult redo = run_sweep_cli(tiny_sweep(), dir, "--resume --jobs 1");
  ASSERT_EQ(redo.exit_code, 0) << redo.output;
  EXPECT_NE(redo.output.find("5 complete already, 1 to run"), std::string::npos) << redo.output;
  EXPECT_EQ(read_text(first.dir / "summary.csv"), summary);
}

TEST(Sweep, BadPointIsRejectedBeforeAnythingRuns)
{
  auto sweep = tiny_sweep();
  sweep["axes"]["ranks"] = {2, 9};  // the star has 8 nodes
  const auto dir = scratch_dir("badsweep");
  CliResult r = run_sweep_cli(sweep, dir, "");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("ranks=9"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(r.dir / "points"));
}
