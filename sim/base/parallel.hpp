// Work over many items spread on host threads in blocks that do not depend on the thread count.
#pragma once

#include <cstddef>
#include <functional>

namespace sparsim {

// Calls work(begin, end) for the blocks [b * block, min(count, (b + 1) * block)) of [0, count), on up to
// `threads` host threads (the caller's among them). The blocks are the same for any thread count, so work that
// writes per item, or per block and is merged in block order afterwards, gives the same result for any count.
// The first exception a block throws is rethrown after all threads stopped.
void parallel_blocks(std::size_t count, std::size_t block, int threads,
                     const std::function<void(std::size_t begin, std::size_t end)>& work);

} // namespace sparsim
