// Result files of a run: results.csv (per iteration and phase), ranks.csv (per rank), links.csv (per
// SimGrid link, sim/output/links.hpp), manifest.json (provenance). All are written in full under temporary
// names, then renamed into place, the manifest last: a crash leaves no file half-written under its final
// name, and only a folder with manifest.json holds a complete run (docs/reliability.md).
#pragma once

#include "sim/run/config.hpp"
#include "sim/run/driver.hpp"

#include <filesystem>
#include <string>

namespace sparsim {

struct Provenance {
  std::string git_revision; // "unknown" outside a git checkout; "-dirty" when the tree had changes
  std::string command_line;
};
Provenance collect_provenance(const std::string& command_line);

// 64-bit FNV-1a of the resolved config's canonical JSON text, as 16 hex digits.
std::string config_hash(const nlohmann::json& resolved);

void write_results(const std::filesystem::path& dir, const ExperimentConfig& config, const RunOutput& output,
                   const Provenance& provenance);

// Writes `text` to `path` through a temporary file in the same folder and a rename.
void write_file_atomically(const std::filesystem::path& path, const std::string& text);

// The short human summary printed after a run.
std::string summarize_run(const ExperimentConfig& config, const RunOutput& output);

} // namespace sparsim
