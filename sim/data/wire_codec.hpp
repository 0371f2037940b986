// The bytes of a message as a real MPI backend sends them (issue 40): each payload type that the simulation
// charges wire_bytes(payload) for encodes to exactly that many bytes, and decodes back from them given what the
// receiver knows in advance (a Bundle's part sizes). Arrays travel in the host's byte order as MPI_INT32 /
// MPI_FLOAT arrays do between hosts of one kind: a sparse payload as its indices, then its values.
//
// Only the paper's wire format encodes (4-byte indices, fp32 values); require_encodable says why another does
// not. Counts travel as 4-byte integers, so a count beyond int32 does not encode (std::out_of_range).
//
// check_encoding (simulation.check_wire) runs a payload through both directions and compares: the size with the
// bytes the simulation charged, the decoded values with the payload's.
#pragma once

#include "sim/data/sparse.hpp"
#include "sim/data/sparse_ops.hpp"
#include "sim/data/wire.hpp"

#include <cstddef>
#include <cstring>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <vector>

namespace sparsim {

using WireBuffer = std::vector<std::byte>;
using WireBytes = std::span<const std::byte>;

// Whether `wire` is the encodable format (4-byte indices, 4-byte values); require_encodable throws
// std::invalid_argument unless it is.
bool encodable(const WireFormat& wire);
void require_encodable(const WireFormat& wire);

// Encoders: exactly wire_bytes(payload, wire) bytes each.
WireBuffer encode(const DenseBlock& block, const WireFormat& wire); // phantom data (no values): zeros
WireBuffer encode(const SparseVector& v, const WireFormat& wire);
WireBuffer encode(const SparseSlice& s, const WireFormat& wire);
WireBuffer encode(const Counts& counts, const WireFormat& wire);
WireBuffer encode(const Count& count, const WireFormat& wire);
WireBuffer encode(const Sums64& sums, const WireFormat& wire);
template <class V> WireBuffer encode(const IndicesOf<V>& part, const WireFormat& wire);
template <class V> WireBuffer encode(const ValuesOf<V>& part, const WireFormat& wire);
template <class T> WireBuffer encode(const Bundle<T>& bundle, const WireFormat& wire);

// Decoders: the receiver's side. Each throws std::invalid_argument when `bytes` cannot hold its payload (a
// length that is not a whole number of elements).
DenseBlock decode_dense(WireBytes bytes, const WireFormat& wire);
SparseVector decode_sparse(WireBytes bytes, const WireFormat& wire); // a SparseVector or a SparseSlice
Counts decode_counts(WireBytes bytes);
Count decode_count(WireBytes bytes);
Sums64 decode_sums64(WireBytes bytes);
std::vector<Index> decode_indices(WireBytes bytes); // an IndicesOf
std::vector<float> decode_values(WireBytes bytes);  // a ValuesOf
// A Bundle: its parts one after the other; the receiver knows their sizes in advance (Bundle) and decodes each.

// The receiver's side of a message whose type it knows (Communicator::take under a transport that moves bytes),
// for the payload types whose bytes alone say what they hold: a dense block, a sparse vector (a slice arrives as
// the whole of a new vector), counts, a count, 64-bit sums, and one half of a sparse payload sent as two
// messages (IndicesOf, ValuesOf: its own array, the other one zero-filled until `rejoined` puts the halves
// together). A Bundle needs its parts' sizes (decode_bundle); other types throw std::logic_error naming the
// type: the algorithms that send them do not yet run where bytes move (docs/mpi.md).
template <class T> std::shared_ptr<const T> decode_payload(WireBytes bytes, const WireFormat& wire);
// A sparse payload sent as two messages, whole again. In a simulation both halves view the same payload, which is
// returned; where bytes move each half arrived on its own and the indices of one and the values of the other
// make a new one. std::runtime_error when their lengths differ.
template <class V> std::shared_ptr<const V> rejoined(const IndicesOf<V>& indices, const ValuesOf<V>& values);
// A Bundle whose layout the receiver knows: its parts' owners and each part's bytes, in order (each part decoded
// by decode_payload). std::runtime_error when the bytes are not the parts' sum.
template <class T>
std::shared_ptr<const Bundle<T>> decode_bundle(WireBytes bytes, std::vector<RankId> owners,
                                               std::span<const Bytes> part_bytes, const WireFormat& wire);

// Whether `bytes` decode to `payload` (values compared bit for bit; phantom dense blocks by length).
bool decodes_to(const DenseBlock& block, WireBytes bytes, const WireFormat& wire);
bool decodes_to(const SparseVector& v, WireBytes bytes, const WireFormat& wire);
bool decodes_to(const SparseSlice& s, WireBytes bytes, const WireFormat& wire);
bool decodes_to(const Counts& counts, WireBytes bytes, const WireFormat& wire);
bool decodes_to(const Count& count, WireBytes bytes, const WireFormat& wire);
bool decodes_to(const Sums64& sums, WireBytes bytes, const WireFormat& wire);
template <class V> bool decodes_to(const IndicesOf<V>& part, WireBytes bytes, const WireFormat& wire);
template <class V> bool decodes_to(const ValuesOf<V>& part, WireBytes bytes, const WireFormat& wire);
template <class T> bool decodes_to(const Bundle<T>& bundle, WireBytes bytes, const WireFormat& wire);

// The payload type's readable name, for messages ("sparsim::SparseSlice").
std::string payload_type_name(const std::type_info& type);

// `payload` encoded; std::logic_error unless it takes exactly the bytes it is charged, wire_bytes(payload, wire).
template <class T> WireBuffer encode_charged(const T& payload, const WireFormat& wire)
{
  WireBuffer bytes = encode(payload, wire);
  const Bytes charged = wire_bytes(payload, wire);
  if (bytes.size() != charged)
    throw std::logic_error("wire check: a " + payload_type_name(typeid(T)) + " payload encodes to " +
                           std::to_string(bytes.size()) + " bytes but is charged " + std::to_string(charged));
  return bytes;
}

// Encodes `payload`, then throws std::logic_error unless it took wire_bytes(payload, wire) bytes and decodes to
// `payload`. Returns the bytes.
template <class T> WireBuffer check_encoding(const T& payload, const WireFormat& wire)
{
  WireBuffer bytes = encode_charged(payload, wire);
  if (!decodes_to(payload, bytes, wire))
    throw std::logic_error("wire check: a " + payload_type_name(typeid(T)) +
                           " payload does not decode to its own values");
  return bytes;
}

// --- the templates' definitions ---

namespace wire_detail {
SparseView view_of(const SparseVector& v);
SparseView view_of(const SparseSlice& s);
// The elements' bytes as they are in memory.
template <class T> WireBuffer bytes_of(std::span<const T> elements)
{
  WireBuffer out(elements.size_bytes());
  if (!out.empty())
    std::memcpy(out.data(), elements.data(), out.size());
  return out;
}
template <class T> bool same_bits(std::span<const T> a, std::span<const T> b)
{
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);
}
} // namespace wire_detail

