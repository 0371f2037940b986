// Counter-based random streams of the synthetic gradient sources: the bits of counter `index` in the stream
// that starts at `base` (a mix_coordinates value), and the uniforms and normals made from them.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>

namespace sparsim {

// splitmix64's finaliser: consecutive counters give independent 64-bit values.
inline std::uint64_t finalise(std::uint64_t x)
{
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline std::uint64_t stream_bits(std::uint64_t base, std::uint64_t index)
{
  return finalise(base + index * 0x9E3779B97F4A7C15ull);
}

// A uniform in [0, 1) from the top 53 bits.
inline double uniform01(std::uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }
// A uniform in (0, 1] from the top 53 bits (safe to take the logarithm of).
inline double uniform_open_closed(std::uint64_t bits) { return static_cast<double>((bits >> 11) + 1) * 0x1.0p-53; }

// Two independent standard normals from 64 random bits (Box-Muller on two 32-bit uniforms; |z| < 6.8).
inline void normal_pair(std::uint64_t bits, double& first, double& second)
{
  const double u1 = (static_cast<double>(bits >> 32) + 0.5) * 0x1.0p-32;
  const double u2 = static_cast<double>(bits & 0xFFFFFFFFull) * 0x1.0p-32;
  const double radius = std::sqrt(-2.0 * std::log(u1));
  const double angle = 2.0 * std::numbers::pi * u2;
  first = radius * std::cos(angle);
  second = radius * std::sin(angle);
}

} // namespace sparsim
