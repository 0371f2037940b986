// Reading JSON configs with errors that name the JSON path, the bad value and what was expected.
//
// A JsonReader is a view onto one JSON object at a known path ("topology.links.global"). Each getter
// consumes a key; finish() then rejects every key nobody asked for, so a typo never passes silently.
// Every path that is read is logged in the shared FieldLog, which the docs test compares against
// docs/config.md.
#pragma once

#include "sim/base/units.hpp"

#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace sparsim {

// A bad config: where, what was there, and what was expected. The CLI turns it into exit status 2.
class ConfigError : public std::runtime_error {
public:
  ConfigError(std::string path, std::string value, std::string expected);
  const std::string& path() const { return path_; }
  const std::string& value() const { return value_; }
  const std::string& expected() const { return expected_; }

private:
  std::string path_;
  std::string value_;
  std::string expected_;
};

// The set of field paths a load touched, with array indices folded to "[]" ("sweep.axes[].name").
using FieldLog = std::set<std::string>;

// The config names of an enum class's values, in the order the docs list them: a mode is an enum in the
// code and a string in the config and the manifest, named once here.
template <class E> struct EnumName {
  E value;
  const char* name;
};
template <class E, std::size_t N> using EnumNames = std::array<EnumName<E>, N>;
template <class E, std::size_t N> const char* name_of(E value, const EnumNames<E, N>& names)
{
  for (const auto& entry : names)
    if (entry.value == value)
      return entry.name;
  throw std::logic_error("name_of: an enum value without a name");
}

class JsonReader {
public:
  // `node` must outlive the reader. `path` is "" for the document root.
  JsonReader(const nlohmann::json& node, std::string path, std::shared_ptr<FieldLog> log = nullptr);

  const std::string& path() const { return path_; }
  std::string path_of(std::string_view key) const;
  bool has(std::string_view key) const;

  // Typed getters. With a default the key is optional; without one it is required.
  std::int64_t get_int(std::string_view key, std::optional<std::int64_t> fallback = std::nullopt,
                       std::int64_t min = std::numeric_limits<std::int64_t>::min(),
                       std::int64_t max = std::numeric_limits<std::int64_t>::max());
  double get_number(std::string_view key, std::optional<double> fallback = std::nullopt,
                    double min = -std::numeric_limits<double>::infinity(),
                    double max = std::numeric_limits<double>::infinity(), bool min_exclusive = false);
  bool get_bool(std::string_view key, std::optional<bool> fallback = std::nullopt);
  std::string get_string(std::string_view key, std::optional<std::string> fallback = std::nullopt);
  std::string get_enum(std::string_view key, const std::vector<std::string>& choices,
                       std::optional<std::string> fallback = std::nullopt);
  // The same for an enum class whose values and config names `names` lists (see EnumNames).
  template <class E, std::size_t N>
  E get_enum(std::string_view key, const EnumNames<E, N>& names,
             std::optional<std::type_identity_t<E>> fallback = std::nullopt)
  {
    std::vector<std::string> choices;
    for (const auto& entry : names)
      choices.emplace_back(entry.name);
    std::optional<std::string> fallback_name;
    if (fallback)
      fallback_name = name_of(*fallback, names);
    const std::string chosen = get_enum(key, choices, fallback_name);
    for (const auto& entry : names)
      if (chosen == entry.name)
        return entry.value;
    throw std::logic_error("JsonReader::get_enum: no value named " + chosen);
  }
  Seconds get_duration(std::string_view key, std::optional<std::string> fallback = std::nullopt);
  BytesPerSecond get_bandwidth(std::string_view key, std::optional<std::string> fallback = std::nullopt);
  std::vector<std::int64_t> get_int_list(std::string_view key, std::int64_t min, std::int64_t max);

  // Sub-objects. object() requires the key; optional_object() reads an absent key as {}.
  JsonReader object(std::string_view key);
  JsonReader optional_object(std::string_view key);
  // Elements of an array of objects, each with path "key[i]".
  std::vector<JsonReader> object_list(std::string_view key);

  // The raw node of a key (consumed), for values handed on as they are (e.g. a sweep's base config).
  const nlohmann::json& raw(std::string_view key);

  // Rejects keys that no getter consumed. Call once, after reading everything.
  void finish() const;

  // Throws ConfigError at this reader's path (or at path_of(key) when a key is given).
  [[noreturn]] void fail(std::string_view key, const nlohmann::json& value, std::string expected) const;

private:
  const nlohmann::json* lookup(std::string_view key, bool required);
  const nlohmann::json& node_;
  std::string path_;
  std::shared_ptr<FieldLog> log_;
  std::set<std::string, std::less<>> consumed_;
};

// Short printable form of a JSON value for error messages (strings quoted, long values cut).
std::string describe_json(const nlohmann::json& value);

} // namespace sparsim
