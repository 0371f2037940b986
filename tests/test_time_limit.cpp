// The wall-clock limit: a run past `--time-limit` stops before its next iteration, writes the iterations it
// completed (exit status 3, manifest "partial"), and those rows equal the same iterations of an unlimited run.
// Ctrl-C (SIGINT) does the same, with exit status 130.
#include "sparsim_cli.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>

using namespace sparsim::testing;

namespace {

nlohmann::json long_ring(int iterations)
{
  return {
      {"name", "limited"},
      {"ranks", 16},
      {"iterations", iterations},
      {"topology", {{"type", "star"}, {"nodes", 16}, {"bandwidth", "10GBps"}, {"latency", "1us"}}},
      {"algorithm", {{"name", "dense_ring"}}},
      {"workload", {{"n", 1 << 20}}},
  };
}

CliResult run_limited(const nlohmann::json& config, const std::string& name, const std::string& limit)
{
  const auto dir = scratch_dir(name);
  std::ofstream(dir / "config.json") << config.dump(2);
  CliResult result = run_cli("run " + (dir / "config.json").string() + " --out " + (dir / "out").string() +
                             " --quiet --time-limit " + limit);
  result.dir = dir / "out";
  return result;
}

} // namespace

TEST(TimeLimit, StopsBeforeTheNextIterationWithPartialResultsThatMatchAFullRun)
{
  // 2000 iterations of a real-data ring on 16 ranks take minutes (some 0.1 s each here): far longer than any
  // limit below on any machine. The limit counts from the start of the run, its setup included (some 0.5 s
  // here, more on a loaded machine or under the sanitizers): when it passed before the first iteration could
  // start (no iteration done), the limit is doubled and the run tried again, up to 16 s.
  CliResult limited;
  int done = 0;
  for (const std::string limit : {"1s", "2s", "4s", "8s", "16s"}) {
    limited = run_limited(long_ring(2000), "limited", limit);
    ASSERT_EQ(limited.exit_code, 3) << "--time-limit " << limit << ": " << limited.output;
    auto manifest = nlohmann::json::parse(read_text(limited.dir / "manifest.json"));
    EXPECT_TRUE(manifest["partial"].get<bool>());
    done = manifest["iterations_completed"].get<int>();
    EXPECT_LT(done, 2000);
    EXPECT_NE(manifest["stop_reason"].get<std::string>().find("wall-clock limit"), std::string::npos);
    EXPECT_EQ(static_cast<int>(total_rows(limited.dir).size()), done);
    if (done > 0)
      break;
  }
  ASSERT_GT(done, 0) << "no iteration started within 16 s: cannot compare with a full run";

  // The completed iterations are exactly those of a run configured with that many iterations.
  CliResult full = run_config(long_ring(done), "full");
  ASSERT_EQ(full.exit_code, 0) << full.output;
  EXPECT_EQ(read_text(limited.dir / "results.csv"), read_text(full.dir / "results.csv"));
  EXPECT_EQ(read_text(limited.dir / "ranks.csv"), read_text(full.dir / "ranks.csv"));
  EXPECT_FALSE(nlohmann::json::parse(read_text(full.dir / "manifest.json"))["partial"].get<bool>());
}

TEST(TimeLimit, ASigintStopsBeforeTheNextIterationWithPartialResultsThatMatchAFullRun)
{
  // The run is signalled once its progress shows a completed iteration (stderr, read from a file), so that the
  // handler is in place (installed before "running" is printed, again once SimGrid's engine has started) and
  // some iterations are done; 2000 iterations leave minutes to spare.
  const auto dir = scratch_dir("interrupted");
  std::ofstream(dir / "config.json") << long_ring(2000).dump(2);
  const auto err = dir / "stderr.txt";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string binary = std::string(SPARSIM_BINARY_DIR) + "/sparsim";
    const std::string config = (dir / "config.json").string(), out = (dir / "out").string();
    if (!std::freopen(err.c_str(), "w", stderr) || !std::freopen("/dev/null", "w", stdout))
      _exit(127);
    execl(binary.c_str(), binary.c_str(), "run", config.c_str(), "--out", out.c_str(), "--threads", "1",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (read_text(err).find("done: simulated") == std::string::npos && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  kill(pid, SIGINT);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << read_text(err);
  ASSERT_EQ(WEXITSTATUS(status), 130) << read_text(err);
  EXPECT_NE(read_text(err).find("sparsim: interrupted"), std::string::npos) << read_text(err);
  const auto manifest = nlohmann::json::parse(read_text(dir / "out" / "manifest.json"));
  EXPECT_TRUE(manifest["partial"].get<bool>());
  const int done = manifest["iterations_completed"].get<int>();
  ASSERT_GT(done, 0);
  ASSERT_LT(done, 2000);
  EXPECT_NE(manifest["stop_reason"].get<std::string>().find("interrupted (SIGINT)"), std::string::npos);
  EXPECT_EQ(static_cast<int>(total_rows(dir / "out").size()), done);

  CliResult full = run_config(long_ring(done), "interrupted_full");
  ASSERT_EQ(full.exit_code, 0) << full.output;
  EXPECT_EQ(read_text(dir / "out" / "results.csv"), read_text(full.dir / "results.csv"));
  EXPECT_EQ(read_text(dir / "out" / "ranks.csv"), read_text(full.dir / "ranks.csv"));
}

TEST(TimeLimit, BadLimitsAreUsageErrors)
{
  for (const char* limit : {"0s", "ten", "-1s", "10 Gbs"}) {
    CliResult run = run_limited(long_ring(1), "bad_limit", std::string("'") + limit + "'");
    EXPECT_EQ(run.exit_code, 2) << limit << ": " << run.output;
    EXPECT_NE(run.output.find("--time-limit"), std::string::npos) << run.output;
  }
}

// A run estimated above an hour says so when it starts (stderr, before the first iteration), with the way to
// stop it cleanly; the limit then stops it as above. 2000 iterations of the ring on 512 ranks: a billion
// messages, hours by the estimate (and records of about 0.6 GB, which the run grows only as iterations start).
TEST(TimeLimit, ARunEstimatedAboveAnHourWarnsWhenItStarts)
{
  nlohmann::json config = long_ring(2000);
  config["ranks"] = 512;
  config["topology"]["nodes"] = 512;
  config["workload"]["n"] = 1 << 10;
  const auto dir = scratch_dir("long_warning");
  std::ofstream(dir / "config.json") << config.dump(2);
  const CliResult run =
      run_cli("run " + (dir / "config.json").string() + " --out " + (dir / "out").string() + " --time-limit 1s");
  EXPECT_EQ(run.exit_code, 3) << run.output;
  EXPECT_NE(run.output.find("sparsim: warning: a long run (about "), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("--time-limit stops it cleanly"), std::string::npos) << run.output;

  // A short run says nothing of the kind.
  const CliResult short_run = run_config(long_ring(1), "short_no_warning");
  EXPECT_EQ(short_run.exit_code, 0) << short_run.output;
  EXPECT_EQ(short_run.output.find("a long run"), std::string::npos) << short_run.output;
}
