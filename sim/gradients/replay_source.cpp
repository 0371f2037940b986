#include "sim/gradients/replay_source.hpp"

#include "sim/gradients/npy.hpp"
#include "sim/gradients/recording_sidecar.hpp"

#include <charconv>
#include <cmath>
#include <fmt/format.h>
#include <functional>
#include <mutex>
#include <optional>
#include <regex>
#include <stdexcept>
#include <utility>

namespace sparsim {
namespace {

std::string in_quotes(const std::string& text) { return "\"" + text + "\""; }

// Throws unless every value is finite, naming the first bad one by its position in `shape`.
void check_finite(std::span<const float> values, const std::vector<std::size_t>& shape, const std::string& origin)
{
  for (std::size_t flat = 0; flat < values.size(); ++flat) {
    if (std::isfinite(values[flat]))
      continue;
    std::vector<std::size_t> position(shape.size());
    std::size_t rest = flat;
    for (std::size_t d = shape.size(); d-- > 0;) {
      position[d] = rest % shape[d];
      rest /= shape[d];
    }
    throw NpyError(origin, fmt::format("the value at {} is {}: replayed gradients must be finite (drop the steps "
                                       "a loss scaler skipped)",
                                       npy_shape_text(position), values[flat]));
  }
}

// The recording's extent and how simulated (rank, iteration) pairs map onto it.
struct ReplayMapping {
  std::string setting; // the config's "file" or "files" value, for messages
  std::size_t iterations = 1;
  std::size_t ranks = 1;
  bool has_iteration_axis = true; // false: the same gradients in every iteration
  bool loop = true;

  std::size_t recorded_iteration(int iteration) const
  {
    const auto it = static_cast<std::size_t>(iteration);
    if (!has_iteration_axis)
      return 0;
    if (loop)
      return it % iterations;
    if (it >= iterations)
      throw std::runtime_error(fmt::format("replayed gradients {}: iteration {} is beyond the {} recorded iterations "
                                           "and gradients.loop is false",
                                           setting, iteration, iterations));
    return it;
  }
  // Rank r replays recorded rank r mod R ("error" mode checked at load time that every rank is recorded).
  std::size_t recorded_rank(RankId rank) const { return static_cast<std::size_t>(rank) % ranks; }
};

// The model behind the recording, when known: its layer table gives the training step compute.training
// "model" charges.
struct ReplayModel {
  std::string setting;             // gradients.model as configured ("" when absent), for to_json
  std::optional<ModelTable> table; // from gradients.model, else from the recording's sidecar
};

class ReplaySource : public GradientSource {
public:
  ReplaySource(ReplayMapping mapping, std::uint64_t n, std::string json_key, std::string rank_mode, ReplayModel model)
      : mapping_(std::move(mapping))
      , n_(n)
      , json_key_(std::move(json_key))
      , rank_mode_(std::move(rank_mode))
      , model_(std::move(model))
  {
  }
  std::string name() const override { return "replay"; }
  nlohmann::json to_json() const override
  {
    nlohmann::json out = {
        {"source", "replay"}, {json_key_, mapping_.setting}, {"loop", mapping_.loop}, {"ranks", rank_mode_}};
    if (!model_.setting.empty())
      out["model"] = model_.setting;
    return out;
  }
  std::optional<TrainingStep> training_step() const override
  {
    if (!model_.table)
      return std::nullopt;
    return model_.table->training_step;
  }
  std::vector<LayerRange> layer_ranges() const override
  {
    return model_.table ? sparsim::layer_ranges(*model_.table) : std::vector<LayerRange>{};
  }
  void generate(RankId rank, int iteration, std::span<float> out) const override
  {
    if (out.size() != n_)
      throw std::logic_error(fmt::format("replay source: asked for {} values, the recording holds {}", out.size(), n_));
    const std::lock_guard lock(mutex_);
    copy_recorded(mapping_.recorded_iteration(iteration), mapping_.recorded_rank(rank), out);
  }
  bool concurrent_generate() const override { return true; } // serialized by mutex_

protected:
  // Writes recorded gradient (iteration, rank) into out; called with mutex_ held.
  virtual void copy_recorded(std::size_t iteration, std::size_t rank, std::span<float> out) const = 0;

