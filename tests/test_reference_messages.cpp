// Bytes per rank and phase against the message lists of the reference implementation (Shigangli/Ok-Topk,
// VGG/allreducer.py), written out here from its MPI calls, not from algorithms/:
// - TopkDSA (branch 'topkSA', sparsim's sparcml_dsar_split_allgather with switch "global"): Alltoall of the
//   P split sizes (one int32 per destination), the split (int32 index + fp32 value per entry, to the region's
//   owner), Allgather of one int32 (the reduced count), Allgatherv of the reduced regions (index + value each).
// - Ok-Topk (branch 'oktopk'), a re-evaluation iteration: Allreduce of the P-1 region boundaries (summed as
//   64-bit integers here: 8 bytes each, by recursive doubling on a power of two), the split, Allgather of one
//   int32 (the reduced count), Allgatherv of the reduced regions.
// Regions: the reference cuts [0, n) into P blocks of n // P (the last takes the rest); n is a multiple of P
// here, where sparsim's near-equal blocks are the same.
#include "sparse_harness.hpp"

#include <cmath>
#include <gtest/gtest.h>
#include <map>
#include <random>
#include <set>

using namespace sparsim;
using namespace sparsim::testing;

namespace {

constexpr Bytes kInt32 = 4, kIndexAndValue = 8;

// Random overlapping selections of different sizes, values multiples of 1/8 (exact sums).
std::vector<SparseVector> random_selections(int P, std::uint64_t n, std::uint64_t seed)
{
  std::mt19937_64 rng(seed);
  std::vector<SparseVector> out(P);
  for (int r = 0; r < P; ++r) {
    std::map<Index, float> picked;
    while (picked.size() < static_cast<std::size_t>(20 + 5 * r))
      picked[static_cast<Index>(rng() % n)] = static_cast<float>(static_cast<int>(rng() % 801) - 400) / 8.0f;
    for (auto [i, v] : picked) {
      out[r].indices.push_back(i);
      out[r].values.push_back(v);
    }
  }
  return out;
}

// The entries of `s` in the reference's region j of [0, n).
std::uint64_t in_region(const SparseVector& s, std::uint64_t n, int P, int j)
{
  const std::uint64_t splitter = n / P;
  const std::uint64_t begin = j * splitter, end = j == P - 1 ? n : begin + splitter;
  std::uint64_t count = 0;
  for (Index i : s.indices)
    count += i >= begin && i < end;
  return count;
}

// The size of the union of the selections within region j (what its owner reduces to).
std::uint64_t union_in_region(const std::vector<SparseVector>& selections, std::uint64_t n, int P, int j)
{
  std::set<Index> indices;
  const std::uint64_t splitter = n / P;
  for (const auto& s : selections)
    for (Index i : s.indices)
      if (i >= j * splitter && (j == P - 1 || i < (j + 1) * splitter))
        indices.insert(i);
  return indices.size();
}

} // namespace

TEST(ReferenceMessages, TopkDsaExchangesTheSplitSizesFirst)
{
  const int P = 6;
  const std::uint64_t n = 600;
  const auto selections = random_selections(P, n, 3);
  auto algorithm = make_sparse_algorithm({{"name", "sparcml_dsar_split_allgather"}, {"switch", "global"}});
  const SparseRun run = run_sparse(*algorithm, {selections}, n, 0);
  for (int r = 0; r < P; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    // Alltoall of the split sizes: one int32 to and from every other rank.
    EXPECT_EQ(run.phase(0, r, "split_counts").bytes_sent, kInt32 * (P - 1));
    EXPECT_EQ(run.phase(0, r, "split_counts").bytes_recv, kInt32 * (P - 1));
    EXPECT_EQ(run.phase(0, r, "split_counts").msgs_sent, static_cast<std::uint64_t>(P - 1));
    // The split: every entry outside the own region to its owner; the own region's entries from the others.
    std::uint64_t sent = 0, received = 0;
    for (int j = 0; j < P; ++j)
      if (j != r)
        sent += in_region(selections[r], n, P, j);
    for (int q = 0; q < P; ++q)
      if (q != r)
        received += in_region(selections[q], n, P, r);
    EXPECT_EQ(run.phase(0, r, "reduce_scatter").bytes_sent, kIndexAndValue * sent);
    EXPECT_EQ(run.phase(0, r, "reduce_scatter").bytes_recv, kIndexAndValue * received);
    // Allgather of the reduced counts, then (far below n/3) the sparse reduced regions of the others.
    EXPECT_EQ(run.phase(0, r, "count_allgather").bytes_recv, kInt32 * (P - 1));
    std::uint64_t others = 0;
    for (int q = 0; q < P; ++q)
      if (q != r)
        others += union_in_region(selections, n, P, q);
    EXPECT_EQ(run.phase(0, r, "allgather").bytes_recv, kIndexAndValue * others);
  }
}

TEST(ReferenceMessages, OkTopkReevaluationAllgathersTheCountsFirst)
{
  const int P = 5;
  const std::uint64_t n = 500;
  const auto selections = random_selections(P, n, 4);
  // Static regions (no repartition) so that the regions are the reference's n // P blocks.
  auto algorithm = make_sparse_algorithm({{"name", "oktopk"}, {"partition", "static"}});
  const SparseRun run = run_sparse(*algorithm, {selections}, n, 30);
  ASSERT_TRUE(run.iterations[0][0].report.reevaluation);
  for (int r = 0; r < P; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(run.phase(0, r, "reevaluation_counts").bytes_recv, kInt32 * (P - 1));
    EXPECT_EQ(run.phase(0, r, "reevaluation_counts").bytes_sent, kInt32 * (P - 1));
    std::uint64_t others = 0;
    for (int q = 0; q < P; ++q)
      if (q != r)
        others += union_in_region(selections, n, P, q);
    EXPECT_EQ(run.phase(0, r, "reevaluation_allgather").bytes_recv, kIndexAndValue * others);
  }
}

TEST(ReferenceMessages, OkTopkBoundariesAreSummedAs64BitIntegers)
{
  // P = 8: recursive doubling, log2 P = 3 rounds each exchanging the P - 1 boundaries, 8 bytes each.
  const int P = 8;
  const std::uint64_t n = 800;
  const auto selections = random_selections(P, n, 5);
  auto algorithm = make_sparse_algorithm({{"name", "oktopk"}});
  const SparseRun run = run_sparse(*algorithm, {selections}, n, 30);
  for (int r = 0; r < P; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(run.phase(0, r, "repartition").msgs_sent, 3u);
    EXPECT_EQ(run.phase(0, r, "repartition").bytes_sent, 3 * 8u * (P - 1));
    EXPECT_EQ(run.phase(0, r, "repartition").bytes_recv, 3 * 8u * (P - 1));
  }
}
