#include "sim/comm/link_loads.hpp"

#include <algorithm>

namespace sparsim {

LinkLoadCounter::LinkLoadCounter(int ranks, LinkRoute route, std::size_t slots)
    : route_(std::move(route))
    , loads_(slots)
    , last_routes_(route_ ? static_cast<std::size_t>(ranks) : 0)
    , sends_(last_routes_.size(), 0)
{
}

std::span<const std::size_t> LinkLoadCounter::add(RankId source, RankId dest, Bytes bytes, int iteration)
{
  if (!route_ || route_.chosen_at_start())
    return {};
  LastRoute& route = last_routes_[source];
  const std::uint64_t message = sends_[source]++;
  if (route.dest != dest || route_.per_message) {
    route.slots.clear();
    route_.find(source, dest, message, route.slots);
    route.dest = dest;
  }
  count(route.slots, bytes, iteration);
  return route.slots;
}

void LinkLoadCounter::count(std::span<const std::size_t> slots, Bytes bytes, int iteration)
{
  // Messages of one iteration are all posted before any of the next (ranks align between iterations),
  // so a link's count for an iteration starts when the first message of that iteration crosses it.
  for (const std::size_t slot : slots) {
    LinkLoad& load = loads_[slot];
    load.crossed = true;
    if (load.current_iteration != iteration) {
      load.current_iteration = iteration;
      load.current = 0;
    }
    load.current += bytes;
    load.total += bytes;
    load.iteration_max = std::max(load.iteration_max, load.current);
  }
}

} // namespace sparsim
