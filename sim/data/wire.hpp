// What a message costs on the wire: the simulated size of every payload type is computed here, from the
// payload itself, so the bytes a run reports are those of the messages actually sent.
#pragma once

#include "sim/base/units.hpp"
#include "sim/data/sparse.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sparsim {

// How elements are encoded on the wire. Defaults are the paper's: int32 index + fp32 value = 8 bytes.
struct WireFormat {
  int index_bytes = 4; // bytes per sparse index
  int value_bytes = 4; // bytes per value, dense or sparse (4 = fp32, 2 = bf16/fp16)
  std::string describe() const;
};

// A contiguous slice of a dense vector. `values` is empty in phantom mode, where only the length travels
// (the dense baselines' communication does not depend on the values).
struct DenseBlock {
  std::uint64_t length = 0;
  std::vector<float> values;
};

// Small integer metadata: element counts, region boundaries.
struct Counts {
  std::vector<std::int64_t> values;
};
// A single count, on the wire as one value of Counts.
struct Count {
  std::int64_t value = 0;
};
// Sums of integers that may pass 2^31 (Ok-Topk's sums of P region boundaries of up to n each): 64-bit on the wire.
struct Sums64 {
  std::vector<std::int64_t> values;
};

inline Bytes wire_bytes(const DenseBlock& block, const WireFormat& wire)
{
  return block.length * static_cast<Bytes>(wire.value_bytes);
}
// A sparse payload of `entries` entries costs one index and one value per entry (what a receiver that knows the
// count expects).
inline Bytes sparse_wire_bytes(std::uint64_t entries, const WireFormat& wire)
{
  return entries * static_cast<Bytes>(wire.index_bytes + wire.value_bytes);
}
inline Bytes wire_bytes(const SparseVector& v, const WireFormat& wire) { return sparse_wire_bytes(v.size(), wire); }
// One array of a sparse payload V (a SparseVector, a SparseSlice), sent on its own: codes that send a selection's
// indices and its values as two messages (the reference implementation's Gaussiank allgathers, Ok-Topk's
// two-message split) send these. Each costs its own array's bytes.
template <class V> struct IndicesOf {
  std::shared_ptr<const V> of;
};
template <class V> struct ValuesOf {
  std::shared_ptr<const V> of;
};
template <class V> Bytes wire_bytes(const IndicesOf<V>& part, const WireFormat& wire)
{
  return part.of->size() * static_cast<Bytes>(wire.index_bytes);
}
template <class V> Bytes wire_bytes(const ValuesOf<V>& part, const WireFormat& wire)
{
  return part.of->size() * static_cast<Bytes>(wire.value_bytes);
}
// Several payloads in one message (allgather steps forward what they have collected; SparDL's reduce-scatter
// sends several blocks). Only the parts are charged on the wire: which part is whose is known to both sides in
// advance.
template <class T> struct Bundle {
  std::vector<RankId> owners; // the parts' owners: ranks, members of a group, or block numbers
  std::vector<std::shared_ptr<const T>> parts;
};
template <class T> Bytes wire_bytes(const Bundle<T>& bundle, const WireFormat& wire)
{
  Bytes bytes = 0;
  for (const auto& part : bundle.parts)
    bytes += wire_bytes(*part, wire);
  return bytes;
}

// Metadata travels as 4-byte integers, as MPI_INT counts do.
inline Bytes wire_bytes(const Counts& counts, const WireFormat&) { return counts.values.size() * 4; }
inline Bytes wire_bytes(const Count&, const WireFormat&) { return 4; }
inline Bytes wire_bytes(const Sums64& sums, const WireFormat&) { return sums.values.size() * 8; }

} // namespace sparsim
