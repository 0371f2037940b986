// Typed units and the one place where unit strings from configs are parsed.
//
// Every physical quantity in sparsim is carried in SI base units (seconds, bytes, bytes per second);
// configs give them as strings with an explicit unit ("1.3us", "5.25GBps") so that a wrong unit is an
// error instead of a silent factor of 1000.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sparsim {

using Seconds = double;
using Bytes = std::uint64_t;
using BytesPerSecond = double;
using RankId = int;

// Parse "1.3us", "2 ms", "0s": units s, ms, us, ns, ps. Returns nullopt when the text is not a duration.
std::optional<Seconds> parse_duration(std::string_view text);
// Parse "5.25GBps", "100Gbps", "1GiBps": byte units B/kB/KB/MB/GB/TB and KiB/MiB/GiB/TiB, or bit units
// bps/kbps/Mbps/Gbps/Tbps, followed by "ps" ("per second"); decimal prefixes are powers of 1000.
std::optional<BytesPerSecond> parse_bandwidth(std::string_view text);
// Parse "8B", "4KiB", "1.5MB" into bytes (must come out a whole number of bytes).
std::optional<Bytes> parse_bytes(std::string_view text);

// Short human forms used in summaries: "1.30us", "5.25GB/s", "1.50MiB".
std::string format_duration(Seconds s);
std::string format_bandwidth(BytesPerSecond b);
std::string format_bytes(double bytes);
// Host wall-clock time for progress lines and estimates: "40s", "1m57s", "2h05m".
std::string format_wall_time(double seconds);

} // namespace sparsim
