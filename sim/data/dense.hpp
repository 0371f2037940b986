// Dense vectors as the dense baselines move them: whole-vector data per rank, cut into blocks.
#pragma once

#include "sim/data/wire.hpp"

#include <cstdint>
#include <memory>

namespace sparsim {

// One rank's dense vector. In phantom mode `values` is empty and only `length` exists: the dense
// collectives then move correctly sized messages without holding n floats per rank.
struct DenseVector {
  std::uint64_t length = 0;
  std::vector<float> values;
  bool phantom() const { return values.empty() && length > 0; }
};

// Start of block b when [0, n) is cut into `blocks` near-equal blocks: floor(b*n/blocks). Block b is
// [block_begin(n, blocks, b), block_begin(n, blocks, b + 1)); sizes differ by at most one.
inline std::uint64_t block_begin(std::uint64_t n, int blocks, int b)
{
  return static_cast<std::uint64_t>((static_cast<unsigned __int128>(n) * static_cast<unsigned>(b)) /
                                    static_cast<unsigned>(blocks));
}

// A copy of [begin, end) as a message payload (length only in phantom mode).
std::shared_ptr<const DenseBlock> extract_block(const DenseVector& v, std::uint64_t begin, std::uint64_t end);
// v[begin + i] += block[i]. Throws std::logic_error if the block does not fit.
void accumulate_block(DenseVector& v, std::uint64_t begin, const DenseBlock& block);
// Memory traffic of accumulate_block, for Communicator::charge_reduction: two fp32 read and one written per
// entry (phantom blocks too: they stand for that work).
inline Bytes accumulate_traffic(const DenseBlock& block) { return 12 * block.length; }
// v[begin + i] = block[i].
void overwrite_block(DenseVector& v, std::uint64_t begin, const DenseBlock& block);

} // namespace sparsim
