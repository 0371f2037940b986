// vector_math: SLEEF's consistent functions give the same bits on every instruction set this CPU has (the
// property that keeps a run's results independent of the machine), stay within 1 ULP of a long-double
// reference, and handle any array length; normal_pairs built on them agrees with the scalar Box-Muller.
#include "sim/gradients/random_streams.hpp"
#include "sim/gradients/vector_math.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>
#include <vector>

using namespace sparsim;
namespace vm = sparsim::vector_math;

namespace {

// Inputs over a function's domain: uniform on [low, high) and log-uniform in magnitude up to 2^exponent_span,
// with the edges.
std::vector<double> inputs(double low, double high, int exponent_span, bool positive, std::uint64_t seed)
{
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<double> uniform(low, high);
  std::uniform_real_distribution<double> exponent(-exponent_span, exponent_span);
  std::vector<double> x;
  for (int i = 0; i < 50000; ++i)
    x.push_back(uniform(random));
  for (int i = 0; i < 50000; ++i) {
    const double magnitude = std::exp2(exponent(random));
    x.push_back(positive || (i % 2 == 0) ? magnitude : -magnitude);
  }
  x.push_back(low);
  x.push_back(std::nextafter(high, low));
  return x;
}

// The distance in units in the last place between a double and a long-double reference rounded to double.
double ulps(double value, long double reference)
{
  const double rounded = static_cast<double>(reference);
  if (value == rounded)
    return 0.0;
  const double ulp = std::nextafter(std::fabs(rounded), INFINITY) - std::fabs(rounded);
  return static_cast<double>(std::fabs(static_cast<long double>(value) - reference) / ulp);
}

std::vector<std::uint64_t> bits_of(const std::vector<double>& values)
{
  std::vector<std::uint64_t> bits;
  for (const double v : values)
    bits.push_back(std::bit_cast<std::uint64_t>(v));
  return bits;
}

} // namespace

TEST(VectorMath, EveryInstructionSetGivesTheSameBits)
{
  const auto sets = vm::available();
  ASSERT_EQ(sets.front(), vm::InstructionSet::sse2);
  if (sets.size() == 1)
    GTEST_SKIP() << "this CPU has only SSE2: nothing to compare";
  const auto log_x = inputs(0x1.0p-33, 1.0, 1000, true, 1);
  const auto exp_x = inputs(-30.0, 30.0, 9, false, 2);
  const auto trig_x = inputs(0.0, 2.0, 60, false, 3);
  std::vector<double> reference_log(log_x.size()), reference_exp(exp_x.size());
  std::vector<double> reference_sin(trig_x.size()), reference_cos(trig_x.size());
  vm::log(log_x, reference_log, vm::InstructionSet::sse2);
  vm::exp(exp_x, reference_exp, vm::InstructionSet::sse2);
  vm::sincospi(trig_x, reference_sin, reference_cos, vm::InstructionSet::sse2);
  for (const auto set : sets) {
    SCOPED_TRACE(std::string(vm::name(set)));
    std::vector<double> log_out(log_x.size()), exp_out(exp_x.size()), sin_out(trig_x.size()), cos_out(trig_x.size());
    vm::log(log_x, log_out, set);
    vm::exp(exp_x, exp_out, set);
    vm::sincospi(trig_x, sin_out, cos_out, set);
    EXPECT_EQ(bits_of(log_out), bits_of(reference_log));
    EXPECT_EQ(bits_of(exp_out), bits_of(reference_exp));
    EXPECT_EQ(bits_of(sin_out), bits_of(reference_sin));
    EXPECT_EQ(bits_of(cos_out), bits_of(reference_cos));
  }
}

TEST(VectorMath, WithinOneUlpOfALongDoubleReference)
{
  const auto log_x = inputs(0x1.0p-33, 1.0, 1000, true, 4);
  const auto exp_x = inputs(-30.0, 30.0, 9, false, 5);
  const auto trig_x = inputs(0.0, 2.0, 0, false, 6);
  std::vector<double> log_out(log_x.size()), exp_out(exp_x.size()), sin_out(trig_x.size()), cos_out(trig_x.size());
  vm::log(log_x, log_out);
  vm::exp(exp_x, exp_out);
  vm::sincospi(trig_x, sin_out, cos_out);
  double worst_log = 0, worst_exp = 0, worst_sin = 0, worst_cos = 0;
  for (std::size_t i = 0; i < log_x.size(); ++i)
    worst_log = std::max(worst_log, ulps(log_out[i], std::log(static_cast<long double>(log_x[i]))));
  for (std::size_t i = 0; i < exp_x.size(); ++i)
    worst_exp = std::max(worst_exp, ulps(exp_out[i], std::exp(static_cast<long double>(exp_x[i]))));
  for (std::size_t i = 0; i < trig_x.size(); ++i) {
    // The long-double angle pi x is off by up to about 2^-64 x 2 pi, an absolute error that reaches 1.5 ULP of a
    // result near 1e-3: the reference is good to 0.03 ULP only where the result is above 0.1.
    const long double angle = std::numbers::pi_v<long double> * trig_x[i];
    if (std::fabs(std::sin(angle)) > 0.1L)
      worst_sin = std::max(worst_sin, ulps(sin_out[i], std::sin(angle)));
    if (std::fabs(std::cos(angle)) > 0.1L)
      worst_cos = std::max(worst_cos, ulps(cos_out[i], std::cos(angle)));
  }
  EXPECT_LE(worst_log, 1.0);
  EXPECT_LE(worst_exp, 1.0);
  EXPECT_LE(worst_sin, 1.0);
  EXPECT_LE(worst_cos, 1.0);
}

