// TopkA against its definition: the union sum of the local selections, on every rank, with 2k(P-1) words
// received per rank, for both allgather shapes and any P.
#include "sparse_harness.hpp"

#include <gtest/gtest.h>
#include <map>
#include <ostream>
#include <random>

using namespace sparsim;
using namespace sparsim::testing;

namespace {

// Random local selections of exactly k distinct indices each.
std::vector<SparseVector> random_selections(int P, std::uint64_t n, std::uint64_t k, std::uint64_t seed)
{
  std::mt19937_64 rng(seed);
  std::vector<SparseVector> out(P);
  for (auto& s : out) {
    std::map<Index, float> picked;
    while (picked.size() < k)
      picked[static_cast<Index>(rng() % n)] = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 8.0f;
    for (auto [i, v] : picked) {
      s.indices.push_back(i);
      s.values.push_back(v);
    }
  }
  return out;
}

// The definition, computed directly: a map from index to the sum of every rank's value there.
SparseVector union_sum(const std::vector<SparseVector>& selections)
{
  std::map<Index, float> sum; // values are multiples of 1/8 below 2^10: sums are exact in any order
  for (const auto& s : selections)
    for (std::size_t e = 0; e < s.size(); ++e)
      sum[s.indices[e]] += s.values[e];
  SparseVector out;
  for (auto [i, v] : sum) {
    out.indices.push_back(i);
    out.values.push_back(v);
  }
  return out;
}

struct Shape {
  int ranks;
  std::string allgather;
};
// Readable test parameters in ctest's names and gtest's output (instead of a byte dump with pointers).
void PrintTo(const Shape& shape, std::ostream* out) { *out << "P" << shape.ranks << "_" << shape.allgather; }

class TopkAShapes : public ::testing::TestWithParam<Shape> {};

} // namespace

TEST_P(TopkAShapes, UnionSumOnEveryRankAndExactVolume)
{
  const auto [P, allgather] = GetParam();
  const std::uint64_t n = 5000, k = 60;
  auto algorithm = make_sparse_algorithm({{"name", "topka"}, {"allgather", allgather}});
  const auto selections = random_selections(P, n, k, 42 + P);
  const SparseRun run = run_sparse(*algorithm, {selections}, n, k);
  const SparseVector expected = union_sum(selections);
  for (int r = 0; r < P; ++r) {
    const RankOutcome& out = run.iterations[0][r];
    EXPECT_EQ(out.result, expected) << "rank " << r;
    // 8-byte elements: every rank receives the other ranks' k elements once.
    EXPECT_EQ(out.total.bytes_recv, 8 * k * (P - 1));
    EXPECT_EQ(out.total.bytes_sent, 8 * k * (P - 1));
  }
  const int steps = allgather == "ring" ? P - 1 : static_cast<int>(std::ceil(std::log2(P)));
  const double expected_time = steps * 2 * kStarLatency + 8.0 * k * (P - 1) / kStarBandwidth;
  EXPECT_NEAR(run.iterations[0][0].time, expected_time, 1e-9 + 0.005 * expected_time);
}

INSTANTIATE_TEST_SUITE_P(Shapes, TopkAShapes,
                         ::testing::Values(Shape{1, "ring"}, Shape{2, "ring"}, Shape{5, "ring"}, Shape{8, "ring"},
                                           Shape{1, "recursive_doubling"}, Shape{2, "recursive_doubling"},
                                           Shape{6, "recursive_doubling"}, Shape{16, "recursive_doubling"},
                                           Shape{13, "recursive_doubling"}),
                         [](const auto& info) {
                           return info.param.allgather + "_P" + std::to_string(info.param.ranks);
                         });

TEST(TopkA, EmptySelectionsGiveAnEmptyResult)
{
  auto algorithm = make_sparse_algorithm({{"name", "topka"}});
  const SparseRun run = run_sparse(*algorithm, {std::vector<SparseVector>(4)}, 100, 0);
  for (const auto& out : run.iterations[0])
    EXPECT_TRUE(out.result.empty());
}
