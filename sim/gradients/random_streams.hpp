// Counter-based random streams of the synthetic gradient sources: the bits of counter `index` in the stream
// that starts at `base` (a mix_coordinates value), and the uniforms and normals made from them.
#pragma once

#include "sim/gradients/vector_math.hpp"

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numbers>
#include <span>

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

// Box-Muller's two uniforms from 64 random bits: u1 in (0, 1) from the top 32 (never 0: safe to take the
// logarithm of), u2 in [0, 1) from the bottom 32. The normals are sqrt(-2 log u1) (cos, sin)(2 pi u2).
inline double box_muller_u1(std::uint64_t bits) { return (static_cast<double>(bits >> 32) + 0.5) * 0x1.0p-32; }
inline double box_muller_u2(std::uint64_t bits) { return static_cast<double>(bits & 0xFFFFFFFFull) * 0x1.0p-32; }

// Two independent standard normals from 64 random bits (Box-Muller on two 32-bit uniforms; |z| < 6.8).
inline void normal_pair(std::uint64_t bits, double& first, double& second)
{
  const double u1 = box_muller_u1(bits);
  const double u2 = box_muller_u2(bits);
  const double radius = std::sqrt(-2.0 * std::log(u1));
  const double angle = 2.0 * std::numbers::pi * u2;
  first = radius * std::cos(angle);
  second = radius * std::sin(angle);
}

// The pairs of normal_pair for counters first_counter + j of the stream `base` into first[j] and second[j] (equal
// sizes), with the logarithm, sine and cosine of whole blocks through vector_math (SLEEF: the same bits for
// every instruction set; within 1 ULP of the C library's functions, so the floats made from them nearly always
// equal normal_pair's). For long runs of pairs.
void normal_pairs(std::uint64_t base, std::uint64_t first_counter, std::span<double> first, std::span<double> second,
                  vector_math::InstructionSet set = vector_math::widest_available());

// Standard exponential variates from a counter-based stream by the ziggurat method (Marsaglia and Tsang,
// "The Ziggurat Method for Generating Random Variables", 2000): 256 layers of equal area under exp(-x); about
// 99% of draws take one 64-bit value, one comparison and one multiply (8 bits pick the layer, 53 place the
// point); the rest fall in a layer's wedge (an exact rejection test) or in the tail beyond the base layer
// (exp(-x) is memoryless there). Exact: the draws are Exp(1) to double rounding.
class ExponentialZiggurat {
public:
  ExponentialZiggurat();
  // One Exp(1) draw; `counter` advances by the stream values it used (one on the fast path).
  double draw(std::uint64_t base, std::uint64_t& counter) const
  {
    return draw_from(stream_bits(base, counter++), base, counter);
  }
  // The same from 32 given bits first (8 for the layer, 24 for the point: the draw is resolved to 2^-24 of its
  // layer's width, finer than a float's mantissa), then from the stream if they fall outside the rectangle.
  double draw32(std::uint32_t bits, std::uint64_t base, std::uint64_t& counter) const
  {
    const std::size_t layer = bits & 0xFF;
    const std::uint32_t u = bits >> 8;
    if (u < inside24_[layer])
      return static_cast<double>(u) * width24_[layer];
    // Outside the rectangle: the same point's wedge or tail test (u on the 53-bit scale), a fresh draw if rejected.
    if (const double x = outside(layer, std::uint64_t{u} << 29, base, counter); x >= 0)
      return x;
    return draw(base, counter);
  }

private:
  double draw_from(std::uint64_t bits, std::uint64_t base, std::uint64_t& counter) const
  {
    for (;;) {
      const std::size_t layer = bits & 0xFF;
      const std::uint64_t u = bits >> 11;
      if (u < inside_[layer])
        return static_cast<double>(u) * width_[layer];
      if (const double x = outside(layer, u, base, counter); x >= 0)
        return x;
      bits = stream_bits(base, counter++);
    }
  }
  // A draw outside the rectangle wholly under the curve: the tail (layer 0) or the wedge; -1: rejected.
  double outside(std::size_t layer, std::uint64_t u, std::uint64_t base, std::uint64_t& counter) const;

  std::array<double, 257> x_{};               // layer edges: x_0 = v / f(r), x_1 = r, ..., x_256 = 0
  std::array<std::uint64_t, 256> inside_{};   // 2^53 x_(i+1) / x_i: the part of layer i under the curve
  std::array<double, 256> width_{};           // x_i / 2^53
  std::array<std::uint32_t, 256> inside24_{}; // the same for draw32: 2^24 x_(i+1) / x_i and x_i / 2^24
  std::array<double, 256> width24_{};
};

} // namespace sparsim
