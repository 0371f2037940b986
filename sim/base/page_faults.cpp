#include "sim/base/page_faults.hpp"

#include <cstdint>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace sparsim {

void fault_in(void* data, std::size_t bytes)
{
#if defined(__linux__) && defined(MADV_POPULATE_WRITE)
  static const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  // Only the pages wholly inside the buffer: the partial ones at its ends may belong to other allocations too
  // (populating them would be harmless, but they are likely present already).
  const auto begin = (reinterpret_cast<std::uintptr_t>(data) + page - 1) / page * page;
  const auto end = (reinterpret_cast<std::uintptr_t>(data) + bytes) / page * page;
  if (end > begin)
    madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE); // failure: pages fault in as written
#else
  (void)data;
  (void)bytes;
#endif
}

} // namespace sparsim
