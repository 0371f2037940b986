#include "sim/base/page_faults.hpp"

#include <atomic>
#include <cstdint>
#include <fstream>
#include <string>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace sparsim {
namespace {

#if defined(__linux__) && defined(MADV_HUGEPAGE)
// The mappings of this process (lines of /proc/self/maps) and the kernel's limit on them (vm.max_map_count).
std::size_t mapping_count()
{
  std::ifstream maps("/proc/self/maps");
  std::size_t lines = 0;
  for (std::string line; std::getline(maps, line);)
    ++lines;
  return lines;
}

std::size_t mapping_limit()
{
  std::size_t limit = 0;
  if (std::ifstream("/proc/sys/vm/max_map_count") >> limit && limit > 0)
    return limit;
  return 65530; // the kernel's default
}

// Whether one more buffer may be advised to use huge pages. Advising a buffer's interior splits its mapping (up to
// two more), and past vm.max_map_count mmap, and so malloc, fails: at P = 16384 the ranks' stacks alone take half
// of the default limit. So advising stops while the process has more than half the limit; counted every 256 calls
// (at most 512 new mappings in between).
bool may_advise_huge_pages()
{
  static const std::size_t limit = mapping_limit();
  static std::atomic<std::uint64_t> calls{0};
  static std::atomic<bool> allowed{true};
  if (calls.fetch_add(1, std::memory_order_relaxed) % 256 == 0)
    allowed.store(mapping_count() < limit / 2, std::memory_order_relaxed);
  return allowed.load(std::memory_order_relaxed);
}
#endif

} // namespace

void fault_in(void* data, std::size_t bytes)
{
#if defined(__linux__) && defined(MADV_POPULATE_WRITE)
  static const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  // Only the pages wholly inside the buffer: the partial ones at its ends may belong to other allocations too
  // (populating them would be harmless, but they are likely present already).
  const auto begin = (reinterpret_cast<std::uintptr_t>(data) + page - 1) / page * page;
  const auto end = (reinterpret_cast<std::uintptr_t>(data) + bytes) / page * page;
#if defined(MADV_HUGEPAGE)
  // Transparent huge pages for the 2 MiB blocks wholly inside the buffer, when there are at least two (smaller
  // buffers would split their mapping for little): one fault and one page-table entry per 2 MiB instead of 512.
  // Failure (no transparent huge pages): 4 KiB pages.
  constexpr std::uintptr_t kHugePage = std::uintptr_t{2} << 20;
  const auto huge_begin = (begin + kHugePage - 1) / kHugePage * kHugePage;
  const auto huge_end = end / kHugePage * kHugePage;
  if (huge_end >= huge_begin + 2 * kHugePage && may_advise_huge_pages())
    madvise(reinterpret_cast<void*>(huge_begin), huge_end - huge_begin, MADV_HUGEPAGE);
#endif
  if (end > begin)
    madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE); // failure: pages fault in as written
#else
  (void)data;
  (void)bytes;
#endif
}

} // namespace sparsim
