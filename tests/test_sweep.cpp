// Sweeps through the CLI: every point runs, summary.csv gathers them, --resume skips complete points and
// redoes incomplete ones, and the rebuilt summary is identical to an uninterrupted run's, also after the sweep
// was stopped by SIGINT or killed by SIGKILL mid-way. Explicit points, their JSON-path errors, progress lines,
// and the Slurm scripts (run here by bash, without Slurm; tests/slurm/ runs them on a real Slurm).
#include "sparsim_cli.hpp"

#include <chrono>
#include <csignal>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <regex>
#include <set>
#include <thread>

using namespace sparsim::testing;

namespace {

nlohmann::json tiny_sweep()
{
  return {
      {"name", "tiny"},
      {"base", star_run_config("tiny", 4, 2, "topka", 5000, 0.02, 8)},
      {"axes",
       {{"ranks", {2, 3, 8}},
        {"@algorithm",
         {{{"algorithm.name", "dense_ring"}, {"workload.data", "phantom"}}, {{"algorithm.name", "oktopk"}}}}}},
  };
}

CliResult run_sweep_cli(const nlohmann::json& sweep, const std::filesystem::path& dir, const std::string& flags,
                        const std::string& out = "out")
{
  std::ofstream(dir / "sweep.json") << sweep.dump(2);
  CliResult r = run_cli("sweep " + (dir / "sweep.json").string() + " --out " + (dir / out).string() + " " + flags);
  r.dir = dir / out;
  return r;
}

// A quick first point, then five of a second or so each: a sweep can be stopped while points run.
constexpr std::size_t kSlowPoints = 6;
nlohmann::json slow_sweep()
{
  nlohmann::json points = {{{"seed", 1}, {"iterations", 1}}};
  for (int seed = 2; seed <= static_cast<int>(kSlowPoints); ++seed)
    points.push_back({{"seed", seed}});
  return {
      {"name", "slow"},
      {"base", star_run_config("slow", 4, 80, "topka", 200000, 0.01, 8)},
      {"points", points},
  };
}

std::size_t complete_points(const std::filesystem::path& out)
{
  std::size_t complete = 0;
  if (std::filesystem::exists(out / "points"))
    for (const auto& entry : std::filesystem::directory_iterator(out / "points"))
      complete += std::filesystem::exists(entry.path() / "manifest.json") ? 1 : 0;
  return complete;
}

// Processes whose command line mentions `text` (other than this test).
std::size_t processes_mentioning(const std::string& text)
{
  std::size_t count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos || std::stoi(name) == getpid())
      continue;
    std::string command_line = read_text(entry.path() / "cmdline");
    if (command_line.find(text) != std::string::npos)
      ++count;
  }
  return count;
}