template <class V> WireBuffer encode(const IndicesOf<V>& part, const WireFormat& wire)
{
  require_encodable(wire);
  return wire_detail::bytes_of<Index>(wire_detail::view_of(*part.of).indices);
}
template <class V> WireBuffer encode(const ValuesOf<V>& part, const WireFormat& wire)
{
  require_encodable(wire);
  return wire_detail::bytes_of<float>(wire_detail::view_of(*part.of).values);
}
template <class T> WireBuffer encode(const Bundle<T>& bundle, const WireFormat& wire)
{
  WireBuffer out;
  for (const auto& part : bundle.parts) {
    const WireBuffer bytes = encode(*part, wire);
    out.insert(out.end(), bytes.begin(), bytes.end());
  }
  return out;
}

template <class V> bool decodes_to(const IndicesOf<V>& part, WireBytes bytes, const WireFormat&)
{
  return wire_detail::same_bits<Index>(decode_indices(bytes), wire_detail::view_of(*part.of).indices);
}
template <class V> bool decodes_to(const ValuesOf<V>& part, WireBytes bytes, const WireFormat&)
{
  return wire_detail::same_bits<float>(decode_values(bytes), wire_detail::view_of(*part.of).values);
}
// Each part's bytes are where the receiver, knowing the parts' sizes, finds them: one after the other.
template <class T> bool decodes_to(const Bundle<T>& bundle, WireBytes bytes, const WireFormat& wire)
{
  std::size_t offset = 0;
  for (const auto& part : bundle.parts) {
    const std::size_t size = wire_bytes(*part, wire);
    if (offset + size > bytes.size() || !decodes_to(*part, bytes.subspan(offset, size), wire))
      return false;
    offset += size;
  }
  return offset == bytes.size();
}

