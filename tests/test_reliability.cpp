// Reliability through the CLI: sweeps give byte-identical results whatever the number of parallel jobs, and a
// run killed half-way leaves complete result files or none, after which a rerun gives the uninterrupted results.
#include "sparsim_cli.hpp"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <poll.h>

using namespace sparsim::testing;

namespace {

// A sweep mixing dense and sparse algorithms, random placement and several iterations, so that any
// dependence on scheduling or on the order points finish would show in the files.
nlohmann::json mixed_sweep()
{
  return {
      {"name", "determinism"},
      {"base",
       {{"ranks", 6},
        {"iterations", 3},
        {"seed", 11},
        {"topology", {{"type", "star"}, {"nodes", 8}, {"bandwidth", "10GBps"}, {"latency", "1us"}}},
        {"placement", {{"type", "random"}, {"seed", 4}}},
        {"algorithm", {{"name", "topka"}}},
        {"workload", {{"n", 6000}, {"density", 0.02}}}}},
      {"axes",
       {{"@algorithm",
         {{{"algorithm.name", "dense_ring"}},
          {{"algorithm.name", "oktopk"}},
          {{"algorithm.name", "gtopk"}, {"ranks", 8}},
          {{"algorithm.name", "sparcml_dsar_split_allgather"}}}},
        {"workload.density", {0.01, 0.05}}}},
  };
}

CliResult run_sweep_into(const nlohmann::json& sweep, const std::filesystem::path& dir, int jobs)
{
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "sweep.json") << sweep.dump(2);
  CliResult r = run_cli("sweep " + (dir / "sweep.json").string() + " --out " + (dir / "out").string() + " --jobs " +
                        std::to_string(jobs));
  r.dir = dir / "out";
  return r;
}

// Manifest fields that legitimately differ between two runs of the same config: the time and memory the run
// took on this machine, and the command line (it names the output folder).
const std::vector<std::string> kRunDependentManifestFields = {
    "wall_time_s",    "iteration_wall_s", "iteration_selection_wall_s", "iteration_selection_shared_wall_s",
    "peak_rss_bytes", "command_line"};

nlohmann::json manifest_without_run_dependent_fields(const std::filesystem::path& dir)
{
  nlohmann::json manifest = nlohmann::json::parse(read_text(dir / "manifest.json"));
  for (const auto& field : kRunDependentManifestFields) {
    EXPECT_TRUE(manifest.contains(field)) << field; // the list names fields that exist
    manifest.erase(field);
  }
  return manifest;
}

// The runs of the kill tests: 16 ranks of Ok-Topk. The reference and the reruns take kIterations; a killed
// run takes kNeverDone (some 45 ms an iteration here, so minutes): it cannot have finished before its kill,
// some 2 s in, on any machine.
constexpr int kIterations = 10;
constexpr int kNeverDone = 10'000;
nlohmann::json sixteen_ranks(int iterations) { return star_run_config("slow", 16, iterations, "oktopk", 400000); }

