// Tests of the top-k kernels (sim/data/topk.hpp): select_topk and kth_largest_magnitude against the std::nth_element
// reference (itself checked against a full sort), select_above and count_above against plain loops, on random,
// heavy-tailed and adversarial inputs. Selections are compared exactly: same indices, values equal bit for bit.
#include "sim/data/topk.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace sparsim {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

// The definition of the top k, by brute force: non-NaN indices sorted by (|x| descending, index ascending).
SparseVector sort_oracle(const std::vector<float>& x, std::size_t k)
{
  std::vector<Index> order;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (!std::isnan(x[i]))
      order.push_back(static_cast<Index>(i));
  std::stable_sort(order.begin(), order.end(), [&](Index a, Index b) { return std::fabs(x[a]) > std::fabs(x[b]); });
  order.resize(std::min(k, order.size()));
  std::sort(order.begin(), order.end());
  SparseVector out;
  for (Index i : order) {
    out.indices.push_back(i);
    out.values.push_back(x[i]);
  }
  return out;
}

// Every entry with |x| > threshold, by a plain loop.
SparseVector loop_above(const std::vector<float>& x, float threshold)
{
  SparseVector out;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (std::fabs(x[i]) > threshold) {
      out.indices.push_back(static_cast<Index>(i));
      out.values.push_back(x[i]);
    }
  return out;
}

std::vector<std::uint32_t> bits(const std::vector<float>& values)
{
  std::vector<std::uint32_t> out;
  for (float v : values)
    out.push_back(std::bit_cast<std::uint32_t>(v));
  return out;
}

// Same indices and bit-identical values (so -0.0 and 0.0 differ).
void expect_identical(const SparseVector& actual, const SparseVector& expected, const std::string& what)
{
  ASSERT_EQ(actual.indices.size(), actual.values.size()) << what;
  ASSERT_EQ(actual.size(), expected.size()) << what;
  EXPECT_EQ(actual.indices, expected.indices) << what;
  EXPECT_EQ(bits(actual.values), bits(expected.values)) << what;
}

// The k-th largest magnitude implied by a correct top-k selection: its smallest magnitude, +inf if it is empty.
float kth_of_selection(const SparseVector& topk)
{
  float kth = kInf;
  for (float v : topk.values)
    kth = std::min(kth, std::fabs(v));
  return kth;
}

// select_topk and kth_largest_magnitude agree with the reference on x for k.
void check_topk(const std::vector<float>& x, std::size_t k, const std::string& what)
{
  const std::string label = what + " n=" + std::to_string(x.size()) + " k=" + std::to_string(k);
  const SparseVector expected = select_topk_reference(x, k);
  expect_identical(select_topk(x, k), expected, label);
  SparseVector into = {{7, 8, 9}, {1.0f, 2.0f, 3.0f}}; // stale content that must be discarded
  select_topk(x, k, into);
  expect_identical(into, expected, label + " into");
  const float kth = kth_largest_magnitude(x, k);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(kth), std::bit_cast<std::uint32_t>(kth_of_selection(expected))) << label;
}

// select_above and count_above agree with a plain loop, with every compaction loop this machine can run.
void check_above(const std::vector<float>& x, float threshold, const std::string& what)
{
  const std::string label = what + " n=" + std::to_string(x.size()) + " threshold=" + std::to_string(threshold);
  const SparseVector expected = loop_above(x, threshold);
  expect_identical(select_above(x, threshold), expected, label);
  SparseVector into = {{7, 8, 9}, {1.0f, 2.0f, 3.0f}};
  select_above(x, threshold, into);
  expect_identical(into, expected, label + " into");
  expect_identical(select_above(x, threshold, CompactionIsa::portable), expected, label + " portable");
  if (best_compaction_isa() == CompactionIsa::avx512)
    expect_identical(select_above(x, threshold, CompactionIsa::avx512), expected, label + " avx512");
  EXPECT_EQ(count_above(x, threshold), expected.size()) << label;
}

