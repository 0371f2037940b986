#include "sim/base/units.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <fmt/format.h>
#include <utility>

namespace sparsim {
namespace {

// Split "12.5 GBps" into a finite non-negative number and its unit suffix.
std::optional<std::pair<double, std::string_view>> split_number_and_unit(std::string_view text)
{
  std::size_t pos = 0;
  while (pos < text.size() && (std::isdigit(static_cast<unsigned char>(text[pos])) || text[pos] == '.' ||
                               text[pos] == 'e' || text[pos] == 'E' || text[pos] == '+' || text[pos] == '-')) {
    // An 'e' followed by a letter starts the unit, not an exponent ("1e" is never a number here).
    if ((text[pos] == 'e' || text[pos] == 'E') &&
        (pos + 1 >= text.size() ||
         !(std::isdigit(static_cast<unsigned char>(text[pos + 1])) || text[pos + 1] == '-' || text[pos + 1] == '+')))
      break;
    ++pos;
  }
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + pos, value);
  if (ec != std::errc() || end != text.data() + pos || pos == 0 || !std::isfinite(value) || value < 0)
    return std::nullopt;
  std::string_view unit = text.substr(pos);
  if (!unit.empty() && unit.front() == ' ')
    unit.remove_prefix(1);
  return std::make_pair(value, unit);
}

// The number of `text` times the scale of its unit in `table` (nothing for a malformed number or an
// unknown unit).
template <std::size_t N>
std::optional<double> parse_scaled(std::string_view text, const std::pair<std::string_view, double> (&table)[N])
{
  const auto parsed = split_number_and_unit(text);
  if (!parsed)
    return std::nullopt;
  for (const auto& [name, scale] : table)
    if (parsed->second == name)
      return parsed->first * scale;
  return std::nullopt;
}

} // namespace

std::optional<Seconds> parse_duration(std::string_view text)
{
  static constexpr std::pair<std::string_view, double> units[] = {
      {"h", 3600.0}, {"min", 60.0}, {"s", 1.0}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}, {"ps", 1e-12}};
  return parse_scaled(text, units);
}

std::optional<BytesPerSecond> parse_bandwidth(std::string_view text)
{
  static constexpr std::pair<std::string_view, double> units[] = {
      {"Bps", 1.0},      {"kBps", 1e3},     {"KBps", 1e3},        {"MBps", 1e6},           {"GBps", 1e9},
      {"TBps", 1e12},    {"KiBps", 1024.0}, {"MiBps", 1048576.0}, {"GiBps", 1073741824.0}, {"TiBps", 1099511627776.0},
      {"bps", 0.125},    {"kbps", 1e3 / 8}, {"Kbps", 1e3 / 8},    {"Mbps", 1e6 / 8},       {"Gbps", 1e9 / 8},
      {"Tbps", 1e12 / 8}};
  const auto bandwidth = parse_scaled(text, units);
  // Zero, and numbers that overflow (or vanish) once scaled by the unit, are no bandwidth.
  if (!bandwidth || !std::isnormal(*bandwidth))
    return std::nullopt;
  return bandwidth;
}

std::optional<Bytes> parse_bytes(std::string_view text)
{
  static constexpr std::pair<std::string_view, double> units[] = {
      {"B", 1.0},   {"kB", 1e3},     {"KB", 1e3},        {"MB", 1e6},           {"GB", 1e9},
      {"TB", 1e12}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
  const auto bytes = parse_scaled(text, units);
  if (!bytes || *bytes != std::floor(*bytes) || *bytes > 1.8e19)
    return std::nullopt;
  return static_cast<Bytes>(*bytes);
}

std::string format_duration(Seconds s)
{
  double a = std::fabs(s);
  if (a >= 1.0 || a == 0.0)
    return fmt::format("{:.3f}s", s);
  if (a >= 1e-3)
    return fmt::format("{:.3f}ms", s * 1e3);
  if (a >= 1e-6)
    return fmt::format("{:.3f}us", s * 1e6);
  return fmt::format("{:.3f}ns", s * 1e9);
}

std::string format_wall_time(double seconds)
{
  const long s = std::lround(seconds);
  if (s < 60)
    return fmt::format("{}s", s);
  if (s < 3600)
    return fmt::format("{}m{:02d}s", s / 60, s % 60);
  return fmt::format("{}h{:02d}m", s / 3600, s % 3600 / 60);
}

std::string format_bandwidth(BytesPerSecond b) { return fmt::format("{:.3g}GB/s", b / 1e9); }

std::string format_bytes(double bytes)
{
  if (bytes >= 1073741824.0)
    return fmt::format("{:.2f}GiB", bytes / 1073741824.0);
  if (bytes >= 1048576.0)
    return fmt::format("{:.2f}MiB", bytes / 1048576.0);
  if (bytes >= 1024.0)
    return fmt::format("{:.2f}KiB", bytes / 1024.0);
  return fmt::format("{:.0f}B", bytes);
}

} // namespace sparsim
