// Operations on sparse vectors that the sparse collectives share: sums in a fixed order (so every rank
// computes bitwise the same result), slices by index range, and re-selection by magnitude.
#pragma once

#include "sim/sparse.hpp"
#include "sim/wire.hpp"

#include <memory>
#include <span>
#include <vector>

namespace sparsim {

// a + b on the union of their indices; where both hold an index the sum is a[i] + b[i] in that order.
SparseVector merge_sum(const SparseVector& a, const SparseVector& b);

// The sum of `parts` on the union of their indices, each index summed in the order of `parts`
// ((p0 + p1) + p2 ...), so ranks holding the same parts in the same order get bitwise-identical sums.
SparseVector sum_in_order(std::span<const SparseVector* const> parts);

// The entries of v with begin <= index < end.
SparseVector slice(const SparseVector& v, Index begin, Index end);

// The k entries of largest |value| (ties: smaller index first), sorted by index.
SparseVector top_k_by_magnitude(const SparseVector& v, std::size_t k);

// Several ranks' sparse vectors in one message; the counts travel with MPI's allgatherv metadata.
using SparseBundle = Bundle<SparseVector>;

}  // namespace sparsim
