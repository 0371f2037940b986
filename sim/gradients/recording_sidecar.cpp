#include "sim/gradients/recording_sidecar.hpp"

#include <fmt/format.h>
#include <fstream>

namespace sparsim {

std::string RecordingSidecar::json_path(std::string_view key) const { return fmt::format("({}).{}", path, key); }

RecordingSidecar read_recording_sidecar(const std::filesystem::path& file)
{
  RecordingSidecar sidecar;
  sidecar.path = file.string();
  const std::string root_path = fmt::format("({})", sidecar.path);
  const nlohmann::json document = [&] {
    std::ifstream in(file);
    if (!std::filesystem::is_regular_file(file) || !in)
      throw ConfigError(root_path, "an unreadable file", "a readable recording sidecar");
    try {
      return nlohmann::json::parse(in);
    } catch (const nlohmann::json::parse_error& e) {
      throw ConfigError(root_path, "text that is not JSON", fmt::format("a JSON object ({})", e.what()));
    }
  }();
  if (!document.is_object())
    throw ConfigError(root_path, describe_json(document), "a JSON object");
  JsonReader root(document, root_path);

  // What the files hold: checked against them by the replay source.
  sidecar.files = root.get_string("files");
  sidecar.n = static_cast<std::uint64_t>(root.get_int("n", std::nullopt, 1));
  sidecar.ranks = static_cast<std::size_t>(root.get_int("ranks", std::nullopt, 1));
  sidecar.iterations = static_cast<std::size_t>(root.get_int("iterations", std::nullopt, 1));
  sidecar.dtype = root.get_enum("dtype", {"float32", "float16", "float64"});
  // How they were made: read for their checks, not used.
  root.get_int("first_step", 0, 0);
  root.get_int("batch", 1, 1);
  root.get_string("recorder", "");
  if (root.has("sparsified")) {
    JsonReader sparsified = root.object("sparsified");
    sparsified.get_number("density", std::nullopt, 0.0, 1.0, true);
    sparsified.get_int("k", std::nullopt, 1);
    sparsified.get_bool("error_feedback");
    sparsified.finish();
  }
  // The layer table; its sizes must add up to n.
  if (root.has("model")) {
    sidecar.model = parse_model_table(root.object("model"));
    if (sidecar.model->total() != sidecar.n)
      throw ConfigError(
          sidecar.json_path("model.layers"),
          fmt::format("{} layers of {} parameters in all", sidecar.model->layers.size(), sidecar.model->total()),
          fmt::format("layers whose sizes add up to the recording's n = {}", sidecar.n));
  }
  root.finish();
  return sidecar;
}

} // namespace sparsim
