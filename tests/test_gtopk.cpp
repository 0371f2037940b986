// gTopk against its definition: a brute-force evaluation of the same reduction tree (std::map based), the
// same result on every rank, the closed form's time and exact per-rank bytes on the contention-free star,
// edge cases, and what the tree does and does not guarantee about the global top-k.
#include "sparse_harness.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <numeric>
#include <random>

using namespace sparsim;
using namespace sparsim::testing;

namespace {

using Set = std::map<Index, float>;

SparseVector to_sparse(const Set& set)
{
  SparseVector out;
  for (auto [i, v] : set) {
    out.indices.push_back(i);
    out.values.push_back(v);
  }
  return out;
}

Set to_set(const SparseVector& v)
{
  Set out;
  for (std::size_t e = 0; e < v.size(); ++e)
    out[v.indices[e]] = v.values[e];
  return out;
}

// The k entries of largest magnitude; among equal magnitudes the smaller index wins.
Set reference_top_k(const Set& set, std::size_t k)
{
  std::vector<std::pair<Index, float>> entries(set.begin(), set.end());
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return std::fabs(a.second) > std::fabs(b.second); // entries start in index order: ties keep it
  });
  entries.resize(std::min(k, entries.size()));
  return Set(entries.begin(), entries.end());
}

// The tree, evaluated directly: every rank starts from the top-k of its selection; in the round at
// distance d, rank r (a multiple of 2d) adds the set of rank r + d (if it exists) and keeps the top-k.
SparseVector reference_gtopk(const std::vector<SparseVector>& selections, std::size_t k)
{
  const int P = static_cast<int>(selections.size());
  std::vector<Set> sets;
  for (const auto& s : selections)
    sets.push_back(reference_top_k(to_set(s), k));
  for (int d = 1; d < P; d *= 2)
    for (int r = 0; r + d < P; r += 2 * d) {
      for (auto [i, v] : sets[r + d]) {
        auto [it, inserted] = sets[r].emplace(i, v);
        if (!inserted)
          it->second = it->second + v;
      }
      sets[r] = reference_top_k(sets[r], k);
    }
  return P == 0 ? SparseVector{} : to_sparse(sets[0]);
}

// Value kinds: multiples of 1/8 in [-2, 2] (many ties in magnitude, sums exact), or full-precision floats
// (sums depend on the association order, so a different tree shape changes the bits).
enum class Values { dyadic, full_precision };

float draw_value(std::mt19937_64& rng, Values kind)
{
  if (kind == Values::dyadic)
    return static_cast<float>(static_cast<int>(rng() % 33) - 16) / 8.0f;
  return std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
}

// Per rank a selection of distinct indices below n, of max_size entries on the first and last ranks (the
// root and a leaf) and of a random size in [0, max_size] elsewhere.
std::vector<SparseVector> random_selections(int P, std::uint64_t n, std::size_t max_size, Values kind,
                                            std::uint64_t seed)
{
  std::mt19937_64 rng(seed);
  std::vector<SparseVector> out(P);
  for (int r = 0; r < P; ++r) {
    SparseVector& s = out[r];
    const std::size_t size = r == 0 || r == P - 1 ? max_size : rng() % (max_size + 1);
    Set picked;
    while (picked.size() < size)
      picked[static_cast<Index>(rng() % n)] = draw_value(rng, kind);
    s = to_sparse(picked);
  }
  return out;
}

// Exactly k distinct indices per rank (overlapping across ranks): every merge then keeps exactly k.
std::vector<SparseVector> full_selections(int P, std::uint64_t n, std::size_t k, std::uint64_t seed)
{
  std::mt19937_64 rng(seed);
  std::vector<SparseVector> out(P);
  for (auto& s : out) {
    Set picked;
    while (picked.size() < k)
      picked[static_cast<Index>(rng() % n)] = draw_value(rng, Values::full_precision);
    s = to_sparse(picked);
  }
  return out;
}

