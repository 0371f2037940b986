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
  // Latency first, as in CM02; then every link carries the message in its first free gap from then on, and
  // the message has arrived once the last of them has.
  const Seconds ready = start + latency;
  Seconds arrival = ready;
  for (std::size_t index : route) {
    const LinkSpec& link = links_[index];
    const Seconds busy = size / link.bandwidth;
    Seconds carried_from = ready;
    if (link.shared) {
      // Bookings that ended before this start can hold no later transfer: forget them.
      std::vector<Booking>& booked = bookings_[index];
      std::size_t expired = 0;
      while (expired < booked.size() && booked[expired].end <= start)
        ++expired;
      booked.erase(booked.begin(), booked.begin() + static_cast<std::ptrdiff_t>(expired));
      carried_from = book(index, ready, busy);
    }
    arrival = std::max(arrival, carried_from + busy);
  }
  // CM02's window bound on the rate of a flow with latency (never binding on the platforms here, but exact).
  if (latency > 0)
    arrival = std::max(arrival, ready + size / std::min(bottleneck, kTcpGammaBytes / (2.0 * latency)));
  return arrival;
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
