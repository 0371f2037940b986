#include "sim/comm/link_loads.hpp"

#include <algorithm>

namespace sparsim {

LinkLoadCounter::LinkLoadCounter(int ranks, LinkRoute route, std::size_t slots)
    : route_(std::move(route))
    , loads_(slots)
    , last_routes_(route_ ? static_cast<std::size_t>(ranks) : 0)
    , long_routes_(last_routes_.size())
{
}

std::span<const std::uint32_t> LinkLoadCounter::add(RankId source, RankId dest, Bytes bytes, int iteration)
{
  if (!route_ || route_.chosen_at_start())
    return {};
  if (iteration != latest_iteration_) {
    add_every_held(); // the previous iteration's sums are complete
    latest_iteration_ = iteration;
  }
  LastRoute& last = last_routes_[source];
  const std::uint64_t message = last.sends++;
  if (last.dest != dest || route_.per_message) {
    add_held(source);
    found_.clear();
    route_.find(source, dest, message, found_);
    last.dest = dest;
    last.length = static_cast<std::uint32_t>(found_.size());
    std::uint32_t* links = last.links.data();
    if (found_.size() > kInlineLinks) {
      long_routes_[source].resize(found_.size());
      links = long_routes_[source].data();
    }
    std::copy(found_.begin(), found_.end(), links);
  }
  last.holding = true;
  last.held_bytes += bytes;
  return links_of(source);
}

void LinkLoadCounter::count(std::span<const std::size_t> slots, Bytes bytes, int iteration)
{
  for (const std::size_t slot : slots)
    count_on(slot, bytes, iteration);
}

const std::vector<LinkLoad>& LinkLoadCounter::loads() const
{
  add_every_held();
  return loads_;
}

std::span<const std::uint32_t> LinkLoadCounter::links_of(RankId source) const
{
  const LastRoute& last = last_routes_[source];
  if (last.length > kInlineLinks)
    return long_routes_[source];
  return std::span(last.links.data(), last.length);
}

void LinkLoadCounter::add_held(RankId source) const
{
  LastRoute& last = last_routes_[source];
  if (!last.holding)
    return;
  for (const std::uint32_t slot : links_of(source))
    count_on(slot, last.held_bytes, latest_iteration_);
  last.holding = false;
  last.held_bytes = 0;
}

void LinkLoadCounter::add_every_held() const
{
  for (RankId source = 0; source < static_cast<RankId>(last_routes_.size()); ++source)
    add_held(source);
}

void LinkLoadCounter::count_on(std::size_t slot, Bytes bytes, int iteration) const
{
  // Messages of one iteration are all posted before any of the next (ranks align between iterations),
  // so a link's count for an iteration starts when the first message of that iteration crosses it.
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

} // namespace sparsim
