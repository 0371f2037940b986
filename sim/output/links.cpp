#include "sim/output/links.hpp"

#include <fmt/format.h>

namespace sparsim {

std::string links_csv(const std::vector<LinkRow>& rows)
{
  std::string csv = "link,level,direction,bytes,bytes_iteration_max\n";
  for (const auto& row : rows)
    csv += fmt::format("{},{},{},{},{}\n", row.link, row.level, row.direction, row.bytes, row.iteration_max);
  return csv;
}

} // namespace sparsim