namespace wire_detail {
// Which half of a sparse payload T is, if any, and of what.
template <class T> struct HalfOf {
  static constexpr bool indices = false, values = false;
};
template <class V> struct HalfOf<IndicesOf<V>> {
  static constexpr bool indices = true, values = false;
  using Of = V;
};
template <class V> struct HalfOf<ValuesOf<V>> {
  static constexpr bool indices = false, values = true;
  using Of = V;
};
// A new vector as a payload of type V (a SparseVector, or a SparseSlice of all of it).
template <class V> std::shared_ptr<const V> as_payload(std::shared_ptr<const SparseVector> whole)
{
  if constexpr (std::is_same_v<V, SparseVector>) {
    return whole;
  } else {
    const auto size = static_cast<std::uint32_t>(whole->size());
    return std::make_shared<const SparseSlice>(SparseSlice{std::move(whole), 0, size});
  }
}
} // namespace wire_detail

template <class T> std::shared_ptr<const T> decode_payload(WireBytes bytes, const WireFormat& wire)
{
  using Half = wire_detail::HalfOf<T>;
  if constexpr (std::is_same_v<T, DenseBlock>) {
    return std::make_shared<const DenseBlock>(decode_dense(bytes, wire));
  } else if constexpr (std::is_same_v<T, SparseVector>) {
    return std::make_shared<const SparseVector>(decode_sparse(bytes, wire));
  } else if constexpr (std::is_same_v<T, SparseSlice>) {
    return wire_detail::as_payload<SparseSlice>(std::make_shared<const SparseVector>(decode_sparse(bytes, wire)));
  } else if constexpr (std::is_same_v<T, Counts>) {
    return std::make_shared<const Counts>(decode_counts(bytes));
  } else if constexpr (std::is_same_v<T, Count>) {
    return std::make_shared<const Count>(decode_count(bytes));
  } else if constexpr (std::is_same_v<T, Sums64>) {
    return std::make_shared<const Sums64>(decode_sums64(bytes));
  } else if constexpr (Half::indices || Half::values) {
    require_encodable(wire);
    auto whole = std::make_shared<SparseVector>();
    if constexpr (Half::indices) {
      whole->indices = decode_indices(bytes);
      whole->values.assign(whole->indices.size(), 0.0f);
    } else {
      whole->values = decode_values(bytes);
      whole->indices.assign(whole->values.size(), 0);
    }
    return std::make_shared<const T>(T{wire_detail::as_payload<typename Half::Of>(std::move(whole))});
  } else {
    (void)bytes;
    (void)wire;
    throw std::logic_error("wire: a " + payload_type_name(typeid(T)) +
                           " payload does not decode from its bytes alone (the receiver would need to know its "
                           "parts' sizes); the algorithm that sends it does not run where bytes move yet");
  }
}

template <class T>
std::shared_ptr<const Bundle<T>> decode_bundle(WireBytes bytes, std::vector<RankId> owners,
                                               std::span<const Bytes> part_bytes, const WireFormat& wire)
{
  auto bundle = std::make_shared<Bundle<T>>();
  bundle->owners = std::move(owners);
  std::size_t offset = 0;
  for (const Bytes size : part_bytes) {
    if (size > bytes.size() - offset)
      break;
    bundle->parts.push_back(decode_payload<T>(bytes.subspan(offset, size), wire));
    offset += size;
  }
  if (bundle->parts.size() != part_bytes.size() || offset != bytes.size())
    throw std::runtime_error("wire: a bundle of " + std::to_string(bytes.size()) + " bytes is not its " +
                             std::to_string(part_bytes.size()) + " parts' announced sizes");
  return bundle;
}

template <class V> std::shared_ptr<const V> rejoined(const IndicesOf<V>& indices, const ValuesOf<V>& values)
{
  if (indices.of == values.of)
    return indices.of;
  const SparseView with_indices = wire_detail::view_of(*indices.of), with_values = wire_detail::view_of(*values.of);
  if (with_indices.indices.size() != with_values.values.size())
    throw std::runtime_error("wire: a payload's indices (" + std::to_string(with_indices.indices.size()) +
                             ") and values (" + std::to_string(with_values.values.size()) + ") differ in length");
  auto whole = std::make_shared<SparseVector>();
  whole->indices.assign(with_indices.indices.begin(), with_indices.indices.end());
  whole->values.assign(with_values.values.begin(), with_values.values.end());
  return wire_detail::as_payload<V>(std::move(whole));
}

} // namespace sparsim
