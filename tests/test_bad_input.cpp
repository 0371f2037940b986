// Bad input through the CLI, the cases of issue 7 that tests/test_config.cpp and tests/test_npy.cpp do not
// already cover: each is refused before anything runs with exit status 2 and a message naming the JSON path,
// the value found and what was expected. Bad configs are made here from a good one (so that test_config's
// scan of tests/configs/ only ever sees good files).
#include "sim/gradients/npy.hpp"
#include "sparsim_cli.hpp"

#include <gtest/gtest.h>

using namespace sparsim::testing;

namespace {

nlohmann::json good_config()
{
  return {
      {"name", "ok"},
      {"ranks", 4},
      {"topology", {{"type", "star"}, {"nodes", 8}, {"bandwidth", "10GBps"}, {"latency", "1us"}}},
      {"algorithm", {{"name", "topka"}}},
      {"workload", {{"n", 1000}, {"density", 0.05}}},
  };
}

// `sparsim validate` on `config` written to DIR/config.json (files it refers to go beside it).
CliResult validate(const nlohmann::json& config, const std::filesystem::path& dir)
{
  std::ofstream(dir / "config.json") << config.dump(2);
  return run_cli("validate " + (dir / "config.json").string());
}

// Exit status 2 and "config error at PATH: got VALUE, expected ...EXPECTED...".
void expect_refused(const CliResult& r, const std::string& path, const std::string& value, const std::string& expected)
{
  EXPECT_EQ(r.exit_code, 2) << r.output;
  const std::string head = "config error at " + path + ": got " + value + ", expected ";
  const auto at = r.output.find(head);
  ASSERT_NE(at, std::string::npos) << "wanted \"" << head << "\" in:\n" << r.output;
  EXPECT_NE(r.output.find(expected, at + head.size()), std::string::npos)
      << "wanted the expectation \"" << expected << "\" in:\n"
      << r.output;
}

// Applies `edit` to the good config, validates it and checks the refusal.
template <typename Edit>
void expect_config_refused(Edit edit, const std::string& path, const std::string& value, const std::string& expected)
{
  SCOPED_TRACE(path + " = " + value);
  nlohmann::json config = good_config();
  edit(config);
  expect_refused(validate(config, scratch_dir("bad-input")), path, value, expected);
}

// "TEXT", as error messages quote string values.
std::string quoted(const std::filesystem::path& text)
{
  std::string result(1, '"');
  result.append(text.string()).push_back('"');
  return result;
}

void write_bytes(const std::filesystem::path& path, const std::vector<std::byte>& bytes)
{
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// A config replaying DIR/grad.npy (shape (ranks, n) = (4, 1000) when well-formed).
nlohmann::json replay_config()
{
  nlohmann::json config = good_config();
  config["gradients"] = {{"source", "replay"}, {"file", "grad.npy"}};
  return config;
}

std::vector<std::byte> good_npy(std::vector<std::size_t> shape = {4, 1000})
{
  std::size_t count = 1;
  for (auto d : shape)
    count *= d;
  std::vector<float> values(count);
  for (std::size_t i = 0; i < count; ++i)
    values[i] = static_cast<float>(i % 17) - 8.0f;
  return sparsim::encode_npy(values, shape);
}

// Replaces the first occurrence of `from` in the header of `bytes` by `to` (same length).
std::vector<std::byte> patch_header(std::vector<std::byte> bytes, const std::string& from, const std::string& to)
{
  std::string text(reinterpret_cast<const char*>(bytes.data()), std::min<std::size_t>(bytes.size(), 128));
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  EXPECT_EQ(from.size(), to.size());
  for (std::size_t i = 0; i < to.size(); ++i)
    bytes[at + i] = static_cast<std::byte>(to[i]);
  return bytes;
}

} // namespace

TEST(BadInput, WrongTypes)
{
  expect_config_refused([](auto& c) { c["workload"]["density"] = "0.05"; }, "workload.density", "\"0.05\"",
                        "a number in (0, 1]");
  expect_config_refused([](auto& c) { c["topology"] = nlohmann::json::array({"star"}); }, "topology", "[\"star\"]",
                        "a JSON object");
  expect_config_refused([](auto& c) { c["algorithm"] = "topka"; }, "algorithm", "\"topka\"", "a JSON object");
  expect_config_refused(
      [](auto& c) {
        c["simulation"] = {{"verify", "yes"}};
      },
      "simulation.verify", "\"yes\"", "true or false");
  expect_config_refused([](auto& c) { c["seed"] = 1.5; }, "seed", "1.5", "an integer >= 0");
  expect_config_refused([](auto& c) { c["ranks"] = true; }, "ranks", "true", "an integer in [1,");
  expect_config_refused([](auto& c) { c["topology"]["latency"] = nullptr; }, "topology.latency", "null",
                        "a duration with a unit");
}

// SimGrid's "Constant" network model has no links, and every platform is made of links: `validate` used to
// accept it and the run then aborted (exit 134). It is a config error now, for both commands.
TEST(BadInput, NetworkModelWithoutLinks)
{
  expect_config_refused(
      [](auto& c) {
        c["network"] = {{"model", "Constant"}};
      },
      "network.model", "\"Constant\"", "one of \"CM02\", \"LV08\"");
  nlohmann::json config = good_config();
  config["network"] = {{"model", "Constant"}};
  const auto dir = scratch_dir("constant-model-run");
  std::ofstream(dir / "config.json") << config.dump(2);
  const CliResult r =
      run_cli("run " + (dir / "config.json").string() + " --out " + (dir / "out").string() + " --quiet");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "out" / "manifest.json"));
}

