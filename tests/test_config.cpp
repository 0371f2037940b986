// Config loading: broken configs fail with exit status 2 and a message naming the field; docs/config.md
// lists exactly the fields the loader reads.
#include "algorithms/registry.hpp"
#include "sim/run/config.hpp"
#include "sparsim_cli.hpp"

#include <fstream>
#include <gtest/gtest.h>
#include <regex>

using namespace sparsim;
using namespace sparsim::testing;

namespace {

nlohmann::json good_config()
{
  return {
      {"name", "ok"},
      {"ranks", 4},
      {"topology", {{"type", "star"}, {"nodes", 8}, {"bandwidth", "10GBps"}, {"latency", "1us"}}},
      {"algorithm", {{"name", "dense_ring"}}},
      {"workload", {{"n", 1000}}},
  };
}

// Validates `config` through the CLI; expects exit 2 and a message naming `path` (and `value` if given).
void expect_rejected(const nlohmann::json& config, const std::string& path, const std::string& value = "")
{
  const auto dir = scratch_dir("bad");
  std::ofstream(dir / "config.json") << config.dump();
  CliResult r = run_cli("validate " + (dir / "config.json").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("config error at " + path + ":"), std::string::npos) << r.output;
  if (!value.empty()) {
    EXPECT_NE(r.output.find(value), std::string::npos) << r.output;
  }
}

// Field paths in the first column of the tables of docs/config.md and docs/platforms.md.
std::set<std::string> documented_fields()
{
  std::set<std::string> fields;
  for (const char* doc : {"/docs/config.md", "/docs/platforms.md"}) {
    std::ifstream in(std::string(SPARSIM_SOURCE_DIR) + doc);
    std::string line;
    const std::regex row(R"(^\| `([a-z_.\[\]]+)` \|)");
    std::smatch m;
    while (std::getline(in, line))
      if (std::regex_search(line, m, row))
        fields.insert(m[1]);
  }
  return fields;
}

} // namespace

