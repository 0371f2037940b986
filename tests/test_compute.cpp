// The compute model in the rank loop, through the CLI: the training step (phase "compute") and host staging
// (phase "staging") are charged every iteration, an iteration's time is the sum of its phases, and the
// defaults charge nothing.
#include "sparsim_cli.hpp"

#include <gtest/gtest.h>

using namespace sparsim::testing;

namespace {

nlohmann::json star_config(const std::string& algorithm, const nlohmann::json& compute)
{
  auto config = star_run_config("compute", 4, 3, algorithm, 20000);
  config["gradients"] = {{"source", "integers"}};
  config["compute"] = compute;
  return config;
}

// Per iteration, the largest over ranks of the sum of the rank's phase times (ranks.csv).
std::map<int, double> slowest_rank_phase_sums(const std::filesystem::path& dir)
{
  std::map<std::pair<int, int>, double> sums;
  for (auto& row : read_csv(dir / "ranks.csv"))
    sums[{std::stoi(row.at("iteration")), std::stoi(row.at("rank"))}] += number(row, "time_s");
  std::map<int, double> slowest;
  for (auto& [key, sum] : sums)
    slowest[key.first] = std::max(slowest[key.first], sum);
  return slowest;
}

// The forward_backward of a model table, in seconds, read from the file ("10.78ms").
double table_forward_backward(const std::string& model)
{
  const auto table = nlohmann::json::parse(
      read_text(std::filesystem::path(SPARSIM_SOURCE_DIR) / "configs" / "models" / (model + ".json")));
  const std::string text = table.at("compute").at("forward_backward");
  EXPECT_EQ(text.substr(text.size() - 2), "ms");
  return std::stod(text.substr(0, text.size() - 2)) / 1000;
}

} // namespace

// compute.training "model" charges the model table's figure in every iteration, dense warm-up included, and
// the iteration is the sum of its compute, selection and communication phases.
TEST(Compute, ModelTrainingStepIsChargedEveryIteration)
{
  auto config = star_config("topka", {{"training", "model"}});
  config["gradients"] = {{"source", "calibrated"}, {"model", "vgg16"}};
  config["selection"] = {{"warmup_iterations", 1}};
  CliResult run = run_config(config, "model_step");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const double step = table_forward_backward("vgg16");
  EXPECT_GT(step, 0.001);
  const auto sums = slowest_rank_phase_sums(run.dir);
  for (int it = 0; it < 3; ++it) {
    SCOPED_TRACE("iteration " + std::to_string(it));
    EXPECT_DOUBLE_EQ(phase_time(run.dir, it, "compute"), step);
    if (it == 0)
      EXPECT_EQ(phase_time(run.dir, it, "selection"), -1); // the dense warm-up selects nothing
    else
      EXPECT_GT(phase_time(run.dir, it, "selection"), 0);
    const double total = phase_time(run.dir, it, "total");
    EXPECT_GT(total, step);
    EXPECT_NEAR(sums.at(it), total, 1e-12 * total);
  }
}

// A fixed training step and PCIe staging on a dense algorithm: the communication phases are those of the run
// without them, and the iteration grows by exactly the compute step and the two copies.
TEST(Compute, FixedStepAndStagingAddToTheCollective)
{
  CliResult plain = run_config(star_config("dense_ring", nlohmann::json::object()), "plain_ring");
  CliResult charged = run_config(
      star_config(
          "dense_ring",
          {{"training", "fixed"}, {"forward_backward", "5ms"}, {"staging", "pcie"}, {"pcie_bandwidth", "10GBps"}}),
      "charged_ring");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  ASSERT_EQ(charged.exit_code, 0) << charged.output;
  const double copies = 2 * 4.0 * 20000 / 10e9; // the gradient down, the sum back up
  const auto sums = slowest_rank_phase_sums(charged.dir);
  for (int it = 0; it < 3; ++it) {
    SCOPED_TRACE("iteration " + std::to_string(it));
    EXPECT_DOUBLE_EQ(phase_time(charged.dir, it, "compute"), 0.005);
    EXPECT_NEAR(phase_time(charged.dir, it, "staging"), copies, 1e-15);
    for (const auto* phase : {"reduce_scatter", "allgather"})
      EXPECT_NEAR(phase_time(charged.dir, it, phase), phase_time(plain.dir, it, phase), 1e-15) << phase;
    const double total = phase_time(charged.dir, it, "total");
    EXPECT_NEAR(total, phase_time(plain.dir, it, "total") + 0.005 + copies, 1e-12);
    EXPECT_NEAR(sums.at(it), total, 1e-12 * total);
  }
}