TEST(BadInput, UnknownKeysInNestedObjects)
{
  expect_config_refused([](auto& c) { c["workload"]["nn"] = 5; }, "workload.nn", "5", "no such field");
  expect_config_refused([](auto& c) { c["topology"]["bandwdith"] = "1GBps"; }, "topology.bandwdith", "\"1GBps\"",
                        "no such field");
  expect_config_refused(
      [](auto& c) {
        c["gradients"] = {{"source", "uniform"}, {"scale", 2}};
      },
      "gradients.scale", "2", "no such field");
  expect_config_refused(
      [](auto& c) {
        c["selection"] = {{"polcy", "exact"}};
      },
      "selection.polcy", "\"exact\"", "no such field");
}

TEST(BadInput, MissingFields)
{
  expect_config_refused([](auto& c) { c.erase("workload"); }, "workload", "nothing (the field is missing)",
                        "this field is required");
  expect_config_refused([](auto& c) { c["workload"].erase("n"); }, "workload.n", "nothing (the field is missing)",
                        "this field is required");
  expect_config_refused([](auto& c) { c.erase("topology"); }, "topology", "nothing (the field is missing)",
                        "this field is required");
  expect_config_refused([](auto& c) { c["algorithm"].erase("name"); }, "algorithm.name",
                        "nothing (the field is missing)", "this field is required");
  expect_config_refused([](auto& c) { c["topology"].erase("bandwidth"); }, "topology.bandwidth",
                        "nothing (the field is missing)", "this field is required");
}

TEST(BadInput, NegativeOrZeroSizes)
{
  expect_config_refused([](auto& c) { c["ranks"] = 0; }, "ranks", "0", "an integer in [1,");
  expect_config_refused([](auto& c) { c["ranks"] = -3; }, "ranks", "-3", "an integer in [1,");
  expect_config_refused([](auto& c) { c["iterations"] = 0; }, "iterations", "0", "an integer in [1,");
  expect_config_refused([](auto& c) { c["topology"]["nodes"] = 0; }, "topology.nodes", "0", "an integer in [1,");
  expect_config_refused([](auto& c) { c["workload"]["value_bytes"] = 0; }, "workload.value_bytes", "0",
                        "an integer in [1, 8]");
  expect_config_refused([](auto& c) { c["workload"]["index_bytes"] = 9; }, "workload.index_bytes", "9",
                        "an integer in [1, 8]");
  expect_config_refused([](auto& c) { c["workload"]["n"] = 1e13; }, "workload.n", "10000000000000.0",
                        "an integer in [1, 1000000000000]");
  expect_config_refused([](auto& c) { c["seed"] = -1; }, "seed", "-1", "an integer >= 0");
}

