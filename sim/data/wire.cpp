#include "sim/data/wire.hpp"

#include <fmt/format.h>

namespace sparsim {

std::string WireFormat::describe() const
{
  return fmt::format("{}-byte indices, {}-byte values ({} bytes per sparse element)", index_bytes, value_bytes,
                     index_bytes + value_bytes);
}

} // namespace sparsim