int ceil_log2(int P)
{
  int l = 0;
  while ((1 << l) < P)
    ++l;
  return l;
}

// Messages rank r receives in the tree reduction (its children r + 2^m, 2^m below r's lowest set bit),
// plus the one it sends to its parent; the broadcast runs the same edges the other way.
int tree_messages(int r, int P)
{
  int messages = r == 0 ? 0 : 1;
  for (int d = 1; d < P && (r == 0 || d < (r & -r)); d *= 2)
    if (r + d < P)
      ++messages;
  return messages;
}

std::unique_ptr<SparseAllreduce> gtopk() { return make_sparse_algorithm({{"name", "gtopk"}}); }

class GTopkRanks : public ::testing::TestWithParam<int> {};

} // namespace

// (1) + (2): two iterations, the first with many magnitude ties (tie rule), the second with full-precision
// values (summation tree); selection sizes from 0 to 1.5k (larger ones are cut to their top-k first).
TEST_P(GTopkRanks, MatchesTheTreeEvaluatedDirectly)
{
  const int P = GetParam();
  const std::uint64_t n = 60; // small, so that selections overlap and merges sum
  const std::size_t k = 12;
  const std::vector<std::vector<SparseVector>> selections = {
      random_selections(P, n, k + k / 2, Values::dyadic, 7 + P),
      random_selections(P, n, k + k / 2, Values::full_precision, 1000 + P)};
  const auto algorithm = gtopk();
  const SparseRun run = run_sparse(*algorithm, selections, n, k);
  for (std::size_t it = 0; it < selections.size(); ++it) {
    const SparseVector expected = reference_gtopk(selections[it], k);
    ASSERT_LE(expected.size(), k);
    for (int r = 0; r < P; ++r) {
      const RankOutcome& out = run.iterations[it][r];
      EXPECT_EQ(out.result, expected) << "iteration " << it << " rank " << r;
      EXPECT_EQ(out.report.global_selected, expected.size()) << "iteration " << it << " rank " << r;
      // Bitwise the same on every rank (operator== on floats would let -0.0 pass for 0.0).
      ASSERT_EQ(out.result.size(), run.iterations[it][0].result.size());
      for (std::size_t e = 0; e < out.result.size(); ++e)
        EXPECT_EQ(std::bit_cast<std::uint32_t>(out.result.values[e]),
                  std::bit_cast<std::uint32_t>(run.iterations[it][0].result.values[e]));
    }
  }
}