  ReplayMapping mapping_;
  std::uint64_t n_;

private:
  std::string json_key_; // "file" or "files"
  std::string rank_mode_;
  ReplayModel model_;
  mutable std::mutex mutex_; // guards the subclasses' caches
};

// "file": one array of shape (I, R, n), (R, n) or (n,), read whole on first use and kept.
class StackReplay final : public ReplaySource {
public:
  StackReplay(ReplayMapping mapping, std::uint64_t n, std::string rank_mode, ReplayModel model,
              std::filesystem::path path)
      : ReplaySource(std::move(mapping), n, "file", std::move(rank_mode), std::move(model))
      , path_(std::move(path))
  {
  }

private:
  void copy_recorded(std::size_t iteration, std::size_t rank, std::span<float> out) const override
  {
    if (!stack_) {
      NpyArray array = read_npy(path_);
      if (array.data.size() != mapping_.iterations * mapping_.ranks * n_)
        throw NpyError(path_.string(), fmt::format("changed since the config was loaded: it now has shape {}",
                                                   npy_shape_text(array.shape)));
      check_finite(array.data, array.shape, path_.string());
      stack_ = std::move(array.data);
    }
    const std::size_t begin = (iteration * mapping_.ranks + rank) * n_;
    std::copy_n(stack_->begin() + static_cast<std::ptrdiff_t>(begin), n_, out.begin());
  }

  std::filesystem::path path_;
  mutable std::optional<std::vector<float>> stack_;
};

// "files": one 1-D file per recorded (iteration, rank), read on demand; the files of the last requested
// recorded iteration are kept (every rank, and the verifier, ask for the same iteration in turn).
class FilesReplay final : public ReplaySource {
public:
  using PathOf = std::function<std::filesystem::path(std::size_t iteration, std::size_t rank)>;
  FilesReplay(ReplayMapping mapping, std::uint64_t n, std::string rank_mode, ReplayModel model, PathOf path_of)
      : ReplaySource(std::move(mapping), n, "files", std::move(rank_mode), std::move(model))
      , path_of_(std::move(path_of))
  {
  }

private:
  void copy_recorded(std::size_t iteration, std::size_t rank, std::span<float> out) const override
  {
    if (iteration != cached_iteration_) {
      cached_.assign(mapping_.ranks, {});
      cached_iteration_ = iteration;
    }
    std::vector<float>& values = cached_[rank];
    if (values.empty()) {
      const std::filesystem::path path = path_of_(iteration, rank);
      NpyArray array = read_npy(path);
      if (array.shape != std::vector<std::size_t>{n_})
        throw NpyError(path.string(), fmt::format("changed since the config was loaded: it now has shape {}, "
                                                  "expected ({},)",
                                                  npy_shape_text(array.shape), n_));
      check_finite(array.data, array.shape, path.string());
      values = std::move(array.data);
    }
    std::copy(values.begin(), values.end(), out.begin());
  }

