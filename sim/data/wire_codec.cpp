#include "sim/data/wire_codec.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <cxxabi.h>
#include <fmt/format.h>
#include <limits>

namespace sparsim {
namespace {

using wire_detail::bytes_of;
using wire_detail::same_bits;

template <class T> std::vector<T> elements_of(WireBytes bytes, const char* what)
{
  if (bytes.size() % sizeof(T) != 0)
    throw std::invalid_argument(
        fmt::format("wire: {} bytes are not a whole number of {} ({} bytes each)", bytes.size(), what, sizeof(T)));
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty())
    std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

// A sparse payload: its indices, then its values.
WireBuffer encode_pairs(const SparseView& view, const WireFormat& wire)
{
  require_encodable(wire);
  WireBuffer out = bytes_of(view.indices);
  const WireBuffer values = bytes_of(view.values);
  out.insert(out.end(), values.begin(), values.end());
  return out;
}

bool decodes_to_pairs(const SparseView& view, WireBytes bytes, const WireFormat& wire)
{
  const SparseVector decoded = decode_sparse(bytes, wire);
  return same_bits<Index>(decoded.indices, view.indices) && same_bits<float>(decoded.values, view.values);
}

} // namespace

namespace wire_detail {
SparseView view_of(const SparseVector& v) { return SparseView(v); }
SparseView view_of(const SparseSlice& s) { return s.view(); }
} // namespace wire_detail

static_assert(sizeof(Index) == 4 && sizeof(float) == 4, "the encodable format is int32 indices and fp32 values");

std::string payload_type_name(const std::type_info& type)
{
  int status = 0;
  char* readable = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  const std::string name = status == 0 && readable ? readable : type.name();
  std::free(readable);
  return name;
}

bool encodable(const WireFormat& wire) { return wire.index_bytes == 4 && wire.value_bytes == 4; }

void require_encodable(const WireFormat& wire)
{
  if (!encodable(wire))
    throw std::invalid_argument(
        fmt::format("wire: only 4-byte indices and 4-byte (fp32) values encode, not {}", wire.describe()));
}

WireBuffer encode(const DenseBlock& block, const WireFormat& wire)
{
  require_encodable(wire);
  if (block.values.empty())
    return WireBuffer(block.length * sizeof(float)); // phantom: only the length matters
  if (block.values.size() != block.length)
    throw std::invalid_argument(
        fmt::format("wire: a dense block of length {} holds {} values", block.length, block.values.size()));
  return bytes_of<float>(block.values);
}

WireBuffer encode(const SparseVector& v, const WireFormat& wire) { return encode_pairs(SparseView(v), wire); }
WireBuffer encode(const SparseSlice& s, const WireFormat& wire) { return encode_pairs(s.view(), wire); }

WireBuffer encode(const Counts& counts, const WireFormat&)
{
  std::vector<std::int32_t> narrow;
  narrow.reserve(counts.values.size());
  for (const std::int64_t value : counts.values) {
    if (value < std::numeric_limits<std::int32_t>::min() || value > std::numeric_limits<std::int32_t>::max())
      throw std::out_of_range(fmt::format("wire: the count {} does not fit the 4 bytes counts travel in", value));
    narrow.push_back(static_cast<std::int32_t>(value));
  }
  return bytes_of<std::int32_t>(narrow);
}

WireBuffer encode(const Count& count, const WireFormat& wire) { return encode(Counts{{count.value}}, wire); }

WireBuffer encode(const Sums64& sums, const WireFormat&) { return bytes_of<std::int64_t>(sums.values); }

DenseBlock decode_dense(WireBytes bytes, const WireFormat& wire)
{
  require_encodable(wire);
  DenseBlock block;
  block.values = elements_of<float>(bytes, "fp32 values");
  block.length = block.values.size();
  return block;
}

SparseVector decode_sparse(WireBytes bytes, const WireFormat& wire)
{
  require_encodable(wire);
  if (bytes.size() % (sizeof(Index) + sizeof(float)) != 0)
    throw std::invalid_argument(
        fmt::format("wire: {} bytes are not a whole number of (index, value) pairs (8 bytes each)", bytes.size()));
  const std::size_t half = bytes.size() / 2;
  return {elements_of<Index>(bytes.first(half), "int32 indices"),
          elements_of<float>(bytes.subspan(half), "fp32 values")};
}

Counts decode_counts(WireBytes bytes)
{
  const std::vector<std::int32_t> narrow = elements_of<std::int32_t>(bytes, "int32 counts");
  return {{narrow.begin(), narrow.end()}};
}

Count decode_count(WireBytes bytes)
{
  const Counts counts = decode_counts(bytes);
  if (counts.values.size() != 1)
    throw std::invalid_argument(fmt::format("wire: one count takes 4 bytes, not {}", bytes.size()));
  return {counts.values.front()};
}

Sums64 decode_sums64(WireBytes bytes) { return {elements_of<std::int64_t>(bytes, "int64 sums")}; }

std::vector<Index> decode_indices(WireBytes bytes) { return elements_of<Index>(bytes, "int32 indices"); }
std::vector<float> decode_values(WireBytes bytes) { return elements_of<float>(bytes, "fp32 values"); }

bool decodes_to(const DenseBlock& block, WireBytes bytes, const WireFormat& wire)
{
  const DenseBlock decoded = decode_dense(bytes, wire);
  if (block.values.empty())
    return decoded.length == block.length;
  return same_bits<float>(decoded.values, block.values);
}

bool decodes_to(const SparseVector& v, WireBytes bytes, const WireFormat& wire)
{
  return decodes_to_pairs(SparseView(v), bytes, wire);
}
bool decodes_to(const SparseSlice& s, WireBytes bytes, const WireFormat& wire)
{
  return decodes_to_pairs(s.view(), bytes, wire);
}

bool decodes_to(const Counts& counts, WireBytes bytes, const WireFormat&)
{
  return decode_counts(bytes).values == counts.values;
}
bool decodes_to(const Count& count, WireBytes bytes, const WireFormat&)
{
  return decode_count(bytes).value == count.value;
}
bool decodes_to(const Sums64& sums, WireBytes bytes, const WireFormat&)
{
  return decode_sums64(bytes).values == sums.values;
}

} // namespace sparsim
