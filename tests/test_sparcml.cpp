// SparCML's three sparse allreduces against their definitions: every rank ends with the union sum of the
// local selections (a brute-force std::map sum written here), the byte counts follow the paper's rules
// (fill-in for recursive doubling; slices to owners, then sparse or dense regions, for the split variants),
// and the edge cases (empty selections, k >= n, n < P) work for any P.
#include "sparse_harness.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

using namespace sparsim;
using namespace sparsim::testing;

namespace {

constexpr Bytes kElement = 8; // default wire: int32 index + fp32 value
constexpr Bytes kValue = 4;
constexpr double kRouteLatency = 2 * kStarLatency; // a star route crosses two links

nlohmann::json spec_of(const std::string& variant)
{
  if (variant == "recursive_double")
    return {{"name", "sparcml_ssar_recursive_double"}};
  if (variant == "ssar")
    return {{"name", "sparcml_ssar_split_allgather"}};
  if (variant == "dsar")
    return {{"name", "sparcml_dsar_split_allgather"}};
  return {{"name", "sparcml_dsar_split_allgather"}, {"switch", "global"}};
}

SparseVector from_map(const std::map<Index, float>& entries)
{
  SparseVector out;
  for (auto [i, v] : entries) {
    out.indices.push_back(i);
    out.values.push_back(v);
  }
  return out;
}

// k distinct random indices in [first, first + span), values multiples of 1/8 in [-125, 125] (zero included):
// sums of up to 16 of them are exact in float in any order.
SparseVector random_selection(std::mt19937_64& rng, Index first, std::uint64_t span, std::uint64_t k)
{
  std::map<Index, float> picked;
  while (picked.size() < std::min(k, span))
    picked[first + static_cast<Index>(rng() % span)] = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 8;
  return from_map(picked);
}

std::vector<SparseVector> random_selections(int P, std::uint64_t n, std::uint64_t k, std::uint64_t seed)
{
  std::mt19937_64 rng(seed);
  std::vector<SparseVector> out;
  for (int r = 0; r < P; ++r)
    out.push_back(random_selection(rng, 0, n, k));
  return out;
}

// The definition: index -> sum of every rank's value there, on the union of the selected indices.
SparseVector union_sum(const std::vector<SparseVector>& selections)
{
  std::map<Index, float> sum;
  for (const auto& s : selections)
    for (std::size_t e = 0; e < s.size(); ++e)
      sum[s.indices[e]] += s.values[e];
  return from_map(sum);
}

struct Case {
  std::string variant;
  int ranks;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.variant << " P=" << c.ranks; }
std::string case_name(const ::testing::TestParamInfo<Case>& info)
{
  return info.param.variant + "_P" + std::to_string(info.param.ranks);
}

class SparcmlAll : public ::testing::TestWithParam<Case> {};
class SparcmlSplit : public ::testing::TestWithParam<Case> {};
class SparcmlRecursiveDouble : public ::testing::TestWithParam<int> {};

} // namespace

// Union sum on every rank, on inputs from sparse to full (k >= n) to empty, and bitwise-identical results
// when the sums are not exact.
TEST_P(SparcmlAll, UnionSumOnEveryRank)
{
  const auto [variant, P] = GetParam();
  const std::uint64_t n = 2000;
  auto algorithm = make_sparse_algorithm(spec_of(variant));
  std::mt19937_64 rng(7 + P);
  std::vector<std::vector<SparseVector>> its;
  its.push_back(random_selections(P, n, 10, 1 + P));  // 0: sparse: every region stays sparse
  its.push_back(random_selections(P, n, 600, 2 + P)); // 1: dense union: DSAR regions go dense
  its.emplace_back();                                 // 2: everything in [0, 100): regions 0/1 busy, rest empty
  for (int r = 0; r < P; ++r)
    its.back().push_back(random_selection(rng, 0, 100, 50));
  its.push_back(random_selections(P, n, n, 3 + P)); // 3: k >= n: every rank selects every index
  its.emplace_back(P);                              // 4: all selections empty
  its.emplace_back();                               // 5: odd ranks only
  for (int r = 0; r < P; ++r)
    its.back().push_back(r % 2 == 1 ? random_selection(rng, 0, n, 30) : SparseVector{});
  its.emplace_back(); // 6: inexact float sums
  for (int r = 0; r < P; ++r) {
    SparseVector s = random_selection(rng, 0, n, 300);
    for (float& v : s.values)
      v = std::uniform_real_distribution<float>(-1, 1)(rng);
    its.back().push_back(s);
  }
  const int inexact = 6;

  const SparseRun run = run_sparse(*algorithm, its, n, 0);
  for (std::size_t it = 0; it < its.size(); ++it) {
    SCOPED_TRACE("iteration " + std::to_string(it));
    const SparseVector expected = union_sum(its[it]);
    for (int r = 0; r < P; ++r) {
      const SparseVector& result = run.iterations[it][r].result;
      if (static_cast<int>(it) != inexact) {
        EXPECT_EQ(result, expected) << "rank " << r;
        continue;
      }
      EXPECT_EQ(result, run.iterations[it][0].result) << "rank " << r << " differs from rank 0";
      ASSERT_EQ(result.indices, expected.indices) << "rank " << r;
      for (std::size_t e = 0; e < result.size(); ++e)
        EXPECT_NEAR(result.values[e], expected.values[e], 1e-5 * P) << "index " << result.indices[e];
    }
  }
  // k >= n: every region is full, so the split variants' allgather carries all other regions whole:
  // sparse (8 bytes an element) for SSAR, dense (4 bytes) for both DSAR switches.
  if (variant != "recursive_double")
    for (int r = 0; r < P; ++r) {
      const Bytes others = n - (block_begin(n, P, r + 1) - block_begin(n, P, r));
      EXPECT_EQ(run.phase(3, r, "allgather").bytes_recv, others * (variant == "ssar" ? kElement : kValue))
          << "rank " << r;
    }
}

