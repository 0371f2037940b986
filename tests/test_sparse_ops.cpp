// Sparse sums against a brute-force oracle: every index's value is the left fold of its values in part
// order, bit for bit, whichever internal path (dense accumulator or k-way merge) sum_in_order takes.
#include "sim/data/sparse_ops.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <map>
#include <random>

using namespace sparsim;

namespace {

// Random sorted parts: `parts` vectors with about `per_part` entries drawn from [offset, offset + span).
std::vector<SparseVector> random_parts(int parts, int per_part, Index offset, Index span, std::uint32_t seed)
{
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<SparseVector> out(parts);
  for (auto& part : out) {
    std::map<Index, float> entries;
    for (int e = 0; e < per_part; ++e)
      entries[offset + random() % span] = value(random);
    for (auto [index, v] : entries) {
      part.indices.push_back(index);
      part.values.push_back(v);
    }
  }
  return out;
}

SparseVector oracle_sum(const std::vector<SparseVector>& parts)
{
  std::map<Index, std::vector<float>> values; // per index, in part order
  for (const auto& part : parts)
    for (std::size_t e = 0; e < part.size(); ++e)
      values[part.indices[e]].push_back(part.values[e]);
  SparseVector sum;
  for (auto& [index, list] : values) {
    float s = list[0];
    for (std::size_t i = 1; i < list.size(); ++i)
      s = s + list[i];
    sum.indices.push_back(index);
    sum.values.push_back(s);
  }
  return sum;
}

void expect_bitwise_equal(const SparseVector& got, const SparseVector& want)
{
  ASSERT_EQ(got.indices, want.indices);
  for (std::size_t e = 0; e < want.size(); ++e)
    ASSERT_EQ(std::bit_cast<std::uint32_t>(got.values[e]), std::bit_cast<std::uint32_t>(want.values[e]))
        << "entry " << e;
}

SparseVector sum_of(const std::vector<SparseVector>& parts)
{
  std::vector<const SparseVector*> pointers;
  for (const auto& part : parts)
    pointers.push_back(&part);
  return sum_in_order(pointers);
}

} // namespace

TEST(SparseOps, SumInOrderMatchesTheOracleOnNarrowAndWideSpans)
{
  // Narrow spans (the accumulator's case) and wide ones (the merge's), few and many parts.
  for (int parts : {2, 3, 17, 64})
    for (Index span : {Index(50), Index(4000), Index(4'000'000)}) {
      SCOPED_TRACE(testing::Message() << parts << " parts, span " << span);
      const auto input = random_parts(parts, 300, 1000, span, parts * 7919u + span);
      expect_bitwise_equal(sum_of(input), oracle_sum(input));
    }
}

TEST(SparseOps, SumInOrderKeepsNegativeZeroAndEmptyParts)
{
  std::vector<SparseVector> parts(4);
  parts[0].indices = {5, 6};
  parts[0].values = {-0.0f, 1.0f};
  parts[2].indices = {6, 7};
  parts[2].values = {-1.0f, -0.0f};
  const SparseVector sum = sum_of(parts);
  expect_bitwise_equal(sum, oracle_sum(parts));
  ASSERT_EQ(sum.size(), 3u);
  EXPECT_TRUE(std::signbit(sum.values[0])); // a lone -0 stays -0
  EXPECT_TRUE(sum_of(std::vector<SparseVector>(3)).empty());
}

// Slices are views: each holds exactly the entries of its index range (checked against a filter of the
// whole vector), costs what a copy of them would cost on the wire, and the views of consecutive ranges
// summed in order give the same bits as the copies.
TEST(SparseOps, SlicesViewTheirIndexRangeWithoutCopying)
{
  const auto whole = std::make_shared<const SparseVector>(random_parts(1, 500, 0, 10'000, 11)[0]);
  const std::vector<Index> bounds = {0, 1, 2500, 2500, 7000, 10'000, 20'000};
  const WireFormat wire;
  std::vector<SparseVector> copies;
  std::vector<SparseView> views;
  std::vector<SparseSlice> slices;
  for (std::size_t j = 0; j + 1 < bounds.size(); ++j)
    slices.push_back(slice_of(whole, bounds[j], bounds[j + 1]));
  for (std::size_t j = 0; j + 1 < bounds.size(); ++j) {
    const SparseSlice& s = slices[j];
    SparseVector expected;
    for (std::size_t e = 0; e < whole->size(); ++e)
      if (whole->indices[e] >= bounds[j] && whole->indices[e] < bounds[j + 1]) {
        expected.indices.push_back(whole->indices[e]);
        expected.values.push_back(whole->values[e]);
      }
    const SparseView view = s.view();
    EXPECT_EQ(SparseVector({{view.indices.begin(), view.indices.end()}, {view.values.begin(), view.values.end()}}),
              expected)
        << "range " << j;
    EXPECT_EQ(view.indices.data(), whole->indices.data() + s.first) << "a view, not a copy";
    EXPECT_EQ(wire_bytes(s, wire), wire_bytes(expected, wire));
    copies.push_back(expected);
    views.push_back(view);
  }
  expect_bitwise_equal(sum_in_order(views), oracle_sum(copies));
  expect_bitwise_equal(sum_in_order(views), *whole);
}

// RegionSlices: the same slices as slice_of range by range (empty regions, regions past the last index, a region
// holding everything); a payload keeps the whole vector alive, and nothing else does once the slices are gone.
TEST(SparseOps, RegionSlicesAreTheSlicesOfEachRange)
{
  auto whole = std::make_shared<const SparseVector>(random_parts(1, 300, 0, 5'000, 12)[0]);
  for (const std::vector<std::uint64_t>& bounds : std::vector<std::vector<std::uint64_t>>{
           {0, 7, 7, 2'000, 4'999, 5'000}, {0, 5'000}, {0, 0, 0}, {4'999, 6'000, 7'000}}) {
    const RegionSlices slices(whole, bounds);
    for (std::size_t j = 0; j + 1 < bounds.size(); ++j) {
      const SparseSlice expected = slice_of(whole, static_cast<Index>(bounds[j]), static_cast<Index>(bounds[j + 1]));
      const auto payload = slices.payload(j);
      EXPECT_EQ(payload->whole, whole);
      EXPECT_EQ(payload->first, expected.first) << "slice " << j;
      EXPECT_EQ(payload->last, expected.last) << "slice " << j;
      EXPECT_EQ(slices.size(j), expected.size()) << "slice " << j;
      EXPECT_EQ(slices.slice(j).first, expected.first) << "slice " << j;
    }
  }
  std::weak_ptr<const SparseVector> watched = whole;
  auto payload = RegionSlices(whole, std::vector<std::uint64_t>{0, 10}).payload(0);
  whole.reset();
  EXPECT_FALSE(watched.expired()) << "a payload keeps its vector";
  payload.reset();
  EXPECT_TRUE(watched.expired());
}
