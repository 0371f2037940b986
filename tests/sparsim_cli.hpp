// Test helpers that run the sparsim executable on a config and read its result files back.
// Experiments run in their own process because SimGrid's engine can be created once per process.
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace sparsim::testing {

struct CliResult {
  int exit_code = -1;
  std::string output; // stdout and stderr together
  std::filesystem::path dir;
};

inline std::filesystem::path scratch_dir(const std::string& name)
{
  auto dir = std::filesystem::temp_directory_path() / ("sparsim-test-" + std::to_string(getpid()) + "-" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::string read_text(const std::filesystem::path& path)
{
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `sparsim ARGS` and captures its output and exit status.
inline CliResult run_cli(const std::string& args)
{
  CliResult result;
  const std::string command = std::string(SPARSIM_BINARY_DIR) + "/sparsim " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  char buffer[4096];
  while (pipe && fgets(buffer, sizeof buffer, pipe))
    result.output += buffer;
  const int status = pipe ? pclose(pipe) : -1;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// Writes `config` to a scratch folder and runs it (with `extra` arguments after --quiet); results land in
// DIR/out.
inline CliResult run_config(const nlohmann::json& config, const std::string& name, const std::string& extra = "")
{
  const auto dir = scratch_dir(name);
  std::ofstream(dir / "config.json") << config.dump(2);
  CliResult result =
      run_cli("run " + (dir / "config.json").string() + " --out " + (dir / "out").string() + " --quiet " + extra);
  result.dir = dir / "out";
  return result;
}

// A CSV file as rows of column -> text.
inline std::vector<std::map<std::string, std::string>> read_csv(const std::filesystem::path& path)
{
  std::ifstream in(path);
  std::string line;
  std::vector<std::string> header;
  std::vector<std::map<std::string, std::string>> rows;
  auto split = [](const std::string& text) {
    std::vector<std::string> cells;
    std::stringstream s(text);
    std::string cell;
    while (std::getline(s, cell, ','))
      cells.push_back(cell);
    if (!text.empty() && text.back() == ',')
      cells.emplace_back();
    return cells;
  };
  if (std::getline(in, line))
    header = split(line);
  while (std::getline(in, line)) {
    auto cells = split(line);
    std::map<std::string, std::string> row;
    for (std::size_t i = 0; i < header.size() && i < cells.size(); ++i)
      row[header[i]] = cells[i];
    rows.push_back(row);
  }
  return rows;
}

// The "total" rows of results.csv, one per iteration.
inline std::vector<std::map<std::string, std::string>> total_rows(const std::filesystem::path& dir)
{
  std::vector<std::map<std::string, std::string>> totals;
  for (auto& row : read_csv(dir / "results.csv"))
    if (row["phase"] == "total")
      totals.push_back(row);
  return totals;
}

inline double number(const std::map<std::string, std::string>& row, const std::string& column)
{
  return std::stod(row.at(column));
}

// Phase time of one iteration in results.csv (the slowest rank's), or -1 when the phase has no row.
inline double phase_time(const std::filesystem::path& dir, int iteration, const std::string& phase)
{
  for (auto& row : read_csv(dir / "results.csv"))
    if (row["phase"] == phase && std::stoi(row["iteration"]) == iteration)
      return number(row, "sim_time_s");
  return -1;
}

// A run on a contention-free star of `nodes` hosts (default: one per rank; 10 GB/s, 1 us links): `ranks`
// ranks run `algorithm` for `iterations` on n gradient entries at `density`. Tests add or change the rest.
inline nlohmann::json star_run_config(const std::string& name, int ranks, int iterations, const std::string& algorithm,
                                      std::uint64_t n, double density = 0.01, int nodes = 0)
{
  return {
      {"name", name},
      {"ranks", ranks},
      {"iterations", iterations},
      {"topology",
       {{"type", "star"}, {"nodes", nodes > 0 ? nodes : ranks}, {"bandwidth", "10GBps"}, {"latency", "1us"}}},
      {"algorithm", {{"name", algorithm}}},
      {"workload", {{"n", n}, {"density", density}}},
  };
}

} // namespace sparsim::testing