// Starts `sparsim run CONFIG --out OUT` for each of the OUTs at once and SIGKILLs each as soon as it
// reports a finished iteration (its first progress line, some 2 s in): it is in the middle of the simulation
// then, its folder's earlier results removed and its own not written. CONFIG must be one that cannot finish
// by then (kNeverDone). Waits for those lines for up to a minute. Returns what went wrong, nothing when every
// run was killed half-way.
std::string run_and_kill_half_way(const std::filesystem::path& config, const std::vector<std::filesystem::path>& outs)
{
  struct Run {
    pid_t pid = -1;
    int fd = -1;
    std::string output;
    bool killed = false, ended = false;
  };
  std::vector<Run> runs(outs.size());
  const std::string binary = std::string(SPARSIM_BINARY_DIR) + "/sparsim";
  for (std::size_t i = 0; i < outs.size(); ++i) {
    int pipe_fds[2];
    if (pipe(pipe_fds) != 0)
      return "cannot make a pipe";
    runs[i].pid = fork();
    if (runs[i].pid == 0) {
      dup2(pipe_fds[1], STDERR_FILENO);
      dup2(pipe_fds[1], STDOUT_FILENO);
      close(pipe_fds[0]);
      execl(binary.c_str(), binary.c_str(), "run", config.c_str(), "--out", outs[i].c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
    close(pipe_fds[1]);
    runs[i].fd = pipe_fds[0];
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto waiting = [&] {
    return std::any_of(runs.begin(), runs.end(), [](const Run& run) { return !run.killed && !run.ended; });
  };
  while (waiting()) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0)
      break;
    std::vector<pollfd> fds;
    for (const Run& run : runs)
      if (!run.killed && !run.ended)
        fds.push_back({run.fd, POLLIN, 0});
    if (poll(fds.data(), fds.size(), static_cast<int>(left)) <= 0)
      continue; // timed out or interrupted: the deadline decides
    for (Run& run : runs) {
      const auto polled = std::find_if(fds.begin(), fds.end(), [&](const pollfd& p) { return p.fd == run.fd; });
      if (polled == fds.end() || polled->revents == 0)
        continue;
      char buffer[4096];
      const ssize_t got = read(run.fd, buffer, sizeof buffer);
      if (got <= 0) {
        run.ended = true; // it ended by itself
        continue;
      }
      run.output.append(buffer, static_cast<std::size_t>(got));
      if (run.output.find("\n  iteration ") != std::string::npos) {
        kill(run.pid, SIGKILL);
        run.killed = true;
      }
    }
  }
  std::string failures;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    Run& run = runs[i];
    if (!run.killed)
      kill(run.pid, SIGKILL); // no progress line within the minute: do not leave it running
    close(run.fd);
    int status = 0;
    waitpid(run.pid, &status, 0);
    if (!(run.killed && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) {
      const char* what = run.killed || run.ended ? "the run ended before its kill" : "no progress line within 60 s";
      failures += fmt::format("{}: {}:\n{}", outs[i].string(), what, run.output);
    }
  }
  return failures;
}

// True when `path` is a CSV file whose every line has as many cells as the header, ending in a newline.
bool complete_csv(const std::filesystem::path& path)
{
  const std::string text = read_text(path);
  if (text.empty() || text.back() != '\n')
    return false;
  std::stringstream lines(text);
  std::string line;
  std::getline(lines, line);
  const auto columns = std::count(line.begin(), line.end(), ',');
  std::size_t rows = 0;
  while (std::getline(lines, line)) {
    if (std::count(line.begin(), line.end(), ',') != columns)
      return false;
    ++rows;
  }
  return rows > 0;
}

// The folder holds a complete run (a manifest whose listed files all parse), or no result file at all.
void expect_complete_or_no_results(const std::filesystem::path& out)
{
  const bool has_manifest = std::filesystem::exists(out / "manifest.json");
  if (!has_manifest) {
    EXPECT_FALSE(std::filesystem::exists(out / "results.csv"));
    EXPECT_FALSE(std::filesystem::exists(out / "ranks.csv"));
    return;
  }
  nlohmann::json manifest;
  ASSERT_NO_THROW(manifest = nlohmann::json::parse(read_text(out / "manifest.json")));
  for (const auto& file : manifest.at("files"))
    EXPECT_TRUE(complete_csv(out / file.get<std::string>())) << file;
}

} // namespace

TEST(Determinism, SweepFilesAreIdenticalWithOneOrTwoJobs)
{
  const auto dir = scratch_dir("determinism");
  const CliResult one = run_sweep_into(mixed_sweep(), dir / "jobs1", 1);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const CliResult two = run_sweep_into(mixed_sweep(), dir / "jobs2", 2);
  ASSERT_EQ(two.exit_code, 0) << two.output;

  EXPECT_EQ(read_text(one.dir / "summary.csv"), read_text(two.dir / "summary.csv"));
  std::size_t totals = 0;
  for (auto& row : read_csv(one.dir / "summary.csv"))
    totals += row.at("phase") == "total" ? 1 : 0;
  EXPECT_EQ(totals, 8u * 3u); // one total row per point and iteration: nothing was lost
  std::size_t points = 0;
  for (const auto& entry : std::filesystem::directory_iterator(one.dir / "points")) {
    const auto other = two.dir / "points" / entry.path().filename();
    for (const char* file : {"config.json", "results.csv", "ranks.csv"}) {
      ASSERT_TRUE(std::filesystem::exists(entry.path() / file)) << entry.path() << " " << file;
      EXPECT_EQ(read_text(entry.path() / file), read_text(other / file)) << entry.path() << " " << file;
    }
    EXPECT_EQ(manifest_without_run_dependent_fields(entry.path()), manifest_without_run_dependent_fields(other))
        << entry.path();
    ++points;
  }
  EXPECT_EQ(points, 8u);
}

