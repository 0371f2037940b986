// Sparse vectors: the (index, value) pairs that sparse collectives exchange and top-k selection produces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace sparsim {

// Position of an entry in the dense gradient; gradients of up to 2^32 - 1 entries (n up to 3e8 in practice) fit.
using Index = std::uint32_t;

// (index, value) pairs stored as two parallel arrays, sorted by index ascending with unique indices.
struct SparseVector {
  std::vector<Index> indices;
  std::vector<float> values;

  std::size_t size() const { return indices.size(); }
  bool empty() const { return indices.empty(); }
  void clear()
  {
    indices.clear();
    values.clear();
  }
  void reserve(std::size_t n)
  {
    indices.reserve(n);
    values.reserve(n);
  }

  // Element-wise equality of both arrays (float ==, so -0.0 equals 0.0).
  friend bool operator==(const SparseVector&, const SparseVector&) = default;
};

// Read-only view of consecutive entries of a sparse vector (all of it, or a slice).
struct SparseView {
  std::span<const Index> indices;
  std::span<const float> values;

  SparseView() = default;
  explicit SparseView(const SparseVector& v)
      : indices(v.indices)
      , values(v.values)
  {
  }
  SparseView(std::span<const Index> i, std::span<const float> v)
      : indices(i)
      , values(v)
  {
  }
  std::size_t size() const { return indices.size(); }
  bool empty() const { return indices.empty(); }
};

} // namespace sparsim
