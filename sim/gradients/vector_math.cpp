#include "sim/gradients/vector_math.hpp"

#include "sim/gradients/vector_math_kernels.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>

namespace sparsim::vector_math {
namespace {

// The widest kernel's width: a tail shorter than this goes through a padded block.
constexpr std::size_t kMaxWidth = 8;

std::size_t width(InstructionSet set)
{
  switch (set) {
  case InstructionSet::sse2:
    return 2;
  case InstructionSet::avx:
    return 4;
  case InstructionSet::avx512:
    return 8;
  }
  return 2;
}

bool supported(InstructionSet set)
{
  switch (set) {
  case InstructionSet::sse2:
    return true;
  case InstructionSet::avx:
    return __builtin_cpu_supports("avx");
  case InstructionSet::avx512:
    return __builtin_cpu_supports("avx512f");
  }
  return false;
}

void check_sizes(std::size_t in, std::size_t out, const char* what)
{
  if (in != out)
    throw std::invalid_argument(std::string("vector_math::") + what + ": input and output sizes differ");
}

// Runs `kernel(in, outs..., count)` over the whole multiples of the width, then the tail through a block padded
// with 1.0 (a value every function takes).
template <class Kernel, std::size_t Outputs>
void run(InstructionSet set, Kernel kernel, std::span<const double> x, std::array<double*, Outputs> outs)
{
  if (!supported(set))
    throw std::invalid_argument("vector_math: instruction set not supported by this CPU");
  const std::size_t whole = x.size() / width(set) * width(set);
  if (whole > 0) {
    if constexpr (Outputs == 1)
      kernel(x.data(), outs[0], whole);
    else
      kernel(x.data(), outs[0], outs[1], whole);
  }
  const std::size_t tail = x.size() - whole;
  if (tail == 0)
    return;
  std::array<double, kMaxWidth> in_block;
  std::array<std::array<double, kMaxWidth>, Outputs> out_blocks{};
  in_block.fill(1.0);
  std::copy(x.begin() + static_cast<std::ptrdiff_t>(whole), x.end(), in_block.begin());
  if constexpr (Outputs == 1)
    kernel(in_block.data(), out_blocks[0].data(), width(set));
  else
    kernel(in_block.data(), out_blocks[0].data(), out_blocks[1].data(), width(set));
  for (std::size_t o = 0; o < Outputs; ++o)
    std::copy_n(out_blocks[o].begin(), tail, outs[o] + whole);
}

} // namespace

InstructionSet widest_available()
{
  static const InstructionSet widest = available().back();
  return widest;
}

std::vector<InstructionSet> available()
{
  std::vector<InstructionSet> sets;
  for (const InstructionSet set : {InstructionSet::sse2, InstructionSet::avx, InstructionSet::avx512})
    if (supported(set))
      sets.push_back(set);
  return sets;
}

bool avx512_loops_supported()
{
  static const bool supported =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  return supported;
}

std::string_view name(InstructionSet set)
{
  switch (set) {
  case InstructionSet::sse2:
    return "SSE2";
  case InstructionSet::avx:
    return "AVX";
  case InstructionSet::avx512:
    return "AVX-512";
  }
  return "?";
}

void log(std::span<const double> x, std::span<double> out, InstructionSet set)
{
  check_sizes(x.size(), out.size(), "log");
  constexpr void (*kernels[])(const double*, double*, std::size_t) = {kernels::log_sse2, kernels::log_avx,
                                                                      kernels::log_avx512};
  run(set, kernels[static_cast<int>(set)], x, std::array{out.data()});
}

void exp(std::span<const double> x, std::span<double> out, InstructionSet set)
{
  check_sizes(x.size(), out.size(), "exp");
  constexpr void (*kernels[])(const double*, double*, std::size_t) = {kernels::exp_sse2, kernels::exp_avx,
                                                                      kernels::exp_avx512};
  run(set, kernels[static_cast<int>(set)], x, std::array{out.data()});
}

void sincospi(std::span<const double> x, std::span<double> sin_out, std::span<double> cos_out, InstructionSet set)
{
  check_sizes(x.size(), sin_out.size(), "sincospi");
  check_sizes(x.size(), cos_out.size(), "sincospi");
  constexpr void (*kernels[])(const double*, double*, double*,
                              std::size_t) = {kernels::sincospi_sse2, kernels::sincospi_avx, kernels::sincospi_avx512};
  run(set, kernels[static_cast<int>(set)], x, std::array{sin_out.data(), cos_out.data()});
}

} // namespace sparsim::vector_math