TEST(NoLostResults, RunKilledHalfWayLeavesCompleteFilesOrNoneAndRerunMatches)
{
  const auto dir = scratch_dir("killed");
  std::ofstream(dir / "config.json") << sixteen_ranks(kIterations).dump(2);
  std::ofstream(dir / "never_done.json") << sixteen_ranks(kNeverDone).dump(2);
  const std::string config = (dir / "config.json").string();

  // The reference: the reruns' config, uninterrupted.
  const CliResult reference = run_cli("run " + config + " --out " + (dir / "reference").string() + " --quiet");
  ASSERT_EQ(reference.exit_code, 0) << reference.output;

  // Into an empty folder, then into one holding the complete results of a different (smaller) run: a run
  // killed half-way (one that could not finish by then), then a rerun of the reference's config.
  nlohmann::json other = sixteen_ranks(2);
  std::ofstream(dir / "other.json") << other.dump(2);
  const CliResult earlier =
      run_cli("run " + (dir / "other.json").string() + " --out " + (dir / "reused").string() + " --quiet");
  ASSERT_EQ(earlier.exit_code, 0) << earlier.output;

  const std::string failure = run_and_kill_half_way(dir / "never_done.json", {dir / "fresh", dir / "reused"});
  ASSERT_EQ(failure, "") << "a run was not killed half-way";
  for (const char* folder : {"fresh", "reused"}) {
    SCOPED_TRACE(folder);
    const auto out = dir / folder;
    expect_complete_or_no_results(out);
    // Killed mid-simulation: neither its results nor the earlier run's (removed before it started).
    EXPECT_FALSE(std::filesystem::exists(out / "manifest.json"));

    const CliResult rerun = run_cli("run " + config + " --out " + out.string() + " --quiet");
    ASSERT_EQ(rerun.exit_code, 0) << rerun.output;
    EXPECT_EQ(read_text(out / "results.csv"), read_text(dir / "reference" / "results.csv"));
    EXPECT_EQ(read_text(out / "ranks.csv"), read_text(dir / "reference" / "ranks.csv"));
    EXPECT_EQ(nlohmann::json::parse(read_text(out / "manifest.json")).at("config_hash"),
              nlohmann::json::parse(read_text(dir / "reference" / "manifest.json")).at("config_hash"));
    for (const auto& entry : std::filesystem::directory_iterator(out))
      EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos) << entry.path();
  }
}

TEST(NoLostResults, LeftoverTemporaryFilesAreRemovedAndNeverTakenForResults)
{
  // What a run killed while writing its files leaves: complete-looking data under temporary names only.
  const auto dir = scratch_dir("leftovers");
  const nlohmann::json config = sixteen_ranks(1);
  std::ofstream(dir / "config.json") << config.dump(2);
  std::filesystem::create_directories(dir / "out");
  std::ofstream(dir / "out" / "results.csv.tmp-999999") << "algorithm,phase\nstale,total\n";
  std::ofstream(dir / "out" / "manifest.json.tmp-999999") << "{\"files\": [\"results.csv\"]";
  expect_complete_or_no_results(dir / "out");

  const CliResult run =
      run_cli("run " + (dir / "config.json").string() + " --out " + (dir / "out").string() + " --quiet");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  expect_complete_or_no_results(dir / "out");
  EXPECT_FALSE(std::filesystem::exists(dir / "out" / "results.csv.tmp-999999"));
  EXPECT_FALSE(std::filesystem::exists(dir / "out" / "manifest.json.tmp-999999"));
  EXPECT_EQ(total_rows(dir / "out").size(), 1u);
}
