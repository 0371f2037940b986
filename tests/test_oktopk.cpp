// Ok-Topk against its definition and its volume claims, in process on the contention-free star.
// The references here are written from algorithms.md, not from algorithms/oktopk.cpp:
// - re-evaluation iteration: U = exact top-k (ties: smaller index) of the union sum of the local selections;
// - other iterations: U = the entries of the union sum with |value| > gth, gth being the threshold the
//   algorithm reports it used (the correction rule that produced it is tested through the run's drift).
#include "algorithms/oktopk.hpp"
#include "sim/data/sparse_ops.hpp"
#include "sim/run/config.hpp"
#include "sim/run/driver.hpp"
#include "sim/run/selection_stage.hpp"
#include "sparse_harness.hpp"

#include <algorithm>
#include <cmath>
#include <gtest/gtest.h>
#include <map>
#include <ostream>
#include <random>
#include <set>

using namespace sparsim;
using namespace sparsim::testing;

namespace {

using Selections = std::vector<SparseVector>;

SparseVector from_map(const std::map<Index, float>& m)
{
  SparseVector v;
  for (auto [i, x] : m) {
    v.indices.push_back(i);
    v.values.push_back(x);
  }
  return v;
}

std::map<Index, float> union_sum(const Selections& selections)
{
  std::map<Index, float> sum; // test values are multiples of 1/8 below 2^10: exact in any order
  for (const auto& s : selections)
    for (std::size_t e = 0; e < s.size(); ++e)
      sum[s.indices[e]] += s.values[e];
  return sum;
}

SparseVector reference_reevaluation(const Selections& selections, std::size_t k)
{
  auto sum = union_sum(selections);
  std::vector<std::pair<Index, float>> entries(sum.begin(), sum.end());
  std::stable_sort(entries.begin(), entries.end(),
                   [](auto a, auto b) { return std::fabs(a.second) > std::fabs(b.second); });
  entries.resize(std::min(k, entries.size()));
  return from_map(std::map<Index, float>(entries.begin(), entries.end()));
}

SparseVector reference_threshold(const Selections& selections, double threshold)
{
  std::map<Index, float> kept;
  for (auto [i, v] : union_sum(selections))
    if (std::fabs(v) > threshold)
      kept[i] = v;
  return from_map(kept);
}

// Random selections: m_r distinct indices per rank, overlapping across ranks, values multiples of 1/8.
Selections random_selections(int P, std::uint64_t n, std::uint64_t k, std::mt19937_64& rng)
{
  Selections out(P);
  for (auto& s : out) {
    std::map<Index, float> picked;
    const std::uint64_t m = k / 2 + rng() % (k + 1); // drifting counts, as under threshold reuse
    while (picked.size() < m)
      picked[static_cast<Index>(rng() % n)] = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 8.0f;
    s = from_map(picked);
  }
  return out;
}

// Rank r selects indices r, r+P, r+2P, ...: k each, interleaved, all inside the first of P static regions.
Selections interleaved_in_region_zero(int P, std::uint64_t k)
{
  Selections selections(P);
  for (int r = 0; r < P; ++r) {
    std::map<Index, float> picked;
    for (std::uint64_t e = 0; e < k; ++e)
      picked[static_cast<Index>(e * P + r)] = 1.0f + r;
    selections[r] = from_map(picked);
  }
  return selections;
}

// Every rank selects indices 0, 1000, 2000, ... (m of them), with rank-dependent values.
Selections same_indices_every_1000(int P, std::uint64_t m)
{
  Selections selections(P);
  for (int r = 0; r < P; ++r) {
    std::map<Index, float> picked;
    for (std::uint64_t e = 0; e < m; ++e)
      picked[static_cast<Index>(e * 1000)] = 1.0f + r;
    selections[r] = from_map(picked);
  }
  return selections;
}

struct Variant {
  int ranks;
  nlohmann::json params;
  std::string label;
};
// Readable test parameters in ctest's names and gtest's output (instead of a byte dump with pointers).
void PrintTo(const Variant& variant, std::ostream* out) { *out << variant.label << "_P" << variant.ranks; }

class OkTopkVariants : public ::testing::TestWithParam<Variant> {};

} // namespace