enum class Dist { gaussian, student_t, cauchy };

std::vector<float> random_vector(Dist dist, std::size_t n, std::uint64_t seed)
{
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> gaussian;
  std::student_t_distribution<float> student_t(1.5f);
  std::cauchy_distribution<float> cauchy;
  std::vector<float> x(n);
  for (float& v : x)
    v = dist == Dist::gaussian ? gaussian(rng) : dist == Dist::student_t ? student_t(rng) : cauchy(rng);
  return x;
}

const char* name(Dist dist)
{
  return dist == Dist::gaussian ? "gaussian" : dist == Dist::student_t ? "student_t" : "cauchy";
}

// k values around the interesting boundaries for an input of n entries.
std::vector<std::size_t> ks_for(std::size_t n)
{
  const std::set<std::size_t> ks = {0, 1,     2,        n / 1000, n / 100, n / 50, n / 10, n / 2, n > 0 ? n - 1 : 0,
                                    n, n + 1, 2 * n + 5};
  return {ks.begin(), ks.end()};
}

// Sizes around the SIMD width (16), the radix select's finish (1024), the compaction chunk (2048), the switch from
// exact to sampled ranges (2^14), and large ones.
const std::vector<std::size_t> kSizes = {
    1,    2,    3,    15,   16,    17,    31,    33,    100,    1000,   1025,
    2047, 2048, 2049, 4097, 16383, 16384, 16385, 65537, 100003, 300007, (std::size_t{1} << 20) + 3};

TEST(TopkReference, MatchesFullSortWithTiesAndNaN)
{
  std::mt19937_64 rng(7);
  for (std::size_t n : {0, 1, 2, 5, 16, 17, 100, 1000, 2049}) {
    // Values on a coarse grid so that ties are common, with some NaN, -0.0 and infinities.
    std::uniform_int_distribution<int> grid(-6, 6);
    std::vector<float> x(n);
    for (float& v : x) {
      const int g = grid(rng);
      v = g == 6 ? kNaN : g == 5 ? -kInf : g == 0 ? -0.0f : static_cast<float>(g) / 2;
    }
    for (std::size_t k : ks_for(n))
      expect_identical(select_topk_reference(x, k), sort_oracle(x, k),
                       "reference n=" + std::to_string(n) + " k=" + std::to_string(k));
  }
}

TEST(Topk, RandomInputsMatchReference)
{
  for (Dist dist : {Dist::gaussian, Dist::student_t, Dist::cauchy})
    for (std::size_t n : kSizes) {
      const std::vector<float> x = random_vector(dist, n, 1000 + n);
      for (std::size_t k : ks_for(n))
        check_topk(x, k, name(dist));
    }
}

TEST(Topk, SmallRandomInputsMatchFullSort)
{
  for (Dist dist : {Dist::gaussian, Dist::cauchy})
    for (std::size_t n : {1, 2, 3, 15, 16, 17, 33, 1000, 16385, 40000}) {
      const std::vector<float> x = random_vector(dist, n, 77 + n);
      for (std::size_t k : ks_for(n))
        expect_identical(select_topk(x, k), sort_oracle(x, k),
                         std::string(name(dist)) + " n=" + std::to_string(n) + " k=" + std::to_string(k));
    }
}

TEST(Topk, EmptyInputAndZeroK)
{
  const std::vector<float> empty;
  for (std::size_t k : {0, 1, 5}) {
    EXPECT_TRUE(select_topk(empty, k).empty());
    EXPECT_TRUE(select_topk_reference(empty, k).empty());
    EXPECT_EQ(kth_largest_magnitude(empty, k), kInf);
  }
  const std::vector<float> x = {3.0f, -1.0f, 2.0f};
  EXPECT_TRUE(select_topk(x, 0).empty());
  EXPECT_EQ(kth_largest_magnitude(x, 0), kInf);
  EXPECT_TRUE(select_above(empty, 0.0f).empty());
  EXPECT_EQ(count_above(empty, 0.0f), 0u);
}

