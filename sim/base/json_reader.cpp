#include "sim/base/json_reader.hpp"

#include <cmath>
#include <fmt/format.h>

namespace sparsim {

ConfigError::ConfigError(std::string path, std::string value, std::string expected)
    : std::runtime_error(
          fmt::format("config error at {}: got {}, expected {}", path.empty() ? "(root)" : path, value, expected))
    , path_(std::move(path))
    , value_(std::move(value))
    , expected_(std::move(expected))
{
}

std::string describe_json(const nlohmann::json& value)
{
  std::string text = value.dump();
  if (text.size() > 80)
    text = text.substr(0, 77) + "...";
  return text;
}

namespace {
// "a.b[3].c" -> "a.b[].c": the form logged for the docs test.
std::string fold_indices(const std::string& path)
{
  std::string folded;
  bool in_index = false;
  for (char c : path) {
    if (c == '[') {
      in_index = true;
      folded += "[]";
    } else if (c == ']') {
      in_index = false;
    } else if (!in_index) {
      folded += c;
    }
  }
  return folded;
}
} // namespace

JsonReader::JsonReader(const nlohmann::json& node, std::string path, std::shared_ptr<FieldLog> log)
    : node_(node)
    , path_(std::move(path))
    , log_(std::move(log))
{
  if (!node_.is_object())
    throw ConfigError(path_, describe_json(node_), "a JSON object");
}

std::string JsonReader::path_of(std::string_view key) const
{
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

bool JsonReader::has(std::string_view key) const { return node_.contains(key); }

void JsonReader::fail(std::string_view key, const nlohmann::json& value, std::string expected) const
{
  throw ConfigError(key.empty() ? path_ : path_of(key), describe_json(value), std::move(expected));
}

const nlohmann::json* JsonReader::lookup(std::string_view key, bool required)
{
  if (log_)
    log_->insert(fold_indices(path_of(key)));
  consumed_.emplace(key);
  auto it = node_.find(key);
  if (it == node_.end()) {
    if (required)
      throw ConfigError(path_of(key), "nothing (the field is missing)", "a value: this field is required");
    return nullptr;
  }
  return &*it;
}

std::int64_t JsonReader::get_int(std::string_view key, std::optional<std::int64_t> fallback, std::int64_t min,
                                 std::int64_t max)
{
  const auto* v = lookup(key, !fallback);
  if (!v)
    return *fallback;
  std::string range = fmt::format("an integer in [{}, {}]", min, max);
  if (max == std::numeric_limits<std::int64_t>::max())
    range = fmt::format("an integer >= {}", min);
  if (v->is_number_integer()) {
    // Unsigned values above int64 range come in as unsigned: reject them as out of range.
    if (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(max))
      fail(key, *v, range);
    auto x = v->get<std::int64_t>();
    if (x < min || x > max)
      fail(key, *v, range);
    return x;
  }
  if (v->is_number_float()) {
    double d = v->get<double>();
    if (std::floor(d) == d && d >= static_cast<double>(min) && d <= static_cast<double>(max) && std::fabs(d) < 9e15)
      return static_cast<std::int64_t>(d);
  }
  fail(key, *v, range);
}

double JsonReader::get_number(std::string_view key, std::optional<double> fallback, double min, double max,
                              bool min_exclusive)
{
  const auto* v = lookup(key, !fallback);
  if (!v)
    return *fallback;
  std::string range = fmt::format("a number in {}{}, {}]", min_exclusive ? "(" : "[", min, max);
  if (!v->is_number())
    fail(key, *v, range);
  double x = v->get<double>();
  if (!std::isfinite(x) || x < min || x > max || (min_exclusive && x == min))
    fail(key, *v, range);
  return x;
}

bool JsonReader::get_bool(std::string_view key, std::optional<bool> fallback)
{
  const auto* v = lookup(key, !fallback);
  if (!v)
    return *fallback;
  if (!v->is_boolean())
    fail(key, *v, "true or false");
  return v->get<bool>();
}

std::string JsonReader::get_string(std::string_view key, std::optional<std::string> fallback)
{
  const auto* v = lookup(key, !fallback);
  if (!v)
    return *fallback;
  if (!v->is_string())
    fail(key, *v, "a string");
  return v->get<std::string>();
}

std::string JsonReader::get_enum(std::string_view key, const std::vector<std::string>& choices,
                                 std::optional<std::string> fallback)
{
  std::string expected = "one of";
  for (const auto& c : choices)
    expected += (expected.size() > 6 ? ", \"" : " \"") + c + "\"";
  const auto* v = lookup(key, !fallback);
  if (!v)
    return *fallback;
  if (v->is_string())
    for (const auto& c : choices)
      if (v->get<std::string>() == c)
        return c;
  fail(key, *v, expected);
}

Seconds JsonReader::get_duration(std::string_view key, std::optional<std::string> fallback)
{
  const auto* v = lookup(key, !fallback);
  const std::string text = v ? (v->is_string() ? v->get<std::string>() : std::string()) : *fallback;
  auto parsed = parse_duration(text);
  if (!parsed)
    fail(key, v ? *v : nlohmann::json(text), "a duration with a unit (s, ms, us, ns, ps), e.g. \"1.3us\"");
  return *parsed;
}

BytesPerSecond JsonReader::get_bandwidth(std::string_view key, std::optional<std::string> fallback)
{
  const auto* v = lookup(key, !fallback);
  const std::string text = v ? (v->is_string() ? v->get<std::string>() : std::string()) : *fallback;
  auto parsed = parse_bandwidth(text);
  if (!parsed)
    fail(key, v ? *v : nlohmann::json(text),
         "a positive bandwidth with a unit (Bps, kBps, MBps, GBps, TBps, KiBps.., bps, Mbps, Gbps, Tbps), "
         "e.g. \"5.25GBps\"");
  return *parsed;
}

std::vector<std::int64_t> JsonReader::get_int_list(std::string_view key, std::int64_t min, std::int64_t max)
{
  const auto* v = lookup(key, true);
  std::string expected = fmt::format("a non-empty array of integers in [{}, {}]", min, max);
  if (!v->is_array() || v->empty())
    fail(key, *v, expected);
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < v->size(); ++i) {
    const auto& e = (*v)[i];
    if (!e.is_number_integer() || e.get<std::int64_t>() < min || e.get<std::int64_t>() > max)
      throw ConfigError(fmt::format("{}[{}]", path_of(key), i), describe_json(e), expected);
    out.push_back(e.get<std::int64_t>());
  }
  return out;
}

JsonReader JsonReader::object(std::string_view key)
{
  const auto* v = lookup(key, true);
  if (!v->is_object())
    fail(key, *v, "a JSON object");
  return JsonReader(*v, path_of(key), log_);
}

JsonReader JsonReader::optional_object(std::string_view key)
{
  static const nlohmann::json empty = nlohmann::json::object();
  const auto* v = lookup(key, false);
  if (!v)
    return JsonReader(empty, path_of(key), log_);
  if (!v->is_object())
    fail(key, *v, "a JSON object");
  return JsonReader(*v, path_of(key), log_);
}

std::vector<JsonReader> JsonReader::object_list(std::string_view key)
{
  const auto* v = lookup(key, true);
  if (!v->is_array())
    fail(key, *v, "an array of JSON objects");
  std::vector<JsonReader> out;
  for (std::size_t i = 0; i < v->size(); ++i)
    out.emplace_back((*v)[i], fmt::format("{}[{}]", path_of(key), i), log_);
  return out;
}

const nlohmann::json& JsonReader::raw(std::string_view key) { return *lookup(key, true); }

void JsonReader::finish() const
{
  for (const auto& [key, value] : node_.items())
    if (!consumed_.count(key))
      throw ConfigError(path_of(key), describe_json(value), "no such field here (unknown key; see docs/config.md)");
}

} // namespace sparsim
