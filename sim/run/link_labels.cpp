#include "sim/run/link_labels.hpp"

#include <stdexcept>

namespace sparsim {

std::vector<LinkRow> label_link_loads(const std::vector<LinkLoad>& loads, const NetworkGraph& graph)
{
  if (loads.size() != link_slot_count(graph))
    throw std::logic_error("label_link_loads: the loads do not have one slot per direction of the graph's links");
  std::vector<LinkRow> rows;
  auto take = [&](std::size_t slot, std::string name, const std::string& level, const char* direction) {
    const LinkLoad& load = loads[slot];
    if (load.crossed)
      rows.push_back({std::move(name), level, direction, load.total, load.iteration_max});
  };
  for (std::size_t i = 0; i < graph.edge_count(); ++i) {
    const NetworkGraph::Link& link = graph.link(i);
    take(2 * i, link.name + "_UP", link.level, "up");
    take(2 * i + 1, link.name + "_DOWN", link.level, "down");
  }
  take(2 * graph.edge_count(), "__loopback__", "loopback", "");
  return rows;
}

} // namespace sparsim
