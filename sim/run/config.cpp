#include "sim/run/config.hpp"

#include "sim/run/devices.hpp"

#include "algorithms/registry.hpp"
#include "sim/base/data_files.hpp"
#include "sim/data/wire_codec.hpp"
#include "sim/network/models/network_model.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fstream>
#include <limits>
#include <sstream>

namespace sparsim {

nlohmann::json read_json_file(const std::filesystem::path& file)
{
  std::ifstream in(file);
  if (!in)
    throw ConfigError("(file)", fmt::format("\"{}\"", file.string()), "a readable JSON file");
  std::stringstream text;
  text << in.rdbuf();
  return parse_json_text(text.str(), file.string());
}

nlohmann::json parse_json_text(std::string_view text, const std::string& origin)
{
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // Syntax errors, and numbers out of double's range such as 1e400 (nlohmann's out_of_range).
    throw ConfigError("(file)", fmt::format("\"{}\"", origin), fmt::format("valid JSON ({})", e.what()));
  }
}

namespace {

// The values of "reference_code": "none", then the model codes of configs/presets/reference_code.json.
const std::vector<std::string> kReferenceCodes = {"none", "vgg", "lstm", "bert"};

// The config with the reference implementation's settings for its algorithm (configs/presets/reference_code.json,
// the model code named by "reference_code") filled in where it leaves them unset. A missing or unknown
// reference_code, or sections that are not objects, leave it as it is (parse_config reports those).
nlohmann::json with_reference_code(const nlohmann::json& document)
{
  if (!document.is_object() || !document.contains("reference_code") || !document["reference_code"].is_string())
    return document;
  const std::string code = document["reference_code"].get<std::string>();
  if (code == "none" || std::find(kReferenceCodes.begin(), kReferenceCodes.end(), code) == kReferenceCodes.end())
    return document;
  const nlohmann::json presets = read_json_file(data_dir() / "configs" / "presets" / "reference_code.json");
  const auto algorithm = document.find("algorithm");
  if (algorithm == document.end() || !algorithm->is_object() || !algorithm->contains("name") ||
      !(*algorithm)["name"].is_string())
    return document;
  const auto preset = presets.at(code).find((*algorithm)["name"].get<std::string>());
  if (preset == presets.at(code).end())
    return document; // an algorithm the reference did not run: nothing to fill in
  nlohmann::json merged = document;
  for (const auto& [section, fields] : preset->items()) {
    if (merged.contains(section) && !merged[section].is_object())
      continue;
    for (const auto& [key, value] : fields.items())
      if (!merged[section].contains(key))
        merged[section][key] = value;
  }
  return merged;
}

// The names of the network models that `fits`, quoted and joined by "or": "\"LinkLevel\"".
template <class Fits> std::string quoted_models_where(const Fits& fits)
{
  std::vector<std::string> names;
  for (const NetworkModel& model : network_models())
    if (fits(model))
      names.push_back("\"" + model.name + "\"");
  return fmt::format("{}", fmt::join(names, " or "));
}

} // namespace