  PathOf path_of_;
  mutable std::size_t cached_iteration_ = static_cast<std::size_t>(-1);
  mutable std::vector<std::vector<float>> cached_; // [recorded rank]; empty until read
};

// How the config names the recording, for messages and the rank check, and its gradients.model.
struct ReplaySettings {
  std::string key;       // "gradients.file" or "gradients.files"
  std::string ranks_key; // "gradients.ranks"
  std::string loop_key;  // "gradients.loop"
  std::string rank_mode; // "wrap" or "error"
  ReplayModel model;     // the table of gradients.model, if given
};

// With "ranks": "error", every simulated rank must have its own recorded rank.
void check_rank_count(const ReplayMapping& mapping, const ReplaySettings& settings, const GradientContext& context)
{
  if (settings.rank_mode == "error" && mapping.ranks < static_cast<std::size_t>(context.ranks))
    throw ConfigError(settings.ranks_key, in_quotes(settings.rank_mode),
                      fmt::format("\"wrap\", or a recording of at least the config's {} ranks ({} records {})",
                                  context.ranks, in_quotes(mapping.setting), mapping.ranks));
}

// With "loop": false, the recording must hold every iteration the run asks for.
void check_iteration_count(const ReplayMapping& mapping, const ReplaySettings& settings, const GradientContext& context)
{
  if (!mapping.loop && mapping.has_iteration_axis && static_cast<std::size_t>(context.iterations) > mapping.iterations)
    throw ConfigError(settings.loop_key, "false",
                      fmt::format("true, or a recording of at least the config's {} iterations ({} records {})",
                                  context.iterations, in_quotes(mapping.setting), mapping.iterations));
}

std::filesystem::path resolve(const std::filesystem::path& config_dir, const std::string& name)
{
  const std::filesystem::path path(name);
  return path.is_absolute() ? path : config_dir / path;
}

// The header of one recorded file, or a ConfigError at `key` saying why it cannot be used.
NpyHeader header_or_config_error(const std::filesystem::path& path, const std::string& key, const std::string& value)
{
  try {
    return read_npy_header(path);
  } catch (const NpyError& e) {
    throw ConfigError(key, in_quotes(value), fmt::format("a readable .npy file of float gradients ({})", e.what()));
  }
}

std::unique_ptr<GradientSource> make_stack_replay(ReplayMapping mapping, const ReplaySettings& settings,
                                                  const GradientContext& context)
{
  const std::string& key = settings.key;
  const std::filesystem::path path = resolve(context.config_dir, mapping.setting);
  const NpyHeader header = header_or_config_error(path, key, mapping.setting);
  const std::vector<std::size_t>& shape = header.shape;
  const std::string value = fmt::format("{} of shape {}", in_quotes(mapping.setting), npy_shape_text(shape));
  if (shape.back() != context.n)
    throw ConfigError(
        key, value,
        fmt::format("gradients of workload.n = {} values (the last dimension is {})", context.n, shape.back()));
  mapping.has_iteration_axis = shape.size() == 3;
  mapping.iterations = shape.size() == 3 ? shape[0] : 1;
  mapping.ranks = shape.size() >= 2 ? shape[shape.size() - 2] : 1;
  if (mapping.iterations == 0 || mapping.ranks == 0)
    throw ConfigError(key, value,
                      "at least one recorded iteration and rank: shape (iterations, ranks, n), "
                      "(ranks, n) or (n,)");
  check_rank_count(mapping, settings, context);
  check_iteration_count(mapping, settings, context);
  return std::make_unique<StackReplay>(std::move(mapping), context.n, settings.rank_mode, settings.model, path);
}

// A "files" pattern split at its placeholders; substitutes (iteration, rank) into it, and recognises the
// names it makes.
class FilePattern {
public:
  FilePattern(const std::string& pattern, const std::string& key)
  {
    parse(pattern, key);
    // The folder: the text before the first placeholder's path component (up to the last '/' of the pattern
    // without placeholders).
    const std::size_t first = placeholders_.empty() ? pattern.size() : literals_[0].size();
    const std::size_t slash = pattern.rfind('/', first == 0 ? 0 : first - 1);
    folder_ = slash == std::string::npos ? "" : pattern.substr(0, slash + 1);
    const std::string rest = pattern.substr(folder_.size());
    depth_ = static_cast<int>(std::count(rest.begin(), rest.end(), '/'));
    // The names the pattern makes: the literals as they are, each placeholder a number without leading zeros.
    std::string expression;
    for (std::size_t i = 0; i < literals_.size(); ++i) {
      for (const char c : literals_[i]) {
        if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos)
          expression += '\\';
        expression += c;
      }
      if (i < placeholders_.size())
        expression += "(0|[1-9][0-9]*)";
    }
    names_ = std::regex(expression);
  }
  bool has_iteration() const { return has_iteration_; }
  bool has_rank() const { return has_rank_; }
  // The pattern's text up to the folder its placeholders start in ("dumps/" in "dumps/it{iteration}.npy"), and
  // how many folders below that one its files are (0 there).
  const std::string& folder() const { return folder_; }
  int depth() const { return depth_; }

