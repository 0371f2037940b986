#include "topologies/builder.hpp"

#include <fmt/format.h>
#include <initializer_list>
#include <stdexcept>
#include <utility>

namespace sparsim {
namespace {

// Formats `value` with the fewest decimals in the largest of `units` (largest first) whose text parses back
// to exactly `value` ("650ns", "4.7GBps"); otherwise in the base unit, where the shortest form round-trips.
template <class Parse>
std::string exact_text(double value, std::initializer_list<std::pair<const char*, double>> units, const char* base_unit,
                       Parse parse)
{
  constexpr int kMaxDecimals = 9;
  for (const auto& [unit, scale] : units) {
    if (value != 0 && value < scale)
      continue;
    for (int decimals = 0; decimals <= kMaxDecimals; ++decimals) {
      std::string text = fmt::format("{:.{}f}{}", value / scale, decimals, unit);
      if (parse(text) == value)
        return text;
    }
  }
  return fmt::format("{}{}", value, base_unit);
}

} // namespace

LinkSpec read_link_spec(JsonReader& reader)
{
  LinkSpec spec;
  spec.bandwidth = reader.get_bandwidth("bandwidth");
  spec.latency = reader.get_duration("latency");
  return spec;
}

nlohmann::json link_spec_json(const LinkSpec& spec)
{
  const std::string bandwidth = exact_text(spec.bandwidth, {{"GBps", 1e9}, {"MBps", 1e6}, {"kBps", 1e3}, {"Bps", 1}},
                                           "Bps", [](const std::string& text) { return parse_bandwidth(text); });
  const std::string latency = exact_text(spec.latency, {{"s", 1}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}}, "s",
                                         [](const std::string& text) { return parse_duration(text); });
  return {{"bandwidth", bandwidth}, {"latency", latency}};
}

std::size_t read_count(JsonReader& reader, std::string_view key, std::size_t max, std::optional<std::int64_t> fallback)
{
  return static_cast<std::size_t>(reader.get_int(key, fallback, 1, static_cast<std::int64_t>(max)));
}

} // namespace sparsim
