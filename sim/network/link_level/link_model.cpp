#include "sim/network/link_level/link_model.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace sparsim {

LinkSharingModel::LinkSharingModel(std::vector<LinkSpec> links, bool predicts)
    : specs_(std::move(links))
    , links_(specs_.size())
    , predicts_(predicts)
    , joining_(predicts ? specs_.size() : 0)
    , departures_(specs_.size())
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
    if (predicts_)
      joining_[index] += flow.bytes;
  }
  const Seconds ready = start + latency;
  // Unshared links carry it at their bandwidth; CM02 bounds the rate of a flow with latency by its window.
  BytesPerSecond own_rate = unshared_bottleneck;
  if (latency > 0)
    own_rate = std::min(own_rate, std::min(bottleneck, kTcpGammaBytes / (2.0 * latency)));
  flow.earliest_arrival = own_rate < kNever ? ready + flow.bytes / own_rate : ready;
  events_.push({.time = ready, .kind = Kind::join, .flow = id});
  return id;
}

Seconds LinkSharingModel::predicted_time(Seconds now, Bytes bytes, const std::vector<std::size_t>& route) const
{
  if (!predicts_)
    throw std::logic_error("LinkSharingModel::predicted_time on a model made without predictions");
  Seconds latency = 0, busiest = 0;
  for (std::size_t index : route) {
    const LinkSpec& spec = specs_.at(index);
    latency += spec.latency;
    double backlog = static_cast<double>(bytes);
    if (spec.shared) {
      const Link& link = links_[index];
      const double flows = static_cast<double>(link.flows.size());
      if (flows > 0) {
        const double virtual_now = link.virtual_time + (now - link.updated) * link.bandwidth / flows;
        backlog += std::max(0.0, link.tag_sum - flows * virtual_now);
      }
      backlog += joining_[index];
    }
    busiest = std::max(busiest, backlog / spec.bandwidth);
  }
  return latency + busiest;
}

Seconds LinkSharingModel::next_event()
{
  return std::min(departures_.top_time(), events_.empty() ? kNever : events_.top().time);
}

void LinkSharingModel::handle_next_event(std::vector<FlowId>& arrived)
{
  const Seconds now = next_event();
  if (now == kNever)
    return;
  for (;;) {
    if (departures_.top_time() == now) {
      depart(departures_.top(), now, arrived);
      continue;
    }
    if (events_.empty() || events_.top().time != now)
      break;
    const Event event = events_.top();
    events_.pop();
    if (event.kind == Kind::arrival) {
      arrived.push_back(event.flow);
      release(event.flow);
    } else {
      join(event.flow, now, arrived);
    }
  }
  // The links that flows joined now take their next departure from their state after the last join: one
  // update of the departure queue per link instead of one per join (a departure due now was set at once).
  for (const std::uint32_t link : rescheduled_) {
    links_[link].rescheduled = false;
    schedule_departure(link);
  }
  rescheduled_.clear();
}

void LinkSharingModel::advance_link(Link& link, Seconds now)
{
  if (link.flows.empty())
    link.virtual_time = 0; // idle: start counting afresh (keeps the numbers small)
  else
    link.virtual_time += (now - link.updated) * link.bandwidth / static_cast<double>(link.flows.size());
  link.updated = now;
}

Seconds LinkSharingModel::next_departure(const Link& link) const
{
  if (link.flows.empty())
    return kNever;
  const double remaining = std::max(0.0, link.flows.top().tag - link.virtual_time);
  return link.updated + remaining * static_cast<double>(link.flows.size()) / link.bandwidth;
}

void LinkSharingModel::schedule_departure(std::uint32_t link_index)
{
  departures_.set(link_index, next_departure(links_[link_index]));
}

void LinkSharingModel::schedule_departure_after_joins(std::uint32_t link_index, Seconds now)
{
  Link& link = links_[link_index];
  if (next_departure(link) == now) {
    departures_.set(link_index, now); // handled before anything else at `now`, as it would be at once
    return;
  }
  if (!link.rescheduled) {
    link.rescheduled = true;
    rescheduled_.push_back(link_index);
  }
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
    const double tag = link.virtual_time + flow.bytes;
    link.flows.push({.tag = tag, .flow = id});
    link.tag_sum += tag;
    if (predicts_)
      joining_[index] -= flow.bytes;
    schedule_departure_after_joins(index, now);
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
    link.tag_sum -= link.flows.top().tag;
    link.flows.pop();
    link_done(flow, now, arrived);
  }
  if (link.flows.empty()) {
    link.virtual_time = 0;
    link.tag_sum = 0;
  }
  schedule_departure(link_index);
}

void LinkSharingModel::link_done(FlowId id, Seconds now, std::vector<FlowId>& arrived)
{
  Flow& flow = flows_[id];
  if (--flow.links_left > 0)
    return;
  if (flow.earliest_arrival > now) {
    events_.push({.time = flow.earliest_arrival, .kind = Kind::arrival, .flow = id});
    return;
  }
  arrived.push_back(id);
  release(id);
}

void LinkSharingModel::DepartureQueue::set(std::uint32_t link, Seconds time)
{
  const std::uint32_t slot = position_[link];
  if (time == kNever) {
    if (slot == kAbsent)
      return;
    const Entry last = heap_.back();
    heap_.pop_back();
    position_[link] = kAbsent;
    if (last.link() != link) {
      // The last entry fills the hole, moving up or down from it.
      if (slot > 0 && last < heap_[(slot - 1) / kArity])
        sift_up(slot, last);
      else
        sift_down(slot, last);
    }
    return;
  }
  const Entry entry(time, link);
  if (slot == kAbsent) {
    heap_.push_back(entry);
    sift_up(heap_.size() - 1, entry);
  } else if (slot > 0 && entry < heap_[(slot - 1) / kArity]) {
    sift_up(slot, entry);
  } else {
    sift_down(slot, entry);
  }
}

void LinkSharingModel::DepartureQueue::sift_up(std::size_t slot, Entry entry)
{
  while (slot > 0) {
    const std::size_t parent = (slot - 1) / kArity;
    if (!(entry < heap_[parent]))
      break;
    place(slot, heap_[parent]);
    slot = parent;
  }
  place(slot, entry);
}

void LinkSharingModel::DepartureQueue::sift_down(std::size_t slot, Entry entry)
{
  for (;;) {
    const std::size_t first = kArity * slot + 1;
    if (first >= heap_.size())
      break;
    const std::size_t last = std::min(first + kArity, heap_.size());
    std::size_t child = first;
    for (std::size_t c = first + 1; c < last; ++c)
      child = heap_[c] < heap_[child] ? c : child;
    if (!(heap_[child] < entry))
      break;
    place(slot, heap_[child]);
    slot = child;
  }
  place(slot, entry);
}

} // namespace sparsim
