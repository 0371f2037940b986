#include "sim/gradients/model_table.hpp"

#include "sim/base/data_files.hpp"

#include <fmt/format.h>
#include <fstream>
#include <functional>
#include <limits>
#include <numeric>

namespace sparsim {

std::uint64_t ModelTable::total() const
{
  std::uint64_t sum = 0;
  for (const auto& layer : layers)
    sum += layer.size;
  return sum;
}

std::vector<LayerRange> layer_ranges(const ModelTable& table)
{
  std::vector<LayerRange> ranges;
  std::uint64_t begin = 0;
  for (std::size_t j = 0; j < table.layers.size(); ++j) {
    const ModelLayer& layer =
        table.flatten_order == "reverse" ? table.layers[table.layers.size() - 1 - j] : table.layers[j];
    ranges.push_back({layer.name, layer.kind, begin, layer.size, layer.output});
    begin += layer.size;
  }
  return ranges;
}

ModelTable parse_model_table(JsonReader root)
{
  ModelTable table;
  table.name = root.get_string("name");
  table.flatten_order = root.get_enum("flatten_order", {"reverse", "forward"});
  root.get_string("note", "");
  if (root.has("compute")) {
    // The training step on the reference GPU, with where the figure comes from (all fields required).
    JsonReader compute = root.object("compute");
    TrainingStep step;
    step.forward_backward = compute.get_duration("forward_backward");
    if (step.forward_backward <= 0)
      compute.fail("forward_backward", step.forward_backward, "a positive duration");
    step.memory_bound = compute.get_duration("memory_bound", "0s");
    if (step.memory_bound < 0 || step.memory_bound > step.forward_backward)
      compute.fail("memory_bound", step.memory_bound, "a duration between 0 and forward_backward");
    step.batch = static_cast<int>(compute.get_int("batch", std::nullopt, 1, 1 << 20));
    compute.get_int("sequence_length", 0, 0, 1 << 20);
    compute.get_string("device");
    step.device = compute.get_string("device_preset", "");
    compute.get_string("method");
    step.source = compute.get_string("source");
    compute.finish();
    table.training_step = step;
  }
  const auto declared_total = root.get_int("total", 0, 0);
  for (JsonReader entry : root.object_list("layers")) {
    ModelLayer layer;
    layer.name = entry.get_string("name");
    layer.kind = entry.get_enum("kind", {"conv", "fc", "lstm", "embedding", "norm", "bias"});
    layer.size = static_cast<std::uint64_t>(entry.get_int("size", std::nullopt, 1));
    layer.rows = static_cast<std::uint64_t>(entry.get_int("rows", 0, 0, static_cast<std::int64_t>(layer.size)));
    layer.output = entry.get_bool("output", false);
    if (entry.has("shape")) {
      const auto shape = entry.get_int_list("shape", 1, std::numeric_limits<std::int64_t>::max());
      const auto product = std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
      if (static_cast<std::uint64_t>(product) != layer.size)
        entry.fail("shape", nlohmann::json(shape), fmt::format("dimensions whose product is the size {}", layer.size));
    }
    entry.finish();
    table.layers.push_back(std::move(layer));
  }
  if (table.layers.empty())
    root.fail("layers", nlohmann::json::array(), "at least one layer");
  if (declared_total != 0 && static_cast<std::uint64_t>(declared_total) != table.total())
    root.fail("total", declared_total, fmt::format("the sum of the layer sizes, {}", table.total()));
  root.finish();
  return table;
}

ModelTable read_model_table(const std::filesystem::path& file)
{
  const nlohmann::json document = [&] {
    std::ifstream in(file);
    // A folder opens like a file and fails only when read (std::ios_failure): refused here.
    if (!std::filesystem::is_regular_file(file) || !in)
      throw ConfigError("(model table)", fmt::format("\"{}\"", file.string()), "a readable layer table");
    try {
      return nlohmann::json::parse(in);
    } catch (const nlohmann::json::parse_error& e) {
      throw ConfigError("(model table)", fmt::format("\"{}\"", file.string()),
                        fmt::format("valid JSON ({})", e.what()));
    }
  }();
  return parse_model_table(JsonReader(document, fmt::format("({})", file.filename().string())));
}

std::filesystem::path model_table_path(const std::string& model, const std::filesystem::path& config_dir)
{
  if (model == "vgg16" || model == "lstm_an4" || model == "bert_base" || model == "resnet_fmnist")
    return data_dir() / "configs" / "models" / (model + ".json");
  const std::filesystem::path path(model);
  return path.is_absolute() ? path : config_dir / path;
}

} // namespace sparsim