TEST(BadInput, UnitsThatDoNotParse)
{
  const std::string bandwidth = "a positive bandwidth with a unit";
  const std::string duration = "a duration with a unit";
  expect_config_refused([](auto& c) { c["topology"]["latency"] = "1 parsec"; }, "topology.latency", "\"1 parsec\"",
                        duration);
  expect_config_refused([](auto& c) { c["topology"]["latency"] = "-1us"; }, "topology.latency", "\"-1us\"", duration);
  expect_config_refused([](auto& c) { c["topology"]["bandwidth"] = "10"; }, "topology.bandwidth", "\"10\"", bandwidth);
  expect_config_refused([](auto& c) { c["topology"]["bandwidth"] = "0GBps"; }, "topology.bandwidth", "\"0GBps\"",
                        bandwidth);
  expect_config_refused([](auto& c) { c["topology"]["bandwidth"] = "fast"; }, "topology.bandwidth", "\"fast\"",
                        bandwidth);
  // Numbers that parse but overflow once scaled by the unit.
  expect_config_refused([](auto& c) { c["topology"]["bandwidth"] = "1e300TBps"; }, "topology.bandwidth",
                        "\"1e300TBps\"", bandwidth);
  expect_config_refused(
      [](auto& c) {
        c["compute"] = {{"memory_bandwidth", "1e308Tbps"}};
      },
      "compute.memory_bandwidth", "\"1e308Tbps\"", bandwidth);
}

