// compute.reduction: local work on received data charged at a bandwidth (Communicator::charge_reduction).
// Oracles: with disjoint selections every set size along the way is known, so the bytes each rank reads and
// writes follow by hand; on a contention-free star the rest of an iteration is the closed form (within the
// 0.5% the other star tests allow), and the charged time adds to the critical path. The reduction bandwidth
// is low, so that the charged time dwarfs that tolerance. (One simulation per test: SimGrid's engine is
// created once per process.)
#include "dense_harness.hpp"
#include "sparse_harness.hpp"

#include <gtest/gtest.h>

using namespace sparsim;
using namespace sparsim::testing;

namespace {

constexpr BytesPerSecond kReductionBandwidth = 1e8;
constexpr double kAlpha = 2 * kStarLatency; // a route crosses two links

// Rank r selects k indices of its own (r*k .. r*k + k - 1), so no two ranks share an index; values grow
// with the index and differ from rank to rank, so re-selection by magnitude has no ties.
std::vector<SparseVector> disjoint_selections(int P, std::uint64_t k)
{
  std::vector<SparseVector> selections(P);
  for (int r = 0; r < P; ++r)
    for (std::uint64_t i = 0; i < k; ++i) {
      selections[r].indices.push_back(static_cast<Index>(r * k + i));
      selections[r].values.push_back(1.0f + static_cast<float>(r * k + i));
    }
  return selections;
}

} // namespace

// gTopk at P = 4: rank 0 merges in both tree rounds, rank 2 in the first; each merge reads 2k pairs and
// writes 2k (the sets are disjoint), and the re-selection reads 2k and writes k: 8 * 7k bytes per merge.
// The leaves charge nothing. Rank 2 merges in the first round while the root does, so the root's iteration
// is the closed form plus its own two merges.
TEST(ReductionCost, GTopkChargesEachTreeMerge)
{
  const int P = 4;
  const std::uint64_t k = 500;
  const std::uint64_t n = P * k;
  const auto algorithm = make_sparse_algorithm({{"name", "gtopk"}});
  const auto run = run_sparse(*algorithm, {disjoint_selections(P, k)}, n, k, {}, 1, kReductionBandwidth);
  const double merge = 8.0 * 7 * k / kReductionBandwidth;
  EXPECT_DOUBLE_EQ(run.phase(0, 0, "reduction").time, 2 * merge);
  EXPECT_DOUBLE_EQ(run.phase(0, 2, "reduction").time, merge);
  EXPECT_EQ(run.phase(0, 1, "reduction").time, 0);
  EXPECT_EQ(run.phase(0, 3, "reduction").time, 0);
  const double network = algorithm->closed_form({P, n, k, WireFormat{}, kAlpha, 1.0 / kStarBandwidth, {}, {}}).time;
  EXPECT_GT(merge, network);
  EXPECT_NEAR(run.iterations[0][0].time, network + 2 * merge, 0.005 * network);
  // The result is the top k of the union: the largest values, rank 3's.
  EXPECT_EQ(run.iterations[0][0].result.indices.front(), static_cast<Index>(3 * k));
}

// A run without a reduction bandwidth charges nothing and has no such phase.
TEST(ReductionCost, FreeByDefault)
{
  const int P = 4;
  const std::uint64_t k = 500;
  const auto algorithm = make_sparse_algorithm({{"name", "gtopk"}});
  const auto run = run_sparse(*algorithm, {disjoint_selections(P, k)}, P * k, k);
  for (const auto& name : run.phase_names)
    EXPECT_NE(name, "reduction");
  const double network = algorithm->closed_form({P, P * k, k, WireFormat{}, kAlpha, 1.0 / kStarBandwidth, {}, {}}).time;
  EXPECT_NEAR(run.iterations[0][0].time, network, 0.005 * network);
}

// TopkA: every rank sums the P gathered sets itself (computed once here, charged to each): it reads P k
// pairs and writes the P k of the disjoint union. The sum follows the allgather, so each rank's time is the
// closed form plus the sum.
TEST(ReductionCost, TopkaChargesTheUnionSumToEveryRank)
{
  const int P = 4;
  const std::uint64_t k = 300;
  const std::uint64_t n = P * k;
  const auto algorithm = make_sparse_algorithm({{"name", "topka"}});
  const auto run = run_sparse(*algorithm, {disjoint_selections(P, k)}, n, k, {}, 1, kReductionBandwidth);
  const double sum = 8.0 * (P * k + P * k) / kReductionBandwidth;
  const double network = algorithm->closed_form({P, n, k, WireFormat{}, kAlpha, 1.0 / kStarBandwidth, {}, {}}).time;
  EXPECT_GT(sum, network);
  for (int r = 0; r < P; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_DOUBLE_EQ(run.phase(0, r, "reduction").time, sum);
    EXPECT_NEAR(run.iterations[0][r].time, network + sum, 0.005 * network);
    EXPECT_EQ(run.iterations[0][r].result.size(), P * k);
  }
}

