// links.csv: the bytes each direction of each graph link carried (rows labelled by sim/run/link_labels.hpp).
#pragma once

#include "sim/run/run_output.hpp"

#include <string>
#include <vector>

namespace sparsim {

// The rows as links.csv text (header: link,level,direction,bytes,bytes_iteration_max).
std::string links_csv(const std::vector<LinkRow>& rows);

} // namespace sparsim
