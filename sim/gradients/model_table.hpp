// Layer tables: a model's parameter tensors in registration order (configs/models/*.json, format in
// docs/gradients.md), read by the calibrated source (which synthesises gradients with the layers' structure)
// and by the replay source (a recording's sidecar, or gradients.model: the training step it charges).
#pragma once

#include "sim/base/json_reader.hpp"
#include "sim/base/units.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace sparsim {

// One parameter tensor of a model table, in registration order.
struct ModelLayer {
  std::string name;
  std::string kind;       // "conv", "fc", "lstm", "embedding", "norm", "bias"
  std::uint64_t size = 0; // number of parameters
  std::uint64_t rows = 0; // > 0: a row-sparse embedding of `rows` rows (gradient only for the batch's tokens)
  bool output = false;    // part of the model's (small) output layer
};

// The model's training step on the reference GPU: the table's optional "compute" object (docs/gradients.md).
struct TrainingStep {
  Seconds forward_backward = 0; // forward + backward pass of one rank's mini-batch
  Seconds memory_bound = 0;     // the part of it bound by memory bandwidth (the rest by arithmetic)
  std::string device;           // the device preset it was estimated for (sim/run/devices.hpp), "" if none
  int batch = 0;                // samples in that mini-batch
  std::string source;           // where the figure comes from (a publication, or an estimate's inputs)
};

// A layer's place in the flattened gradient: entries [begin, begin + size).
struct LayerRange {
  std::string name;
  std::string kind;
  std::uint64_t begin = 0;
  std::uint64_t size = 0;
  bool output = false;
};

struct ModelTable {
  std::string name;
  std::string flatten_order; // "reverse" (last registered layer first) or "forward"
  std::vector<ModelLayer> layers;
  std::optional<TrainingStep> training_step;
  std::uint64_t total() const;
};

// Reads a layer table from the JSON object `root` (calls root.finish()); errors are ConfigErrors at root's paths.
ModelTable parse_model_table(JsonReader root);
// The table's layers in the order its flatten_order puts them in a gradient of total() entries.
std::vector<LayerRange> layer_ranges(const ModelTable& table);
// Reads a layer table file; errors are ConfigErrors naming the file and field.
ModelTable read_model_table(const std::filesystem::path& file);
// "vgg16", "lstm_an4", "bert_base", "resnet_fmnist" name the tables in configs/models/; anything else is a file path,
// relative to `config_dir` unless absolute.
std::filesystem::path model_table_path(const std::string& model, const std::filesystem::path& config_dir);

} // namespace sparsim
