#include "sim/base/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace sparsim {

void parallel_blocks(std::size_t count, std::size_t block, int threads,
                     const std::function<void(std::size_t begin, std::size_t end)>& work)
{
  const std::size_t blocks = block == 0 ? 0 : (count + block - 1) / block;
  const auto used = static_cast<std::size_t>(std::max(1, threads));
  std::atomic<std::size_t> next = 0;
  std::mutex failure_mutex;
  std::exception_ptr failure;
  auto run = [&] {
    for (std::size_t b = next++; b < blocks; b = next++) {
      try {
        work(b * block, std::min(count, (b + 1) * block));
      } catch (...) {
        std::lock_guard lock(failure_mutex);
        if (!failure)
          failure = std::current_exception();
        next = blocks; // stop handing out blocks
      }
    }
  };
  std::vector<std::thread> helpers;
  for (std::size_t t = 1; t < std::min(used, blocks); ++t)
    helpers.emplace_back(run);
  run();
  for (auto& helper : helpers)
    helper.join();
  if (failure)
    std::rethrow_exception(failure);
}

} // namespace sparsim