TEST(VectorMath, AnyLengthGivesTheSameValuesAsOneLongCall)
{
  const auto x = inputs(0.0, 2.0, 0, false, 7);
  std::vector<double> whole_sin(x.size()), whole_cos(x.size()), whole_exp(x.size());
  vm::sincospi(x, whole_sin, whole_cos);
  vm::exp(x, whole_exp);
  for (const auto set : vm::available())
    for (const std::size_t length : {0, 1, 2, 3, 5, 7, 8, 9, 15, 17}) {
      SCOPED_TRACE(testing::Message() << vm::name(set) << ", length " << length);
      const std::span<const double> part(x.data() + 11, length);
      std::vector<double> s(length), c(length), e(length);
      vm::sincospi(part, s, c, set);
      vm::exp(part, e, set);
      for (std::size_t i = 0; i < length; ++i) {
        EXPECT_EQ(std::bit_cast<std::uint64_t>(s[i]), std::bit_cast<std::uint64_t>(whole_sin[11 + i]));
        EXPECT_EQ(std::bit_cast<std::uint64_t>(c[i]), std::bit_cast<std::uint64_t>(whole_cos[11 + i]));
        EXPECT_EQ(std::bit_cast<std::uint64_t>(e[i]), std::bit_cast<std::uint64_t>(whole_exp[11 + i]));
      }
    }
}

TEST(VectorMath, InPlaceAndSizeChecks)
{
  std::vector<double> x{0.5, 1.0, 2.0};
  const std::vector<double> copy = x;
  vm::log(x, x);
  for (std::size_t i = 0; i < x.size(); ++i)
    EXPECT_NEAR(x[i], std::log(copy[i]), 1e-15);
  std::vector<double> short_out(2);
  EXPECT_THROW(vm::exp(copy, short_out), std::invalid_argument);
}

TEST(NormalPairs, EveryInstructionSetGivesTheSameBits)
{
  const std::size_t count = 100003; // not a multiple of any block or width
  std::vector<double> reference_first(count), reference_second(count);
  normal_pairs(0xfeedull, 12345, reference_first, reference_second, vm::InstructionSet::sse2);
  for (const auto set : vm::available()) {
    SCOPED_TRACE(std::string(vm::name(set)));
    std::vector<double> first(count), second(count);
    normal_pairs(0xfeedull, 12345, first, second, set);
    EXPECT_EQ(bits_of(first), bits_of(reference_first));
    EXPECT_EQ(bits_of(second), bits_of(reference_second));
  }
}

TEST(NormalPairs, AgreeWithTheScalarBoxMullerToRounding)
{
  // normal_pair uses the C library's log, cos and sin, normal_pairs SLEEF's: both within 1 ULP. normal_pair's
  // angle 2 pi u2 is rounded before its cosine (sincospi takes 2 u2 exactly), an absolute error up to about
  // 4.4e-16 x 6.8 in the normal; so the doubles agree within 1e-14 absolute, and the floats made from them
  // differ only where a double falls next to a float's rounding boundary (about 2 in 10^8 values measured;
  // docs/benchmarks.md).
  const std::size_t count = 1 << 20;
  std::vector<double> first(count), second(count);
  normal_pairs(0xabcdefull, 7, first, second);
  double worst = 0;
  std::size_t floats_differing = 0;
  for (std::size_t i = 0; i < count; ++i) {
    double a = 0, b = 0;
    normal_pair(stream_bits(0xabcdefull, 7 + i), a, b);
    worst = std::max({worst, std::fabs(first[i] - a), std::fabs(second[i] - b)});
    floats_differing += (static_cast<float>(first[i]) != static_cast<float>(a)) +
                        (static_cast<float>(second[i]) != static_cast<float>(b));
  }
  EXPECT_LT(worst, 1e-14); // absolute: the normals are below 6.8
  EXPECT_LE(floats_differing, 4u);
}
