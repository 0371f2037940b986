// CPU top-k selection kernels for gradient sparsification: exact top-k by magnitude, selection above a threshold, the
// exact k-th largest magnitude, and a plain std::nth_element reference that the tests and the benchmark compare with.
//
// Conventions shared by every function here (tests/test_topk.cpp pins each of them down):
// - Ranking: entries are ranked by magnitude |x[i]|; among equal magnitudes the smaller index ranks higher. The top-k
//   set is therefore unique and the selections are deterministic.
// - Results are SparseVectors sorted by index that carry the original values bit for bit (sign kept, -0.0 stays -0.0).
// - NaN entries are never selected and never counted: every function behaves as if they were absent from x.
// - +-Inf entries are ordinary entries of the largest magnitude (+inf).
// - -0.0 and +0.0 have magnitude 0 and tie with each other.
// - Zero magnitudes are selected like any other when k asks for them: the top-k of an all-zero vector are its first k
//   entries.
// - k = 0 or n = 0: the selection is empty and kth_largest_magnitude returns +inf.
// - k >= m, the number of non-NaN entries (in particular k >= n): the selection holds all m non-NaN entries and
//   kth_largest_magnitude returns the smallest magnitude (the m-th largest); +inf when m = 0.
// - x.size() must fit in Index (at most 2^32 - 1 entries); larger inputs throw std::length_error.
// The kernels are single-threaded, allocate only their result and scratch memory, and keep no state between calls.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "sim/data/sparse.hpp"

namespace sparsim {

// Exact top-k of x by magnitude (ties at the boundary: smaller index wins), sorted by index.
// Algorithm: sample x at stratified pseudo-random positions and derive from the sample a key range [lo, hi] that holds
// the k-th largest magnitude with overwhelming probability; one streaming compaction pass (as in select_above)
// collects the candidates |x| >= lo; a radix select among the candidates in [lo, hi] (those above hi are certainly in)
// finds the exact k-th largest magnitude, and a final pass over the candidates keeps the top k. When the sample was
// wrong (fewer than k candidates), a histogram of all magnitudes' top bits gives a range that is certainly right and
// the compaction is repeated, so the result is exact for every input. 1.3-1.9x one read pass of x at n = 2^26 and
// 0.1-2% density with AVX-512 (docs/benchmarks.md); about 5.5x when the fallback is taken.
SparseVector select_topk(std::span<const float> x, std::size_t k);

// The same top-k as select_topk, computed the plain way; this is the oracle of the tests and the baseline of the
// benchmark, not a kernel to use: std::nth_element on a copy of the non-NaN magnitudes gives the k-th largest
// magnitude, then one pass over x keeps the larger entries and the first of the tied ones.
SparseVector select_topk_reference(std::span<const float> x, std::size_t k);

// All entries with |x[i]| > threshold (strict), sorted by index; one streaming pass (plus a 4096-entry sample that
// sizes the result). threshold < 0 selects every non-NaN entry; threshold = +inf or NaN selects nothing.
SparseVector select_above(std::span<const float> x, float threshold);

// Number of entries with |x[i]| > threshold (strict); same threshold rules as select_above.
std::size_t count_above(std::span<const float> x, float threshold);

// The exact k-th largest magnitude among the non-NaN entries of x (the edge cases are in the header comment).
// The top-k of x are the entries |x| > t plus the first min(k, m) - count_above(x, t) entries with |x| == t, for
// t = kth_largest_magnitude(x, k) and m the number of non-NaN entries. Same algorithm as select_topk.
float kth_largest_magnitude(std::span<const float> x, std::size_t k);

// The same selections written into out: its previous content is discarded and its capacity reused. Calls that reuse
// one `out` do not fault in fresh pages for the result, which costs 0.1-0.25x of a read pass at 1-2% density.
void select_topk(std::span<const float> x, std::size_t k, SparseVector& out);
void select_above(std::span<const float> x, float threshold, SparseVector& out);

// The compaction loop behind select_above. select_above uses best_compaction_isa(); the benchmark and the tests also
// run the portable loop on machines that have AVX-512.
enum class CompactionIsa {
  portable, // plain C++: tests 16 entries at a time (vectorized) and compacts only groups with a hit, branch-free
  avx512,   // AVX-512F: masked compare and vpcompressd of 16 indices and values at a time
};
// avx512 when the CPU running the program supports AVX-512F (and the build has the kernel: x86 without
// SPARSIM_DISABLE_AVX512 defined).
CompactionIsa best_compaction_isa();
// select_above with the given loop; std::invalid_argument for avx512 on a CPU (or build) without AVX-512F.
SparseVector select_above(std::span<const float> x, float threshold, CompactionIsa isa);

namespace detail {
// The positions select_topk samples for an input of n entries (stratified: one pseudo-random position per stratum,
// always the same for the same n); empty when n is small and every entry is a candidate. Exposed so that tests can
// build inputs that fool the sample and exercise the fallback.
std::vector<std::size_t> sample_positions(std::size_t n);
} // namespace detail

} // namespace sparsim