TEST(Topk, KAtLeastNSelectsEverythingAndKthIsTheSmallestMagnitude)
{
  const std::vector<float> x = {3.0f, -1.0f, 2.0f, -0.5f, 4.0f};
  for (std::size_t k : {5, 6, 1000}) {
    const SparseVector all = select_topk(x, k);
    EXPECT_EQ(all.indices, (std::vector<Index>{0, 1, 2, 3, 4}));
    EXPECT_EQ(all.values, x);
    EXPECT_EQ(kth_largest_magnitude(x, k), 0.5f);
  }
  EXPECT_EQ(kth_largest_magnitude(x, 1), 4.0f);
  EXPECT_EQ(kth_largest_magnitude(x, 2), 3.0f);
  EXPECT_EQ(kth_largest_magnitude(x, 4), 1.0f);
  EXPECT_EQ(select_topk(x, 2).indices, (std::vector<Index>{0, 4}));
  const std::vector<float> one = {-7.0f};
  EXPECT_EQ(select_topk(one, 1).values, one);
  EXPECT_EQ(kth_largest_magnitude(one, 1), 7.0f);
}

TEST(Topk, AllEqualMagnitudesKeepTheSmallestIndices)
{
  for (std::size_t n : {17, 2049, 100003}) {
    std::vector<float> x(n);
    for (std::size_t i = 0; i < n; ++i)
      x[i] = i % 3 == 0 ? -1.5f : 1.5f;
    for (std::size_t k : ks_for(n)) {
      const SparseVector top = select_topk(x, k);
      std::vector<Index> first(std::min(k, n));
      std::iota(first.begin(), first.end(), Index{0});
      EXPECT_EQ(top.indices, first) << "n=" << n << " k=" << k;
      check_topk(x, k, "all equal");
    }
  }
}

TEST(Topk, AllZerosIncludingNegativeZeroKeepSignBits)
{
  for (std::size_t n : {1, 16, 2049, 100003}) {
    std::vector<float> x(n, 0.0f);
    for (std::size_t i = 0; i < n; i += 2)
      x[i] = -0.0f;
    for (std::size_t k : ks_for(n)) {
      const SparseVector top = select_topk(x, k);
      ASSERT_EQ(top.size(), std::min(k, n));
      for (std::size_t j = 0; j < top.size(); ++j) {
        EXPECT_EQ(top.indices[j], j);
        EXPECT_EQ(std::signbit(top.values[j]), j % 2 == 0) << "n=" << n << " k=" << k << " j=" << j;
      }
      if (k > 0) {
        EXPECT_EQ(std::bit_cast<std::uint32_t>(kth_largest_magnitude(x, k)), 0u); // +0.0, the magnitude
      }
      check_topk(x, k, "zeros");
    }
  }
}

TEST(Topk, ManyTiesAtTheBoundary)
{
  // Few distinct magnitudes, so the k-th largest is shared by thousands of entries, with either sign.
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int> level(-3, 3);
  for (std::size_t n : {1000, 16385, 100003, 1000003}) {
    std::vector<float> x(n);
    for (float& v : x)
      v = static_cast<float>(level(rng)) * 0.25f;
    for (std::size_t k : ks_for(n))
      check_topk(x, k, "ties");
    // k exactly at the end of a level and one past it.
    const std::size_t top_level =
        static_cast<std::size_t>(std::count_if(x.begin(), x.end(), [](float v) { return std::fabs(v) == 0.75f; }));
    for (std::size_t k : {top_level - 1, top_level, top_level + 1})
      check_topk(x, k, "ties at level end");
  }
}