  std::string substitute(std::size_t iteration, std::size_t rank) const
  {
    std::string out = literals_[0];
    for (std::size_t i = 0; i < placeholders_.size(); ++i)
      out += std::to_string(placeholders_[i] == "iteration" ? iteration : rank) + literals_[i + 1];
    return out;
  }
  // The (iteration, rank) whose substitution is `name`, if any (0 for a placeholder the pattern lacks).
  std::optional<std::pair<std::size_t, std::size_t>> match(const std::string& name) const
  {
    std::smatch found;
    if (!std::regex_match(name, found, names_))
      return std::nullopt;
    std::optional<std::size_t> iteration, rank;
    for (std::size_t i = 0; i < placeholders_.size(); ++i) {
      const std::string digits = found[i + 1].str();
      std::size_t value = 0;
      if (std::from_chars(digits.data(), digits.data() + digits.size(), value).ec != std::errc())
        return std::nullopt; // beyond size_t: not a name substitute() makes
      std::optional<std::size_t>& axis = placeholders_[i] == "iteration" ? iteration : rank;
      if (axis && *axis != value)
        return std::nullopt; // a placeholder used twice, with two values
      axis = value;
    }
    return std::pair(iteration.value_or(0), rank.value_or(0));
  }

private:
  void parse(const std::string& pattern, const std::string& key)
  {
    std::size_t pos = 0;
    while (pos < pattern.size()) {
      const std::size_t open = pattern.find_first_of("{}", pos);
      literals_.push_back(pattern.substr(pos, open == std::string::npos ? std::string::npos : open - pos));
      if (open == std::string::npos)
        return;
      const std::size_t close = pattern.find('}', open);
      const std::string name = close == std::string::npos ? "" : pattern.substr(open + 1, close - open - 1);
      if (pattern[open] == '}' || (name != "iteration" && name != "rank"))
        throw ConfigError(key, in_quotes(pattern),
                          "a path pattern whose only braces are the placeholders {iteration} and {rank}");
      placeholders_.push_back(name);
      has_iteration_ = has_iteration_ || name == "iteration";
      has_rank_ = has_rank_ || name == "rank";
      pos = close + 1;
    }
    literals_.emplace_back();
  }

