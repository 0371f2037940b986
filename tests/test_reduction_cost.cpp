// compute.reduction: local work on received data charged at a bandwidth (Communicator::charge_reduction).
// Oracles: with disjoint selections every set size along the way is known, so the bytes each rank reads and
// writes follow by hand; on a contention-free star the rest of an iteration is the closed form (within the
// 0.5% the other star tests allow), and the charged time adds to the critical path. The reduction bandwidth
// is low, so that the charged time dwarfs that tolerance. (One simulation per test: SimGrid's engine is
// created once per process.)
#include "sparse_harness.hpp"

#include <gtest/gtest.h>

using namespace sparsim;
using namespace sparsim::testing;

namespace {

constexpr BytesPerSecond kReductionBandwidth = 1e8;
constexpr double kAlpha = 2 * kStarLatency;  // a route crosses two links

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

}  // namespace

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
  const double network = algorithm->closed_form({P, n, k, WireFormat{}, kAlpha, 1.0 / kStarBandwidth}).time;
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
  const double network = algorithm->closed_form({P, P * k, k, WireFormat{}, kAlpha, 1.0 / kStarBandwidth}).time;
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
  const double network = algorithm->closed_form({P, n, k, WireFormat{}, kAlpha, 1.0 / kStarBandwidth}).time;
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
