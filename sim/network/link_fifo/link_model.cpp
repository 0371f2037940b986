#include "sim/network/link_fifo/link_model.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <utility>

namespace sparsim {

LinkFifoModel::LinkFifoModel(std::vector<LinkSpec> links)
    : links_(std::move(links))
    , bookings_(links_.size())
{
  for (const LinkSpec& link : links_)
    if (!(link.bandwidth > 0) || !(link.latency >= 0))
      throw std::invalid_argument("LinkFifoModel: every link needs a positive bandwidth and a latency >= 0");
}

Seconds LinkFifoModel::transfer(Seconds start, Bytes bytes, const std::vector<std::size_t>& route)
{
  const double size = static_cast<double>(bytes);
  Seconds latency = 0;
  BytesPerSecond bottleneck = std::numeric_limits<double>::infinity();
  for (std::size_t index : route) {
    latency += links_.at(index).latency;
    bottleneck = std::min(bottleneck, links_[index].bandwidth);
  }
  // Latency first, as in CM02; then the head enters each link in its first free gap at or after the time it
  // entered the link before, and the tail leaves no earlier than it left the link before.
  Seconds head = start + latency;
  Seconds tail = head;
  for (std::size_t index : route) {
    const LinkSpec& link = links_[index];
    const Seconds busy = size / link.bandwidth;
    if (link.shared) {
      // Bookings that ended before this start can hold no later transfer: forget them.
      std::vector<Booking>& booked = bookings_[index];
      std::size_t expired = 0;
      while (expired < booked.size() && booked[expired].end <= start)
        ++expired;
      booked.erase(booked.begin(), booked.begin() + static_cast<std::ptrdiff_t>(expired));
      head = book(index, head, busy);
    }
    tail = std::max(tail, head + busy);
  }
  // CM02's window bound on the rate of a flow with latency (never binding on the platforms here, but exact).
  if (latency > 0)
    tail = std::max(tail, start + latency + size / std::min(bottleneck, kTcpGammaBytes / (2.0 * latency)));
  return tail;
}

Seconds LinkFifoModel::book(std::size_t link, Seconds earliest, Seconds duration)
{
  std::vector<Booking>& booked = bookings_[link];
  if (duration <= 0)
    return earliest;
  // The first gap after `earliest` long enough: before booking i, or after the last.
  std::size_t i = 0;
  Seconds begin = earliest;
  for (; i < booked.size(); ++i) {
    if (booked[i].end <= begin)
      continue;
    if (begin + duration <= booked[i].begin)
      break;
    begin = booked[i].end;
  }
  const Seconds end = begin + duration;
  // Insert before booking i, merging with the booking before and the one after where they touch.
  const bool joins_previous = i > 0 && booked[i - 1].end == begin;
  const bool joins_next = i < booked.size() && booked[i].begin == end;
  if (joins_previous && joins_next) {
    booked[i - 1].end = booked[i].end;
    booked.erase(booked.begin() + static_cast<std::ptrdiff_t>(i));
  } else if (joins_previous) {
    booked[i - 1].end = end;
  } else if (joins_next) {
    booked[i].begin = begin;
  } else {
    booked.insert(booked.begin() + static_cast<std::ptrdiff_t>(i), {begin, end});
  }
  return begin;
}

} // namespace sparsim
