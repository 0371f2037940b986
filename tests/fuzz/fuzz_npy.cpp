// libFuzzer target: bytes as a .npy file through parse_npy, the reader behind replayed gradients. An NpyError
// is the expected answer to a malformed file; any other exception, a crash or undefined behaviour is a
// finding, and so is an accepted array whose data does not match its shape.
#include "sim/gradients/npy.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    const sparsim::NpyArray array = sparsim::parse_npy(bytes, "fuzz input");
    const std::size_t elements =
        std::accumulate(array.shape.begin(), array.shape.end(), std::size_t{1}, std::multiplies<>());
    if (array.shape.empty() || array.shape.size() > 3 || elements != array.data.size())
      std::abort();
  } catch (const sparsim::NpyError&) {
  }
  return 0;
}