// (3): every set holds exactly k pairs, so the root's time is 2 ceil(log2 P) (alpha + k e beta) and each
// rank moves k e bytes per tree edge it touches, the root ceil(log2 P) k e each way (the closed form).
TEST_P(GTopkRanks, CostOnTheStarMatchesTheClosedForm)
{
  const int P = GetParam();
  const std::uint64_t n = 4000;
  const std::size_t k = 500;
  const double e = 8; // int32 index + fp32 value
  const auto algorithm = gtopk();
  const SparseRun run = run_sparse(*algorithm, {full_selections(P, n, k, 99 + P)}, n, k);

  const int rounds = ceil_log2(P);
  const double alpha = 2 * kStarLatency; // a route crosses two links
  const double expected_time = 2 * rounds * alpha + 2 * rounds * k * e / kStarBandwidth;
  const CostInputs in{P, n, k, WireFormat{}, alpha, 1.0 / kStarBandwidth, {}, {}};
  const ClosedForm cf = algorithm->closed_form(in);
  EXPECT_NEAR(cf.time, expected_time, 1e-15);
  EXPECT_EQ(cf.bytes_sent_per_rank, rounds * k * e);
  EXPECT_EQ(cf.bytes_recv_per_rank, rounds * k * e);
  // The rendezvous keeps every root step at alpha + k e beta for any P, not only powers of two.
  EXPECT_NEAR(run.iterations[0][0].time, expected_time, 1e-9 + 0.005 * expected_time);

  Bytes busiest_sent = 0, busiest_recv = 0;
  for (int r = 0; r < P; ++r) {
    const RankOutcome& out = run.iterations[0][r];
    EXPECT_EQ(out.result.size(), k);
    const Bytes expected_bytes = static_cast<Bytes>(tree_messages(r, P)) * k * 8;
    EXPECT_EQ(out.total.bytes_sent, expected_bytes) << "rank " << r;
    EXPECT_EQ(out.total.bytes_recv, expected_bytes) << "rank " << r;
    EXPECT_EQ(out.total.msgs_sent, static_cast<std::uint64_t>(tree_messages(r, P))) << "rank " << r;
    EXPECT_LE(out.time, run.iterations[0][0].time + 1e-12) << "rank " << r << " outlasts the root";
    busiest_sent = std::max(busiest_sent, out.total.bytes_sent);
    busiest_recv = std::max(busiest_recv, out.total.bytes_recv);
  }
  EXPECT_EQ(static_cast<double>(busiest_sent), cf.bytes_sent_per_rank);
  EXPECT_EQ(static_cast<double>(busiest_recv), cf.bytes_recv_per_rank);
  // The root receives in the reduction and sends in the broadcast.
  EXPECT_EQ(run.phase(0, 0, "tree_reduce").bytes_recv, static_cast<Bytes>(rounds) * k * 8);
  EXPECT_EQ(run.phase(0, 0, "tree_reduce").bytes_sent, 0u);
  EXPECT_EQ(run.phase(0, 0, "broadcast").bytes_sent, static_cast<Bytes>(rounds) * k * 8);
}

// (4): nothing selected anywhere: an empty result, and the tree's messages still flow (empty).
TEST_P(GTopkRanks, EmptySelectionsGiveAnEmptyResult)
{
  const int P = GetParam();
  const auto algorithm = gtopk();
  const SparseRun run = run_sparse(*algorithm, {std::vector<SparseVector>(P)}, 100, 10);
  for (int r = 0; r < P; ++r) {
    const RankOutcome& out = run.iterations[0][r];
    EXPECT_TRUE(out.result.empty()) << "rank " << r;
    EXPECT_EQ(out.report.global_selected, 0u);
    EXPECT_EQ(out.total.bytes_sent, 0u);
    EXPECT_EQ(out.total.msgs_sent, static_cast<std::uint64_t>(tree_messages(r, P)));
  }
}

// (4): k >= n: no merge can drop anything, so the result is the plain union sum (exact: dyadic values).
TEST_P(GTopkRanks, KAtLeastNGivesTheUnionSum)
{
  const int P = GetParam();
  const std::uint64_t n = 10;
  const std::size_t k = 16;
  const auto selections = random_selections(P, n, n, Values::dyadic, 5 + P);
  Set union_sum;
  for (const auto& s : selections)
    for (std::size_t e = 0; e < s.size(); ++e)
      union_sum[s.indices[e]] += s.values[e];
  const auto algorithm = gtopk();
  const SparseRun run = run_sparse(*algorithm, {selections}, n, k);
  for (int r = 0; r < P; ++r)
    EXPECT_EQ(run.iterations[0][r].result, to_sparse(union_sum)) << "rank " << r;
}

