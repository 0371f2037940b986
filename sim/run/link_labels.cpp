#include "sim/run/link_labels.hpp"

#include <fmt/format.h>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Link.hpp>
#include <stdexcept>
#include <unordered_map>

namespace sparsim {

std::vector<LinkRow> label_link_loads(const World::LinkLoads& loads, const NetworkGraph& graph)
{
  std::unordered_map<std::string, const LinkLoad*> by_name;
  for (const simgrid::s4u::Link* link : simgrid::s4u::Engine::get_instance()->get_all_links())
    if (const auto found = loads.find(link->get_impl()); found != loads.end())
      by_name.emplace(link->get_name(), &found->second);

  std::vector<LinkRow> rows;
  auto take = [&](const std::string& name, const std::string& level, const char* direction) {
    const auto found = by_name.find(name);
    if (found == by_name.end())
      return;
    rows.push_back({name, level, direction, found->second->total, found->second->iteration_max});
    by_name.erase(found);
  };
  for (std::size_t i = 0; i < graph.edge_count(); ++i) {
    const NetworkGraph::Link& link = graph.link(i);
    take(link.name + "_UP", link.level, "up");
    take(link.name + "_DOWN", link.level, "down");
  }
  take("__loopback__", "loopback", "");
  if (!by_name.empty())
    throw std::logic_error("links.csv: SimGrid link \"" + by_name.begin()->first +
                           "\" carried bytes but is not in the topology's graph");
  return rows;
}

}  // namespace sparsim