ExperimentConfig parse_config(const nlohmann::json& original, const std::filesystem::path& config_dir,
                              std::shared_ptr<FieldLog> log)
{
  const nlohmann::json document = with_reference_code(original);
  JsonReader root(document, "", std::move(log));
  ExperimentConfig config;
  config.name = root.get_string("name", "experiment");
  config.reference_code = root.get_enum("reference_code", kReferenceCodes, "none");
  if (config.reference_code == "none")
    config.reference_code.clear();
  config.seed = static_cast<std::uint64_t>(root.get_int("seed", 1, 0));
  config.ranks = static_cast<int>(root.get_int("ranks", std::nullopt, 1, 1 << 20));
  config.iterations = static_cast<int>(root.get_int("iterations", 1, 1, 1'000'000));

  config.topology = parse_topology(root.object("topology"), config_dir);
  if (static_cast<std::size_t>(config.ranks) > config.topology->node_count())
    root.fail("ranks", config.ranks,
              fmt::format("at most the platform's {} {} ({})", config.topology->node_count(),
                          config.topology->gpus_per_node() > 1 ? "GPUs" : "nodes", config.topology->describe()));
  config.placement = parse_placement(root.optional_object("placement"));

  {
    JsonReader workload = root.object("workload");
    config.workload.n = static_cast<std::uint64_t>(workload.get_int("n", std::nullopt, 1, 1'000'000'000'000));
    config.workload.density = workload.get_number("density", 0.01, 0.0, 1.0, true);
    config.workload.k = static_cast<std::uint64_t>(std::floor(config.workload.density * config.workload.n));
    config.workload.wire.value_bytes = static_cast<int>(workload.get_int("value_bytes", 4, 1, 8));
    config.workload.wire.index_bytes = static_cast<int>(workload.get_int("index_bytes", 4, 1, 8));
    config.workload.data = workload.get_enum("data", kDataModeNames, DataMode::real);
    workload.finish();
  }

  JsonReader algorithm = root.object("algorithm");
  const std::string algorithm_path = algorithm.path();
  config.algorithm = parse_algorithm(std::move(algorithm));
  config.algorithm->check_ranks({.ranks = config.ranks,
                                 .gpus_per_node = static_cast<int>(config.topology->gpus_per_node()),
                                 .placement = config.placement.type});
  if (config.workload.data == DataMode::phantom && config.is_sparse())
    throw ConfigError("workload.data", "\"phantom\"", "\"real\": sparse algorithms select from real values");
  if (config.is_sparse() && config.workload.n > std::numeric_limits<Index>::max())
    throw ConfigError(
        "workload.n", std::to_string(config.workload.n),
        fmt::format("at most {} for a sparse algorithm (indices are 32-bit)", std::numeric_limits<Index>::max()));

  config.gradients = parse_gradient_source(
      root.optional_object("gradients"), GradientContext{config.seed, config.workload.n, config.ranks, config_dir,
                                                         config.iterations, config.workload.data == DataMode::phantom});
  // Selection settings are read (and checked) for every algorithm, so that one sweep can mix dense and sparse
  // algorithms; dense algorithms select nothing and ignore them.
  const SparseAllreduce* sparse = config.sparse_algorithm();
  const auto local = sparse ? sparse->default_local_selection() : SparseAllreduce::LocalSelection::exact_top_k;
  const SelectionPolicy default_policy =
      local == SparseAllreduce::LocalSelection::threshold_reuse ? SelectionPolicy::threshold_reuse
      : local == SparseAllreduce::LocalSelection::gaussian_fit  ? SelectionPolicy::gaussian
                                                                : SelectionPolicy::exact;
  const bool within_collective = config.selects_within_collective();
  if (within_collective && config.gradients->generates_candidates())
    throw ConfigError("gradients.generation", "\"candidates\"",
                      "\"dense\": " + config.algorithm->name() + " selects within the collective from the dense acc");
  config.selection =
      parse_selection(root.optional_object("selection"), default_policy, config.gradients->generates_candidates());
  if (within_collective && config.selection.policy != SelectionPolicy::exact)
    throw ConfigError("selection.policy",
                      std::string("\"") + name_of(config.selection.policy, kSelectionPolicyNames) + "\"",
                      "\"exact\" or unset: " + config.algorithm->name() +
                          " selects within the collective (each block's exact top-k)");
  if (within_collective && config.selection.top_k != TopKRule::exact)
    throw ConfigError("selection.top_k", std::string("\"") + name_of(config.selection.top_k, kTopKRuleNames) + "\"",
                      "\"exact\" or unset: " + config.algorithm->name() + " selects within the collective");
  if (config.selection.reevaluation_residual != ReevaluationResidual::selected_in_result &&
      default_policy != SelectionPolicy::threshold_reuse)
    throw ConfigError("selection.reevaluation_residual",
                      std::string("\"") + name_of(config.selection.reevaluation_residual, kReevaluationResidualNames) +
                          "\"",
                      "\"selected_in_result\": only oktopk has re-evaluation iterations that consume from U");
  config.compute = parse_compute(root.optional_object("compute"));
  if (within_collective && config.compute.selection == SelectionCharge::measured)
    throw ConfigError("compute.selection", "\"measured\"",
                      "\"memory_bandwidth\" or \"free\": " + config.algorithm->name() +
                          " selects within the collective, where host time is not measured");
  if (config.compute.training == TrainingCharge::model) {
    const auto step = config.gradients->training_step();
    if (!step)
      throw ConfigError(
          "compute.training", "\"model\"",
          "a gradient source whose model table gives a training step (gradients.source \"calibrated\", or "
          "\"replay\" with a recording sidecar or gradients.model, whose layer table has a \"compute\" "
          "object), or \"fixed\" with compute.forward_backward");
    const std::vector<std::string> devices = device_preset_names();
    if (!step->device.empty() && std::find(devices.begin(), devices.end(), step->device) == devices.end())
      throw ConfigError(
          "gradients.model", "\"" + step->device + "\"",
          fmt::format("a model table whose compute.device_preset is one of \"{}\"", fmt::join(devices, "\", \"")));
    config.compute.forward_backward = resolve_training_step(config.compute, *step);
  }

  {
    JsonReader network = root.optional_object("network");
    config.network.model = network.get_enum("model", network_model_names(), "CM02");
    const NetworkModel& model = network_model(config.network.model);
    config.network.crosstraffic = network.get_bool("crosstraffic", false);
    if (config.network.crosstraffic && !model.acknowledgement_traffic)
      throw ConfigError("network.crosstraffic", "true",
                        "false with network.model \"" + model.name + "\" (that model has no acknowledgement traffic)");
    // A model keeps the platform's static routes unless it routes each message itself.
    if (!model.routes_per_message &&
        (config.topology->routes_per_message() || config.topology->adaptive_routing().candidates > 0))
      throw ConfigError("topology.routing", "\"" + config.topology->routing() + "\"",
                        "static routing with network.model \"" + model.name + "\" (it keeps static routes); \"" +
                            config.topology->routing() + "\" needs network.model " +
                            quoted_models_where([](const NetworkModel& m) { return m.routes_per_message; }));
    const std::string runtime =
        network.get_enum("runtime", {NetworkOptions::kSimGridActors, NetworkOptions::kFibers}, model.runtimes.front());
    if (std::find(model.runtimes.begin(), model.runtimes.end(), runtime) == model.runtimes.end())
      network.fail("runtime", runtime,
                   fmt::format("\"{}\" with network.model \"{}\"; \"{}\" needs network.model {}",
                               fmt::join(model.runtimes, "\" or \""), model.name, runtime,
                               quoted_models_where([&](const NetworkModel& m) {
                                 return std::find(m.runtimes.begin(), m.runtimes.end(), runtime) != m.runtimes.end();
                               })));
    config.network.runtime = runtime;
    if (network.has("fiber_stack")) {
      const std::string text = network.get_string("fiber_stack");
      const std::optional<Bytes> stack = parse_bytes(text);
      if (!stack || *stack < NetworkOptions::kMinFiberStack || *stack > NetworkOptions::kMaxFiberStack)
        network.fail("fiber_stack", text,
                     fmt::format("a size between {} and {} (\"256KiB\")",
                                 format_bytes(double(NetworkOptions::kMinFiberStack)),
                                 format_bytes(double(NetworkOptions::kMaxFiberStack))));
      if (!config.network.fibers())
        network.fail("fiber_stack", text, "no fiber_stack unless network.runtime is \"fibers\"");
      config.network.fiber_stack = static_cast<std::size_t>(*stack);
    }
    network.finish();
  }
  {
    JsonReader simulation = root.optional_object("simulation");
    config.verify = simulation.get_bool("verify", config.workload.data == DataMode::real);
    if (config.verify && config.workload.data == DataMode::phantom)
      simulation.fail("verify", true, "false: phantom data has no values to verify");
    config.check_wire = simulation.get_bool("check_wire", false);
    if (config.check_wire && !encodable(config.workload.wire))
      simulation.fail("check_wire", true,
                      "false unless workload.index_bytes and workload.value_bytes are 4 (only int32 indices and fp32 "
                      "values encode)");
    simulation.finish();
  }
  root.finish();
  return config;
}