TEST(Config, GoodConfigValidates)
{
  const auto dir = scratch_dir("good");
  std::ofstream(dir / "config.json") << good_config().dump();
  CliResult r = run_cli("validate " + (dir / "config.json").string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(Config, BrokenConfigsNameTheField)
{
  auto c = good_config();
  c.erase("ranks");
  expect_rejected(c, "ranks", "missing");

  c = good_config();
  c["ranks"] = "four";
  expect_rejected(c, "ranks", "\"four\"");

  c = good_config();
  c["rnaks"] = 4;
  expect_rejected(c, "rnaks");

  c = good_config();
  c["workload"]["n"] = -5;
  expect_rejected(c, "workload.n", "-5");

  c = good_config();
  c["workload"]["n"] = 0;
  expect_rejected(c, "workload.n", "0");

  c = good_config();
  c["ranks"] = 9; // the star has 8 nodes
  expect_rejected(c, "ranks", "9");

  c = good_config();
  c["algorithm"]["name"] = "dense_ringg";
  expect_rejected(c, "algorithm.name", "dense_ringg");

  c = good_config();
  c["algorithm"]["bucket"] = 4; // dense_ring has no parameters
  expect_rejected(c, "algorithm.bucket");

  c = good_config();
  c["topology"]["type"] = "hypercube";
  expect_rejected(c, "topology.type", "hypercube");

  c = good_config();
  c["topology"]["bandwidth"] = "10 Gbs";
  expect_rejected(c, "topology.bandwidth", "10 Gbs");

  c = good_config();
  c["topology"]["latency"] = 1e-6; // a bare number: the unit is missing
  expect_rejected(c, "topology.latency");

  c = good_config();
  c["network"] = {{"model", "CM03"}};
  expect_rejected(c, "network.model", "CM03");

  c = good_config();
  c["workload"]["data"] = "phantom";
  c["simulation"] = {{"verify", true}};
  expect_rejected(c, "simulation.verify");
}

TEST(Config, RunsThatCannotFitAreRefusedWithTheEstimate)
{
  auto c = good_config();
  c["ranks"] = 4096;
  c["topology"]["nodes"] = 4096;
  c["algorithm"]["name"] = "topka";
  c["workload"]["n"] = 100'000'000; // 4096 residuals of 400 MB: 1.6 TB
  expect_rejected(c, "ranks", "fits in memory");

  // A million iterations of a small dense ring on 4096 ranks: its per-rank records (ranks.csv) would not fit;
  // the error names the iterations.
  c = good_config();
  c["ranks"] = 4096;
  c["topology"]["nodes"] = 4096;
  c["iterations"] = 1'000'000;
  expect_rejected(c, "iterations", "per-iteration records");
}

TEST(Config, MalformedJsonIsAConfigError)
{
  const auto dir = scratch_dir("malformed");
  std::ofstream(dir / "config.json") << R"({"ranks": 4,, })";
  CliResult r = run_cli("validate " + (dir / "config.json").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("valid JSON"), std::string::npos) << r.output;
  r = run_cli("validate " + (dir / "absent.json").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
}

TEST(Config, BadArgumentsExitTwo)
{
  EXPECT_EQ(run_cli("").exit_code, 2);
  EXPECT_EQ(run_cli("frobnicate").exit_code, 2);
  EXPECT_EQ(run_cli("run").exit_code, 2);
  EXPECT_EQ(run_cli("run a.json --bogus").exit_code, 2);
  CliResult help = run_cli("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.output.find("sparsim run CONFIG.json"), std::string::npos);
}

// Every command prints its own usage for --help and exits 0 (it used to be "unexpected argument", exit 2);
// the usage names that command's forms and no other command's.
TEST(Config, HelpPerCommand)
{
  for (const std::string command : {"run", "sweep", "validate", "topology", "algorithms", "stats"}) {
    SCOPED_TRACE(command);
    const CliResult help = run_cli(command + " --help");
    EXPECT_EQ(help.exit_code, 0) << help.output;
    EXPECT_NE(help.output.find("sparsim " + command), std::string::npos) << help.output;
    for (const std::string other : {"run ", "sweep ", "validate ", "topology ", "stats "})
      if (other != command + " ") {
        EXPECT_EQ(help.output.find("sparsim " + other), std::string::npos) << help.output;
      }
  }
  EXPECT_EQ(run_cli("frobnicate --help").exit_code, 2);
}

TEST(Config, DocsListExactlyTheFieldsTheLoaderReads)
{
  auto log = std::make_shared<FieldLog>();
  std::vector<std::filesystem::path> configs;
  // Experiment configs only: platform files, model tables and presets have their own loaders, and sweeps (files
  // with a "base") check their points when they load.
  const std::set<std::filesystem::path> ignored_folders = {"platforms", "models", "presets"};
  for (const auto* folder : {"/configs", "/tests/configs"})
    for (const auto& entry : std::filesystem::recursive_directory_iterator(std::string(SPARSIM_SOURCE_DIR) + folder))
      if (entry.path().extension() == ".json" && !ignored_folders.count(entry.path().parent_path().filename()) &&
          !read_json_file(entry.path()).contains("base"))
        configs.push_back(entry.path());
  ASSERT_FALSE(configs.empty());
  for (const auto& path : configs) {
    SCOPED_TRACE(path.string());
    EXPECT_NO_THROW(load_config(path, log));
  }
  const std::set<std::string> documented = documented_fields();
  for (const auto& field : *log)
    EXPECT_TRUE(documented.count(field)) << "read by the loader but missing from docs/config.md: " << field;
  for (const auto& field : documented)
    EXPECT_TRUE(log->count(field)) << "documented but never read by any config in configs/ or tests/configs/: "
                                   << field;
}

// configs/examples/ has a ready single-run config per registered algorithm (NAME.json, running NAME) and per
// platform preset (platform_PRESET.json, on that preset); each loads (the test above loads every config).
TEST(Config, ExamplesCoverEveryAlgorithmAndEveryPlatformPreset)
{
  const std::filesystem::path configs = std::filesystem::path(SPARSIM_SOURCE_DIR) / "configs";
  for (const auto& entry : algorithm_registry()) {
    const std::filesystem::path example = configs / "examples" / (entry.name + ".json");
    SCOPED_TRACE(example.string());
    ASSERT_TRUE(std::filesystem::exists(example));
    EXPECT_EQ(load_config(example).algorithm->name(), entry.name);
  }
  std::size_t presets = 0;
  for (const auto& preset : std::filesystem::directory_iterator(configs / "platforms")) {
    const std::filesystem::path example =
        configs / "examples" / ("platform_" + preset.path().stem().string() + ".json");
    SCOPED_TRACE(example.string());
    ASSERT_TRUE(std::filesystem::exists(example));
    EXPECT_EQ(read_json_file(example).at("topology").at("file"), "platforms/" + preset.path().filename().string());
    ++presets;
  }
  EXPECT_GE(presets, 4u);
}

// `validate` states the messages a run will post (from the closed forms' counts, dense warm-up included):
// the run posts exactly that many (ranks.csv) for algorithms whose count is exact. It also estimates the wall
// time and warns about long runs.
TEST(Config, ValidateCountsTheMessagesTheRunPosts)
{
  struct Case {
    std::string algorithm;
    int warmup;
  };
  for (const Case& c : {Case{"dense_ring", 0}, Case{"topka", 1}, Case{"sparcml_ssar_split_allgather", 0}}) {
    SCOPED_TRACE(c.algorithm);
    auto config = star_run_config("count", 6, 4, c.algorithm, 6000, 0.02);
    if (c.warmup > 0)
      config["selection"] = {{"warmup_iterations", c.warmup}};
    const auto dir = scratch_dir("validate-count-" + c.algorithm);
    std::ofstream(dir / "config.json") << config.dump();
    const CliResult checked = run_cli("validate " + (dir / "config.json").string());
    ASSERT_EQ(checked.exit_code, 0) << checked.output;
    std::smatch said;
    ASSERT_TRUE(std::regex_search(checked.output, said, std::regex(R"(messages (\d+) in all)"))) << checked.output;
    EXPECT_NE(checked.output.find("wall     about"), std::string::npos) << checked.output;
    EXPECT_NE(checked.output.find("under network.model \"LinkLevel\" about"), std::string::npos) << checked.output;

    const CliResult ran = run_config(config, "validate-run-" + c.algorithm);
    ASSERT_EQ(ran.exit_code, 0) << ran.output;
    std::uint64_t posted = 0;
    for (const auto& row : read_csv(ran.dir / "ranks.csv"))
      posted += std::stoull(row.at("msgs_sent"));
    EXPECT_EQ(std::to_string(posted), said[1].str());
  }
  // A run estimated at hours is flagged, with the way to stop it cleanly.
  auto big = star_run_config("big", 4096, 20, "oktopk", 1 << 20, 0.01);
  big["selection"] = {{"residual", "none"}};
  const auto dir = scratch_dir("validate-long");
  std::ofstream(dir / "config.json") << big.dump();
  const CliResult r = run_cli("validate " + (dir / "config.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("warning  a long run"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--time-limit"), std::string::npos) << r.output;
  // Under SimGrid's flows (star_run_config's default) the warning names the link-level model's estimate.
  EXPECT_NE(r.output.find("network.model \"LinkLevel\" would take about"), std::string::npos) << r.output;
}