// SparCML's recursive doubling at P = 4: two exchange rounds, each merging two disjoint sets of 2^i k pairs
// (k + k, then 2k + 2k), written whole.
TEST(ReductionCost, SparcmlRecursiveDoublingChargesEveryRound)
{
  const int P = 4;
  const std::uint64_t k = 400;
  const std::uint64_t n = P * k;
  const auto charged = run_sparse(*make_sparse_algorithm({{"name", "sparcml_ssar_recursive_double"}}),
                                  {disjoint_selections(P, k)}, n, k, {}, 1, kReductionBandwidth);
  const double rounds = 8.0 * ((2 * k + 2 * k) + (4 * k + 4 * k)) / kReductionBandwidth;
  for (int r = 0; r < P; ++r)
    EXPECT_DOUBLE_EQ(charged.phase(0, r, "reduction").time, rounds) << "rank " << r;
}

// Dense recursive doubling at P = 3 (p2 = 2, rem = 1): rank 0 folds its vector into rank 1, which adds it
// (12 n bytes: two fp32 read, one written per entry); ranks 1 and 2 then exchange and each add the other's
// vector (12 n bytes each); rank 1 unfolds the result to rank 0, which overwrites its copy (free). So rank 1
// is charged two additions, rank 2 one, rank 0 none. The additions on rank 1 sit on the critical path (fold,
// add, exchange, add, unfold): the iteration takes the closed form plus two additions.
TEST(ReductionCost, DenseRecursiveDoublingChargesTheFoldAddition)
{
  const int P = 3;
  const std::uint64_t n = 1000;
  const auto algorithm = make_dense_algorithm({{"name", "dense_recursive_doubling"}});
  std::vector<std::vector<float>> vectors(P, std::vector<float>(n));
  for (int r = 0; r < P; ++r)
    for (std::uint64_t i = 0; i < n; ++i)
      vectors[r][i] = static_cast<float>(r * 1000 + i % 97);
  const auto run = run_dense(*algorithm, vectors, kReductionBandwidth);
  const double add = 12.0 * n / kReductionBandwidth;
  EXPECT_EQ(run.phase(0, "reduction").time, 0);
  EXPECT_DOUBLE_EQ(run.phase(1, "reduction").time, 2 * add);
  EXPECT_DOUBLE_EQ(run.phase(2, "reduction").time, add);
  const double network = algorithm->closed_form({P, n, 0, WireFormat{}, kAlpha, 1.0 / kStarBandwidth, {}, {}}).time;
  EXPECT_GT(add, network);
  for (int r = 0; r < P; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    for (std::uint64_t i = 0; i < n; ++i)
      ASSERT_EQ(run.ranks[r].result[i], vectors[0][i] + vectors[1][i] + vectors[2][i]) << "entry " << i;
  }
  EXPECT_NEAR(run.ranks[0].time, network + 2 * add, 0.005 * network);
}

// Rabenseifner at P = 3 folds the same way: rank 1 adds rank 0's whole vector (12 n bytes), then ranks 1 and 2
// each add the partner's half in the one halving step (12 n/2 bytes each); the allgather and the unfold only
// overwrite. The critical path holds rank 1's two additions.
TEST(ReductionCost, DenseRabenseifnerChargesTheFoldAddition)
{
  const int P = 3;
  const std::uint64_t n = 1000;
  const auto algorithm = make_dense_algorithm({{"name", "dense_rabenseifner"}});
  std::vector<std::vector<float>> vectors(P, std::vector<float>(n));
  for (int r = 0; r < P; ++r)
    for (std::uint64_t i = 0; i < n; ++i)
      vectors[r][i] = static_cast<float>(r * 1000 + i % 89);
  const auto run = run_dense(*algorithm, vectors, kReductionBandwidth);
  const double fold_add = 12.0 * n / kReductionBandwidth;
  const double half_add = 12.0 * (n / 2) / kReductionBandwidth;
  EXPECT_EQ(run.phase(0, "reduction").time, 0);
  EXPECT_DOUBLE_EQ(run.phase(1, "reduction").time, fold_add + half_add);
  EXPECT_DOUBLE_EQ(run.phase(2, "reduction").time, half_add);
  const double network = algorithm->closed_form({P, n, 0, WireFormat{}, kAlpha, 1.0 / kStarBandwidth, {}, {}}).time;
  for (int r = 0; r < P; ++r)
    for (std::uint64_t i = 0; i < n; ++i)
      ASSERT_EQ(run.ranks[r].result[i], vectors[0][i] + vectors[1][i] + vectors[2][i]) << "rank " << r;
  EXPECT_NEAR(run.ranks[0].time, network + fold_add + half_add, 0.005 * network);
}

// The power-of-two ranks have no fold: dense recursive doubling at P = 4 charges each rank its two additions.
TEST(ReductionCost, DenseRecursiveDoublingWithoutFold)
{
  const int P = 4;
  const std::uint64_t n = 1000;
  const auto algorithm = make_dense_algorithm({{"name", "dense_recursive_doubling"}});
  const auto run =
      run_dense(*algorithm, std::vector<std::vector<float>>(P, std::vector<float>(n, 1.0f)), kReductionBandwidth);
  const double add = 12.0 * n / kReductionBandwidth;
  const double network = algorithm->closed_form({P, n, 0, WireFormat{}, kAlpha, 1.0 / kStarBandwidth, {}, {}}).time;
  for (int r = 0; r < P; ++r) {
    EXPECT_DOUBLE_EQ(run.phase(r, "reduction").time, 2 * add) << "rank " << r;
    EXPECT_NEAR(run.ranks[r].time, network + 2 * add, 0.005 * network) << "rank " << r;
    EXPECT_EQ(run.ranks[r].result, std::vector<float>(n, 4.0f));
  }
}