  std::vector<std::string> literals_;     // text around the placeholders: placeholders_.size() + 1 pieces
  std::vector<std::string> placeholders_; // "iteration" or "rank", in order
  bool has_iteration_ = false;
  bool has_rank_ = false;
  std::string folder_;
  int depth_ = 0;
  std::regex names_;
};

// A hole in the recording: a file the pattern names beyond the extent counted from 0 (an iteration at or
// after the first missing one, or such a rank). Lists the pattern's folder, and the folders below it as deep
// as its files are (skipping those it may not read); throws a ConfigError at `key` naming the first such file
// and the missing one before it.
void check_no_hole(const FilePattern& pattern, const ReplayMapping& mapping, const std::string& key,
                   const std::filesystem::path& config_dir)
{
  auto path_of = [&](std::size_t iteration, std::size_t rank) {
    return resolve(config_dir, pattern.substitute(iteration, rank));
  };
  const std::filesystem::path root = pattern.folder().empty() ? config_dir : resolve(config_dir, pattern.folder());
  std::optional<std::pair<std::size_t, std::size_t>> first_beyond;
  try {
    namespace fs = std::filesystem;
    for (auto entry = fs::recursive_directory_iterator(root, fs::directory_options::skip_permission_denied);
         entry != fs::recursive_directory_iterator(); ++entry) {
      if (entry.depth() >= pattern.depth())
        entry.disable_recursion_pending();
      if (entry.depth() != pattern.depth())
        continue;
      const auto found = pattern.match(pattern.folder() + entry->path().lexically_relative(root).generic_string());
      if (found && (found->first >= mapping.iterations || found->second >= mapping.ranks))
        first_beyond = first_beyond ? std::min(*first_beyond, *found) : *found;
    }
  } catch (const std::filesystem::filesystem_error& e) {
    throw ConfigError(
        key, in_quotes(mapping.setting),
        fmt::format("a pattern whose folder can be listed, to find holes in the recording ({})", e.what()));
  }
  if (!first_beyond)
    return;
  const bool iterations = first_beyond->first >= mapping.iterations;
  throw ConfigError(key, in_quotes(mapping.setting),
                    fmt::format("a recording without holes: {} exists, but {} does not ({} are counted from 0 up to "
                                "the first missing one)",
                                path_of(first_beyond->first, first_beyond->second).string(),
                                (iterations ? path_of(mapping.iterations, 0) : path_of(0, mapping.ranks)).string(),
                                iterations ? "iterations" : "ranks"));
}

// The recording's sidecar, when the pattern's folder has one; it must describe the files the pattern names.
std::optional<RecordingSidecar> sidecar_of(const FilePattern& pattern, const std::string& setting,
                                           const std::string& key, const std::filesystem::path& config_dir)
{
  const std::filesystem::path path = resolve(config_dir, pattern.folder()) / kSidecarName;
  if (!std::filesystem::exists(path))
    return std::nullopt;
  RecordingSidecar sidecar = read_recording_sidecar(path);
  const std::string relative = setting.substr(pattern.folder().size());
  if (sidecar.files != relative)
    throw ConfigError(sidecar.json_path("files"), in_quotes(sidecar.files),
                      fmt::format("the file names of {} {} in that folder, {} (a sidecar describes the whole "
                                  "recording in its folder)",
                                  key, in_quotes(setting), in_quotes(relative)));
  return sidecar;
}

// The sidecar's n, ranks and iterations must be those of the files (checked: n values each, ranks and
// iterations as counted).
void check_sidecar_extent(const RecordingSidecar& sidecar, const FilePattern& pattern, const ReplayMapping& mapping,
                          const std::string& key, const GradientContext& context)
{
  const std::string files = in_quotes(mapping.setting);
  if (sidecar.n != context.n)
    throw ConfigError(sidecar.json_path("n"), std::to_string(sidecar.n),
                      fmt::format("the length of the recorded files, workload.n = {}", context.n));
  if (sidecar.ranks != mapping.ranks)
    throw ConfigError(sidecar.json_path("ranks"), std::to_string(sidecar.ranks),
                      fmt::format("the ranks {} {} holds, {} (counted from 0 while {} exists)", key, files,
                                  mapping.ranks, resolve(context.config_dir, pattern.substitute(0, 0)).string()));
  if (sidecar.iterations != mapping.iterations)
    throw ConfigError(sidecar.json_path("iterations"), std::to_string(sidecar.iterations),
                      fmt::format("the iterations {} {} holds, {} ({} is the first one missing)", key, files,
                                  mapping.iterations,
                                  resolve(context.config_dir, pattern.substitute(mapping.iterations, 0)).string()));
}

std::unique_ptr<GradientSource> make_files_replay(ReplayMapping mapping, const ReplaySettings& settings,
                                                  const GradientContext& context)
{
  const std::string& key = settings.key;
  const FilePattern pattern(mapping.setting, key);
  const std::filesystem::path dir = context.config_dir;
  auto path_of = [pattern, dir](std::size_t iteration, std::size_t rank) {
    return resolve(dir, pattern.substitute(iteration, rank));
  };
  // The recording's extent: consecutive files from 0 along each axis; an axis absent from the pattern has one.
  auto count_along = [](bool in_pattern, auto&& path_at) {
    std::size_t count = 0;
    while (std::filesystem::exists(path_at(count))) {
      ++count;
      if (!in_pattern)
        break;
    }
    return count;
  };
  mapping.has_iteration_axis = pattern.has_iteration();
  mapping.iterations = count_along(pattern.has_iteration(), [&](std::size_t i) { return path_of(i, 0); });
  mapping.ranks = count_along(pattern.has_rank(), [&](std::size_t r) { return path_of(0, r); });
  if (mapping.iterations == 0)
    throw ConfigError(
        key, in_quotes(mapping.setting),
        fmt::format("a pattern matching recorded files: the first one, {}, does not exist", path_of(0, 0).string()));
  check_no_hole(pattern, mapping, key, dir);
  const std::optional<RecordingSidecar> sidecar = sidecar_of(pattern, mapping.setting, key, dir);
  for (std::size_t it = 0; it < mapping.iterations; ++it)
    for (std::size_t r = 0; r < mapping.ranks; ++r) {
      const std::filesystem::path path = path_of(it, r);
      if (!std::filesystem::exists(path))
        throw ConfigError(key, in_quotes(mapping.setting),
                          fmt::format("a file for every recorded iteration and rank ({} iterations and {} ranks "
                                      "recorded), but {} is missing",
                                      mapping.iterations, mapping.ranks, path.string()));
      const NpyHeader header = header_or_config_error(path, key, mapping.setting);
      if (header.shape != std::vector<std::size_t>{context.n})
        throw ConfigError(key, in_quotes(mapping.setting),
                          fmt::format("1-D .npy files of workload.n = {} values, but {} has shape {}", context.n,
                                      path.string(), npy_shape_text(header.shape)));
      if (sidecar && npy_dtype_name(header.dtype) != sidecar->dtype)
        throw ConfigError(sidecar->json_path("dtype"), in_quotes(sidecar->dtype),
                          fmt::format("the dtype of the recorded files, but {} holds {}", path.string(),
                                      npy_dtype_name(header.dtype)));
    }
  if (sidecar)
    check_sidecar_extent(*sidecar, pattern, mapping, key, context);
  check_rank_count(mapping, settings, context);
  check_iteration_count(mapping, settings, context);
  // gradients.model gives the layer table, else the sidecar.
  ReplayModel model = settings.model;
  if (!model.table && sidecar)
    model.table = sidecar->model;
  return std::make_unique<FilesReplay>(std::move(mapping), context.n, settings.rank_mode, std::move(model), path_of);
}

} // namespace