// The defaults charge neither: the same results as an explicit "none", with no compute or staging rows.
TEST(Compute, DefaultsChargeNothing)
{
  CliResult implicit = run_config(star_config("topka", nlohmann::json::object()), "implicit");
  CliResult explicit_none = run_config(star_config("topka", {{"training", "none"}, {"staging", "none"}}), "none");
  ASSERT_EQ(implicit.exit_code, 0) << implicit.output;
  ASSERT_EQ(explicit_none.exit_code, 0) << explicit_none.output;
  EXPECT_EQ(read_text(implicit.dir / "results.csv"), read_text(explicit_none.dir / "results.csv"));
  for (int it = 0; it < 3; ++it) {
    EXPECT_EQ(phase_time(implicit.dir, it, "compute"), -1);
    EXPECT_EQ(phase_time(implicit.dir, it, "staging"), -1);
  }
}

// compute.reduction "memory_bandwidth" on the dense ring: each reduce-scatter step adds one block of n / P
// entries (12 bytes each: two fp32 read, one written); the allgather adds nothing. All ranks add in lock
// step, so the iteration grows by exactly the P - 1 adds and the allgather is unchanged. The default,
// "free", gives the results of a run that does not mention it.
TEST(Compute, DenseRingReductionsChargeTheirBlocks)
{
  CliResult plain = run_config(star_config("dense_ring", nlohmann::json::object()), "plain_ring");
  CliResult free_run = run_config(star_config("dense_ring", {{"reduction", "free"}}), "free_ring");
  CliResult charged = run_config(
      star_config("dense_ring", {{"reduction", "memory_bandwidth"}, {"reduction_bandwidth", "1GBps"}}), "adds");
  for (const auto* run : {&plain, &free_run, &charged})
    ASSERT_EQ(run->exit_code, 0) << run->output;
  EXPECT_EQ(read_text(plain.dir / "results.csv"), read_text(free_run.dir / "results.csv"));
  const double add = 12.0 * (20000 / 4) / 1e9;
  for (int it = 0; it < 3; ++it) {
    SCOPED_TRACE("iteration " + std::to_string(it));
    EXPECT_EQ(phase_time(plain.dir, it, "reduction"), -1);
    EXPECT_NEAR(phase_time(charged.dir, it, "reduction"), 3 * add, 1e-15);
    EXPECT_NEAR(phase_time(charged.dir, it, "allgather"), phase_time(plain.dir, it, "allgather"), 1e-15);
    EXPECT_NEAR(phase_time(charged.dir, it, "total"), phase_time(plain.dir, it, "total") + 3 * add, 1e-12);
  }
}

TEST(Compute, BadTrainingSettingsAreConfigErrors)
{
  struct Case {
    nlohmann::json compute;
    std::string path;
  };
  const std::vector<Case> cases = {
      {{{"training", "fixed"}}, "compute.forward_backward"},
      {{{"training", "model"}, {"forward_backward", "5ms"}}, "compute.forward_backward"},
      {{{"training", "fixed"}, {"forward_backward", "0s"}}, "compute.forward_backward"},
      {{{"training", "model"}}, "compute.training"}, // the integers source has no model table
      {{{"staging", "pcie"}, {"pcie_bandwidth", "12"}}, "compute.pcie_bandwidth"},
      {{{"reduction", "gpu"}}, "compute.reduction"},
      {{{"reduction_bandwidth", "10GBps"}}, "compute.reduction_bandwidth"}, // only with "memory_bandwidth"
      {{{"reduction", "memory_bandwidth"}, {"reduction_bandwidth", "12"}}, "compute.reduction_bandwidth"},
      {{{"device", "v100"}}, "compute.device"},
      {{{"precision", "fp8"}}, "compute.precision"},
  };
  for (const auto& c : cases) {
    CliResult run = run_config(star_config("topka", c.compute), "bad_compute");
    EXPECT_EQ(run.exit_code, 2) << c.compute.dump() << "\n" << run.output;
    EXPECT_NE(run.output.find("config error at " + c.path), std::string::npos) << run.output;
  }
}

