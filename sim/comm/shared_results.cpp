#include "sim/comm/shared_results.hpp"

namespace sparsim {

std::shared_ptr<const void> SharedResults::get_erased(Key key, int users, const Make& keep, const Make& compute)
{
  auto found = entries_.find(key);
  if (found == entries_.end()) {
    found = entries_.emplace(std::move(key), Entry{keep(), compute(), users}).first;
    ++computed_;
  }
  ++taken_;
  std::shared_ptr<const void> result = found->second.result;
  if (--found->second.remaining <= 0)
    entries_.erase(found);
  return result;
}

} // namespace sparsim