ExperimentConfig load_config(const std::filesystem::path& file, std::shared_ptr<FieldLog> log,
                             std::optional<std::filesystem::path> relative_to)
{
  return parse_config(read_json_file(file), relative_to.value_or(file.parent_path()), std::move(log));
}

CostInputs ExperimentConfig::cost_inputs(const RouteSummary* routes) const
{
  CostInputs inputs{.ranks = ranks,
                    .n = workload.n,
                    .k = workload.k,
                    .wire = workload.wire,
                    .alpha = 0,
                    .seconds_per_byte = 0,
                    .intra_node = {},
                    .inter_node = {}};
  if (!routes)
    return inputs;
  auto seconds_per_byte = [](BytesPerSecond bandwidth) { return bandwidth > 0 ? 1.0 / bandwidth : 0.0; };
  inputs.alpha = routes->latency_max;
  inputs.seconds_per_byte = seconds_per_byte(routes->bandwidth_min);
  inputs.intra_node = {routes->intra_node.latency_max, seconds_per_byte(routes->intra_node.bandwidth_min)};
  inputs.inter_node = {routes->inter_node.latency_max, seconds_per_byte(routes->inter_node.bandwidth_min)};
  return inputs;
}

nlohmann::json ExperimentConfig::resolved() const
{
  nlohmann::json algorithm_json = algorithm->params();
  algorithm_json["name"] = algorithm->name();
  nlohmann::json resolved = {
      {"name", name},
      {"seed", seed},
      {"ranks", ranks},
      {"iterations", iterations},
      {"topology", topology->to_json()},
      {"placement", {{"type", placement.type}, {"seed", placement.seed}}},
      {"workload",
       {{"n", workload.n},
        {"density", workload.density},
        {"value_bytes", workload.wire.value_bytes},
        {"index_bytes", workload.wire.index_bytes},
        {"data", name_of(workload.data, kDataModeNames)}}},
      {"algorithm", algorithm_json},
      {"gradients", gradients->to_json()},
      {"selection", is_sparse() ? selection.to_json() : nlohmann::json(nullptr)},
      {"compute", compute.to_json()},
      {"network", network.fibers() ? nlohmann::json{{"model", network.model},
                                                    {"crosstraffic", network.crosstraffic},
                                                    {"runtime", network.runtime},
                                                    {"fiber_stack", format_bytes(double(network.fiber_stack))}}
                                   : nlohmann::json{{"model", network.model},
                                                    {"crosstraffic", network.crosstraffic},
                                                    {"runtime", network.runtime}}},
      {"simulation", {{"verify", verify}, {"check_wire", check_wire}}},
  };
  if (!reference_code.empty())
    resolved["reference_code"] = reference_code;
  return resolved;
}

} // namespace sparsim