// compute.device moves a model table's training step from the table's device (the P100) to another: the
// compute-bound part by the ratio of arithmetic peaks (fp32, or fp16/bf16 tensor cores under "mixed"), the
// memory-bound part by the ratio of memory bandwidths (devices.cpp's figures); the P100 keeps the table's own
// figure exactly, and the device's memory bandwidth becomes the selection kernels' default rate.
TEST(Compute, DeviceMovesTheModelTablesTrainingStep)
{
  struct Case {
    std::string model;
    nlohmann::json compute;
    double expected; // seconds
    double memory_bandwidth;
  };
  const double vgg = table_forward_backward("vgg16");
  const double lstm = table_forward_backward("lstm_an4");
  const double lstm_memory = 22.38e-3; // lstm_an4.json's memory_bound
  const std::vector<Case> cases = {
      {"vgg16", {{"training", "model"}}, vgg, 732e9},
      {"vgg16", {{"training", "model"}, {"device", "p100"}}, vgg, 732e9},
      {"vgg16", {{"training", "model"}, {"device", "h100"}}, vgg * 9.3 / 67, 3350e9},
      {"vgg16", {{"training", "model"}, {"device", "h100"}, {"precision", "mixed"}}, vgg * 9.3 / 989, 3350e9},
      {"vgg16", {{"training", "model"}, {"device", "p100"}, {"precision", "mixed"}}, vgg * 9.3 / 18.7, 732e9},
      {"lstm_an4",
       {{"training", "model"}, {"device", "a100"}},
       (lstm - lstm_memory) * 9.3 / 19.5 + lstm_memory * 732 / 1555,
       1555e9},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.model + " " + c.compute.dump());
    auto config = star_config("topka", c.compute);
    config["gradients"] = {{"source", "calibrated"}, {"model", c.model}};
    CliResult run = run_config(config, "device_step");
    ASSERT_EQ(run.exit_code, 0) << run.output;
    EXPECT_NEAR(phase_time(run.dir, 1, "compute"), c.expected, 1e-12 * c.expected);
    const auto manifest = nlohmann::json::parse(read_text(run.dir / "manifest.json"));
    EXPECT_EQ(manifest["config"]["compute"]["memory_bandwidth_Bps"].get<double>(), c.memory_bandwidth);
  }
  EXPECT_EQ(phase_time(run_config(
                           [&] {
                             auto config = star_config("topka", {{"training", "model"}});
                             config["gradients"] = {{"source", "calibrated"}, {"model", "vgg16"}};
                             return config;
                           }(),
                           "device_default")
                           .dir,
                       0, "compute"),
            vgg); // bitwise: the default device is the table's own
}

// A model table that names no device (a recording's sidecar, a user's table) is charged as it is; asking for
// a device then is an error rather than a silent non-move.
TEST(Compute, DeviceWithATableThatNamesNoDeviceIsAConfigError)
{
  auto table =
      nlohmann::json::parse(read_text(std::filesystem::path(SPARSIM_SOURCE_DIR) / "configs" / "models" / "vgg16.json"));
  table["compute"].erase("device_preset");
  const auto dir = scratch_dir("device_table");
  std::ofstream(dir / "table.json") << table.dump();
  auto config = star_config("topka", {{"training", "model"}, {"device", "h100"}});
  config["gradients"] = {{"source", "calibrated"}, {"model", (dir / "table.json").string()}};
  CliResult run = run_config(config, "device_no_preset");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("config error at compute.device"), std::string::npos) << run.output;
  config["compute"].erase("device");
  CliResult plain = run_config(config, "device_no_preset_plain");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_DOUBLE_EQ(phase_time(plain.dir, 1, "compute"), table_forward_backward("vgg16"));
}