// (5): with disjoint selections no index is ever summed, and a merge keeps the top-k of the union of two
// sets; top-k(top-k(A) u top-k(B)) = top-k(A u B), so by induction over the tree the result is exactly
// the top-k of the union of all selections.
TEST_P(GTopkRanks, DisjointSelectionsGiveTheTopKOfTheUnion)
{
  const int P = GetParam();
  const std::size_t k = 20;
  const std::uint64_t n = static_cast<std::uint64_t>(P) * k + 37;
  std::mt19937_64 rng(300 + P);
  std::vector<Index> indices(n);
  std::iota(indices.begin(), indices.end(), 0);
  std::shuffle(indices.begin(), indices.end(), rng);
  std::vector<int> magnitudes(static_cast<std::size_t>(P) * k); // distinct: 1..Pk, in eighths
  std::iota(magnitudes.begin(), magnitudes.end(), 1);
  std::shuffle(magnitudes.begin(), magnitudes.end(), rng);
  std::vector<SparseVector> selections(P);
  Set all;
  std::size_t next = 0;
  for (auto& s : selections) {
    const std::size_t size = rng() % (k + 1);
    Set picked;
    for (std::size_t e = 0; e < size; ++e, ++next)
      picked[indices[next]] = (rng() % 2 ? 1.0f : -1.0f) * static_cast<float>(magnitudes[next]) / 8.0f;
    all.insert(picked.begin(), picked.end());
    s = to_sparse(picked);
  }
  const SparseVector expected = to_sparse(reference_top_k(all, k));
  const auto algorithm = gtopk();
  const SparseRun run = run_sparse(*algorithm, {selections}, n, k);
  for (int r = 0; r < P; ++r)
    EXPECT_EQ(run.iterations[0][r].result, expected) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Ranks, GTopkRanks, ::testing::Values(1, 2, 3, 4, 5, 7, 8, 12, 16),
                         [](const auto& info) { return "P" + std::to_string(info.param); });

// With overlapping selections the tree is not exact. P = 4, k = 2, indices a=0 b=1 c=2 d=3 x=4:
//   rank 0 {a 10, c 6}, rank 1 {b 9, c 6}, rank 2 {b 9, d 1}, rank 3 {a 0.5, x 2}.
//   Round 0: rank 0 has {a 10, b 9, c 12} -> {a 10, c 12}; rank 2 has {a 0.5, b 9, d 1, x 2} -> {b 9, x 2}.
//   Round 1: rank 0 has {a 10, b 9, c 12, x 2} -> {a 10, c 12}.
// The union sum is {a 10.5, b 18, c 12, d 1, x 2}: its top-2 is {b, c}, but b was split across the two
// halves and lost in both; and U[a] = 10 misses rank 3's 0.5, dropped in round 0.
TEST(GTopk, OverlappingSelectionsCanLoseTheLargestSum)
{
  const std::vector<SparseVector> selections = {
      {{0, 2}, {10.0f, 6.0f}}, {{1, 2}, {9.0f, 6.0f}}, {{1, 3}, {9.0f, 1.0f}}, {{0, 4}, {0.5f, 2.0f}}};
  const auto algorithm = gtopk();
  const SparseRun run = run_sparse(*algorithm, {selections}, 6, 2);
  const SparseVector expected{{0, 2}, {10.0f, 12.0f}};
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(run.iterations[0][r].result, expected) << "rank " << r;
}

// The reference code's float64 pairs: 16 bytes per element, twice the default bytes and beta term.
TEST(GTopk, SixteenBytePairsDoubleTheVolume)
{
  const int P = 8;
  const std::uint64_t n = 4000;
  const std::size_t k = 500;
  const WireFormat float64_pairs{8, 8};
  const auto algorithm = gtopk();
  const SparseRun run = run_sparse(*algorithm, {full_selections(P, n, k, 17)}, n, k, float64_pairs);
  const double expected_time = 2 * 3 * (2 * kStarLatency) + 2 * 3 * k * 16.0 / kStarBandwidth;
  EXPECT_NEAR(run.iterations[0][0].time, expected_time, 1e-9 + 0.005 * expected_time);
  EXPECT_EQ(run.iterations[0][0].total.bytes_recv, 3u * k * 16);
  EXPECT_EQ(run.iterations[0][0].total.bytes_sent, 3u * k * 16);
}

TEST(GTopk, RejectsUnknownParameters)
{
  EXPECT_THROW(make_sparse_algorithm({{"name", "gtopk"}, {"pair_bytes", 16}}), ConfigError);
}
