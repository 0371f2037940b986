// Sweeps through the CLI: every point runs, summary.csv gathers them, --resume skips complete points and
// redoes incomplete ones, and the rebuilt summary is identical to an uninterrupted run's, also after the sweep
// was stopped by SIGINT or killed by SIGKILL mid-way. Explicit points, their JSON-path errors, progress lines,
// and the Slurm scripts (run here by bash, without Slurm; tests/slurm/ runs them on a real Slurm).
#include "sparsim_cli.hpp"

#include <chrono>
#include <csignal>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <optional>
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

// The sweep of the interrupt tests: a quick first point (one iteration), then kPoints - 1 points of
// `iterations` each. The interrupted sweep gives those kNeverDone iterations: once started they cannot finish
// before the test's signal on any machine (about 2 ms an iteration here, so minutes; the signal comes a
// second or so in), so which points were complete, running and not started when it came is known, whatever
// the machine's speed. --resume and the uninterrupted run take the same sweep with kIterations, which
// complete: point 0's config is the same in both, and --resume redoes the other points afresh from the sweep
// file as it is (their config.json rewritten, checked below).
constexpr std::size_t kPoints = 6;
constexpr int kNeverDone = 100'000;
constexpr int kIterations = 8;
nlohmann::json points_sweep(int iterations)
{
  nlohmann::json points = {{{"seed", 1}, {"iterations", 1}}};
  for (int seed = 2; seed <= static_cast<int>(kPoints); ++seed)
    points.push_back({{"seed", seed}});
  return {
      {"name", "interrupt"},
      {"base", star_run_config("interrupt", 4, iterations, "topka", 200000, 0.01, 8)},
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
std::vector<pid_t> processes_mentioning(const std::string& text)
{
  std::vector<pid_t> pids;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos || std::stoi(name) == getpid())
      continue;
    std::string command_line = read_text(entry.path() / "cmdline");
    if (command_line.find(text) != std::string::npos)
      pids.push_back(std::stoi(name));
  }
  return pids;
}

// Whether `sparsim run` runs on point `index` of the sweep in OUT: past its exec (a forked sweep that has not
// exec'd yet still has the sweep's command line), so a SIGTERM from the sweep ends it.
bool point_running(const std::filesystem::path& out, std::size_t index)
{
  return !processes_mentioning((out / "points" / fmt::format("{:04d}", index) / "config.json").string()).empty();
}

