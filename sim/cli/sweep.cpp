#include "sim/cli/sweep.hpp"

#include "sim/output/results.hpp"
#include "sim/run/config.hpp"
#include "sim/run/memory.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <pthread.h>
#include <set>
#include <sstream>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace sparsim {
namespace {

std::vector<std::string> path_keys(const std::string& path)
{
  std::vector<std::string> keys;
  std::stringstream parts(path);
  std::string key;
  while (std::getline(parts, key, '.'))
    keys.push_back(key);
  return keys;
}

// Sets `value` at a dotted path inside `config`, creating objects on the way.
void set_path(nlohmann::json& config, const std::string& path, const nlohmann::json& value)
{
  const std::vector<std::string> keys = path_keys(path);
  nlohmann::json* node = &config;
  for (std::size_t i = 0; i + 1 < keys.size(); ++i) {
    if (!node->contains(keys[i]) || !(*node)[keys[i]].is_object())
      (*node)[keys[i]] = nlohmann::json::object();
    node = &(*node)[keys[i]];
  }
  (*node)[keys.back()] = value;
}

// The value at a dotted path inside `config`, or null when it is not set there.
nlohmann::json value_at(const nlohmann::json& config, const std::string& path)
{
  const nlohmann::json* node = &config;
  for (const std::string& key : path_keys(path)) {
    if (!node->is_object() || !node->contains(key))
      return nullptr;
    node = &(*node)[key];
  }
  return *node;
}

// A config path as a point or an axis names it: keys joined by single dots.
bool is_config_path(const std::string& path)
{
  return !path.empty() && path.front() != '.' && path.back() != '.' && path.find("..") == std::string::npos;
}

// A coordinate as text: strings as they are, variants as "path=value;path=value", null (not set) as nothing,
// others as JSON.
std::string value_text(const nlohmann::json& value)
{
  if (value.is_null())
    return "";
  if (value.is_string())
    return value.get<std::string>();
  if (!value.is_object())
    return value.dump();
  std::string text;
  for (const auto& [path, v] : value.items())
    text += (text.empty() ? "" : ";") + path + "=" + value_text(v);
  return text;
}

bool axes_contain(const std::vector<SweepAxis>& axes, const std::string& path)
{
  return std::any_of(axes.begin(), axes.end(), [&](const SweepAxis& axis) { return axis.path == path; });
}

// Complete: the run finished and wrote its manifest, and its results are not partial (a run stopped by its
// wall-clock limit is redone on --resume).
bool point_complete(const std::filesystem::path& dir)
{
  if (!std::filesystem::exists(dir / "manifest.json"))
    return false;
  try {
    return !read_json_file(dir / "manifest.json").value("partial", false);
  } catch (const std::exception&) {
    return false; // unreadable: redo the point
  }
}

std::string csv_cell(const nlohmann::json& value)
{
  std::string text = value_text(value);
  if (text.find_first_of(",\"\n") != std::string::npos) {
    std::string quoted = "\"";
    for (char c : text)
      quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
    return quoted + "\"";
  }
  return text;
}

// Text in single quotes for bash.
std::string shell_quote(const std::string& text)
{
  std::string quoted = "'";
  for (char c : text)
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// Clears the folders of the selected points to run (all, or the incomplete ones on resume) and writes their
// config.json; returns their indices.
std::vector<std::size_t> prepare_points(const Sweep& sweep, const SweepOptions& options)
{
  std::filesystem::create_directories(options.out / "points");
  std::vector<std::size_t> todo;
  for (std::size_t i : selected_points(sweep, options.only)) {
    const auto dir = point_dir(options.out, i);
    if (options.resume && point_complete(dir)) {
      // Point numbers depend on the sweep file (and older versions of sparsim ordered axes alphabetically):
      // a complete point of another expansion must not pass for this one.
      if (read_json_file(dir / "config.json") != sweep.points[i].config)
        throw std::runtime_error(fmt::format(
            "--resume: {} holds a complete point whose config.json differs from point {} of {} (another sweep "
            "file, or one whose axes or points changed since it ran); resume into a folder of this sweep, or "
            "run into a new --out",
            dir.string(), i, sweep.file.string()));
      continue;
    }
    // A point without a manifest was never run or was stopped half-way: start it afresh.
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    write_file_atomically(dir / "config.json", sweep.points[i].config.dump(2) + "\n");
    todo.push_back(i);
  }
  return todo;
}

} // namespace

PointFilter parse_point_filter(const std::string& text)
{
  const std::size_t equals = text.find('=');
  if (equals == std::string::npos || equals == 0)
    throw std::invalid_argument("takes PATH=VALUE, e.g. ranks=128 or gradients.model=vgg16");
  PointFilter filter{text.substr(0, equals), nlohmann::json()};
  const std::string value = text.substr(equals + 1);
  filter.value = nlohmann::json::accept(value) ? nlohmann::json::parse(value) : nlohmann::json(value);
  return filter;
}

std::vector<std::size_t> selected_points(const Sweep& sweep, const std::vector<PointFilter>& filters)
{
  std::map<std::string, std::vector<nlohmann::json>> wanted; // path -> any of these values
  for (const auto& filter : filters)
    wanted[filter.path].push_back(filter.value);
  std::vector<std::size_t> selected;
  for (std::size_t i = 0; i < sweep.points.size(); ++i) {
    bool all = true;
    for (const auto& [path, values] : wanted) {
      const nlohmann::json value = value_at(sweep.points[i].config, path);
      all = all && std::find(values.begin(), values.end(), value) != values.end();
    }
    if (all)
      selected.push_back(i);
  }
  return selected;
}

namespace {

// Set by SIGINT/SIGTERM while a local sweep runs.
volatile std::sig_atomic_t stop_requested = 0;
void request_stop(int) { stop_requested = 1; }

// Installs request_stop for SIGINT and SIGTERM for its lifetime (no SA_RESTART: waits return early).
class StopSignals {
public:
  StopSignals()
  {
    stop_requested = 0;
    struct sigaction action {};
    action.sa_handler = request_stop;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
  }
  ~StopSignals()
  {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

// Starts `sparsim run` on one point, with relative paths in its config resolved against the sweep's config
// folder; its output goes to the point's run.log. The child gets its own process group (a terminal's Ctrl-C
// reaches the sweep only, which stops its points itself) and dies with the sweep (even a SIGKILLed one).
pid_t start_point(const SweepOptions& options, const std::filesystem::path& dir,
                  const std::filesystem::path& config_dir)
{
  const std::string relative_to = config_dir.lexically_normal().string();
  const std::string config = (dir / "config.json").string();
  const std::string out = dir.string();
  const std::string log = (dir / "run.log").string();
  // By default the cores are shared between the points running at once (each point's selection stage uses
  // threads).
  const auto cores = static_cast<unsigned>(machine_cores());
  const unsigned shared = std::max(1u, cores / static_cast<unsigned>(options.jobs));
  const std::string threads = std::to_string(options.threads > 0 ? static_cast<unsigned>(options.threads) : shared);
  const pid_t sweep_pid = getpid();
  // SIGINT and SIGTERM are blocked across the fork and the child puts back their default actions before it
  // unblocks them: a stop request that reaches it before exec ends it, instead of running the sweep's handler
  // in the child and being lost.
  sigset_t stop_signals;
  sigset_t previous_mask;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, &previous_mask);
  const pid_t pid = fork();
  if (pid == 0) {
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    pthread_sigmask(SIG_SETMASK, &previous_mask, nullptr);
    setpgid(0, 0);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != sweep_pid)
      _exit(127);
    std::FILE* f = std::freopen(log.c_str(), "w", stdout);
    if (!f || dup2(fileno(stdout), STDERR_FILENO) < 0)
      _exit(127);
    execl(options.executable.c_str(), options.executable.c_str(), "run", config.c_str(), "--out", out.c_str(),
          "--relative-to", relative_to.c_str(), "--threads", threads.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  pthread_sigmask(SIG_SETMASK, &previous_mask, nullptr);
  if (pid < 0)
    throw std::runtime_error("sweep: cannot start a process");
  return pid;
}

enum class PointEnd { done, failed, stopped };

// Progress of a local sweep on standard error: on a terminal one line rewritten in place (and a line of its
// own for each failed or stopped point), otherwise one line per finished point. Both show points done /
// total, elapsed wall time and the remaining time estimated from this session's throughput.
class Progress {
public:
  Progress(std::string name, std::size_t total, std::size_t complete, std::size_t to_run)
      : name_(std::move(name))
      , total_(total)
      , complete_(complete)
      , to_run_(to_run)
      , terminal_(isatty(STDERR_FILENO) == 1)
      , start_(std::chrono::steady_clock::now())
  {
    redraw();
  }

  // A stopped point does not count as done; a failed one does (it will not run again this session).
  void point_ended(const std::string& label, PointEnd end, const std::string& log)
  {
    finished_ += end == PointEnd::stopped ? 0 : 1;
    const std::string outcome = end == PointEnd::done     ? "done"
                                : end == PointEnd::failed ? "FAILED, see " + log
                                                          : "stopped, to be redone by --resume";
    if (terminal_) {
      if (end != PointEnd::done)
        fmt::print(stderr, "\r\033[K  {}: {}\n", label, outcome);
      redraw();
    } else {
      fmt::print(stderr, "  {} ({}: {})\n", figures(), label, outcome);
    }
  }

  // Terminal: keeps the elapsed time ticking, at most once a second.
  void tick()
  {
    if (terminal_ && std::chrono::steady_clock::now() - last_draw_ >= std::chrono::seconds(1))
      redraw();
  }

  void close() const
  {
    if (terminal_)
      fmt::print(stderr, "\n");
  }

private:
  double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }
  std::string figures() const
  {
    const double elapsed_s = elapsed();
    const std::string remaining =
        finished_ == 0 ? "remaining time not known yet"
                       : "about " + format_wall_time(elapsed_s / finished_ * (to_run_ - finished_)) + " left";
    return fmt::format("{}/{} points done, elapsed {}, {}", complete_ + finished_, total_, format_wall_time(elapsed_s),
                       remaining);
  }
  void redraw()
  {
    if (!terminal_)
      return;
    fmt::print(stderr, "\r\033[Ksweep {}: {}", name_, figures());
    std::fflush(stderr);
    last_draw_ = std::chrono::steady_clock::now();
  }

  std::string name_;
  std::size_t total_, complete_, to_run_, finished_ = 0;
  bool terminal_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

} // namespace

std::filesystem::path point_dir(const std::filesystem::path& out, std::size_t index)
{
  return out / "points" / fmt::format("{:04d}", index);
}

namespace {

// The keys of the object at `member` of the sweep file, in the order the file writes them (nlohmann::json
// sorts keys); `index` picks an element when `member` is an array of objects.
std::vector<std::string> keys_in_file_order(const nlohmann::ordered_json& document, const char* member,
                                            std::optional<std::size_t> index = std::nullopt)
{
  const nlohmann::ordered_json& node = index ? document.at(member).at(*index) : document.at(member);
  std::vector<std::string> keys;
  for (const auto& item : node.items())
    keys.push_back(item.key());
  return keys;
}

} // namespace

Sweep load_sweep(const std::filesystem::path& file)
{
  const nlohmann::json document = read_json_file(file);
  // Axes and point paths keep the file's order (columns of summary.csv; the last axis varies fastest).
  std::ifstream text(file);
  const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(text);
  JsonReader root(document, "");
  Sweep sweep;
  sweep.name = root.get_string("name", file.stem().string());
  sweep.file = std::filesystem::absolute(file).lexically_normal();
  sweep.config_dir = sweep.file.parent_path();
  nlohmann::json base;
  const nlohmann::json& base_node = root.raw("base");
  if (base_node.is_string()) {
    const std::filesystem::path base_file = sweep.config_dir / base_node.get<std::string>();
    base = read_json_file(base_file);
    sweep.config_dir = base_file.parent_path();
  } else if (base_node.is_object()) {
    base = base_node;
  } else {
    root.fail("base", base_node, "a config object or the path of a config file");
  }
  if (!root.has("axes") && !root.has("points"))
    throw ConfigError("axes", "nothing (neither \"axes\" nor \"points\" is given)",
                      "\"axes\" (config paths to arrays of values), \"points\" (an array of objects of config "
                      "paths to values), or both");

  if (root.has("axes")) {
    const nlohmann::json& axes = root.raw("axes");
    if (!axes.is_object() || axes.empty())
      root.fail("axes", axes, "an object of config paths to non-empty arrays of values");
    for (const std::string& path : keys_in_file_order(ordered, "axes")) {
      const nlohmann::json& values = axes.at(path);
      if (!is_config_path(path))
        throw ConfigError("axes." + path, describe_json(values), "a config path (keys joined by single dots)");
      if (!values.is_array() || values.empty())
        throw ConfigError("axes." + path, describe_json(values), "a non-empty array of values");
      sweep.axes.push_back({path, std::vector<nlohmann::json>(values.begin(), values.end())});
    }
  }

  // Explicit points: objects of config paths to values; their paths become the first coordinate columns.
  std::vector<nlohmann::json> listed;
  std::vector<std::string> listed_paths; // in order of first appearance
  if (root.has("points")) {
    const nlohmann::json& points = root.raw("points");
    if (!points.is_array() || points.empty())
      root.fail("points", points, "a non-empty array of objects of config paths to values");
    for (std::size_t e = 0; e < points.size(); ++e) {
      const nlohmann::json& point = points[e];
      if (!point.is_object() || point.empty())
        throw ConfigError(fmt::format("points[{}]", e), describe_json(point),
                          "a non-empty object of config paths to values");
      for (const std::string& path : keys_in_file_order(ordered, "points", e)) {
        const nlohmann::json& value = point.at(path);
        const std::string where = fmt::format("points[{}].{}", e, path);
        if (!is_config_path(path) || path.front() == '@')
          throw ConfigError(where, describe_json(value),
                            "a config path (keys joined by single dots; \"@\" variants belong to axes)");
        if (axes_contain(sweep.axes, path))
          throw ConfigError(where, describe_json(value), "a path that is not also an axis (it is in \"axes\")");
        if (std::find(listed_paths.begin(), listed_paths.end(), path) == listed_paths.end())
          listed_paths.push_back(path);
      }
      listed.push_back(point);
    }
  }
  root.finish();
  sweep.columns.assign(listed_paths.begin(), listed_paths.end());
  for (const auto& axis : sweep.axes)
    sweep.columns.push_back(axis.path);
  if (listed.empty())
    listed.push_back(nlohmann::json::object()); // the axes alone

  // Every listed point with the cartesian product of the axes, the last axis varying fastest.
  for (std::size_t e = 0; e < listed.size(); ++e) {
    std::vector<std::size_t> at(sweep.axes.size(), 0);
    while (true) {
      SweepPoint point;
      point.config = base;
      for (const auto& [path, value] : listed[e].items())
        set_path(point.config, path, value);
      for (const std::string& path : listed_paths)
        point.values.push_back(value_at(point.config, path));
      for (std::size_t a = 0; a < sweep.axes.size(); ++a) {
        const nlohmann::json& value = sweep.axes[a].values[at[a]];
        point.values.push_back(value);
        if (sweep.axes[a].path.front() != '@') {
          set_path(point.config, sweep.axes[a].path, value);
          continue;
        }
        // A variant axis: each value is a set of config paths and values applied together.
        if (!value.is_object())
          throw ConfigError(fmt::format("axes.{}[{}]", sweep.axes[a].path, at[a]), describe_json(value),
                            "an object of config paths to values (a variant axis starts with @)");
        for (const auto& [path, v] : value.items()) {
          if (!is_config_path(path))
            throw ConfigError(fmt::format("axes.{}[{}].{}", sweep.axes[a].path, at[a], path), describe_json(v),
                              "a config path (keys joined by single dots)");
          set_path(point.config, path, v);
        }
      }
      point.label = listed_paths.empty() ? "" : fmt::format("points[{}]", e);
      for (std::size_t c = 0; c < sweep.columns.size(); ++c)
        if (!point.values[c].is_null()) // a path this point does not set, nor the base
          point.label +=
              fmt::format("{}{}={}", point.label.empty() ? "" : " ", sweep.columns[c], value_text(point.values[c]));
      auto at_point = [&](const ConfigError& e) {
        return ConfigError(fmt::format("[point {}] {}", point.label, e.path()), e.value(), e.expected());
      };
      try {
        const ExperimentConfig config = parse_config(point.config, sweep.config_dir);
        point.memory_bytes = estimate_memory(config).bytes;
        try {
          check_memory(config);
        } catch (const ConfigError& e) {
          point.too_large_here = at_point(e);
        }
      } catch (const ConfigError& e) {
        throw at_point(e);
      }
      sweep.points.push_back(std::move(point));
      std::size_t a = sweep.axes.size();
      while (a > 0 && ++at[a - 1] == sweep.axes[a - 1].values.size())
        at[--a] = 0;
      if (a == 0)
        break;
    }
  }
  return sweep;
}

SweepOutcome run_sweep(const Sweep& sweep, const SweepOptions& options)
{
  // Before anything is written: every point to run must fit this machine (a complete one is not run again).
  for (std::size_t i : selected_points(sweep, options.only))
    if (sweep.points[i].too_large_here && !(options.resume && point_complete(point_dir(options.out, i))))
      throw *sweep.points[i].too_large_here;
  const std::vector<std::size_t> todo = prepare_points(sweep, options);
  // With --only, the selected points stand for the sweep in the counts.
  const std::size_t total = options.only.empty() ? sweep.points.size() : selected_points(sweep, options.only).size();
  const std::size_t complete = total - todo.size();
  fmt::print(stderr, "sweep {}: {} points{}, {} complete already, {} to run, {} at a time\n", sweep.name, total,
             options.only.empty() ? "" : fmt::format(" selected by --only (of {})", sweep.points.size()), complete,
             todo.size(), options.jobs);

  // Points start in order while a job slot is free and the running points' memory estimates leave room.
  const double memory_budget = 0.9 * physical_memory_bytes();
  double memory_in_use = 0;
  const StopSignals stop_signals;
  Progress progress(sweep.name, total, complete, todo.size());
  std::map<pid_t, std::size_t> running;
  std::size_t next = 0;
  SweepOutcome outcome;
  auto stopping_since = std::chrono::steady_clock::time_point();
  bool killed = false;
  while (true) {
    while (!stop_requested && next < todo.size() && static_cast<int>(running.size()) < options.jobs &&
           (running.empty() || memory_in_use + sweep.points[todo[next]].memory_bytes <= memory_budget)) {
      const std::size_t i = todo[next++];
      running[start_point(options, std::filesystem::absolute(point_dir(options.out, i)), sweep.config_dir)] = i;
      memory_in_use += sweep.points[i].memory_bytes;
    }
    if (running.empty())
      break;
    if (stop_requested && !outcome.interrupted) {
      // Stop: terminate the running points (SIGKILL if they linger); their folders stay incomplete.
      outcome.interrupted = true;
      stopping_since = std::chrono::steady_clock::now();
      for (const auto& [pid, i] : running)
        kill(pid, SIGTERM);
    }
    if (outcome.interrupted && !killed &&
        std::chrono::steady_clock::now() - stopping_since > std::chrono::seconds(10)) {
      killed = true;
      for (const auto& [pid, i] : running)
        kill(pid, SIGKILL);
    }

    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid == 0 || (pid < 0 && errno == EINTR)) {
      progress.tick();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    if (pid < 0)
      throw std::runtime_error("sweep: lost track of the running points");
    const std::size_t i = running.at(pid);
    running.erase(pid);
    memory_in_use -= sweep.points[i].memory_bytes;
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && point_complete(point_dir(options.out, i));
    const PointEnd end = ok ? PointEnd::done : outcome.interrupted ? PointEnd::stopped : PointEnd::failed;
    progress.point_ended(sweep.points[i].label, end, (point_dir(options.out, i) / "run.log").string());
    outcome.failed += end == PointEnd::failed ? 1 : 0;
  }
  progress.close();
  write_summary(sweep, options.out);
  return outcome;
}

std::size_t emit_slurm(const Sweep& sweep, const SweepOptions& options, int chunk)
{
  const std::vector<std::size_t> todo = prepare_points(sweep, options);
  if (todo.empty())
    return 0;
  const std::filesystem::path out = std::filesystem::canonical(options.out);
  std::filesystem::create_directories(out / "slurm");
  const std::size_t tasks = (todo.size() + chunk - 1) / chunk;
  double largest_memory = 0;
  std::string points;
  for (std::size_t i : todo) {
    largest_memory = std::max(largest_memory, sweep.points[i].memory_bytes);
    points += fmt::format("{}{:04d}", points.empty() ? "" : " ", i);
  }
  // A task's memory request: the largest point estimate plus room for the process itself, in MiB.
  const long memory_mib = std::lround(std::ceil(largest_memory / (1 << 20))) + 256;

  const std::string array_script = fmt::format(
      R"(#!/bin/bash
# Slurm job array of sweep "{name}", written by `sparsim sweep --emit-slurm`.
# Task t runs points t*{chunk} .. t*{chunk}+{last} of the list below, each as `sparsim run` into its point
# folder (its output in run.log there), as the local sweep does. After the array, gather.sbatch rebuilds
# summary.csv from the complete points. Options given to sbatch override the #SBATCH lines below.
#SBATCH --job-name=sparsim-{name}
#SBATCH --array=0-{last_task}
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=1
#SBATCH --mem={memory_mib}M
#SBATCH --output={out}/slurm/task-%A_%a.out
set -u
sparsim={sparsim}
points_dir={points_dir}
relative_to={relative_to}
points=({points})
chunk={chunk}
status=0
first=$((SLURM_ARRAY_TASK_ID * chunk))
for ((i = first; i < first + chunk && i < ${{#points[@]}}; ++i)); do
  dir="$points_dir/${{points[i]}}"
  echo "point ${{points[i]}}"
  "$sparsim" run "$dir/config.json" --out "$dir" --relative-to "$relative_to" \
    --threads "${{SLURM_CPUS_PER_TASK:-1}}" > "$dir/run.log" 2>&1 || status=1
done
exit $status
)",
      fmt::arg("name", sweep.name), fmt::arg("chunk", chunk), fmt::arg("last", chunk - 1),
      fmt::arg("last_task", tasks - 1), fmt::arg("memory_mib", memory_mib), fmt::arg("out", out.string()),
      fmt::arg("sparsim", shell_quote(options.executable)),
      fmt::arg("points_dir", shell_quote((out / "points").string())),
      fmt::arg("relative_to", shell_quote(sweep.config_dir.lexically_normal().string())), fmt::arg("points", points));
  const std::string gather_script = fmt::format(
      R"(#!/bin/bash
# Rebuilds summary.csv of sweep "{name}" from its complete points; submit it to run after the array:
#   sbatch --dependency=afterany:ARRAY_JOB_ID {out}/gather.sbatch
#SBATCH --job-name=sparsim-{name}-gather
#SBATCH --ntasks=1
#SBATCH --output={out}/slurm/gather-%j.out
exec {sparsim} sweep {file} --out {quoted_out} --gather
)",
      fmt::arg("name", sweep.name), fmt::arg("out", out.string()), fmt::arg("sparsim", shell_quote(options.executable)),
      fmt::arg("file", shell_quote(sweep.file.string())), fmt::arg("quoted_out", shell_quote(out.string())));
  write_file_atomically(out / "sweep.sbatch", array_script);
  write_file_atomically(out / "gather.sbatch", gather_script);
  return todo.size();
}

std::size_t write_summary(const Sweep& sweep, const std::filesystem::path& out)
{
  std::string summary;
  std::string header;
  std::size_t complete = 0;
  for (std::size_t i = 0; i < sweep.points.size(); ++i) {
    const auto dir = point_dir(out, i);
    if (!point_complete(dir))
      continue;
    ++complete;
    std::ifstream results(dir / "results.csv");
    std::string line;
    std::getline(results, line);
    if (header.empty()) {
      header = "point";
      for (const auto& column : sweep.columns)
        header += ",axis:" + column;
      header += "," + line + "\n";
    }
    std::string prefix = std::to_string(i);
    for (const auto& value : sweep.points[i].values)
      prefix += fmt::format(",{}", csv_cell(value));
    while (std::getline(results, line))
      summary += prefix + "," + line + "\n";
  }
  write_file_atomically(out / "summary.csv", header + summary);
  return complete;
}

} // namespace sparsim