// n < P: some regions are empty (split variants), and the vectors fill in to n at once.
TEST_P(SparcmlAll, FewerIndicesThanRanks)
{
  const auto [variant, P] = GetParam();
  const std::uint64_t n = (P + 1) / 2; // < P from P = 2 on
  auto algorithm = make_sparse_algorithm(spec_of(variant));
  std::mt19937_64 rng(11 + P);
  std::vector<std::vector<SparseVector>> its;
  its.push_back(random_selections(P, n, n, 1 + P)); // every rank selects every index
  its.emplace_back();                               // each rank some of them, or none
  for (int r = 0; r < P; ++r)
    its.back().push_back(random_selection(rng, 0, n, r % 3));
  its.emplace_back(P); // all empty
  const SparseRun run = run_sparse(*algorithm, its, n, 0);
  for (std::size_t it = 0; it < its.size(); ++it)
    for (int r = 0; r < P; ++r)
      EXPECT_EQ(run.iterations[it][r].result, union_sum(its[it])) << "iteration " << it << " rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Variants, SparcmlAll, ::testing::ValuesIn([] {
                           std::vector<Case> cases;
                           for (const char* v : {"recursive_double", "ssar", "dsar", "dsar_global"})
                             for (int P : {1, 2, 3, 5, 8, 16})
                               cases.push_back({v, P});
                           return cases;
                         }()),
                         case_name);

// Disjoint selections spread evenly (m per region per rank): per-rank bytes are known exactly, and they are
// the closed form's.
TEST_P(SparcmlSplit, EvenDisjointSelectionsMoveExactBytes)
{
  const auto [variant, P] = GetParam();
  const std::uint64_t L = 64, m = 4; // region length; per rank per region
  const std::uint64_t n = P * L, k = P * m;
  std::vector<SparseVector> selections(P);
  for (int r = 0; r < P; ++r)
    for (int j = 0; j < P; ++j)
      for (std::uint64_t t = 0; t < m; ++t) {
        selections[r].indices.push_back(static_cast<Index>(j * L + r * m + t));
        selections[r].values.push_back(0.5f + r);
      }
  auto algorithm = make_sparse_algorithm(spec_of(variant));
  const SparseRun run = run_sparse(*algorithm, {selections}, n, k);

  // Each reduced region holds u = P m elements. At P = 8, u = 32 costs 32 * 8 = 64 * 4 bytes either way:
  // the tie stays sparse. At P = 16 the regions are full.
  const std::uint64_t u = P * m;
  bool dense = false;
  if (variant == "dsar")
    dense = u * kElement > L * kValue;
  if (variant == "dsar_global")
    dense = 2 * (P * u) >= 2 * n / 3;
  const Bytes region_bytes = dense ? L * kValue : u * kElement;
  for (int r = 0; r < P; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(run.iterations[0][r].result, union_sum(selections));
    const PhaseStats scatter = run.phase(0, r, "reduce_scatter");
    EXPECT_EQ(scatter.bytes_sent, (P - 1) * m * kElement);
    EXPECT_EQ(scatter.bytes_recv, (P - 1) * m * kElement);
    EXPECT_EQ(scatter.msgs_sent, static_cast<std::uint64_t>(P - 1));
    const PhaseStats gather = run.phase(0, r, "allgather");
    EXPECT_EQ(gather.bytes_sent, (P - 1) * region_bytes);
    EXPECT_EQ(gather.bytes_recv, (P - 1) * region_bytes);
    EXPECT_EQ(run.phase(0, r, "count_allgather").bytes_recv, variant == "dsar_global" ? 4 * (P - 1) : 0);
  }

  const CostInputs in{P, n, k, WireFormat{}, kRouteLatency, 1 / kStarBandwidth, {}, {}};
  const ClosedForm cf = algorithm->closed_form(in);
  const RankOutcome& out = run.iterations[0][0];
  EXPECT_EQ(cf.bytes_sent_per_rank, static_cast<double>(out.total.bytes_sent)) << cf.formula;
  EXPECT_EQ(cf.bytes_recv_per_rank, static_cast<double>(out.total.bytes_recv)) << cf.formula;
  // The P-1 reduce-scatter messages fly at once (their latencies overlap, their bytes share each link).
  EXPECT_NEAR(out.time, cf.time, 1e-12 + 0.005 * cf.time) << cf.formula;
}

