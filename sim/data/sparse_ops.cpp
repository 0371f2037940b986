#include "sim/data/sparse_ops.hpp"

#include "sim/data/topk.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <queue>
#include <stdexcept>

namespace sparsim {

SparseVector merge_sum(const SparseVector& a, const SparseVector& b)
{
  const SparseVector* parts[] = {&a, &b};
  return sum_in_order(parts);
}

namespace {

// k-way merge on (index, part number): equal indices come out in part order.
SparseVector merge_in_order(std::span<const SparseView> parts, std::size_t total)
{
  using Head = std::pair<Index, std::size_t>; // (index, part)
  std::priority_queue<Head, std::vector<Head>, std::greater<>> heads;
  std::vector<std::size_t> cursor(parts.size(), 0);
  for (std::size_t p = 0; p < parts.size(); ++p)
    if (!parts[p].empty())
      heads.emplace(parts[p].indices[0], p);
  SparseVector sum;
  sum.reserve(total);
  while (!heads.empty()) {
    auto [index, p] = heads.top();
    heads.pop();
    const float value = parts[p].values[cursor[p]];
    if (!sum.empty() && sum.indices.back() == index) {
      sum.values.back() += value;
    } else {
      sum.indices.push_back(index);
      sum.values.push_back(value);
    }
    if (++cursor[p] < parts[p].size())
      heads.emplace(parts[p].indices[cursor[p]], p);
  }
  return sum;
}

// The same sums through a dense accumulator over the parts' index span: parts are added one after the other,
// so each index's value is summed in part order exactly as the merge does (the first value is copied, not
// added to zero, which would turn -0 into +0). Linear in the span and the entries.
SparseVector accumulate_in_order(std::span<const SparseView> parts, Index lowest, Index highest)
{
  const std::size_t span = static_cast<std::size_t>(highest - lowest) + 1;
  thread_local std::vector<float> values;
  thread_local std::vector<std::uint8_t> present;
  values.resize(span);
  present.assign(span, 0);
  for (const SparseView& part : parts)
    for (std::size_t e = 0; e < part.size(); ++e) {
      const std::size_t slot = part.indices[e] - lowest;
      values[slot] = present[slot] ? values[slot] + part.values[e] : part.values[e];
      present[slot] = 1;
    }
  SparseVector sum;
  sum.reserve(static_cast<std::size_t>(std::count(present.begin(), present.end(), 1)));
  for (std::size_t slot = 0; slot < span; ++slot)
    if (present[slot]) {
      sum.indices.push_back(static_cast<Index>(lowest + slot));
      sum.values.push_back(values[slot]);
    }
  return sum;
}

} // namespace

SparseVector sum_in_order(std::span<const SparseVector* const> parts)
{
  std::vector<SparseView> views;
  views.reserve(parts.size());
  for (const SparseVector* part : parts)
    views.emplace_back(*part);
  return sum_in_order(views);
}

SparseVector sum_in_order(std::span<const SparseView> parts)
{
  std::size_t total = 0;
  Index lowest = std::numeric_limits<Index>::max();
  Index highest = 0;
  for (const SparseView& part : parts) {
    total += part.size();
    if (!part.empty()) {
      lowest = std::min(lowest, part.indices.front());
      highest = std::max(highest, part.indices.back());
    }
  }
  if (total == 0)
    return {};
  // The accumulator pays for the span once; the merge pays log(parts) per entry.
  const double span = static_cast<double>(highest - lowest) + 1;
  if (parts.size() > 2 && span <= 8.0 * static_cast<double>(total))
    return accumulate_in_order(parts, lowest, highest);
  return merge_in_order(parts, total);
}

namespace {
// The position of the first entry of v whose index is at least i.
std::size_t position_of(const SparseVector& v, Index i)
{
  return static_cast<std::size_t>(std::lower_bound(v.indices.begin(), v.indices.end(), i) - v.indices.begin());
}
} // namespace

SparseSlice slice_of(std::shared_ptr<const SparseVector> v, Index begin, Index end)
{
  const auto first = static_cast<std::uint32_t>(position_of(*v, begin));
  const auto last = static_cast<std::uint32_t>(position_of(*v, end));
  return {std::move(v), first, last};
}

RegionSlices::RegionSlices(std::shared_ptr<const SparseVector> v, std::span<const std::uint64_t> boundaries)
    : whole_(std::move(v))
{
  if (whole_->size() > std::numeric_limits<std::uint32_t>::max())
    throw std::length_error("RegionSlices: a vector of more than 2^32 - 1 entries");
  cuts_.reserve(boundaries.size());
  for (const std::uint64_t boundary : boundaries) // the positions slice_of finds
    cuts_.push_back(static_cast<std::uint32_t>(position_of(*whole_, static_cast<Index>(boundary))));
}

SparseVector top_k_by_magnitude(const SparseVector& v, std::size_t k)
{
  // Select among the values as if they were a dense vector, then map positions back to indices; positions
  // follow index order, so ties still go to the smaller index.
  const SparseVector by_position = select_topk(v.values, k);
  SparseVector out;
  out.reserve(by_position.size());
  for (std::size_t e = 0; e < by_position.size(); ++e) {
    out.indices.push_back(v.indices[by_position.indices[e]]);
    out.values.push_back(by_position.values[e]);
  }
  return out;
}

} // namespace sparsim