TEST_P(OkTopkVariants, ResultMatchesTheDefinitionOnEveryRank)
{
  const Variant& v = GetParam();
  const int P = v.ranks;
  const std::uint64_t n = 4000, k = 80;
  const int iterations = 6;
  std::mt19937_64 rng(1234 + P);
  std::vector<Selections> selections;
  for (int it = 0; it < iterations; ++it)
    selections.push_back(random_selections(P, n, k, rng));
  nlohmann::json spec = v.params;
  spec["name"] = "oktopk";
  spec["repartition_every"] = 2;
  auto algorithm = make_sparse_algorithm(spec);
  const SparseRun run = run_sparse(*algorithm, selections, n, k, {}, /*reevaluate_every=*/3);

  for (int it = 0; it < iterations; ++it) {
    const RankOutcome& first = run.iterations[it][0];
    const bool reevaluation = it % 3 == 0;
    EXPECT_EQ(first.report.reevaluation, reevaluation);
    const SparseVector expected = reevaluation ? reference_reevaluation(selections[it], k)
                                               : reference_threshold(selections[it], first.report.global_threshold);
    for (int r = 0; r < P; ++r) {
      EXPECT_EQ(run.iterations[it][r].result, expected) << "iteration " << it << " rank " << r;
      EXPECT_EQ(run.iterations[it][r].report.global_threshold, first.report.global_threshold);
      EXPECT_EQ(run.iterations[it][r].report.global_selected, expected.size());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Variants, OkTopkVariants,
    ::testing::Values(
        Variant{1, nlohmann::json::object(), "default_P1"}, Variant{2, nlohmann::json::object(), "default_P2"},
        Variant{3, nlohmann::json::object(), "default_P3"}, Variant{8, nlohmann::json::object(), "default_P8"},
        Variant{13, nlohmann::json::object(), "default_P13"}, Variant{16, nlohmann::json::object(), "default_P16"},
        Variant{7, {{"balancing", false}}, "no_balancing_P7"},
        Variant{6, {{"messages_per_step", 2}}, "two_messages_P6"},
        Variant{5, {{"rotation", false}, {"partition", "static"}}, "ablations_P5"},
        Variant{9, {{"bucket", 1}}, "bucket1_P9"}, Variant{10, {{"bucket", 16}}, "bucket16_P10"},
        Variant{2, {{"repartition_allreduce", "rabenseifner"}}, "rabenseifner_P2"},
        Variant{13, {{"repartition_allreduce", "rabenseifner"}}, "rabenseifner_P13"},
        Variant{16, {{"repartition_allreduce", "rabenseifner"}}, "rabenseifner_P16"}),
    [](const auto& info) { return info.param.label; });

TEST(OkTopk, RotationMakesEveryStepAPermutation)
{
  for (int P : {1, 2, 3, 8, 13, 64}) {
    for (int step = 1; step < P; ++step) {
      std::set<RankId> destinations;
      for (RankId r = 0; r < P; ++r) {
        const SplitStep s = oktopk_split_step(r, P, step, true);
        EXPECT_NE(s.dest, r);
        destinations.insert(s.dest);
        EXPECT_EQ(oktopk_split_step(s.dest, P, step, true).source, r); // the destination expects r
      }
      EXPECT_EQ(destinations.size(), static_cast<std::size_t>(P)) << "P=" << P << " step " << step;
    }
    // Without rotation every rank sends to rank 0 first (incast), except rank 0 itself.
    if (P > 2) {
      EXPECT_EQ(oktopk_split_step(1, P, 1, false).dest, 0);
      EXPECT_EQ(oktopk_split_step(2, P, 1, false).dest, 0);
    }
  }
}

// Balanced input: each rank holds k/P entries in each of the P static regions; in the second iteration
// exactly k/P entries per region exceed the threshold set by the first. The split phase then moves exactly
// k(P-1)/P elements per rank each way (2k(P-1)/P words), balancing moves nothing, and the allgatherv brings
// every rank the other k(P-1)/P elements: 4k(P-1)/P words in total, metadata apart.
TEST(OkTopk, BalancedInputHasTheClosedFormVolume)
{
  const int P = 8;
  const std::uint64_t per_region = 4;
  const std::uint64_t k = per_region * P; // k/P = 4 entries per rank per region
  const std::uint64_t n = 64 * P;
  const std::uint64_t region = n / P;
  std::vector<Selections> selections(2, Selections(P));
  for (int it = 0; it < 2; ++it)
    for (int r = 0; r < P; ++r) {
      std::map<Index, float> picked;
      for (int j = 0; j < P; ++j)
        for (std::uint64_t e = 0; e < per_region; ++e) {
          const Index i = static_cast<Index>(j * region + r * per_region + e); // disjoint across ranks
          // Iteration 0: all 1.0 (the exact top-k sets gth = 1). Iteration 1: rank 0's entries 2.0, others 0.5.
          picked[i] = it == 0 ? 1.0f : (r == 0 ? 2.0f : 0.5f);
        }
      selections[it][r] = from_map(picked);
    }
  auto algorithm = make_sparse_algorithm({{"name", "oktopk"}, {"partition", "static"}});
  const SparseRun run = run_sparse(*algorithm, selections, n, k, {}, /*reevaluate_every=*/2);
  const Bytes element = 8;
  const Bytes share = k * (P - 1) / P * element;
  for (int r = 0; r < P; ++r) {
    EXPECT_EQ(run.iterations[1][r].result.size(), k);
    EXPECT_EQ(run.phase(1, r, "split").bytes_sent, share);
    EXPECT_EQ(run.phase(1, r, "split").bytes_recv, share);
    EXPECT_EQ(run.phase(1, r, "balance").bytes_sent, 0u);
    EXPECT_EQ(run.phase(1, r, "allgatherv").bytes_recv, share);
    EXPECT_EQ(run.phase(1, r, "allgatherv").bytes_sent, share);
  }
}

// All selections in region 0 of a static partition: its owner receives every other rank's k elements
// (2k(P-1) words, TopkA's volume).
TEST(OkTopk, StaticPartitionHasAHotSpot)
{
  const int P = 8;
  const std::uint64_t k = 64, n = 100000;
  const Selections selections = interleaved_in_region_zero(P, k);
  const Bytes element = 8;
  auto hot = make_sparse_algorithm({{"name", "oktopk"}, {"partition", "static"}});
  const SparseRun run = run_sparse(*hot, {selections}, n, k);
  EXPECT_EQ(run.phase(0, 0, "split").bytes_recv, k * (P - 1) * element);
  for (int r = 1; r < P; ++r)
    EXPECT_EQ(run.phase(0, r, "split").bytes_recv, 0u);
}

// The same input with the balanced repartition (one engine per test process, hence a second test).
TEST(OkTopk, BalancedPartitionSpreadsTheSameInput)
{
  const int P = 8;
  const std::uint64_t k = 64, n = 100000;
  const Selections selections = interleaved_in_region_zero(P, k);
  auto balanced = make_sparse_algorithm({{"name", "oktopk"}, {"partition", "balanced"}});
  const SparseRun run = run_sparse(*balanced, {selections}, n, k);
  const Bytes element = 8;
  for (int r = 0; r < P; ++r) {
    // Each owner now receives about k/P elements from each of the other P-1 ranks (quantile rounding: +1).
    EXPECT_LE(run.phase(0, r, "split").bytes_recv, (k / P + 1) * (P - 1) * element) << "rank " << r;
  }
}

TEST(OkTopk, ResidualKeepsWhatTheGlobalSelectionDropped)
{
  // Summed over ranks, (acc - residual) equals U: every rank zeroes exactly its selected entries that are in U.
  std::mt19937_64 rng(7);
  const int P = 5;
  const std::uint64_t n = 500, k = 30;
  Selections selections = random_selections(P, n, k, rng);
  std::vector<std::vector<float>> acc(P, std::vector<float>(n, 0.0f));
  for (int r = 0; r < P; ++r) {
    for (std::size_t i = 0; i < n; ++i)
      acc[r][i] = static_cast<float>(static_cast<int>(rng() % 17) - 8) / 8.0f;
    for (std::size_t e = 0; e < selections[r].size(); ++e)
      acc[r][selections[r].indices[e]] = selections[r].values[e];
  }
  const SparseVector result = reference_threshold(selections, 40.0);
  std::vector<double> consumed(n, 0.0);
  for (int r = 0; r < P; ++r) {
    std::vector<float> residual = acc[r];
    consume_selection(residual, selections[r], result, SparseAllreduce::ResidualRule::selected_in_result);
    for (std::size_t i = 0; i < n; ++i)
      consumed[i] += acc[r][i] - residual[i];
  }
  std::vector<double> expected(n, 0.0);
  for (std::size_t e = 0; e < result.size(); ++e)
    expected[result.indices[e]] = result.values[e];
  for (std::size_t i = 0; i < n; ++i)
    EXPECT_EQ(consumed[i], expected[i]) << "index " << i;
}

// The reference code's quantiles (every floor(m/P)-th selected index) leave the last region with up to
// m - (P-1) floor(m/P) of every rank's entries; when m/P is small that is a hot spot that the exact
// quantiles (position floor(j m / P)) do not have. Here m = 2P - 1: stride 1, so the last region keeps
// P entries of each rank instead of about 2.
TEST(OkTopk, ReferenceQuantilesOverloadTheLastRegionWhenMOverPIsSmall)
{
  const int P = 16;
  const std::uint64_t m = 2 * P - 1, n = 100000;
  const Selections selections = same_indices_every_1000(P, m);
  auto reference = make_sparse_algorithm({{"name", "oktopk"}, {"quantiles", "reference_stride"}});
  const SparseRun run = run_sparse(*reference, {selections}, n, m);
  const Bytes element = 8;
  // Boundaries land on j*1000: region j < P-1 holds entry j of each rank, the last region entries 15..30.
  EXPECT_EQ(run.phase(0, P - 1, "split").bytes_recv, static_cast<Bytes>(P) * (P - 1) * element);
  for (int r = 0; r < P - 1; ++r)
    EXPECT_EQ(run.phase(0, r, "split").bytes_recv, (P - 1) * element) << "rank " << r;
}

// The same input with the exact quantiles (positions floor(j m / P): 1, 3, 5, ..., 29): every region holds at
// most two entries of each rank.
TEST(OkTopk, ExactQuantilesSpreadTheSameInput)
{
  const int P = 16;
  const std::uint64_t m = 2 * P - 1, n = 100000;
  auto exact = make_sparse_algorithm({{"name", "oktopk"}});
  const SparseRun run = run_sparse(*exact, {same_indices_every_1000(P, m)}, n, m);
  const Bytes element = 8;
  for (int r = 0; r < P; ++r)
    EXPECT_LE(run.phase(0, r, "split").bytes_recv, 2 * (P - 1) * element) << "rank " << r;
}

// The memory estimate's term for what each collective holds grows with P^2 and must cover the structures the code
// keeps per rank and region or gathered part (their sizes here, so a structure that grows without its term
// fails); measured against peak heap and RSS in docs/scale.md.
TEST(HeldMemory, CoversWhatEachRankKeepsPerRegionAndPerGatheredPart)
{
  auto held_bytes = [](const std::string& algorithm, int ranks) {
    const nlohmann::json json = {
        {"ranks", ranks},
        {"topology", {{"type", "star"}, {"nodes", ranks}, {"bandwidth", "10Gbps"}, {"latency", "1us"}}},
        {"workload", {{"n", 1 << 20}, {"density", 0.01}}},
        {"algorithm", {{"name", algorithm}}}};
    const ExperimentConfig config = parse_config(json, SPARSIM_SOURCE_DIR);
    double bytes = 0;
    for (const auto& term : config.sparse_algorithm()->held_memory(config.cost_inputs()))
      bytes += term.bytes;
    return bytes;
  };
  const double P = 64;
  // Ok-Topk's split: a boundary, a cut in the selection, the slice received and the count announced.
  const double split = sizeof(std::uint64_t) + sizeof(std::uint32_t) + sizeof(SparseSlice) + sizeof(std::uint32_t);
  EXPECT_GE(held_bytes("oktopk", P), split * P * P);
  // SparCML's reduce-scatter: the same but the count (its counts end before the slices arrive).
  EXPECT_GE(held_bytes("sparcml_ssar_split_allgather", P), (split - sizeof(std::uint32_t)) * P * P);
  // An allgather: a pointer per part on every rank; Gaussiank keeps four such arrays at once.
  EXPECT_GE(held_bytes("topka", P), sizeof(std::shared_ptr<const SparseVector>) * P * P);
  EXPECT_GE(held_bytes("gaussiank", P), 4 * sizeof(std::shared_ptr<const SparseVector>) * P * P);
  // gTopk's tree holds nothing per rank pair.
  EXPECT_EQ(held_bytes("gtopk", P), 0);
}