// DSAR's per-region switch happens exactly when the sparse encoding costs more than the dense one. Regions of
// 16 indices cost 64 bytes dense; 7 elements cost 56 sparse (stays sparse), 9 cost 72 (goes dense); at 8 both
// cost 64 (a tie, invisible in bytes: the rule keeps it sparse).
TEST_P(SparcmlSplit, RegionGoesDenseExactlyAboveBreakEven)
{
  const auto [variant, P] = GetParam();
  const std::uint64_t L = 16, n = P * L;
  const std::uint64_t pattern[] = {7, 9, 8, 0}; // union size of region j: pattern[j % 4]
  std::vector<std::map<Index, float>> picked(P);
  std::uint64_t union_nnz = 0;
  for (int j = 0; j < P; ++j)
    for (std::uint64_t t = 0; t < pattern[j % 4]; ++t, ++union_nnz)
      picked[(t + j) % P][static_cast<Index>(j * L + t)] = 1.0f + t;
  std::vector<SparseVector> selections;
  for (const auto& p : picked)
    selections.push_back(from_map(p));
  auto algorithm = make_sparse_algorithm(spec_of(variant));
  const SparseRun run = run_sparse(*algorithm, {selections}, n, 0);

  auto region_bytes = [&](int j) -> Bytes {
    const std::uint64_t c = pattern[j % 4];
    bool dense = false;
    if (variant == "dsar")
      dense = c > 8;
    if (variant == "dsar_global")
      dense = 2 * union_nnz >= 2 * n / 3;
    return dense ? L * kValue : c * kElement;
  };
  Bytes total_sent = 0, total_recv = 0;
  for (int r = 0; r < P; ++r) {
    EXPECT_EQ(run.iterations[0][r].result, union_sum(selections)) << "rank " << r;
    Bytes others = 0;
    for (int j = 0; j < P; ++j)
      others += j == r ? 0 : region_bytes(j);
    const PhaseStats gather = run.phase(0, r, "allgather");
    EXPECT_EQ(gather.bytes_recv, others) << "rank " << r;
    total_sent += gather.bytes_sent;
    total_recv += gather.bytes_recv;
  }
  EXPECT_EQ(total_sent, total_recv);
}