TEST(Topk, StructuredInputs)
{
  for (std::size_t n : {33, 4097, 100003, 1000003}) {
    std::vector<float> ascending(n), descending(n), alternating(n), huge(n);
    for (std::size_t i = 0; i < n; ++i) {
      ascending[i] = static_cast<float>(i) * 0.001f;
      descending[i] = static_cast<float>(n - i) * 0.001f;
      alternating[i] = (i % 2 ? -1.0f : 1.0f) * (1.0f + static_cast<float>(i % 97));
      huge[i] = 1e-3f * std::sin(static_cast<float>(i));
    }
    // A few huge values, the largest finite float among them, in a sea of small ones.
    huge[0] = 1e30f;
    huge[n / 2] = -std::numeric_limits<float>::max();
    huge[n - 1] = 3e38f;
    for (std::size_t k : ks_for(n)) {
      check_topk(ascending, k, "ascending");
      check_topk(descending, k, "descending");
      check_topk(alternating, k, "alternating");
      check_topk(huge, k, "huge");
    }
    const std::vector<Index> largest = {0, static_cast<Index>(n / 2), static_cast<Index>(n - 1)};
    EXPECT_EQ(select_topk(huge, 3).indices, largest);
    EXPECT_EQ(kth_largest_magnitude(huge, 1), std::numeric_limits<float>::max());
    // Denormal magnitudes order like any others.
    std::vector<float> tiny(n);
    for (std::size_t i = 0; i < n; ++i)
      tiny[i] = std::bit_cast<float>(static_cast<std::uint32_t>(i % 1000)) * (i % 2 ? -1.0f : 1.0f);
    for (std::size_t k : ks_for(n))
      check_topk(tiny, k, "denormals");
  }
}

TEST(Topk, NaNIsNeverSelectedNorCounted)
{
  for (std::size_t n : {1, 17, 2049, 100003}) {
    const std::vector<float> base = random_vector(Dist::gaussian, n, 5 + n);
    for (int layout = 0; layout < 4; ++layout) {
      std::vector<float> x = base;
      if (layout == 0)
        x.front() = kNaN; // at the start
      if (layout == 1)
        x.back() = -kNaN; // at the end, negative
      if (layout == 2)
        for (std::size_t i = 0; i < n; i += 3)
          x[i] = kNaN; // everywhere
      if (layout == 3)
        std::fill(x.begin(), x.end(), kNaN); // only NaN
      const std::size_t non_nan =
          static_cast<std::size_t>(std::count_if(x.begin(), x.end(), [](float v) { return !std::isnan(v); }));
      for (std::size_t k : ks_for(n)) {
        const SparseVector top = select_topk(x, k);
        EXPECT_EQ(top.size(), std::min(k, non_nan));
        for (float v : top.values)
          EXPECT_FALSE(std::isnan(v));
        expect_identical(top, sort_oracle(x, k), "nan layout " + std::to_string(layout));
        check_topk(x, k, "nan layout " + std::to_string(layout));
      }
      EXPECT_EQ(count_above(x, -1.0f), non_nan);
      check_above(x, -1.0f, "nan");
      check_above(x, 0.5f, "nan");
      if (layout == 3) {
        EXPECT_EQ(kth_largest_magnitude(x, 1), kInf);
      }
    }
  }
}

TEST(Topk, InfinitiesAreTheLargestMagnitudes)
{
  for (std::size_t n : {16, 2049, 100003}) {
    std::vector<float> x = random_vector(Dist::cauchy, n, 3 + n);
    x[n / 3] = kInf;
    x[n / 2] = -kInf;
    x[n - 1] = kNaN;
    const SparseVector top2 = select_topk(x, 2);
    EXPECT_EQ(top2.indices, (std::vector<Index>{static_cast<Index>(n / 3), static_cast<Index>(n / 2)}));
    EXPECT_EQ(top2.values, (std::vector<float>{kInf, -kInf}));
    EXPECT_EQ(kth_largest_magnitude(x, 2), kInf);
    EXPECT_LT(kth_largest_magnitude(x, 3), kInf);
    for (std::size_t k : ks_for(n))
      check_topk(x, k, "inf");
    check_above(x, 1e30f, "inf");
    check_above(x, kInf, "inf");
    EXPECT_EQ(count_above(x, std::numeric_limits<float>::max()), 2u);
  }
}

