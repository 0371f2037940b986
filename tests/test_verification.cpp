// The sparse verifier (sim/run/verification.hpp) against a brute-force reference: the sums of the local
// selections per index in a std::map, the same error ratio computed from them; and the failures it must report.
#include "sim/run/verification.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>

namespace sparsim {
namespace {

using Semantics = SparseAllreduce::ResultSemantics;

// P random selections of about m entries each from [0, n), sorted by index.
std::vector<SparseVector> random_selections(int P, std::uint64_t n, std::size_t m, std::uint32_t seed)
{
  std::mt19937 rng(seed);
  std::uniform_int_distribution<Index> index(0, static_cast<Index>(n - 1));
  std::normal_distribution<float> value(0.0f, 1.0f);
  std::vector<SparseVector> selections(P);
  for (auto& selection : selections) {
    std::map<Index, float> entries;
    while (entries.size() < m)
      entries[index(rng)] = value(rng);
    for (const auto& [i, v] : entries) {
      selection.indices.push_back(i);
      selection.values.push_back(v);
    }
  }
  return selections;
}

struct Reference {
  std::map<Index, double> sum, abs_sum;
};
Reference brute_force(const std::vector<SparseVector>& selections)
{
  Reference reference;
  for (const auto& selection : selections)
    for (std::size_t e = 0; e < selection.size(); ++e) {
      reference.sum[selection.indices[e]] += selection.values[e];
      reference.abs_sum[selection.indices[e]] += std::fabs(selection.values[e]);
    }
  return reference;
}

// U: the summed entries at every `stride`-th index of the union (float sums, as an algorithm would send).
SparseVector result_from(const Reference& reference, int stride)
{
  SparseVector result;
  int position = 0;
  for (const auto& [i, s] : reference.sum)
    if (position++ % stride == 0) {
      result.indices.push_back(i);
      result.values.push_back(static_cast<float>(s));
    }
  return result;
}

double expected_ratio(const Reference& reference, const SparseVector& result, int P)
{
  double worst = 0;
  for (std::size_t e = 0; e < result.size(); ++e) {
    const Index i = result.indices[e];
    worst = std::max(worst, std::fabs(result.values[e] - reference.sum.at(i)) /
                                rounding_tolerance(P, reference.abs_sum.at(i)));
  }
  return worst;
}

// P random selections, their brute-force sums and the result U that holds all of them.
struct Sample {
  std::vector<SparseVector> selections;
  Reference reference;
  SparseVector all;
};
Sample sample(int P, std::uint64_t n, std::size_t m, std::uint32_t seed)
{
  Sample s;
  s.selections = random_selections(P, n, m, seed);
  s.reference = brute_force(s.selections);
  s.all = result_from(s.reference, 1);
  return s;
}

double verify(int P, std::uint64_t n, Semantics semantics, const std::vector<SparseVector>& selections,
              const SparseVector& result)
{
  SparseVerifier verifier(P, n, semantics);
  const auto shared = std::make_shared<const SparseVector>(result);
  double ratio = -1;
  for (int r = 0; r < P; ++r)
    ratio = verifier.report(selections[r], shared);
  return ratio;
}

TEST(SparseVerifier, ErrorRatioEqualsTheBruteForceOnesForUnionAndRestrictedResults)
{
  const int P = 7;
  const std::uint64_t n = 1000;
  const auto [selections, reference, all] = sample(P, n, 60, 3);
  const double ratio = verify(P, n, Semantics::union_sum, selections, all);
  EXPECT_EQ(ratio, expected_ratio(reference, all, P));
  EXPECT_LE(ratio, 1.0);
  const SparseVector some = result_from(reference, 3);
  EXPECT_EQ(verify(P, n, Semantics::restricted_sum, selections, some), expected_ratio(reference, some, P));
}

TEST(SparseVerifier, AResultOutOfIndexOrderGivesTheSameRatio)
{
  const int P = 5;
  const std::uint64_t n = 777; // not a multiple of 64
  const auto selections = random_selections(P, n, 80, 4);
  const Reference reference = brute_force(selections);
  const SparseVector ordered = result_from(reference, 2);
  SparseVector shuffled;
  std::vector<std::size_t> order(ordered.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::shuffle(order.begin(), order.end(), std::mt19937(5));
  for (std::size_t e : order) {
    shuffled.indices.push_back(ordered.indices[e]);
    shuffled.values.push_back(ordered.values[e]);
  }
  EXPECT_EQ(verify(P, n, Semantics::restricted_sum, selections, shuffled),
            verify(P, n, Semantics::restricted_sum, selections, ordered));
}

TEST(SparseVerifier, ReportsWrongSumsMissingAndForeignIndices)
{
  const int P = 4;
  const std::uint64_t n = 500;
  const auto [selections, reference, all] = sample(P, n, 40, 6);

  SparseVector wrong = all;
  wrong.values[wrong.size() / 2] += 1e-3f;
  EXPECT_GT(verify(P, n, Semantics::union_sum, selections, wrong), 1.0);

  SparseVector missing = all; // a selected index dropped: wrong for a union, allowed for a restricted sum
  missing.indices.erase(missing.indices.begin() + 3);
  missing.values.erase(missing.values.begin() + 3);
  EXPECT_EQ(verify(P, n, Semantics::union_sum, selections, missing), 1e300);
  EXPECT_LE(verify(P, n, Semantics::restricted_sum, selections, missing), 1.0);

  SparseVector foreign = all; // an index nobody selected
  Index unselected = 0;
  while (reference.sum.count(unselected))
    ++unselected;
  const auto at =
      std::lower_bound(foreign.indices.begin(), foreign.indices.end(), unselected) - foreign.indices.begin();
  foreign.indices.insert(foreign.indices.begin() + at, unselected);
  foreign.values.insert(foreign.values.begin() + at, 0.0f);
  EXPECT_EQ(verify(P, n, Semantics::restricted_sum, selections, foreign), 1e300);

  SparseVector repeated = all; // an index twice
  repeated.indices.push_back(all.indices.back());
  repeated.values.push_back(all.values.back());
  EXPECT_EQ(verify(P, n, Semantics::restricted_sum, selections, repeated), 1e300);

  SparseVector outside = all; // an index beyond the vector
  outside.indices.push_back(static_cast<Index>(n));
  outside.values.push_back(0.0f);
  EXPECT_EQ(verify(P, n, Semantics::restricted_sum, selections, outside), 1e300);
}

TEST(SparseVerifier, RanksWithDifferentResultsFailAndReselectedResultsAreNotSummed)
{
  const int P = 3;
  const std::uint64_t n = 300;
  const auto [selections, reference, all] = sample(P, n, 20, 7);
  SparseVector other = all;
  other.values[0] += 1.0f;
  SparseVerifier verifier(P, n, Semantics::union_sum);
  verifier.report(selections[0], std::make_shared<const SparseVector>(all));
  EXPECT_THROW(verifier.report(selections[1], std::make_shared<const SparseVector>(other)), std::runtime_error);

  SparseVector foreign; // nobody selected it, but a re-selected result is checked by its algorithm's tests
  foreign.indices = {static_cast<Index>(n - 1)};
  foreign.values = {1.0f};
  EXPECT_EQ(verify(P, n, Semantics::reselected, selections, foreign), 0.0);
}

TEST(SparseVerifier, EveryIterationStartsAfresh)
{
  const int P = 3;
  const std::uint64_t n = 256;
  SparseVerifier verifier(P, n, Semantics::union_sum);
  for (std::uint32_t iteration = 0; iteration < 3; ++iteration) {
    const auto selections = random_selections(P, n, 30, 10 + iteration);
    const Reference reference = brute_force(selections);
    const auto result = std::make_shared<const SparseVector>(result_from(reference, 1));
    double ratio = -1;
    for (int r = 0; r < P; ++r)
      ratio = verifier.report(selections[r], result);
    EXPECT_EQ(ratio, expected_ratio(reference, *result, P)) << "iteration " << iteration;
  }
}

// Within-collective selection (SparDL): U plus the residuals must give back the accs' sum at every index. Hand
// accs of 3 ranks on 6 indices; a correct split passes at zero error, a value lost, a value counted twice or an
// index twice in U fail, and each iteration starts afresh.
TEST(SparseVerifier, ChecksConservationForWithinCollectiveSelection)
{
  const int P = 3;
  const std::uint64_t n = 6;
  const std::vector<std::vector<float>> accs = {{1, 2, 3, 4, 5, 6}, {0.5f, -2, 0, 1, 0, 0}, {0, 0, 7, 0, 0, -1}};
  // U takes indices 2 and 5 whole (sums 10 and 5); the residuals keep the rest where they were.
  SparseVector u;
  u.indices = {2, 5};
  u.values = {10, 5};
  std::vector<std::vector<float>> residuals = accs;
  for (auto& residual : residuals)
    residual[2] = residual[5] = 0;
  auto verify_split = [&](const SparseVector& result, const std::vector<std::vector<float>>& left) {
    SparseVerifier verifier(P, n, Semantics::reselected, true);
    verifier.record_accs([&](RankId r) { return std::span<const float>(accs[r]); });
    const auto shared = std::make_shared<const SparseVector>(result);
    double ratio = -1;
    for (int r = 0; r < P; ++r)
      ratio = verifier.report(SparseVector{}, shared, left[r]);
    return ratio;
  };
  EXPECT_EQ(verify_split(u, residuals), 0.0);
  auto lost = residuals;
  lost[1][0] = 0; // rank 1's 0.5 at index 0 went nowhere
  EXPECT_GT(verify_split(u, lost), 1.0);
  auto twice = residuals;
  twice[0][2] = 3; // rank 0's 3 at index 2 is in U and still in its residual
  EXPECT_GT(verify_split(u, twice), 1.0);
  SparseVector repeated = u;
  repeated.indices = {2, 2};
  EXPECT_GT(verify_split(repeated, residuals), 1.0);
  // A value moved from one rank's residual to another's is still conserved.
  auto moved = residuals;
  moved[0][0] = 0;
  moved[2][0] = 1;
  EXPECT_EQ(verify_split(u, moved), 0.0);
}

} // namespace
} // namespace sparsim
