// Sweeps: one base config, named axes (a cartesian product) and/or an explicit list of points.
//
// A sweep file:
//   {"name": "...", "base": {... a config ...} or "path/to/config.json",
//    "axes": {"ranks": [16, 64], "algorithm.name": ["topka", "oktopk"]},
//    "points": [{"ranks": 16, "workload.n": 1000}, {"ranks": 64, "workload.n": 4000}]}
// An axis is a config path (dots between object keys) and the values it takes; an axis named "@something" is
// a variant axis whose values are objects of paths and values applied together (e.g. an algorithm with its
// own parameters and workload mode: {"algorithm.name": "dense_ring", "workload.data": "phantom"}).
// "points" lists irregular grids: each entry is an object of config paths and values. With points alone the
// sweep runs exactly those; with points and axes, every point is combined with every axes combination
// (points vary slowest, then the axes in alphabetical order, the last fastest). At least one of the two is
// needed; a path may not be both a point key and an axis.
//
// Every point's config is validated before anything runs. Point i runs as its own process (`sparsim run`) into
// DIR/points/<i>/ (its config in DIR/points/<i>/config.json); a point whose manifest.json exists is complete
// and is skipped on --resume. DIR/summary.csv is rebuilt from the complete points (never appended to): one
// row per (point, iteration, phase) with the point's coordinates first: columns "axis:<path>" for the paths
// the points set (alphabetical; a point that does not set one shows the base config's value there, or an
// empty cell) and then for the axes (alphabetical).
#pragma once

#include "sim/base/json_reader.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace sparsim {

struct SweepAxis {
  std::string path; // "algorithm.name"
  std::vector<nlohmann::json> values;
};

struct SweepPoint {
  std::vector<nlohmann::json> values; // one per column of Sweep::columns
  nlohmann::json config;              // the base config with the values applied
  double memory_bytes = 0;            // estimate_memory of the config
  // check_memory's refusal on this machine (its path prefixed with the point), raised only if the point is to
  // run here: a sweep may hold points for a larger machine (run there, or as a Slurm job array).
  std::optional<ConfigError> too_large_here;
  std::string label; // "ranks=16 algorithm.name=topka", for messages
};

struct Sweep {
  std::string name;
  std::filesystem::path file;       // the sweep file, absolute
  std::vector<std::string> columns; // point paths, then axis paths: the summary's "axis:" columns
  std::vector<SweepAxis> axes;
  std::vector<SweepPoint> points;
  std::filesystem::path config_dir; // where relative paths in the configs resolve (absolute)
};

// Reads and expands a sweep file; every point's config is checked with parse_config (ConfigError on failure, its
// path prefixed with the point's coordinates) and its memory estimated; check_memory's verdict is kept for
// run_sweep, which refuses to run here a selected point that does not fit this machine.
Sweep load_sweep(const std::filesystem::path& file);

// `--only PATH=VALUE`: a point is selected when its config holds VALUE at PATH (keys joined by dots).
struct PointFilter {
  std::string path;     // "ranks", "gradients.model"
  nlohmann::json value; // 128, "vgg16"
};
// Parses "PATH=VALUE"; VALUE is JSON when it parses as JSON (128, false, "x"), else a string (vgg16).
// Throws std::invalid_argument without a "=" or with an empty path.
PointFilter parse_point_filter(const std::string& text);

struct SweepOptions {
  std::filesystem::path out;
  int jobs = 1;
  int threads = 0; // selection threads per point; 0: the machine's cores / jobs
  bool resume = false;
  std::string executable; // the sparsim binary that runs each point
  // Only the points every path's filters select (filters of one path: any of their values; of different
  // paths: all); the others are neither cleared nor run, so slices of one sweep can share its folder.
  std::vector<PointFilter> only;
};

// Indices of the points `filters` select (all points without filters).
std::vector<std::size_t> selected_points(const Sweep& sweep, const std::vector<PointFilter>& filters);

// DIR/points/NNNN of point `index`.
std::filesystem::path point_dir(const std::filesystem::path& out, std::size_t index);

struct SweepOutcome {
  std::size_t failed = 0;
  bool interrupted = false; // stopped by SIGINT or SIGTERM
};

// Runs the selected points (SweepOptions::only) not yet complete, up to `jobs` at a time and never more at once than
// the machine's memory holds (by the points' estimates), printing progress: one updating line on a terminal, a line per
// finished point otherwise. Then writes summary.csv. SIGINT or SIGTERM stops the running points (their folders stay
// incomplete, to be redone by --resume) and returns after writing summary.csv from the complete points.
SweepOutcome run_sweep(const Sweep& sweep, const SweepOptions& options);

// Writes each incomplete selected point's config.json (all selected points' unless `resume`), then DIR/sweep.sbatch, a
// Slurm job array with one task per `chunk` points each running `sparsim run` like the local sweep, and
// DIR/gather.sbatch, which rebuilds summary.csv. Returns the number of points the array runs.
std::size_t emit_slurm(const Sweep& sweep, const SweepOptions& options, int chunk);

// Rebuilds DIR/summary.csv from the complete points; returns how many points were complete.
std::size_t write_summary(const Sweep& sweep, const std::filesystem::path& out);

} // namespace sparsim