TEST(Topk, SamplePositionsAreStratifiedAndDeterministic)
{
  EXPECT_TRUE(detail::sample_positions(1000).empty());
  for (std::size_t n : {std::size_t{1} << 14, std::size_t{100003}, std::size_t{1} << 26}) {
    const std::vector<std::size_t> p = detail::sample_positions(n);
    ASSERT_FALSE(p.empty());
    EXPECT_TRUE(std::is_sorted(p.begin(), p.end()));
    EXPECT_EQ(std::adjacent_find(p.begin(), p.end()), p.end());
    EXPECT_LT(p.back(), n);
    EXPECT_EQ(p, detail::sample_positions(n));
  }
}

// Inputs built against the sample positions, so that the sample misleads select_topk.
TEST(Topk, FallbackWhenTheSampleOverestimatesTheThreshold)
{
  const std::size_t n = 1000003;
  const std::vector<std::size_t> sample = detail::sample_positions(n);
  // Large values exactly at the sampled positions, zeros elsewhere: the sample suggests the top k are all large, but
  // only sample.size() entries are, so the candidates are too few.
  std::vector<float> x(n, 0.0f);
  for (std::size_t p : sample)
    x[p] = 1.0f + static_cast<float>(p % 7);
  const std::size_t s = sample.size();
  for (std::size_t k : {s / 2, s - 1, s, s + 1, 2 * s, n / 3})
    check_topk(x, k, "sample overestimates");
  // The same with a distinct small value at every other position, so that the exact select is not just ties.
  for (std::size_t i = 0; i < n; ++i)
    if (x[i] == 0.0f)
      x[i] = 1e-6f * static_cast<float>(i % 1013);
  for (std::size_t k : {s + 1, 3 * s, n / 10})
    check_topk(x, k, "sample overestimates, distinct");
}

TEST(Topk, FallbackWhenTheSampleUnderestimatesTheThreshold)
{
  const std::size_t n = 1000003;
  const std::vector<std::size_t> sample = detail::sample_positions(n);
  // Small values at the sampled positions, large ones elsewhere: more than k entries lie above hi.
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i)
    x[i] = 10.0f + static_cast<float>(i % 101);
  for (std::size_t p : sample)
    x[p] = 0.001f * static_cast<float>(p % 13);
  const std::size_t s = sample.size();
  for (std::size_t k : {std::size_t{1}, std::size_t{10}, std::size_t{1000}, n / 100, n - s, n - s + 1, n - 1})
    check_topk(x, k, "sample underestimates");
}

TEST(SelectAbove, MatchesPlainLoop)
{
  for (Dist dist : {Dist::gaussian, Dist::cauchy})
    for (std::size_t n : kSizes) {
      std::vector<float> x = random_vector(dist, n, 99 + n);
      if (n > 20) {
        x[3] = -0.0f;
        x[5] = 0.0f;
        x[n - 2] = kNaN;
        x[n / 2] = -kInf;
      }
      const float denormal = std::bit_cast<float>(std::uint32_t{5});
      for (float threshold : {-1.0f, -0.0f, 0.0f, denormal, 0.5f, 1.0f, 2.0f, 3.0f, 100.0f, kInf, kNaN})
        check_above(x, threshold, name(dist));
      // Thresholds at the densities top-k uses, taken from the data.
      for (double density : {0.001, 0.01, 0.02, 0.5})
        check_above(x, kth_largest_magnitude(x, static_cast<std::size_t>(density * static_cast<double>(n))),
                    std::string(name(dist)) + " density " + std::to_string(density));
    }
}