// Starts a sweep of slow_sweep() in the background, two points at a time; once its quick first point is
// complete and the third has started (so points 1 and 2 are running), sends it `signal`; returns its exit
// status (-1 when a signal ended it).
int interrupt_sweep(const std::filesystem::path& dir, int signal)
{
  std::ofstream(dir / "sweep.json") << slow_sweep().dump(2);
  const std::string command = fmt::format("exec {}/sparsim sweep {} --out {} --jobs 2 > {} 2>&1", SPARSIM_BINARY_DIR,
                                          (dir / "sweep.json").string(), (dir / "out").string(),
                                          (dir / "interrupted.log").string());
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  const auto out = dir / "out" / "points";
  while (!(std::filesystem::exists(out / "0000" / "manifest.json") && std::filesystem::exists(out / "0002" / "run.log")) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  kill(pid, signal);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// After an interrupted sweep in DIR/out: the complete points match an uninterrupted run's, --resume redoes
// the rest, and summary.csv is byte for byte the uninterrupted run's.
void expect_resume_matches_uninterrupted(const std::filesystem::path& dir)
{
  const std::size_t complete = complete_points(dir / "out");
  EXPECT_GE(complete, 1u);
  EXPECT_LT(complete, kSlowPoints) << "the sweep ended before the signal: the test needs slower points";
  CliResult whole = run_sweep_cli(slow_sweep(), dir, "--jobs 2", "uninterrupted");
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  for (std::size_t i = 0; i < kSlowPoints; ++i) {
    const auto point = fmt::format("points/{:04d}", i);
    if (std::filesystem::exists(dir / "out" / point / "manifest.json")) {
      EXPECT_EQ(read_text(dir / "out" / point / "results.csv"), read_text(whole.dir / point / "results.csv")) << point;
    }
  }
  CliResult resumed = run_sweep_cli(slow_sweep(), dir, "--resume --jobs 2");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find(fmt::format("{} complete already, {} to run", complete, kSlowPoints - complete)),
            std::string::npos)
      << resumed.output;
  EXPECT_EQ(read_text(dir / "out" / "summary.csv"), read_text(whole.dir / "summary.csv"));
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
  // Not a terminal: a plain line per finished point with the counts and times.
  EXPECT_TRUE(std::regex_search(first.output, std::regex(R"(6/6 points done, elapsed \d+s, about \d+s left)")))
      << first.output;

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

// --only runs a slice into the sweep's folder under the sweep's own point numbers and leaves the other points'
// folders alone, so slices add up to the whole sweep; a filter that selects nothing is a usage error.
TEST(Sweep, OnlyRunsASliceAndKeepsTheOtherPoints)
{
  const auto dir = scratch_dir("sweep_only");
  CliResult ranks3 = run_sweep_cli(tiny_sweep(), dir, "--jobs 1 --only ranks=3");
  ASSERT_EQ(ranks3.exit_code, 0) << ranks3.output;
  EXPECT_NE(ranks3.output.find("2 points selected by --only (of 6)"), std::string::npos) << ranks3.output;
  // Points vary as {dense_ring, oktopk} x ranks {2, 3, 8}, ranks fastest: ranks = 3 is points 1 and 4.
  auto complete = [&] {
    std::set<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(ranks3.dir / "points"))
      if (std::filesystem::exists(entry.path() / "manifest.json"))
        names.insert(entry.path().filename().string());
    return names;
  };
  EXPECT_EQ(complete(), (std::set<std::string>{"0001", "0004"}));
  const auto point4 = read_text(ranks3.dir / "points" / "0004" / "results.csv");

  // Another slice, without --resume: Ok-Topk at every P (points 3, 4, 5); point 1 stays, point 4 is redone alike.
  CliResult oktopk = run_sweep_cli(tiny_sweep(), dir, "--jobs 1 --only algorithm.name=oktopk");
  ASSERT_EQ(oktopk.exit_code, 0) << oktopk.output;
  EXPECT_EQ(complete(), (std::set<std::string>{"0001", "0003", "0004", "0005"}));
  EXPECT_EQ(read_text(ranks3.dir / "points" / "0004" / "results.csv"), point4);
  std::set<std::string> summarised;
  for (auto& row : read_csv(ranks3.dir / "summary.csv"))
    summarised.insert(row.at("point"));
  EXPECT_EQ(summarised.size(), 4u);
  // Two values of one path select either; two paths select both.
  CliResult both = run_sweep_cli(tiny_sweep(), dir, "--jobs 1 --resume --only ranks=2 --only ranks=8 "
                                                    "--only algorithm.name=dense_ring");
  ASSERT_EQ(both.exit_code, 0) << both.output;
  EXPECT_NE(both.output.find("2 points selected by --only (of 6), 0 complete already, 2 to run"), std::string::npos)
      << both.output;
  EXPECT_EQ(complete().size(), 6u);

  for (const std::string flag : {"--only ranks=5", "--only nosuch.path=1", "--only ranks", "--gather --only ranks=3"}) {
    CliResult bad = run_sweep_cli(tiny_sweep(), dir, flag);
    EXPECT_EQ(bad.exit_code, 2) << flag << "\n" << bad.output;
    EXPECT_NE(bad.output.find("--only"), std::string::npos) << bad.output;
  }
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

TEST(Sweep, JobsDefaultToTheMachinesCores)
{
  const auto dir = scratch_dir("sweepjobs");
  CliResult r = run_sweep_cli(tiny_sweep(), dir, "");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(fmt::format("to run, {} at a time", std::max(1u, std::thread::hardware_concurrency()))),
            std::string::npos)
      << r.output;
  for (const char* flags : {"--jobs 0", "--jobs x", "--chunk 2", "--gather --resume", "--emit-slurm --jobs 2"}) {
    CliResult bad = run_sweep_cli(tiny_sweep(), dir, flags);
    EXPECT_EQ(bad.exit_code, 2) << flags << "\n" << bad.output;
  }
}

// Points run with cores / jobs selection threads unless --threads says how many (the manifest's command line
// shows what each point got).
TEST(Sweep, ThreadsPerPointDefaultToCoresOverJobs)
{
  const auto dir = scratch_dir("sweepthreads");
  auto point_command = [&](const std::string& out) {
    const auto manifest = nlohmann::json::parse(read_text(dir / out / "points" / "0000" / "manifest.json"));
    return manifest["command_line"].get<std::string>();
  };
  CliResult by_default = run_sweep_cli(tiny_sweep(), dir, "--jobs 1", "default");
  ASSERT_EQ(by_default.exit_code, 0) << by_default.output;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  EXPECT_NE(point_command("default").find(fmt::format("--threads {}", cores)), std::string::npos)
      << point_command("default");
  CliResult three = run_sweep_cli(tiny_sweep(), dir, "--jobs 1 --threads 3", "three");
  ASSERT_EQ(three.exit_code, 0) << three.output;
  EXPECT_NE(point_command("three").find("--threads 3"), std::string::npos) << point_command("three");
  for (const char* flags : {"--threads 0", "--threads 2 --emit-slurm", "--threads 2 --gather"})
    EXPECT_EQ(run_sweep_cli(tiny_sweep(), dir, flags, "bad").exit_code, 2) << flags;
}

TEST(Sweep, SigintStopsCleanlyAndResumeGivesTheSameSummary)
{
  const auto dir = scratch_dir("sweepsigint");
  EXPECT_EQ(interrupt_sweep(dir, SIGINT), 130) << read_text(dir / "interrupted.log");
  const std::string log = read_text(dir / "interrupted.log");
  EXPECT_NE(log.find("continue with --resume"), std::string::npos) << log;
  EXPECT_NE(log.find("seed=2: stopped, to be redone by --resume"), std::string::npos) << log;
  // The sweep waited for its points to stop before exiting.
  EXPECT_EQ(processes_mentioning((dir / "out").string()), 0u);
  expect_resume_matches_uninterrupted(dir);
}

TEST(Sweep, SigkillThenResumeGivesTheSameSummary)
{
  const auto dir = scratch_dir("sweepsigkill");
  EXPECT_EQ(interrupt_sweep(dir, SIGKILL), -1);
  // The running points die with the sweep instead of running on as orphans and completing.
  const std::size_t complete_at_kill = complete_points(dir / "out");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (processes_mentioning((dir / "out").string()) > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(processes_mentioning((dir / "out").string()), 0u);
  EXPECT_EQ(complete_points(dir / "out"), complete_at_kill);
  expect_resume_matches_uninterrupted(dir);
}

TEST(Sweep, ExplicitPointsAloneAndCombinedWithAxes)
{
  const auto dir = scratch_dir("sweeppoints");
  auto sweep = tiny_sweep();
  sweep["axes"] = {{"algorithm.name", {"dense_ring", "topka"}}};
  sweep["points"] = {{{"ranks", 2}, {"workload.n", 3000}}, {{"ranks", 5}}};
  CliResult r = run_sweep_cli(sweep, dir, "--jobs 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rows = read_csv(r.dir / "summary.csv");
  ASSERT_FALSE(rows.empty());
  const std::string header = "point,axis:ranks,axis:workload.n,axis:algorithm.name,algorithm,";
  EXPECT_EQ(read_text(r.dir / "summary.csv").substr(0, header.size()), header);
  // Points vary slowest, the axis fastest; a point without workload.n shows the base's.
  const std::vector<std::tuple<std::string, std::string, std::string>> expected = {
      {"2", "3000", "dense_ring"}, {"2", "3000", "topka"}, {"5", "5000", "dense_ring"}, {"5", "5000", "topka"}};
  std::set<std::string> seen;
  for (const auto& row : rows) {
    const auto& [ranks, n, algorithm] = expected.at(std::stoul(row.at("point")));
    EXPECT_EQ(row.at("axis:ranks"), ranks);
    EXPECT_EQ(row.at("ranks"), ranks);
    EXPECT_EQ(row.at("axis:workload.n"), n);
    EXPECT_EQ(row.at("n"), n);
    EXPECT_EQ(row.at("axis:algorithm.name"), algorithm);
    EXPECT_EQ(row.at("algorithm"), algorithm);
    seen.insert(row.at("point"));
  }
  EXPECT_EQ(seen.size(), 4u);

  // Points alone: exactly those.
  sweep.erase("axes");
  CliResult alone = run_sweep_cli(sweep, dir, "--jobs 2", "alone");
  ASSERT_EQ(alone.exit_code, 0) << alone.output;
  std::set<std::string> ranks;
  for (const auto& row : read_csv(alone.dir / "summary.csv"))
    ranks.insert(row.at("point") + ":" + row.at("ranks") + ":" + row.at("n"));
  EXPECT_EQ(ranks, (std::set<std::string>{"0:2:3000", "1:5:5000"}));
}

TEST(Sweep, BadPointsNameTheirJsonPath)
{
  const auto dir = scratch_dir("sweepbadpoints");
  struct Case {
    nlohmann::json points;
    bool with_axes;
    std::string message;
  };
  const std::vector<Case> cases = {
      {nlohmann::json::object(), true, "points: got {}"},
      {{{{"seed", 2}}, 3}, true, "points[1]: got 3"},
      {{{{"seed", 2}}, nlohmann::json::object()}, true, "points[1]: got {}"},
      {{{{"@algorithm", "topka"}}}, true, "points[0].@algorithm"},
      {{{{"workload..n", 2}}}, true, "points[0].workload..n"},
      {{{{"ranks", 2}}}, true, "points[0].ranks: got 2, expected a path that is not also an axis"},
      {{{{"ranks", 2}}, {{"ranks", 9}}}, false, "[point points[1] ranks=9] ranks"},
      {nullptr, false, "axes: got nothing"},
  };
  for (const auto& c : cases) {
    auto sweep = tiny_sweep();
    if (!c.with_axes)
      sweep.erase("axes");
    if (!c.points.is_null())
      sweep["points"] = c.points;
    CliResult r = run_sweep_cli(sweep, dir, "");
    EXPECT_EQ(r.exit_code, 2) << c.message << "\n" << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.points.dump() << "\n" << r.output;
    EXPECT_FALSE(std::filesystem::exists(r.dir / "points"));
  }
}

// The emitted scripts run by bash as Slurm would run them (SLURM_ARRAY_TASK_ID per task): their gathered
// summary is the local sweep's.
TEST(Sweep, SlurmScriptsRunTheSamePoints)
{
  const auto dir = scratch_dir("sweepslurm");
  CliResult emitted = run_sweep_cli(tiny_sweep(), dir, "--emit-slurm --chunk 4", "slurm");
  ASSERT_EQ(emitted.exit_code, 0) << emitted.output;
  EXPECT_NE(emitted.output.find("sbatch " + emitted.dir.string() + "/sweep.sbatch"), std::string::npos)
      << emitted.output;
  const std::string array = read_text(emitted.dir / "sweep.sbatch");
  EXPECT_NE(array.find("#SBATCH --array=0-1\n"), std::string::npos) << array;  // 6 points, 4 per task
  for (const std::string key : {"sparsim=", "points_dir=", "relative_to="}) {
    const auto at = array.find("\n" + key);
    ASSERT_NE(at, std::string::npos) << key;
    EXPECT_EQ(array.substr(at + 1 + key.size(), 2), "'/") << key << " is not an absolute path";
  }
  for (int i = 0; i < 6; ++i)
    EXPECT_TRUE(std::filesystem::exists(emitted.dir / fmt::format("points/{:04d}/config.json", i)));
  EXPECT_EQ(complete_points(emitted.dir), 0u);  // nothing ran yet

  CliResult early = run_cli("sweep " + (dir / "sweep.json").string() + " --out " + emitted.dir.string() + " --gather");
  EXPECT_EQ(early.exit_code, 1) << early.output;
  EXPECT_NE(early.output.find("0 of 6 points complete"), std::string::npos) << early.output;

  for (int task = 0; task < 2; ++task)
    EXPECT_EQ(std::system(fmt::format("SLURM_ARRAY_TASK_ID={} bash {} > /dev/null", task,
                                      (emitted.dir / "sweep.sbatch").string())
                              .c_str()),
              0);
  EXPECT_EQ(std::system(("bash " + (emitted.dir / "gather.sbatch").string() + " > /dev/null").c_str()), 0);
  CliResult local = run_sweep_cli(tiny_sweep(), dir, "--jobs 2", "local");
  ASSERT_EQ(local.exit_code, 0) << local.output;
  EXPECT_EQ(read_text(emitted.dir / "summary.csv"), read_text(local.dir / "summary.csv"));
}

// A sweep file named without a folder (the current one) runs, locally and as Slurm scripts.
TEST(Sweep, SweepFileInTheCurrentFolder)
{
  const auto dir = scratch_dir("sweepcwd");
  std::ofstream(dir / "sweep.json") << tiny_sweep().dump(2);
  const std::string binary = std::string(SPARSIM_BINARY_DIR) + "/sparsim";
  EXPECT_EQ(std::system(("cd " + dir.string() + " && " + binary + " sweep sweep.json --out out --jobs 2 > log 2>&1").c_str()), 0)
      << read_text(dir / "log");
  EXPECT_EQ(complete_points(dir / "out"), 6u);
  EXPECT_EQ(std::system(("cd " + dir.string() + " && " + binary + " sweep sweep.json --out slurm --emit-slurm > log 2>&1").c_str()), 0)
      << read_text(dir / "log");
  EXPECT_NE(read_text(dir / "slurm" / "gather.sbatch").find(fmt::format("'{}/sweep.json'", dir.string())), std::string::npos);
}