TEST(BadInput, DensitiesOutsideZeroToOne)
{
  for (const double density : {0.0, -0.1, 1.5}) {
    nlohmann::json value = density;
    expect_config_refused([&](auto& c) { c["workload"]["density"] = density; }, "workload.density", value.dump(),
                          "a number in (0, 1]");
  }
  // The boundary 1 is allowed: every entry selected.
  nlohmann::json config = good_config();
  config["workload"]["density"] = 1;
  const CliResult r = validate(config, scratch_dir("density-one"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(BadInput, SparseAlgorithmParametersOutOfRange)
{
  expect_config_refused(
      [](auto& c) {
        c["algorithm"] = {{"name", "gtopk"}, {"bucket", 4}};
      },
      "algorithm.bucket", "4", "no such field");
  expect_config_refused(
      [](auto& c) {
        c["algorithm"] = {{"name", "sparcml_dsar_split_allgather"}, {"throttle", 0}};
      },
      "algorithm.throttle", "0", "an integer in [1,");
  expect_config_refused(
      [](auto& c) {
        c["algorithm"] = {{"name", "sparcml_ssar_split_allgather"}, {"throttle", -2}};
      },
      "algorithm.throttle", "-2", "an integer in [1,");
  expect_config_refused(
      [](auto& c) {
        c["algorithm"] = {{"name", "sparcml_dsar_split_allgather"}, {"switch", "sometimes"}};
      },
      "algorithm.switch", "\"sometimes\"", "one of \"per_region\", \"global\"");
  expect_config_refused(
      [](auto& c) {
        c["algorithm"] = {{"name", "sparcml_ssar_recursive_double"}, {"throttle", 4}};
      },
      "algorithm.throttle", "4", "no such field");
  expect_config_refused(
      [](auto& c) {
        c["algorithm"] = {{"name", "oktopk"}, {"bucket", 0}};
      },
      "algorithm.bucket", "0", "an integer in [1,");
  expect_config_refused(
      [](auto& c) {
        c["algorithm"] = {{"name", "oktopk"}, {"messages_per_step", 3}};
      },
      "algorithm.messages_per_step", "3", "an integer in [1, 2]");
  expect_config_refused(
      [](auto& c) {
        c["algorithm"] = {{"name", "oktopk"}, {"repartition_every", 0}};
      },
      "algorithm.repartition_every", "0", "an integer in [1,");
}

TEST(BadInput, MalformedNpyFiles)
{
  struct Case {
    std::string name;
    std::vector<std::byte> bytes;
    std::string problem; // part of the reader's explanation
  };
  std::vector<std::byte> truncated = good_npy();
  truncated.resize(truncated.size() - 6);
  std::vector<std::byte> not_npy = good_npy();
  not_npy[1] = std::byte{'X'};
  const std::vector<Case> cases = {
      {"wrong dtype", patch_header(good_npy(), "'<f4'", "'<i4'"), "<i4"},
      {"big-endian", patch_header(good_npy(), "'<f4'", "'>f4'"), ">f4"},
      {"wrong shape", good_npy({4, 999}), "workload.n = 1000"},
      {"four dimensions", patch_header(good_npy({4, 10, 100}), "(4, 10, 100)", "(4,10,1,100)"), "dimension"},
      {"truncated", truncated, "bytes"},
      {"not an npy file", not_npy, "magic"},
      {"empty file", {}, "too short for the magic string"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const auto dir = scratch_dir("bad-npy");
    write_bytes(dir / "grad.npy", c.bytes);
    const CliResult r = validate(replay_config(), dir);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("config error at gradients.file: got \"grad.npy\""), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(c.problem), std::string::npos) << r.output;
  }
}

TEST(BadInput, UnreadableNpyFile)
{
  // A folder where the file should be cannot be read (permissions would not stop root, who runs CI).
  const auto dir = scratch_dir("unreadable-npy");
  std::filesystem::create_directories(dir / "grad.npy");
  const CliResult r = validate(replay_config(), dir);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("config error at gradients.file: got \"grad.npy\""), std::string::npos) << r.output;
}

TEST(BadInput, MissingDatasetFiles)
{
  nlohmann::json config = good_config();
  config["workload"]["n"] = 784 * 64 + 64 + 64 * 10 + 10; // the 784-64-10 MLP's parameters
  config["algorithm"] = {{"name", "dense_ring"}};
  config["gradients"] = {{"source", "fashion_mnist_mlp"}, {"dataset", "no-such-folder"}};
  const auto dir = scratch_dir("no-dataset");
  const CliResult r = validate(config, dir);
  // The value is the folder resolved against the config's folder.
  expect_refused(r, "gradients.dataset", quoted(dir / "no-such-folder"),
                 "a folder holding Fashion-MNIST's IDX files (missing ");
}

TEST(BadInput, BadSweeps)
{
  const nlohmann::json good_sweep = {{"name", "s"}, {"base", good_config()}, {"axes", {{"ranks", {2, 4}}}}};
  auto sweep_refused = [](const nlohmann::json& sweep, const std::string& path, const std::string& value,
                          const std::string& expected) {
    SCOPED_TRACE(sweep.dump());
    const auto dir = scratch_dir("bad-sweep");
    std::ofstream(dir / "sweep.json") << sweep.dump();
    const CliResult r = run_cli("sweep " + (dir / "sweep.json").string() + " --out " + (dir / "out").string());
    expect_refused(r, path, value, expected);
    EXPECT_FALSE(std::filesystem::exists(dir / "out" / "points")) << "nothing may run";
  };
  nlohmann::json s = good_sweep;
  s["axes"] = nlohmann::json::object();
  sweep_refused(s, "axes", "{}", "an object of config paths to non-empty arrays");
  s = good_sweep;
  s["axes"]["ranks"] = nlohmann::json::array();
  sweep_refused(s, "axes.ranks", "[]", "a non-empty array of values");
  s = good_sweep;
  s.erase("base");
  sweep_refused(s, "base", "nothing (the field is missing)", "this field is required");
  s = good_sweep;
  s["jobs"] = 2;
  sweep_refused(s, "jobs", "2", "no such field");
  s = good_sweep;
  s["axes"]["workload.density"] = {0.1, 2.0};
  sweep_refused(s, "[point ranks=2 workload.density=2.0] workload.density", "2.0", "a number in (0, 1]");
}

TEST(BadInput, NumberBeyondDoubleRangeIsMalformedJson)
{
  // Found by fuzz_config: nlohmann's parser reports it as out_of_range, not as a parse error.
  const auto dir = scratch_dir("number-overflow");
  std::ofstream(dir / "config.json") << R"({"ranks": 1e400})";
  const CliResult r = run_cli("validate " + (dir / "config.json").string());
  expect_refused(r, "(file)", quoted(dir / "config.json"), "valid JSON");
  EXPECT_NE(r.output.find("1e400"), std::string::npos) << r.output;
}

// Every input the fuzzers found a crash with (tests/fuzz/regressions/, docs/reliability.md) now gets a clean
// error from the normal build.
TEST(FuzzRegressions, ConfigFindingsAreConfigErrors)
{
  std::size_t findings = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(SPARSIM_SOURCE_DIR) + "/tests/fuzz/regressions/config")) {
    SCOPED_TRACE(entry.path().string());
    const CliResult r = run_cli("validate " + entry.path().string());
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("sparsim: config error at "), std::string::npos) << r.output;
    ++findings;
  }
  EXPECT_GT(findings, 0u);
}
