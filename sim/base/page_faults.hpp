// Faulting in a fresh buffer's pages with one system call instead of one trap per 4 KiB page.
#pragma once

#include <cstddef>
#include <vector>

namespace sparsim {

// Makes the whole pages inside [data, data + bytes) present and writable (Linux: madvise MADV_POPULATE_WRITE) without
// touching their contents. On a VM a page fault costs several microseconds, more than filling the page; a buffer of
// megabytes filled right after this costs a fraction of its faults. The 2 MiB blocks inside a buffer of at least two
// are advised to be transparent huge pages (MADV_HUGEPAGE): on this project's VM fresh 4 KiB pages stay costly to
// first write even when faulted in this way, and one 2 MiB page replaces 512 of them (docs/benchmarks.md, "Huge
// pages"). Does nothing where the calls are not available (the pages then fault in as they are written).
void fault_in(void* data, std::size_t bytes);

// Reserves room for `count` elements in v and faults in its pages at once: for a fresh vector about to be filled.
template <class T> void reserve_faulted_in(std::vector<T>& v, std::size_t count)
{
  v.reserve(count);
  fault_in(v.data(), count * sizeof(T));
}

} // namespace sparsim
