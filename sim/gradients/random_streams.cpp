#include "sim/gradients/random_streams.hpp"

#include <algorithm>
#include <stdexcept>

namespace sparsim {
namespace {

// The 256-layer ziggurat of exp(-x): the base layer's edge r and the common area v = (r + 1) exp(-r) of every
// layer (the base layer's rectangle plus the tail beyond r). r is the root of the layer recursion ending at
// x_256 = 0 (Marsaglia and Tsang, 2000).
constexpr double kEdge = 7.69711747013104972;
constexpr double kArea = 3.949659822581572e-3;

// normal_pairs over one block of at most kPairBlock pairs: the uniforms, their transcendental functions through
// vector_math, then the radii and the products. Inlined into a portable and an AVX-512 loop over the blocks;
// the arithmetic is exact integer work, exact conversions and correctly rounded square roots and products
// (no fused multiply-add), so both give the same bits.
constexpr std::size_t kPairBlock = 256;

[[gnu::always_inline]] inline void normal_pairs_block(std::uint64_t base, std::uint64_t first_counter, double* first,
                                                      double* second, std::size_t count,
                                                      vector_math::InstructionSet set)
{
  std::array<double, kPairBlock> log_u1, half_turns, sine, cosine; // half_turns: the angle 2 pi u2 in units of pi
  for (std::size_t j = 0; j < count; ++j) {
    const std::uint64_t bits = stream_bits(base, first_counter + j);
    log_u1[j] = box_muller_u1(bits);
    half_turns[j] = 2.0 * box_muller_u2(bits);
  }
  vector_math::log(std::span(log_u1).first(count), std::span(log_u1).first(count), set);
  vector_math::sincospi(std::span(half_turns).first(count), std::span(sine).first(count),
                        std::span(cosine).first(count), set);
  for (std::size_t j = 0; j < count; ++j) {
    const double radius = std::sqrt(-2.0 * log_u1[j]);
    first[j] = radius * cosine[j];
    second[j] = radius * sine[j];
  }
}

void normal_pairs_portable(std::uint64_t base, std::uint64_t first_counter, std::span<double> first,
                           std::span<double> second, vector_math::InstructionSet set)
{
  for (std::size_t begin = 0; begin < first.size(); begin += kPairBlock)
    normal_pairs_block(base, first_counter + begin, first.data() + begin, second.data() + begin,
                       std::min(kPairBlock, first.size() - begin), set);
}

// The same loops vectorized for AVX-512 (64-bit multiplies and square roots in vector registers).
[[gnu::target("avx512f,avx512dq,avx512vl"), gnu::optimize("O3")]] void
normal_pairs_avx512(std::uint64_t base, std::uint64_t first_counter, std::span<double> first, std::span<double> second)
{
  for (std::size_t begin = 0; begin < first.size(); begin += kPairBlock)
    normal_pairs_block(base, first_counter + begin, first.data() + begin, second.data() + begin,
                       std::min(kPairBlock, first.size() - begin), vector_math::InstructionSet::avx512);
}

} // namespace

void normal_pairs(std::uint64_t base, std::uint64_t first_counter, std::span<double> first, std::span<double> second,
                  vector_math::InstructionSet set)
{
  if (first.size() != second.size())
    throw std::invalid_argument("normal_pairs: the two outputs differ in size");
  if (set == vector_math::InstructionSet::avx512 && vector_math::avx512_loops_supported())
    normal_pairs_avx512(base, first_counter, first, second);
  else
    normal_pairs_portable(base, first_counter, first, second, set);
}

ExponentialZiggurat::ExponentialZiggurat()
{
  // x_(i+1) = f^-1(f(x_i) + v / x_i): each layer [0, x_i] x [f(x_i), f(x_(i+1))] has area v.
  x_[0] = kArea / std::exp(-kEdge);
  x_[1] = kEdge;
  for (std::size_t i = 1; i < 255; ++i)
    x_[i + 1] = -std::log(std::exp(-x_[i]) + kArea / x_[i]);
  x_[256] = 0;
  for (std::size_t i = 0; i < 256; ++i) {
    inside_[i] = static_cast<std::uint64_t>(x_[i + 1] / x_[i] * 0x1.0p53);
    width_[i] = x_[i] * 0x1.0p-53;
    inside24_[i] = static_cast<std::uint32_t>(x_[i + 1] / x_[i] * 0x1.0p24);
    width24_[i] = x_[i] * 0x1.0p-24;
  }
}

double ExponentialZiggurat::outside(std::size_t layer, std::uint64_t u, std::uint64_t base,
                                    std::uint64_t& counter) const
{
  if (layer == 0) // beyond r: r plus an Exp(1) draw
    return kEdge - std::log(uniform_open_closed(stream_bits(base, counter++)));
  // The wedge between x_(i+1) and x_i: accept when a uniform height in [f(x_i), f(x_(i+1))] is under f(x).
  const double x = static_cast<double>(u) * width_[layer];
  const double low = std::exp(-x_[layer]), high = std::exp(-x_[layer + 1]);
  const double height = low + uniform01(stream_bits(base, counter++)) * (high - low);
  return height < std::exp(-x) ? x : -1.0;
}

} // namespace sparsim
