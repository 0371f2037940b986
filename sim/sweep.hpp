// Sweeps: one base config and named axes; every point of their cartesian product is one run.
//
// A sweep file:
//   {"name": "...", "base": {... a config ...} or "path/to/config.json",
//    "axes": {"ranks": [16, 64], "algorithm.name": ["topka", "oktopk"]}}
// An axis is a config path (dots between object keys) and the values it takes; an axis named "@something" is
// a variant axis whose values are objects of paths and values applied together (e.g. an algorithm with its
// own parameters and workload mode: {"algorithm.name": "dense_ring", "workload.data": "phantom"}). Every
// point's config is
// validated before anything runs. Point i runs as its own process (`sparsim run`) into DIR/points/<i>/; a
// point whose manifest.json exists is complete and is skipped on --resume. DIR/summary.csv is rebuilt from
// the complete points (never appended to): one row per (point, iteration, phase) with the axis values first
// (columns "axis:<path>", axes in alphabetical order).
#pragma once

#include "sim/json_reader.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace sparsim {

struct SweepAxis {
  std::string path;                   // "algorithm.name"
  std::vector<nlohmann::json> values;
};

struct SweepPoint {
  std::vector<nlohmann::json> values;  // one per axis
  nlohmann::json config;               // the base config with the values applied
};

struct Sweep {
  std::string name;
  std::vector<SweepAxis> axes;
  std::vector<SweepPoint> points;
  std::filesystem::path config_dir;  // where relative paths in the configs resolve
};

// Reads and expands a sweep file; every point's config is checked with parse_config and its memory estimate
// with check_memory (ConfigError on failure, its path prefixed with the point's axis values; the estimate is
// per point: running points in parallel needs the sum).
Sweep load_sweep(const std::filesystem::path& file);

struct SweepOptions {
  std::filesystem::path out;
  int jobs = 1;
  bool resume = false;
  std::string executable;  // the sparsim binary that runs each point
};

// Runs the points not yet complete, `jobs` at a time, printing progress; then writes summary.csv.
// Returns the number of points that failed.
int run_sweep(const Sweep& sweep, const SweepOptions& options);

// Rebuilds DIR/summary.csv from the complete points.
void write_summary(const Sweep& sweep, const std::filesystem::path& out);

}  // namespace sparsim
