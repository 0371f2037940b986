#include "sim/network/link_level/link_model.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace sparsim {

LinkSharingModel::LinkSharingModel(std::vector<LinkSpec> links)
    : specs_(std::move(links))
    , links_(specs_.size())
{
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    if (!(specs_[i].bandwidth > 0) || !(specs_[i].latency >= 0))
      throw std::invalid_argument("LinkSharingModel: every link needs a positive bandwidth and a latency >= 0");
    links_[i].bandwidth = specs_[i].bandwidth;
  }
}

LinkSharingModel::FlowId LinkSharingModel::start(Seconds start, Bytes bytes, const std::vector<std::size_t>& route)
{
  FlowId id;
  if (free_flows_.empty()) {
    id = static_cast<FlowId>(flows_.size());
    flows_.emplace_back();
  } else {
    id = free_flows_.back();
    free_flows_.pop_back();
  }
  Flow& flow = flows_[id];
  flow.bytes = static_cast<double>(bytes);
  flow.hop_count = 0;
  Seconds latency = 0;
  BytesPerSecond bottleneck = kNever;
  BytesPerSecond unshared_bottleneck = kNever;
  for (std::size_t index : route) {
    const LinkSpec& spec = specs_.at(index);
    latency += spec.latency;
    bottleneck = std::min(bottleneck, spec.bandwidth);
    if (!spec.shared) {
      unshared_bottleneck = std::min(unshared_bottleneck, spec.bandwidth);
      continue;
    }
    if (flow.hop_count == kMaxSharedHops)
      throw std::length_error("LinkSharingModel: a route with more than 32 shared links");
    flow.hops[flow.hop_count++] = static_cast<std::uint32_t>(index);
  }
  const Seconds ready = start + latency;
  // Unshared links carry it at their bandwidth; CM02 bounds the rate of a flow with latency by its window.
  BytesPerSecond own_rate = unshared_bottleneck;
  if (latency > 0)
    own_rate = std::min(own_rate, std::min(bottleneck, kTcpGammaBytes / (2.0 * latency)));
  flow.earliest_arrival = own_rate < kNever ? ready + flow.bytes / own_rate : ready;
  events_.push({.time = ready, .kind = Kind::join, .id = id, .version = 0});
  return id;
}

Seconds LinkSharingModel::next_event()
{
  drop_stale_events();
  return events_.empty() ? kNever : events_.top().time;
}

void LinkSharingModel::handle_next_event(std::vector<FlowId>& arrived)
{
  drop_stale_events();
  if (events_.empty())
    return;
  const Seconds now = events_.top().time;
  while (!events_.empty() && events_.top().time == now) {
    const Event event = events_.top();
    events_.pop();
    switch (event.kind) {
    case Kind::departure:
      if (event.version == links_[event.id].version)
        depart(event.id, now, arrived);
      break;
    case Kind::arrival:
      arrived.push_back(event.id);
      release(event.id);
      break;
    case Kind::join:
      join(event.id, now, arrived);
      break;
    }
    drop_stale_events();
  }
}

void LinkSharingModel::drop_stale_events()
{
  while (!events_.empty() && events_.top().kind == Kind::departure &&
         events_.top().version != links_[events_.top().id].version)
    events_.pop();
}

void LinkSharingModel::advance_link(Link& link, Seconds now)
{
  if (link.flows.empty())
    link.virtual_time = 0; // idle: start counting afresh (keeps the numbers small)
  else
    link.virtual_time += (now - link.updated) * link.bandwidth / static_cast<double>(link.flows.size());
  link.updated = now;
}

void LinkSharingModel::schedule_departure(std::uint32_t link_index)
{
  Link& link = links_[link_index];
  ++link.version;
  if (link.flows.empty())
    return;
  const double remaining = std::max(0.0, link.flows.top().tag - link.virtual_time);
  const Seconds time = link.updated + remaining * static_cast<double>(link.flows.size()) / link.bandwidth;
  events_.push({.time = time, .kind = Kind::departure, .id = link_index, .version = link.version});
}

void LinkSharingModel::join(FlowId id, Seconds now, std::vector<FlowId>& arrived)
{
  Flow& flow = flows_[id];
  if (flow.hop_count == 0) {
    flow.links_left = 1; // no shared link: only its own rate bounds it
    link_done(id, now, arrived);
    return;
  }
  flow.links_left = flow.hop_count;
  for (std::uint32_t h = 0; h < flow.hop_count; ++h) {
    const std::uint32_t index = flow.hops[h];
    Link& link = links_[index];
    advance_link(link, now);
    link.flows.push({.tag = link.virtual_time + flow.bytes, .flow = id});
    schedule_departure(index);
  }
}

void LinkSharingModel::depart(std::uint32_t link_index, Seconds now, std::vector<FlowId>& arrived)
{
  Link& link = links_[link_index];
  // The first flow's tag is reached now; every flow with that tag leaves with it.
  const double reached = link.flows.top().tag;
  link.virtual_time = reached;
  link.updated = now;
  while (!link.flows.empty() && link.flows.top().tag <= reached) {
    const FlowId flow = link.flows.top().flow;
    link.flows.pop();
    link_done(flow, now, arrived);
  }
  if (link.flows.empty())
    link.virtual_time = 0;
  schedule_departure(link_index);
}

void LinkSharingModel::link_done(FlowId id, Seconds now, std::vector<FlowId>& arrived)
{
  Flow& flow = flows_[id];
  if (--flow.links_left > 0)
    return;
  if (flow.earliest_arrival > now) {
    events_.push({.time = flow.earliest_arrival, .kind = Kind::arrival, .id = id, .version = 0});
    return;
  }
  arrived.push_back(id);
  release(id);
}

} // namespace sparsim
