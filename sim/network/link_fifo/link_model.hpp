// The link-level FIFO model's arithmetic: when a message that starts at a given time arrives, given what
// earlier messages left on the links of its route. No SimGrid and no ranks here (the transport that uses it:
// transport.hpp).
//
// A message of S bytes that starts at time t on a route of links l_1..l_h (bandwidth b_i, latency lat_i) first
// pays the route's latency L = lat_1 + ... + lat_h, as CM02 does before any of its bytes move. Then each link
// of the route carries it for S / b_i, its own time to carry the message, in the earliest gap of that length
// the link has left free from t + L on; links are booked in order of transfer start. The message has arrived
// when the last of its links has carried it. A message's links are booked independently of each other, as
// if switches forwarded its packets as they come (packet pipelining with buffers), not as one rigid train.
//
// A lone message therefore takes exactly L + S / min_i b_i, CM02's time without cross traffic, and n
// messages into one link finish one after the other, the last at L + n S / b as under max-min sharing.
// A fast link that carries several slower flows is booked only for each flow's share (S / b_i, not
// S / bottleneck), so a 4x uplink carries four node-rate flows at once. Gaps are filled (backfill): a message
// that must wait for one link still uses the others while they are free, so waves of rotated steps pack the
// links as tightly as fair sharing does.
//
// LIMITATIONS
// - FIFO per link instead of CM02's max-min fair sharing: messages that share a link finish one after the
//   other instead of together (the last one at the same time); a small message booked after a large one
//   waits for it instead of taking a share. Shares are not weighted by route latency.
// - Bookings are made once, in order of transfer start, and never revised; each link carries the message at
//   its own bandwidth, at its own time: infinite switch buffers absorb the difference between the links of
//   a route (no back-pressure, no credit stalls), so a message may finish on a link before it has finished
//   on the link before it.
// - Latency is paid once per message, before its bytes move, and never shared.
// - Static routes (the topology's route function); no adaptive routing.
#pragma once

#include "sim/base/units.hpp"

#include <cstddef>
#include <vector>

namespace sparsim {

// One link direction, as a network model sees it.
struct LinkSpec {
  BytesPerSecond bandwidth = 0;
  Seconds latency = 0;
  bool shared = true; // false: every message gets the full bandwidth (SimGrid's FATPIPE loopback)
};

// SimGrid 3.32's defaults for the loopback a node's message to itself crosses (network/loopback-bw and
// network/loopback-lat).
inline constexpr BytesPerSecond kLoopbackBandwidth = 10e9;
inline constexpr Seconds kLoopbackLatency = 0.0;
// SimGrid's network/TCP-gamma default (bytes): CM02 bounds a flow's rate by gamma / (2 * route latency).
inline constexpr double kTcpGammaBytes = 4194304.0;

class LinkFifoModel {
public:
  explicit LinkFifoModel(std::vector<LinkSpec> links);

  // A transfer of `bytes` over the links `route` (indices into the links, in route order) that starts at
  // `start`: books its time on every link and returns its arrival. Calls must come in non-decreasing order
  // of `start`.
  Seconds transfer(Seconds start, Bytes bytes, const std::vector<std::size_t>& route);

private:
  struct Booking {
    Seconds begin;
    Seconds end;
  };
  // Books `duration` on `link` in its earliest free gap at or after `earliest`; returns where it begins.
  Seconds book(std::size_t link, Seconds earliest, Seconds duration);

  std::vector<LinkSpec> links_;
  // Per link, the bookings that end after the latest transfer start, in time order, disjoint (touching ones
  // merged).
  std::vector<std::vector<Booking>> bookings_;
};

} // namespace sparsim
