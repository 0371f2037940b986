// Operations on sparse vectors that the sparse collectives share: sums in a fixed order (so every rank
// computes bitwise the same result), slices by index range, and re-selection by magnitude.
#pragma once

#include "sim/data/sparse.hpp"
#include "sim/data/wire.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace sparsim {

// a + b on the union of their indices; where both hold an index the sum is a[i] + b[i] in that order.
SparseVector merge_sum(const SparseVector& a, const SparseVector& b);

// The sum of `parts` on the union of their indices, each index summed in the order of `parts`
// ((p0 + p1) + p2 ...), so ranks holding the same parts in the same order get bitwise-identical sums.
SparseVector sum_in_order(std::span<const SparseView> parts);
SparseVector sum_in_order(std::span<const SparseVector* const> parts);

// The entries of v with begin <= index < end, without copying them: a message payload that keeps the whole
// vector alive and costs on the wire what a SparseVector of those entries costs (sparse collectives send
// slices of a rank's selection to the ranks that own the index ranges).
struct SparseSlice {
  std::shared_ptr<const SparseVector> whole;
  // Positions [first, last) of `whole`: 32 bits, as a selection holds at most n < 2^32 entries (a slice is 24
  // bytes; every rank holds one per region during a split).
  std::uint32_t first = 0;
  std::uint32_t last = 0;

  std::size_t size() const { return last - first; }
  SparseView view() const
  {
    return {std::span(whole->indices).subspan(first, size()), std::span(whole->values).subspan(first, size())};
  }
};
SparseSlice slice_of(std::shared_ptr<const SparseVector> v, Index begin, Index end); // entries begin <= index < end
// The slices of v between consecutive boundaries (slice j: boundaries[j] <= index < boundaries[j + 1]), kept as
// their cut positions in v: a slice object is made when one is asked for (a message's payload, gone once
// received), so a rank holds 4 bytes per region, not a slice object per region (P^2 of them over all ranks).
class RegionSlices {
public:
  RegionSlices(std::shared_ptr<const SparseVector> v, std::span<const std::uint64_t> boundaries);
  std::size_t size(std::size_t region) const { return cuts_[region + 1] - cuts_[region]; }
  SparseSlice slice(std::size_t region) const { return {whole_, cuts_[region], cuts_[region + 1]}; }
  std::shared_ptr<const SparseSlice> payload(std::size_t region) const
  {
    return std::make_shared<const SparseSlice>(slice(region));
  }

private:
  std::shared_ptr<const SparseVector> whole_;
  std::vector<std::uint32_t> cuts_; // region j is positions [cuts_[j], cuts_[j + 1]) of whole_
};
inline Bytes wire_bytes(const SparseSlice& s, const WireFormat& wire)
{
  return s.size() * static_cast<Bytes>(wire.index_bytes + wire.value_bytes);
}

// The k entries of largest |value| (ties: smaller index first), sorted by index.
SparseVector top_k_by_magnitude(const SparseVector& v, std::size_t k);

// Memory traffic of local work on sparse data, for Communicator::charge_reduction: the pairs read and the
// pairs written, each once, as int32 index + fp32 value (8 bytes, as the selection model counts them).
inline Bytes pair_traffic(std::uint64_t pairs_read, std::uint64_t pairs_written)
{
  return 8 * (pairs_read + pairs_written);
}

// The pairs in all of `parts` (shared pointers to sparse vectors, slices or views).
template <class Parts> std::uint64_t total_pairs(const Parts& parts)
{
  std::uint64_t total = 0;
  for (const auto& part : parts)
    total += part->size();
  return total;
}

} // namespace sparsim