TEST(SelectAbove, ThresholdEdgeCases)
{
  const std::vector<float> x = {-0.0f, 0.0f, 1.0f, -1.0f, kInf, -kInf, kNaN, 2.0f};
  EXPECT_EQ(select_above(x, -1.0f).indices, (std::vector<Index>{0, 1, 2, 3, 4, 5, 7})); // every non-NaN entry
  EXPECT_EQ(select_above(x, -0.0f).indices, (std::vector<Index>{2, 3, 4, 5, 7}));       // strict: zeros are out
  EXPECT_EQ(select_above(x, 1.0f).indices, (std::vector<Index>{4, 5, 7}));
  EXPECT_TRUE(select_above(x, kInf).empty());
  EXPECT_TRUE(select_above(x, kNaN).empty());
  EXPECT_EQ(count_above(x, -1.0f), 7u);
  EXPECT_EQ(count_above(x, kNaN), 0u);
  EXPECT_EQ(std::signbit(select_above(x, -1.0f).values[0]), true);
}

TEST(Topk, KthLargestAndSelectAboveComposeIntoTheTopK)
{
  // The documented identity: top-k = {|x| > t} plus the first min(k, m) - count_above(x, t) entries with |x| == t.
  std::mt19937_64 rng(23);
  std::uniform_int_distribution<int> level(-40, 40);
  for (std::size_t n : {1, 100, 16385, 200003}) {
    std::vector<float> x(n);
    for (float& v : x)
      v = static_cast<float>(level(rng)) * 0.125f;
    for (std::size_t k : ks_for(n)) {
      const float t = kth_largest_magnitude(x, k);
      SparseVector composed = select_above(x, t);
      std::size_t ties = std::min(k, n) - count_above(x, t);
      for (std::size_t i = 0; i < n && ties > 0; ++i)
        if (std::fabs(x[i]) == t) {
          composed.indices.push_back(static_cast<Index>(i));
          composed.values.push_back(x[i]);
          --ties;
        }
      std::vector<std::size_t> order(composed.size());
      std::iota(order.begin(), order.end(), std::size_t{0});
      std::sort(order.begin(), order.end(),
                [&](std::size_t a, std::size_t b) { return composed.indices[a] < composed.indices[b]; });
      SparseVector sorted;
      for (std::size_t j : order) {
        sorted.indices.push_back(composed.indices[j]);
        sorted.values.push_back(composed.values[j]);
      }
      expect_identical(select_topk(x, k), sorted, "composed n=" + std::to_string(n) + " k=" + std::to_string(k));
    }
  }
}

TEST(Topk, OneOutputReusedAcrossCalls)
{
  SparseVector out;
  for (std::size_t n : {100003, 17, 0, 65537, 100003}) {
    const std::vector<float> x = random_vector(Dist::student_t, n, 31 + n);
    for (std::size_t k : ks_for(n)) {
      select_topk(x, k, out);
      expect_identical(out, select_topk_reference(x, k), "reused n=" + std::to_string(n) + " k=" + std::to_string(k));
      const float t = kth_largest_magnitude(x, k);
      select_above(x, t, out);
      expect_identical(out, loop_above(x, t), "reused above n=" + std::to_string(n) + " k=" + std::to_string(k));
    }
  }
}

TEST(SelectAbove, Avx512RequestWithoutAvx512Throws)
{
  if (best_compaction_isa() == CompactionIsa::avx512)
    GTEST_SKIP() << "this CPU has AVX-512F";
  EXPECT_THROW(select_above(std::vector<float>{1.0f}, 0.0f, CompactionIsa::avx512), std::invalid_argument);
}

TEST(Topk, RejectsInputsLargerThanIndexCanAddress)
{
  // The span is never dereferenced: the size check comes first.
  const float one = 1.0f;
  const std::span<const float> too_big(&one, std::size_t{std::numeric_limits<Index>::max()} + 1);
  EXPECT_THROW(select_topk(too_big, 1), std::length_error);
  EXPECT_THROW(select_above(too_big, 0.0f), std::length_error);
  EXPECT_THROW(kth_largest_magnitude(too_big, 1), std::length_error);
  EXPECT_THROW(count_above(too_big, 0.0f), std::length_error);
  EXPECT_THROW(select_topk_reference(too_big, 1), std::length_error);
}

} // namespace
} // namespace sparsim