// All selections in region 0: its owner receives every other rank's k elements in the reduce-scatter.
TEST_P(SparcmlSplit, AllSelectionsInOneRegion)
{
  const auto [variant, P] = GetParam();
  const std::uint64_t L = 64, n = P * L, k = 20;
  std::mt19937_64 rng(5 + P);
  std::vector<SparseVector> selections;
  for (int r = 0; r < P; ++r)
    selections.push_back(random_selection(rng, 0, L, k));
  auto algorithm = make_sparse_algorithm(spec_of(variant));
  const SparseRun run = run_sparse(*algorithm, {selections}, n, k);
  for (int r = 0; r < P; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(run.iterations[0][r].result, union_sum(selections));
    const PhaseStats scatter = run.phase(0, r, "reduce_scatter");
    EXPECT_EQ(scatter.bytes_recv, r == 0 ? k * (P - 1) * kElement : 0);
    EXPECT_EQ(scatter.bytes_sent, r == 0 ? 0 : k * kElement);
    EXPECT_EQ(scatter.msgs_recv, static_cast<std::uint64_t>(P - 1)); // empty slices are sent too
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, SparcmlSplit, ::testing::ValuesIn([] {
                           std::vector<Case> cases;
                           for (const char* v : {"ssar", "dsar", "dsar_global"})
                             for (int P : {1, 2, 3, 5, 8, 16})
                               cases.push_back({v, P});
                           return cases;
                         }()),
                         case_name);

// bf16 values with int32 indices: an element costs 6 bytes, a dense value 2, so a region of 18 indices (36
// bytes dense) goes dense above 6 elements: 5 stay sparse (30 bytes), 7 go dense (not 42).
TEST(SparcmlDsar, BreakEvenFollowsTheWireFormat)
{
  const int P = 4;
  const std::uint64_t L = 18, n = P * L;
  const std::uint64_t sizes[] = {5, 7, 0, 18}; // union size of region j
  std::vector<SparseVector> selections(P);
  for (int j = 0; j < P; ++j)
    for (std::uint64_t t = 0; t < sizes[j]; ++t) {
      selections[t % P].indices.push_back(static_cast<Index>(j * L + t));
      selections[t % P].values.push_back(-2.0f);
    }
  auto algorithm = make_sparse_algorithm(spec_of("dsar"));
  const WireFormat bf16{4, 2};
  const SparseRun run = run_sparse(*algorithm, {selections}, n, 0, bf16);
  const Bytes region_bytes[] = {5 * 6, 18 * 2, 0, 18 * 2}; // 5 sparse, 7 dense, empty sparse, full dense
  for (int r = 0; r < P; ++r) {
    Bytes others = 0;
    for (int j = 0; j < P; ++j)
      others += j == r ? 0 : region_bytes[j];
    EXPECT_EQ(run.phase(0, r, "allgather").bytes_recv, others) << "rank " << r;
    EXPECT_EQ(run.iterations[0][r].result, union_sum(selections)) << "rank " << r;
  }
}

// The reference TopkDSA's global switch: with n = 120 every region goes dense once 2 * |union| >= floor(240/3),
// i.e. at 40 selected indices, and all stay sparse at 39. The counts travel first (4 bytes a rank).
TEST(SparcmlDsar, GlobalSwitchAtAThirdOfN)
{
  const int P = 4;
  const std::uint64_t L = 30, n = P * L;
  std::vector<std::vector<SparseVector>> its;
  for (std::uint64_t union_nnz : {39, 40}) {
    std::vector<std::map<Index, float>> picked(P);
    for (std::uint64_t t = 0; t < union_nnz; ++t) // spread over the regions and the ranks
      picked[t % P][static_cast<Index>((t % P) * L + t / P)] = 3.0f;
    its.emplace_back();
    for (const auto& p : picked)
      its.back().push_back(from_map(p));
  }
  auto algorithm = make_sparse_algorithm(spec_of("dsar_global"));
  const SparseRun run = run_sparse(*algorithm, its, n, 0);
  for (int r = 0; r < P; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const std::uint64_t own_sparse = its[0][r].size(); // rank r's selection lies in region r
    EXPECT_EQ(run.phase(0, r, "allgather").bytes_recv, (39 - own_sparse) * kElement);
    EXPECT_EQ(run.phase(1, r, "allgather").bytes_recv, (P - 1) * L * kValue);
    EXPECT_EQ(run.phase(1, r, "count_allgather").bytes_recv, 4u * (P - 1));
    for (int it = 0; it < 2; ++it)
      EXPECT_EQ(run.iterations[it][r].result, union_sum(its[it]));
  }
}

// Disjoint selections (worst-case fill-in): round i moves 2^i k elements each way on a power of two; other
// P fold first. Every per-rank figure and the critical path are the closed form's.
TEST_P(SparcmlRecursiveDouble, DisjointSelectionsFillIn)
{
  const int P = GetParam();
  const std::uint64_t n = 4096, k = 40;
  std::vector<SparseVector> selections(P);
  for (int r = 0; r < P; ++r)
    for (std::uint64_t t = 0; t < k; ++t) {
      selections[r].indices.push_back(static_cast<Index>(r + P * t));
      selections[r].values.push_back(0.25f * (r + 1));
    }
  auto algorithm = make_sparse_algorithm(spec_of("recursive_double"));
  const SparseRun run = run_sparse(*algorithm, {selections}, n, k);

  int p2 = 1;
  while (p2 * 2 <= P)
    p2 *= 2;
  const int rem = P - p2;
  Bytes max_sent = 0, max_recv = 0;
  for (int r = 0; r < P; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const RankOutcome& out = run.iterations[0][r];
    EXPECT_EQ(out.result, union_sum(selections));
    EXPECT_EQ(out.result.size(), P * k);
    max_sent = std::max(max_sent, out.total.bytes_sent);
    max_recv = std::max(max_recv, out.total.bytes_recv);
    if (rem == 0) { // rounds 0..log2 P - 1 receive k, 2k, 4k, ... elements: (P-1) k in all
      EXPECT_EQ(out.total.bytes_recv, (P - 1) * k * kElement);
      EXPECT_EQ(out.total.bytes_sent, (P - 1) * k * kElement);
    } else if (r < 2 * rem) { // folded pairs: the selection goes up, the result comes back
      const bool even = r % 2 == 0;
      EXPECT_EQ(run.phase(0, r, even ? "fold" : "unfold").bytes_sent, (even ? k : P * k) * kElement);
      EXPECT_EQ(run.phase(0, r, even ? "unfold" : "fold").bytes_recv, (even ? P * k : k) * kElement);
      EXPECT_EQ(run.phase(0, r, "exchange").msgs_sent, even ? 0u : static_cast<std::uint64_t>(std::log2(p2)));
    }
  }
  const CostInputs in{P, n, k, WireFormat{}, kRouteLatency, 1 / kStarBandwidth, {}, {}};
  const ClosedForm cf = algorithm->closed_form(in);
  EXPECT_EQ(cf.bytes_sent_per_rank, static_cast<double>(max_sent)) << cf.formula;
  EXPECT_EQ(cf.bytes_recv_per_rank, static_cast<double>(max_recv)) << cf.formula;
  double slowest = 0;
  for (const auto& out : run.iterations[0])
    slowest = std::max(slowest, out.time);
  EXPECT_NEAR(slowest, cf.time, 1e-12 + 0.005 * cf.time) << cf.formula;
  // Each round's sum is computed once per group of ranks holding the same two vectors: p2 / 2 + p2 / 4 + ... + 1.
  EXPECT_EQ(run.shared_results_computed, static_cast<std::uint64_t>(p2 - 1));
}

INSTANTIATE_TEST_SUITE_P(Ranks, SparcmlRecursiveDouble, ::testing::Values(1, 2, 3, 5, 6, 8, 13, 16),
                         [](const auto& info) { return "P" + std::to_string(info.param); });

// Fill-in stops at n: with every index selected by every rank, each round moves n elements.
TEST(SparcmlRecursiveDouble, FillInIsCappedAtN)
{
  const int P = 8;
  const std::uint64_t n = 50;
  const auto selections = random_selections(P, n, n, 3);
  auto algorithm = make_sparse_algorithm(spec_of("recursive_double"));
  const SparseRun run = run_sparse(*algorithm, {selections}, n, n);
  for (const auto& out : run.iterations[0]) {
    EXPECT_EQ(out.result, union_sum(selections));
    EXPECT_EQ(out.total.bytes_recv, 3 * n * kElement); // log2 8 rounds of n elements
  }
}

TEST(SparcmlConfig, ParametersAreCheckedAndReported)
{
  EXPECT_EQ(make_sparse_algorithm(spec_of("dsar"))->params(),
            nlohmann::json({{"switch", "per_region"}, {"throttle", 32}}));
  EXPECT_EQ(make_sparse_algorithm(spec_of("dsar_global"))->params(),
            nlohmann::json({{"switch", "global"}, {"throttle", 32}}));
  EXPECT_THROW(make_sparse_algorithm({{"name", "sparcml_ssar_split_allgather"}, {"throttle", 0}}), ConfigError);
  EXPECT_EQ(make_sparse_algorithm(spec_of("ssar"))->name(), "sparcml_ssar_split_allgather");
  EXPECT_THROW(make_sparse_algorithm({{"name", "sparcml_dsar_split_allgather"}, {"switch", "sometimes"}}), ConfigError);
  EXPECT_THROW(make_sparse_algorithm({{"name", "sparcml_ssar_split_allgather"}, {"switch", "global"}}), ConfigError);
  for (const char* v : {"recursive_double", "ssar", "dsar", "dsar_global"}) {
    auto algorithm = make_sparse_algorithm(spec_of(v));
    EXPECT_EQ(algorithm->residual_rule(), SparseAllreduce::ResidualRule::all_selected) << v;
    EXPECT_EQ(algorithm->result_semantics(), SparseAllreduce::ResultSemantics::union_sum) << v;
  }
}