// A sweep started in the background by a test: SIGKILLed and reaped if the test leaves before waiting for
// it (its points die with it), so that no sweep outlives a failed test.
struct BackgroundSweep {
  pid_t pid = -1;
  BackgroundSweep() = default;
  BackgroundSweep(const BackgroundSweep&) = delete;
  BackgroundSweep& operator=(const BackgroundSweep&) = delete;
  ~BackgroundSweep()
  {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
  // Its exit status once it has ended (-1 when a signal ended it); `hang` false: without waiting, nullopt while
  // it runs.
  std::optional<int> wait(bool hang = true)
  {
    int status = 0;
    if (waitpid(pid, &status, hang ? 0 : WNOHANG) != pid)
      return std::nullopt;
    pid = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
};

// Starts the interrupted sweep (points_sweep(kNeverDone)) in DIR/out in the background, two points at a time,
// and sends it `signal` once point 0 is complete and points 1 and 2 run (they cannot finish, and points 3 to
// 5 wait for a free job slot, so the state at the signal is always the same). Polls for that state for up to
// a minute (a failure past it). Sets `exit_status` to the sweep's (-1 when a signal ended it).
void interrupt_sweep(const std::filesystem::path& dir, int signal, int& exit_status)
{
  std::ofstream(dir / "interrupted.json") << points_sweep(kNeverDone).dump(2);
  const std::string command =
      fmt::format("exec {}/sparsim sweep {} --out {} --jobs 2 > {} 2>&1", SPARSIM_BINARY_DIR,
                  (dir / "interrupted.json").string(), (dir / "out").string(), (dir / "interrupted.log").string());
  BackgroundSweep sweep;
  sweep.pid = fork();
  if (sweep.pid == 0) {
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_GT(sweep.pid, 0) << "cannot start the sweep";
  const auto out = dir / "out";
  auto point0_complete = [&] { return std::filesystem::exists(out / "points" / "0000" / "manifest.json"); };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!(point0_complete() && point_running(out, 1) && point_running(out, 2))) {
    if (const auto status = sweep.wait(false))
      FAIL() << "the sweep ended (status " << *status << ") before point 0 was complete with points 1 and 2 "
             << "running:\n"
             << read_text(dir / "interrupted.log");
    if (std::chrono::steady_clock::now() > deadline)
      FAIL() << "after 60 s, point 0 is " << (point0_complete() ? "" : "not ") << "complete, point 1 "
             << (point_running(out, 1) ? "" : "not ") << "running, point 2 " << (point_running(out, 2) ? "" : "not ")
             << "running:\n"
             << read_text(dir / "interrupted.log");
    std::this_thread::sleep_for(std::chrono::milliseconds(5)); // the poll's period, not a synchronisation
  }
  kill(sweep.pid, signal);
  exit_status = *sweep.wait();
}

// After an interrupted sweep in DIR/out (point 0 complete, points 1 and 2 stopped, 3 to 5 not started): the
// complete point matches an uninterrupted run's, --resume redoes the rest from the sweep file, and
// summary.csv is byte for byte the uninterrupted run's.
void expect_resume_matches_uninterrupted(const std::filesystem::path& dir)
{
  EXPECT_EQ(complete_points(dir / "out"), 1u);
  CliResult whole = run_sweep_cli(points_sweep(kIterations), dir, "--jobs 2", "uninterrupted");
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  EXPECT_EQ(read_text(dir / "out" / "points" / "0000" / "results.csv"),
            read_text(whole.dir / "points" / "0000" / "results.csv"));
  CliResult resumed = run_sweep_cli(points_sweep(kIterations), dir, "--resume --jobs 2");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find(fmt::format("1 complete already, {} to run", kPoints - 1)), std::string::npos)
      << resumed.output;
  for (std::size_t i = 0; i < kPoints; ++i) {
    const auto point = fmt::format("points/{:04d}", i);
    EXPECT_EQ(read_text(dir / "out" / point / "config.json"), read_text(whole.dir / point / "config.json")) << point;
  }
  EXPECT_EQ(read_text(dir / "out" / "summary.csv"), read_text(whole.dir / "summary.csv"));
}

} // namespace

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
    EXPECT_EQ(row.at("axis:ranks"), row.at("ranks")); // the axis value reached the run
  const std::string summary = read_text(first.dir / "summary.csv");
  // Not a terminal: a plain line per finished point with the counts and times.
  // (Elapsed as format_wall writes it: "42s", "1m05s" or "1h02m", whatever the machine's speed.)
  const std::regex done_line(R"(6/6 points done, elapsed \d+(s|m\d\ds|h\d\dm), about \d+s left)");
  EXPECT_TRUE(std::regex_search(first.output, done_line)) << first.output;

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
  CliResult both = run_sweep_cli(tiny_sweep(), dir,
                                 "--jobs 1 --resume --only ranks=2 --only ranks=8 "
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
  sweep["axes"]["ranks"] = {2, 9}; // the star has 8 nodes
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
  int exit_status = 0;
  ASSERT_NO_FATAL_FAILURE(interrupt_sweep(dir, SIGINT, exit_status));
  const std::string log = read_text(dir / "interrupted.log");
  EXPECT_EQ(exit_status, 130) << log;
  EXPECT_NE(log.find("continue with --resume"), std::string::npos) << log;
  // The running points were stopped; the waiting ones were not started.
  for (const char* point : {"seed=2: stopped, to be redone by --resume", "seed=3: stopped, to be redone by --resume"})
    EXPECT_NE(log.find(point), std::string::npos) << point << "\n" << log;
  EXPECT_EQ(log.find("seed=4"), std::string::npos) << log;
  // The sweep waited for its points to stop before exiting.
  EXPECT_EQ(processes_mentioning((dir / "out").string()).size(), 0u);
  expect_resume_matches_uninterrupted(dir);
}

