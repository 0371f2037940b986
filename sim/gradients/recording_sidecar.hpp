// The sidecar of a recording: recording.json in the folder of a "files" replay's recording (written by the
// recorder, python/sparsim_record; format in docs/config.md), saying what the recording holds, so that the
// files can be checked against it, and giving the model's layer table.
#pragma once

#include "sim/gradients/model_table.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace sparsim {

inline constexpr const char* kSidecarName = "recording.json";

struct RecordingSidecar {
  std::string path;  // the sidecar file as found, for messages
  std::string files; // the files' name pattern, relative to the sidecar's folder
  std::uint64_t n = 0;
  std::size_t ranks = 0;
  std::size_t iterations = 0;
  std::string dtype;               // "float32", "float16" or "float64"
  std::optional<ModelTable> model; // the layer table of the recorded parameters, in the recording's order

  // The JSON path of one of its keys in messages: "(PATH).key".
  std::string json_path(std::string_view key) const;
};

// Reads and checks the sidecar `file` on its own (not against the files: the replay source does that);
// errors are ConfigErrors at "(FILE).key".
RecordingSidecar read_recording_sidecar(const std::filesystem::path& file);

} // namespace sparsim
