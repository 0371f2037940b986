#include "sim/data/dense.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace sparsim {
namespace {
void check_fits(const DenseVector& v, std::uint64_t begin, const DenseBlock& block)
{
  if (begin + block.length > v.length)
    throw std::logic_error("dense block [" + std::to_string(begin) + ", +" + std::to_string(block.length) +
                           ") outside a vector of length " + std::to_string(v.length));
  if (v.phantom() != block.values.empty() && block.length > 0)
    throw std::logic_error("dense block and vector disagree on phantom mode");
}
} // namespace

std::shared_ptr<const DenseBlock> extract_block(const DenseVector& v, std::uint64_t begin, std::uint64_t end)
{
  auto block = std::make_shared<DenseBlock>();
  block->length = end - begin;
  if (!v.phantom())
    block->values.assign(v.values.begin() + static_cast<std::ptrdiff_t>(begin),
                         v.values.begin() + static_cast<std::ptrdiff_t>(end));
  return block;
}

void accumulate_block(DenseVector& v, std::uint64_t begin, const DenseBlock& block)
{
  check_fits(v, begin, block);
  for (std::size_t i = 0; i < block.values.size(); ++i)
    v.values[begin + i] += block.values[i];
}

void overwrite_block(DenseVector& v, std::uint64_t begin, const DenseBlock& block)
{
  check_fits(v, begin, block);
  std::copy(block.values.begin(), block.values.end(), v.values.begin() + static_cast<std::ptrdiff_t>(begin));
}

} // namespace sparsim