TEST(Sweep, SigkillThenResumeGivesTheSameSummary)
{
  const auto dir = scratch_dir("sweepsigkill");
  int exit_status = 0;
  ASSERT_NO_FATAL_FAILURE(interrupt_sweep(dir, SIGKILL, exit_status));
  EXPECT_EQ(exit_status, -1);
  // The running points die with the sweep (they would run for minutes as orphans); polled for up to 30 s.
  const std::string out = (dir / "out").string();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!processes_mentioning(out).empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const std::vector<pid_t> orphans = processes_mentioning(out);
  for (pid_t pid : orphans)
    kill(pid, SIGKILL); // do not leave them running
  ASSERT_TRUE(orphans.empty()) << orphans.size() << " point process(es) still ran 30 s after the sweep was killed";
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
// A point too large for this machine (a dense ring of 10^11 floats per rank: terabytes) stops only a run that
// would start it here: other slices run, and Slurm scripts for a larger machine are written.
TEST(Sweep, PointTooLargeHereStopsOnlyARunThatIncludesIt)
{
  nlohmann::json sweep = {
      {"name", "large"},
      {"base", star_run_config("large", 2, 1, "topka", 5000, 0.02, 8)},
      {"points",
       {{{"ranks", 2}}, {{"ranks", 8}, {"algorithm.name", "dense_ring"}, {"workload.n", 100'000'000'000LL}}}}};
  const auto dir = scratch_dir("sweep_large");
  CliResult slice = run_sweep_cli(sweep, dir, "--jobs 1 --only ranks=2", "slice");
  ASSERT_EQ(slice.exit_code, 0) << slice.output;
  EXPECT_EQ(complete_points(slice.dir), 1u);

  CliResult all = run_sweep_cli(sweep, dir, "--jobs 1", "all");
  EXPECT_EQ(all.exit_code, 2) << all.output;
  EXPECT_NE(all.output.find("config error at [point points[1]"), std::string::npos) << all.output;
  EXPECT_NE(all.output.find("fits in memory"), std::string::npos) << all.output;
  EXPECT_FALSE(std::filesystem::exists(all.dir / "points")) << "something was written before the refusal";

  CliResult slurm = run_sweep_cli(sweep, dir, "--emit-slurm", "slurm");
  EXPECT_EQ(slurm.exit_code, 0) << slurm.output;
  EXPECT_TRUE(std::filesystem::exists(slurm.dir / "points" / "0001" / "config.json"));
}

TEST(Sweep, SlurmScriptsRunTheSamePoints)
{
  const auto dir = scratch_dir("sweepslurm");
  CliResult emitted = run_sweep_cli(tiny_sweep(), dir, "--emit-slurm --chunk 4", "slurm");
  ASSERT_EQ(emitted.exit_code, 0) << emitted.output;
  EXPECT_NE(emitted.output.find("sbatch " + emitted.dir.string() + "/sweep.sbatch"), std::string::npos)
      << emitted.output;
  const std::string array = read_text(emitted.dir / "sweep.sbatch");
  EXPECT_NE(array.find("#SBATCH --array=0-1\n"), std::string::npos) << array; // 6 points, 4 per task
  for (const std::string key : {"sparsim=", "points_dir=", "relative_to="}) {
    const auto at = array.find("\n" + key);
    ASSERT_NE(at, std::string::npos) << key;
    EXPECT_EQ(array.substr(at + 1 + key.size(), 2), "'/") << key << " is not an absolute path";
  }
  for (int i = 0; i < 6; ++i)
    EXPECT_TRUE(std::filesystem::exists(emitted.dir / fmt::format("points/{:04d}/config.json", i)));
  EXPECT_EQ(complete_points(emitted.dir), 0u); // nothing ran yet

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
  EXPECT_EQ(
      std::system(("cd " + dir.string() + " && " + binary + " sweep sweep.json --out out --jobs 2 > log 2>&1").c_str()),
      0)
      << read_text(dir / "log");
  EXPECT_EQ(complete_points(dir / "out"), 6u);
  EXPECT_EQ(
      std::system(
          ("cd " + dir.string() + " && " + binary + " sweep sweep.json --out slurm --emit-slurm > log 2>&1").c_str()),
      0)
      << read_text(dir / "log");
  EXPECT_NE(read_text(dir / "slurm" / "gather.sbatch").find(fmt::format("'{}/sweep.json'", dir.string())),
            std::string::npos);
}

TEST(Sweep, AxesAndPointPathsKeepTheFilesOrder)
{
  const auto dir = scratch_dir("sweeporder");
  // Written as text: the axes and the point keys out of alphabetical order.
  const std::string base = star_run_config("order", 4, 1, "topka", 4000, 0.02, 8).dump();
  std::ofstream(dir / "sweep.json") << R"({"name": "order", "base": )" << base << R"(,
    "points": [{"seed": 2, "ranks": 3}, {"workload.value_bytes": 4, "seed": 3}],
    "axes": {"workload.n": [3000, 4000], "algorithm.name": ["topka", "gtopk"]}})";
  const CliResult r = run_cli("sweep " + (dir / "sweep.json").string() + " --out " + (dir / "out").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string header =
      "point,axis:seed,axis:ranks,axis:workload.value_bytes,axis:workload.n,axis:algorithm.name,";
  EXPECT_EQ(read_text(dir / "out" / "summary.csv").substr(0, header.size()), header);
  // The last axis of the file varies fastest.
  std::map<std::string, std::string> algorithm_of_point, n_of_point;
  for (const auto& row : read_csv(dir / "out" / "summary.csv")) {
    algorithm_of_point[row.at("point")] = row.at("algorithm");
    n_of_point[row.at("point")] = row.at("n");
  }
  EXPECT_EQ(algorithm_of_point, (std::map<std::string, std::string>{{"0", "topka"},
                                                                    {"1", "gtopk"},
                                                                    {"2", "topka"},
                                                                    {"3", "gtopk"},
                                                                    {"4", "topka"},
                                                                    {"5", "gtopk"},
                                                                    {"6", "topka"},
                                                                    {"7", "gtopk"}}));
  EXPECT_EQ(n_of_point["0"], "3000");
  EXPECT_EQ(n_of_point["1"], "3000");
  EXPECT_EQ(n_of_point["2"], "4000");
  // A point's label names the values it runs with, in the file's order, leaving out a path that neither the
  // point nor the base sets (points[0] has no workload.value_bytes).
  EXPECT_NE(r.output.find("(points[0] seed=2 ranks=3 workload.n=3000 algorithm.name=topka:"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("(points[1] seed=3 ranks=4 workload.value_bytes=4 workload.n=4000 algorithm.name=gtopk:"),
            std::string::npos)
      << r.output;
}

TEST(Sweep, ResumeRefusesTheCompletePointsOfAnotherSweep)
{
  const auto dir = scratch_dir("sweepresumeother");
  auto sweep = tiny_sweep();
  CliResult first = run_sweep_cli(sweep, dir, "--jobs 2");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  sweep["axes"]["ranks"] = {3, 2, 8}; // the same points, numbered differently
  CliResult resumed = run_sweep_cli(sweep, dir, "--resume");
  EXPECT_EQ(resumed.exit_code, 1) << resumed.output;
  EXPECT_NE(resumed.output.find("differs from point 0"), std::string::npos) << resumed.output;
  // Nothing was touched: every point is still complete.
  EXPECT_EQ(complete_points(first.dir), 6u);
}
