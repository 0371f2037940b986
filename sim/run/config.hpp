// An experiment config: the JSON a user writes, validated into typed settings before anything runs.
// Every field, its unit, default and meaning is listed in docs/config.md (a test keeps the two in sync).
#pragma once

#include "algorithms/algorithm.hpp"
#include "sim/base/json_reader.hpp"
#include "sim/data/wire.hpp"
#include "sim/gradients/source.hpp"
#include "sim/network/options.hpp"
#include "sim/run/selection.hpp"
#include "topologies/topology.hpp"

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace sparsim {

// What dense ranks move: real values, or lengths only ("phantom": nothing is summed or checked).
enum class DataMode { real, phantom };
inline constexpr EnumNames<DataMode, 2> kDataModeNames{{{DataMode::real, "real"}, {DataMode::phantom, "phantom"}}};

struct Workload {
  std::uint64_t n = 0;   // gradient length in elements
  double density = 0.01; // sparse algorithms select k = floor(density * n) per rank
  std::uint64_t k = 0;
  WireFormat wire;
  DataMode data = DataMode::real;
};

struct ExperimentConfig {
  std::string name;
  std::uint64_t seed = 1;
  int ranks = 1;
  int iterations = 1;
  // "vgg", "lstm", "bert": the reference implementation's settings of that model's code were filled in where the
  // config left them unset (configs/presets/reference_code.json); "" for none.
  std::string reference_code;
  std::unique_ptr<Topology> topology;
  Placement placement;
  std::unique_ptr<Algorithm> algorithm;
  Workload workload;
  std::unique_ptr<GradientSource> gradients;
  SelectionConfig selection; // sparse algorithms
  ComputeModel compute;      // how selection is charged in simulated time
  NetworkOptions network;
  bool verify = true;
  bool check_wire = false; // simulation.check_wire: every payload encoded and checked (sim/data/wire_codec.hpp)

  // The algorithm as a sparse allreduce, or null for a dense one: the one place that asks which it is.
  const SparseAllreduce* sparse_algorithm() const { return dynamic_cast<const SparseAllreduce*>(algorithm.get()); }
  bool is_sparse() const { return sparse_algorithm() != nullptr; }
  // A sparse algorithm that selects within the collective from each rank's dense acc (SparDL).
  bool selects_within_collective() const
  {
    const SparseAllreduce* sparse = sparse_algorithm();
    return sparse && sparse->default_local_selection() == SparseAllreduce::LocalSelection::within_collective;
  }
  const DenseAllreduce& dense_algorithm() const { return dynamic_cast<const DenseAllreduce&>(*algorithm); }

  // The config with every default filled in, as written into result manifests.
  nlohmann::json resolved() const;
  // The closed forms' inputs for this problem, on the routes between the placed ranks when given (zero alpha
  // and beta without them).
  CostInputs cost_inputs(const RouteSummary* routes = nullptr) const;
  // The compute vertex (node, or GPU) each rank runs on.
  std::vector<std::size_t> rank_nodes() const
  {
    return place_ranks(placement, ranks, topology->node_count(), topology->gpus_per_node());
  }
};

// Parses a config document. `config_dir` resolves relative file references (platform files).
// Every path read is added to `log` when given (used by the docs test).
ExperimentConfig parse_config(const nlohmann::json& document, const std::filesystem::path& config_dir,
                              std::shared_ptr<FieldLog> log = nullptr);
// Reads and parses a config file; unreadable files and malformed JSON are ConfigErrors too. Relative paths
// inside resolve against `relative_to`, by default the file's folder.
ExperimentConfig load_config(const std::filesystem::path& file, std::shared_ptr<FieldLog> log = nullptr,
                             std::optional<std::filesystem::path> relative_to = std::nullopt);
nlohmann::json read_json_file(const std::filesystem::path& file);
// Parses JSON text; malformed JSON is a ConfigError naming `origin` (the file it came from).
nlohmann::json parse_json_text(std::string_view text, const std::string& origin);

} // namespace sparsim
