#include "sim/sparse_ops.hpp"

#include "sim/topk.hpp"

#include <algorithm>
#include <queue>

namespace sparsim {

SparseVector merge_sum(const SparseVector& a, const SparseVector& b)
{
  const SparseVector* parts[] = {&a, &b};
  return sum_in_order(parts);
}

SparseVector sum_in_order(std::span<const SparseVector* const> parts)
{
  // k-way merge on (index, part number): equal indices come out in part order.
  using Head = std::pair<Index, std::size_t>;  // (index, part)
  std::priority_queue<Head, std::vector<Head>, std::greater<>> heads;
  std::vector<std::size_t> cursor(parts.size(), 0);
  std::size_t total = 0;
  for (std::size_t p = 0; p < parts.size(); ++p) {
    total += parts[p]->size();
    if (!parts[p]->empty())
      heads.emplace(parts[p]->indices[0], p);
  }
  SparseVector sum;
  sum.reserve(total);
  while (!heads.empty()) {
    auto [index, p] = heads.top();
    heads.pop();
    const float value = parts[p]->values[cursor[p]];
    if (!sum.empty() && sum.indices.back() == index) {
      sum.values.back() += value;
    } else {
      sum.indices.push_back(index);
      sum.values.push_back(value);
    }
    if (++cursor[p] < parts[p]->size())
      heads.emplace(parts[p]->indices[cursor[p]], p);
  }
  return sum;
}

SparseVector slice(const SparseVector& v, Index begin, Index end)
{
  const auto first = std::lower_bound(v.indices.begin(), v.indices.end(), begin) - v.indices.begin();
  const auto last = std::lower_bound(v.indices.begin(), v.indices.end(), end) - v.indices.begin();
  SparseVector out;
  out.indices.assign(v.indices.begin() + first, v.indices.begin() + last);
  out.values.assign(v.values.begin() + first, v.values.begin() + last);
  return out;
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

}  // namespace sparsim
