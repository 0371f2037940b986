#include "sim/gradients/random_streams.hpp"

namespace sparsim {
namespace {

// The 256-layer ziggurat of exp(-x): the base layer's edge r and the common area v = (r + 1) exp(-r) of every
// layer (the base layer's rectangle plus the tail beyond r). r is the root of the layer recursion ending at
// x_256 = 0 (Marsaglia and Tsang, 2000).
constexpr double kEdge = 7.69711747013104972;
constexpr double kArea = 3.949659822581572e-3;

} // namespace

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
