// The wire codec (sim/data/wire_codec.hpp): every payload type encodes to exactly the bytes the simulation
// charges for it and decodes back bit for bit; formats and values that cannot travel are refused; and
// simulation.check_wire, which runs every message of a run through it, leaves the run's results as they are
// (the whole algorithm matrix runs with it: tests/test_algorithm_matrix.cpp).
#include "sim/data/wire_codec.hpp"
#include "sparsim_cli.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>

using namespace sparsim;
using namespace sparsim::testing;

namespace {

SparseVector sample_pairs()
{
  // Values a text or a float conversion would change: -0.0, a denormal, NaN's bits, the largest float.
  return {{0, 7, 4096, 4294967295u},
          {-0.0f, std::numeric_limits<float>::denorm_min(), std::nanf("0x2a"), std::numeric_limits<float>::max()}};
}

TEST(WireCodec, SparsePayloadsTakeTheirChargedBytesAndDecodeBitForBit)
{
  const WireFormat wire;
  const auto pairs = std::make_shared<const SparseVector>(sample_pairs());
  const WireBuffer bytes = encode(*pairs, wire);
  EXPECT_EQ(bytes.size(), wire_bytes(*pairs, wire));
  const SparseVector decoded = decode_sparse(bytes, wire);
  EXPECT_EQ(decoded.indices, pairs->indices);
  EXPECT_TRUE(std::signbit(decoded.values[0]));
  EXPECT_TRUE(std::isnan(decoded.values[2]));
  EXPECT_TRUE(decodes_to(*pairs, bytes, wire));

  // A slice travels as the pairs it covers; its indices and values alone as their arrays.
  const SparseSlice middle{pairs, 1, 3};
  const WireBuffer slice_bytes = encode(middle, wire);
  EXPECT_EQ(slice_bytes.size(), wire_bytes(middle, wire));
  EXPECT_EQ(decode_sparse(slice_bytes, wire).indices, (std::vector<Index>{7, 4096}));
  EXPECT_TRUE(decodes_to(middle, slice_bytes, wire));
  EXPECT_FALSE(decodes_to(middle, bytes, wire)) << "the whole vector is not the slice";
  const IndicesOf<SparseSlice> indices{std::make_shared<const SparseSlice>(middle)};
  const ValuesOf<SparseVector> values{pairs};
  EXPECT_EQ(encode(indices, wire).size(), wire_bytes(indices, wire));
  EXPECT_EQ(decode_indices(encode(indices, wire)), (std::vector<Index>{7, 4096}));
  EXPECT_EQ(encode(values, wire).size(), wire_bytes(values, wire));
  EXPECT_TRUE(decodes_to(values, encode(values, wire), wire));

  // A bundle: its parts one after the other, each found by the size the receiver knows.
  Bundle<SparseVector> bundle;
  bundle.owners = {3, 1};
  bundle.parts = {pairs, std::make_shared<const SparseVector>(SparseVector{{5}, {2.5f}})};
  const WireBuffer bundle_bytes = encode(bundle, wire);
  EXPECT_EQ(bundle_bytes.size(), wire_bytes(bundle, wire));
  EXPECT_TRUE(decodes_to(bundle, bundle_bytes, wire));
  std::swap(bundle.parts[0], bundle.parts[1]);
  EXPECT_FALSE(decodes_to(bundle, bundle_bytes, wire)) << "parts in another order";
}

TEST(WireCodec, DenseBlocksAndCountsTakeTheirChargedBytes)
{
  const WireFormat wire;
  const DenseBlock block{3, {1.5f, -2.0f, 0.25f}};
  EXPECT_EQ(encode(block, wire).size(), wire_bytes(block, wire));
  EXPECT_EQ(decode_dense(encode(block, wire), wire).values, block.values);
  // Phantom data: the length travels as that many bytes (zeros).
  const DenseBlock phantom{1000, {}};
  EXPECT_EQ(encode(phantom, wire).size(), 4000u);
  EXPECT_TRUE(decodes_to(phantom, encode(phantom, wire), wire));

  const Counts counts{{0, -1, std::numeric_limits<std::int32_t>::max()}};
  EXPECT_EQ(encode(counts, wire).size(), wire_bytes(counts, wire));
  EXPECT_EQ(decode_counts(encode(counts, wire)).values, counts.values);
  const Count count{42};
  EXPECT_EQ(encode(count, wire).size(), wire_bytes(count, wire));
  EXPECT_EQ(decode_count(encode(count, wire)).value, 42);
  const Sums64 sums{{std::int64_t{1} << 40, -3}};
  EXPECT_EQ(encode(sums, wire).size(), wire_bytes(sums, wire));
  EXPECT_EQ(decode_sums64(encode(sums, wire)).values, sums.values);
}

TEST(WireCodec, WhatCannotTravelIsRefused)
{
  const WireFormat wire;
  // Counts travel in 4 bytes.
  EXPECT_THROW(encode(Counts{{std::int64_t{1} << 31}}, wire), std::out_of_range);
  // Only int32 indices and fp32 values encode.
  WireFormat half = wire;
  half.value_bytes = 2;
  EXPECT_THROW(encode(sample_pairs(), half), std::invalid_argument);
  EXPECT_THROW(encode(DenseBlock{2, {1, 2}}, half), std::invalid_argument);
  // A dense block whose values do not match its length.
  EXPECT_THROW(encode(DenseBlock{3, {1, 2}}, wire), std::invalid_argument);
  // Bytes that are not whole elements.
  const WireBuffer seven(7);
  EXPECT_THROW(decode_sparse(seven, wire), std::invalid_argument);
  EXPECT_THROW(decode_counts(seven), std::invalid_argument);
  EXPECT_THROW(decode_count(WireBuffer(8)), std::invalid_argument);
}

// What a receiver rebuilds from the bytes alone (decode_payload), from bytes and the layout it knows
// (decode_bundle), and from two halves (rejoined): the payloads the sender had.
TEST(WireCodec, ReceiversRebuildThePayloadsFromTheirBytes)
{
  const WireFormat wire;
  const auto pairs = std::make_shared<const SparseVector>(SparseVector{{2, 9, 40}, {1.5f, -0.0f, 7.0f}});
  const auto slice = decode_payload<SparseSlice>(encode(SparseSlice{pairs, 1, 3}, wire), wire);
  EXPECT_EQ(slice->size(), 2u);
  EXPECT_EQ(slice->view().indices[1], 40u);
  EXPECT_EQ(decode_payload<Count>(encode(Count{-3}, wire), wire)->value, -3);

  // A bundle cut by its parts' sizes; sizes that do not add up to the bytes are refused.
  Bundle<SparseVector> bundle;
  bundle.owners = {4, 0};
  bundle.parts = {pairs, std::make_shared<const SparseVector>(SparseVector{{5}, {2.5f}})};
  const WireBuffer bytes = encode(bundle, wire);
  const std::vector<Bytes> sizes = {wire_bytes(*bundle.parts[0], wire), wire_bytes(*bundle.parts[1], wire)};
  const auto decoded = decode_bundle<SparseVector>(bytes, {4, 0}, sizes, wire);
  EXPECT_EQ(decoded->owners, (std::vector<RankId>{4, 0}));
  ASSERT_EQ(decoded->parts.size(), 2u);
  EXPECT_TRUE(*decoded->parts[0] == *pairs);
  EXPECT_EQ(decoded->parts[1]->indices, (std::vector<Index>{5}));
  EXPECT_THROW(decode_bundle<SparseVector>(bytes, {4, 0}, std::vector<Bytes>{sizes[0], sizes[1] + 8}, wire),
               std::runtime_error);
  EXPECT_THROW(decode_bundle<SparseVector>(bytes, {4}, std::vector<Bytes>{sizes[0]}, wire), std::runtime_error);
  EXPECT_THROW(decode_payload<Bundle<SparseVector>>(bytes, wire), std::logic_error) << "sizes unknown";

  // Indices and values sent apart: each half decodes alone, and the two make the payload again.
  const auto indices = decode_payload<IndicesOf<SparseSlice>>(encode(IndicesOf<SparseVector>{pairs}, wire), wire);
  const auto values = decode_payload<ValuesOf<SparseSlice>>(encode(ValuesOf<SparseVector>{pairs}, wire), wire);
  EXPECT_EQ(wire_bytes(*values, wire), wire_bytes(ValuesOf<SparseVector>{pairs}, wire)) << "forwarded as received";
  const auto whole = rejoined(*indices, *values);
  EXPECT_EQ(whole->size(), 3u);
  EXPECT_EQ(std::vector<Index>(whole->view().indices.begin(), whole->view().indices.end()), pairs->indices);
  EXPECT_TRUE(std::signbit(whole->view().values[1]));
  // In a simulation both halves view one payload: that one comes back.
  const auto shared = std::make_shared<const SparseVector>(*pairs);
  EXPECT_EQ(rejoined(IndicesOf<SparseVector>{shared}, ValuesOf<SparseVector>{shared}), shared);
  const auto short_values = std::make_shared<const ValuesOf<SparseVector>>(
      ValuesOf<SparseVector>{std::make_shared<const SparseVector>(SparseVector{{1}, {1.0f}})});
  EXPECT_THROW(rejoined(IndicesOf<SparseVector>{shared}, *short_values), std::runtime_error);
}

// A payload whose charge and encoding disagree: check_encoding must say so.
struct Misfit {
  SparseVector pairs;
};
Bytes wire_bytes(const Misfit& m, const WireFormat& wire) { return wire_bytes(m.pairs, wire) + 4; }
WireBuffer encode(const Misfit& m, const WireFormat& wire) { return encode(m.pairs, wire); }
bool decodes_to(const Misfit& m, WireBytes bytes, const WireFormat& wire) { return decodes_to(m.pairs, bytes, wire); }

TEST(WireCodec, CheckEncodingCatchesAChargeThatIsNotTheMessage)
{
  const WireFormat wire;
  EXPECT_NO_THROW(check_encoding(sample_pairs(), wire));
  EXPECT_THROW(check_encoding(Misfit{sample_pairs()}, wire), std::logic_error);
}

// A run with every message checked gives the files of the same run without the check.
TEST(WireCheck, LeavesResultsAsTheyAre)
{
  nlohmann::json config = star_run_config("wire", 8, 3, "oktopk", 1 << 14);
  config["gradients"] = {{"source", "calibrated"}, {"model", "vgg16"}};
  config["selection"] = {{"reevaluate_every", 2}};
  const CliResult plain = run_config(config, "plain");
  config["simulation"] = {{"check_wire", true}};
  const CliResult checked = run_config(config, "checked");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  ASSERT_EQ(checked.exit_code, 0) << checked.output;
  for (const char* file : {"results.csv", "ranks.csv", "links.csv"})
    EXPECT_EQ(read_text(plain.dir / file), read_text(checked.dir / file)) << file;
  const auto manifest = nlohmann::json::parse(read_text(checked.dir / "manifest.json"));
  EXPECT_TRUE(manifest["config"]["simulation"]["check_wire"].get<bool>());
}

TEST(WireCheck, NeedsTheEncodableFormat)
{
  nlohmann::json config = star_run_config("wire", 4, 1, "topka", 1 << 12);
  config["workload"]["value_bytes"] = 2;
  config["simulation"] = {{"check_wire", true}};
  const CliResult run = run_config(config, "bf16");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("simulation.check_wire"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("value_bytes"), std::string::npos) << run.output;
}

} // namespace