std::unique_ptr<GradientSource> make_replay_source(JsonReader& gradients, const GradientContext& context)
{
  const bool has_file = gradients.has("file");
  const bool has_files = gradients.has("files");
  const std::string file = gradients.get_string("file", "");
  const std::string files = gradients.get_string("files", "");
  ReplayMapping mapping;
  mapping.loop = gradients.get_bool("loop", true);
  ReplaySettings settings;
  settings.rank_mode = gradients.get_enum("ranks", {"wrap", "error"}, "wrap");
  settings.ranks_key = gradients.path_of("ranks");
  settings.loop_key = gradients.path_of("loop");
  if (has_file == has_files)
    throw ConfigError(gradients.path(), has_file ? "both \"file\" and \"files\"" : "neither \"file\" nor \"files\"",
                      "one of \"file\" (an array of shape (iterations, ranks, n)) or \"files\" (a pattern such as "
                      "\"it{iteration}_rank{rank}.npy\")");
  settings.key = gradients.path_of(has_file ? "file" : "files");
  mapping.setting = has_file ? file : files;
  if (mapping.setting.empty())
    throw ConfigError(settings.key, "\"\"", "a path");
  // gradients.model: the layer table of the recorded parameters (it must hold n of them).
  settings.model.setting = gradients.get_string("model", "");
  if (gradients.has("model")) {
    try {
      settings.model.table = read_model_table(model_table_path(settings.model.setting, context.config_dir));
    } catch (const ConfigError& e) {
      gradients.fail(
          "model", settings.model.setting,
          fmt::format("\"vgg16\", \"lstm_an4\", \"bert_base\", \"resnet_fmnist\" or a valid layer table file ({})",
                      e.what()));
    }
    if (settings.model.table->total() != context.n)
      gradients.fail("model", settings.model.setting,
                     fmt::format("a layer table of the recorded gradients' workload.n = {} parameters (its layers "
                                 "hold {})",
                                 context.n, settings.model.table->total()));
  }
  return has_file ? make_stack_replay(std::move(mapping), settings, context)
                  : make_files_replay(std::move(mapping), settings, context);
}

} // namespace sparsim
