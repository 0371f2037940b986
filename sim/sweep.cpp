#include "sim/sweep.hpp"

#include "sim/config.hpp"
#include "sim/memory.hpp"
#include "sim/results.hpp"

#include <chrono>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace sparsim {
namespace {

// Sets `value` at a dotted path inside `config`, creating objects on the way.
void set_path(nlohmann::json& config, const std::string& path, const nlohmann::json& value)
{
  nlohmann::json* node = &config;
  std::stringstream parts(path);
  std::string key;
  std::vector<std::string> keys;
  while (std::getline(parts, key, '.'))
    keys.push_back(key);
  for (std::size_t i = 0; i + 1 < keys.size(); ++i) {
    if (!node->contains(keys[i]) || !(*node)[keys[i]].is_object())
      (*node)[keys[i]] = nlohmann::json::object();
    node = &(*node)[keys[i]];
  }
  (*node)[keys.back()] = value;
}

// An axis value as text: strings as they are, variants as "path=value;path=value", others as JSON.
std::string value_text(const nlohmann::json& value)
{
  if (value.is_string())
    return value.get<std::string>();
  if (!value.is_object())
    return value.dump();
  std::string text;
  for (const auto& [path, v] : value.items())
    text += (text.empty() ? "" : ";") + path + "=" + value_text(v);
  return text;
}

std::string point_label(const Sweep& sweep, const SweepPoint& point)
{
  std::string label;
  for (std::size_t a = 0; a < sweep.axes.size(); ++a)
    label += fmt::format("{}{}={}", a ? " " : "", sweep.axes[a].path, value_text(point.values[a]));
  return label;
}

std::filesystem::path point_dir(const std::filesystem::path& out, std::size_t index)
{
  return out / "points" / fmt::format("{:04d}", index);
}

bool point_complete(const std::filesystem::path& dir) { return std::filesystem::exists(dir / "manifest.json"); }

// Starts `sparsim run` on one point, with relative paths in its config resolved against the sweep's config
// folder; its output goes to the point's run.log.
pid_t start_point(const SweepOptions& options, const std::filesystem::path& dir,
                  const std::filesystem::path& config_dir)
{
  const std::string relative_to = std::filesystem::absolute(config_dir).string();
  const std::string config = (dir / "config.json").string();
  const std::string out = dir.string();
  const std::string log = (dir / "run.log").string();
  const pid_t pid = fork();
  if (pid == 0) {
    std::FILE* f = std::freopen(log.c_str(), "w", stdout);
    if (!f || dup2(fileno(stdout), STDERR_FILENO) < 0)
      _exit(127);
    execl(options.executable.c_str(), options.executable.c_str(), "run", config.c_str(), "--out", out.c_str(),
          "--relative-to", relative_to.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  if (pid < 0)
    throw std::runtime_error("sweep: cannot start a process");
  return pid;
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

}  // namespace

Sweep load_sweep(const std::filesystem::path& file)
{
  const nlohmann::json document = read_json_file(file);
  JsonReader root(document, "");
  Sweep sweep;
  sweep.name = root.get_string("name", file.stem().string());
  sweep.config_dir = file.parent_path();
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
  const nlohmann::json& axes = root.raw("axes");
  if (!axes.is_object() || axes.empty())
    root.fail("axes", axes, "an object of config paths to non-empty arrays of values");
  for (const auto& [path, values] : axes.items()) {
    if (!values.is_array() || values.empty())
      throw ConfigError("axes." + path, describe_json(values), "a non-empty array of values");
    sweep.axes.push_back({path, std::vector<nlohmann::json>(values.begin(), values.end())});
  }
  root.finish();

  // The cartesian product, the last axis varying fastest.
  std::vector<std::size_t> at(sweep.axes.size(), 0);
  while (true) {
    SweepPoint point;
    point.config = base;
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
      for (const auto& [path, v] : value.items())
        set_path(point.config, path, v);
    }
    try {
      check_memory(parse_config(point.config, sweep.config_dir));
    } catch (const ConfigError& e) {
      throw ConfigError(fmt::format("[point {}] {}", point_label(sweep, point), e.path()), e.value(), e.expected());
    }
    sweep.points.push_back(std::move(point));
    std::size_t a = sweep.axes.size();
    while (a > 0 && ++at[a - 1] == sweep.axes[a - 1].values.size())
      at[--a] = 0;
    if (a == 0)
      break;
  }
  return sweep;
}

int run_sweep(const Sweep& sweep, const SweepOptions& options)
{
  std::filesystem::create_directories(options.out / "points");
  std::vector<std::size_t> todo;
  for (std::size_t i = 0; i < sweep.points.size(); ++i) {
    const auto dir = point_dir(options.out, i);
    if (options.resume && point_complete(dir))
      continue;
    // A point without a manifest was never run or was killed half-way: start it afresh.
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    nlohmann::json config = sweep.points[i].config;
    write_file_atomically(dir / "config.json", config.dump(2) + "\n");
    todo.push_back(i);
  }
  const std::size_t skipped = sweep.points.size() - todo.size();
  fmt::print(stderr, "sweep {}: {} points, {} complete already, {} to run, {} at a time\n", sweep.name,
             sweep.points.size(), skipped, todo.size(), options.jobs);

  const auto start = std::chrono::steady_clock::now();
  std::map<pid_t, std::size_t> running;
  std::size_t next = 0, done = 0;
  int failures = 0;
  while (next < todo.size() || !running.empty()) {
    while (next < todo.size() && static_cast<int>(running.size()) < options.jobs) {
      const std::size_t i = todo[next++];
      running[start_point(options, std::filesystem::absolute(point_dir(options.out, i)), sweep.config_dir)] = i;
    }
    int status = 0;
    const pid_t pid = wait(&status);
    if (pid < 0)
      break;
    const std::size_t i = running.at(pid);
    running.erase(pid);
    ++done;
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && point_complete(point_dir(options.out, i));
    failures += ok ? 0 : 1;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double remaining = elapsed / done * (todo.size() - done);
    fmt::print(stderr, "  [{}/{}] {}: {} (elapsed {:.0f} s, about {:.0f} s left)\n", done + skipped,
               sweep.points.size(), point_label(sweep, sweep.points[i]),
               ok ? "done" : fmt::format("FAILED, see {}", (point_dir(options.out, i) / "run.log").string()), elapsed,
               remaining);
  }
  write_summary(sweep, options.out);
  return failures;
}

void write_summary(const Sweep& sweep, const std::filesystem::path& out)
{
  std::string summary;
  std::string header;
  for (std::size_t i = 0; i < sweep.points.size(); ++i) {
    const auto dir = point_dir(out, i);
    if (!point_complete(dir))
      continue;
    std::ifstream results(dir / "results.csv");
    std::string line;
    std::getline(results, line);
    if (header.empty()) {
      header = "point";
      for (const auto& axis : sweep.axes)
        header += ",axis:" + axis.path;
      header += "," + line + "\n";
    }
    std::string prefix = std::to_string(i);
    for (const auto& value : sweep.points[i].values)
      prefix += "," + csv_cell(value);
    while (std::getline(results, line))
      summary += prefix + "," + line + "\n";
  }
  write_file_atomically(out / "summary.csv", header + summary);
}

}  // namespace sparsim
