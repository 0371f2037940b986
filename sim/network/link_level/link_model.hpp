// The link-level model's arithmetic: every link direction shares its bandwidth equally among the messages
// crossing it (processor sharing), each link on its own. No SimGrid and no ranks here (the transport that
// uses it: transport.hpp).
//
// A message ("flow") of S bytes that starts at time t on a route of links l_1..l_h (bandwidth b_i, latency
// lat_i) first pays the route's latency L = lat_1 + ... + lat_h, as CM02 does before any of its bytes move.
// At t + L it joins every link of its route at once. A link with n flows serves each of them at b_i / n; the
// flow has crossed link i when that link has served its S bytes, and has arrived when every link of its
// route has. The links of a route are not coupled: each serves the flow at its own share, as if switches
// forwarded packets as they come with buffers between the links.
//
// A lone message therefore takes exactly L + S / min_i b_i, CM02's time without cross traffic; n equal
// messages that join one link together finish together at L + n S / b, as under max-min sharing, so a step
// whose messages contend stays in step as under CM02. A fast link that carries several slower flows gives
// each its share, so a 4x uplink carries four node-rate flows at their own rate.
//
// Each link keeps its "virtual time" V, the bytes it has served each of its flows since it was last idle
// (dV/dt = b / n); a flow that joins at virtual time V with S bytes leaves the link when V reaches V + S,
// so the order in which a link's flows leave is known when they join, and an event costs O(log n) on one
// link, never a global solve.
//
// LIMITATIONS
// - Equal shares per link instead of CM02's max-min: a flow held back by another link still takes its full
//   share here, so the other flows on this link get less than max-min would give them while it is there,
//   and more once it has left early. Shares are not weighted by route latency (CM02 weights them by it:
//   shorter routes get more; weighting them here changed the validation grid by at most 0.12 points).
// - The links of a route serve a flow independently (infinite switch buffers, no back-pressure or credit
//   stalls): a flow may have crossed a link before it has crossed the link before it.
// - Latency is paid once per message, before its bytes move, and never shared.
// - The route is fixed when the transfer starts (the topology's, or the transport's adaptive choice among
//   candidates by predicted_time()); a message never changes route on the way as Aries' packets may.
#pragma once

#include "sim/base/units.hpp"

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <queue>
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

class LinkSharingModel {
public:
  using FlowId = std::uint32_t;
  static constexpr Seconds kNever = std::numeric_limits<double>::infinity();

  // `predicts`: predicted_time() will be asked (adaptive routing); the model then also keeps, per link, the bytes
  // of the flows about to join it.
  explicit LinkSharingModel(std::vector<LinkSpec> links, bool predicts = false);

  // A flow of `bytes` over the links `route` (indices into the links, in route order) that starts at `start`
  // (no earlier than the last event handled). Returns its id, valid until it is reported arrived.
  FlowId start(Seconds start, Bytes bytes, const std::vector<std::size_t>& route);

  // How long a flow of `bytes` starting `now` on `route` would take to cross its busiest link if nothing else
  // joined: the route's latency plus, over its shared links, the largest (bytes still to serve there + bytes) /
  // bandwidth, counting the flows that have started but not yet joined (adaptive routing's load estimate). Only for
  // a model made with `predicts` (std::logic_error otherwise).
  Seconds predicted_time(Seconds now, Bytes bytes, const std::vector<std::size_t>& route) const;

  // When the next thing happens (a flow joins its links, leaves a link, or arrives); kNever when nothing is
  // in flight.
  Seconds next_event();
  // Handles everything that happens at next_event() and appends the flows that arrived then to `arrived`.
  void handle_next_event(std::vector<FlowId>& arrived);

private:
  static constexpr std::size_t kMaxSharedHops = 32;
  // Aligned to a cache line, so that a flow with up to 10 shared links reads and writes one line.
  struct alignas(64) Flow {
    double bytes = 0;
    Seconds earliest_arrival = 0; // what its unshared links and CM02's window bound allow
    std::uint32_t links_left = 0; // shared links that have not served it yet
    std::uint32_t hop_count = 0;  // its shared links, in route order
    std::array<std::uint32_t, kMaxSharedHops> hops{};
  };
  struct Departure {
    double tag; // the link's virtual time at which the flow leaves
    FlowId flow;
    bool operator>(const Departure& other) const { return tag != other.tag ? tag > other.tag : flow > other.flow; }
  };
  // One cache line per link (what a join or a departure reads and writes).
  struct alignas(64) Link {
    BytesPerSecond bandwidth = 0;
    double virtual_time = 0;
    Seconds updated = 0;      // real time of virtual_time
    double tag_sum = 0;       // sum of its flows' departure tags: their bytes left are tag_sum - n * virtual_time
    bool rescheduled = false; // flows joined it at the current event time: its next departure is set after them
    std::priority_queue<Departure, std::vector<Departure>, std::greater<>> flows;
  };
  // At equal times departures come first (a link's flows leave before new ones join), then arrivals, then
  // joins; among departures the lower link index, among the others the lower flow id.
  enum class Kind : std::uint8_t { arrival, join };
  struct Event {
    Seconds time;
    Kind kind;
    std::uint32_t flow;
    bool operator>(const Event& other) const
    {
      if (time != other.time)
        return time > other.time;
      if (kind != other.kind)
        return kind > other.kind;
      return flow > other.flow;
    }
  };
  // The next departure of every link that carries flows, one entry per link, kept in place when a link's
  // next departure moves: an indexed 4-ary min-heap by (time, link) whose entries hold their keys, so a sift
  // reads one cache line per level (the (time, link) keys are unique, so the order of the tops is that of any
  // heap).
  class DepartureQueue {
  public:
    explicit DepartureQueue(std::size_t links)
        : position_(links, kAbsent)
    {
    }
    bool empty() const { return heap_.empty(); }
    std::uint32_t top() const { return heap_.front().link(); }
    Seconds top_time() const { return heap_.empty() ? kNever : heap_.front().time(); }
    // Sets the link's next departure (kNever: none).
    void set(std::uint32_t link, Seconds time);

  private:
    static constexpr std::uint32_t kAbsent = std::numeric_limits<std::uint32_t>::max();
    static constexpr std::size_t kArity = 4;
    // (time, link) as one 128-bit key: the bits of a time >= 0 order as the time does, so one integer
    // comparison orders entries by time, then link, without a branch.
    struct Entry {
      unsigned __int128 key;
      Entry(Seconds time, std::uint32_t link)
          : key(static_cast<unsigned __int128>(std::bit_cast<std::uint64_t>(time + 0.0)) << 32 | link) // -0 as +0
      {
      }
      Seconds time() const { return std::bit_cast<Seconds>(static_cast<std::uint64_t>(key >> 32)); }
      std::uint32_t link() const { return static_cast<std::uint32_t>(key); }
      bool operator<(const Entry& other) const { return key < other.key; }
    };
    void place(std::size_t slot, const Entry& entry)
    {
      heap_[slot] = entry;
      position_[entry.link()] = static_cast<std::uint32_t>(slot);
    }
    void sift_up(std::size_t slot, Entry entry);
    void sift_down(std::size_t slot, Entry entry);

    std::vector<std::uint32_t> position_; // [link]: its slot in heap_, or kAbsent
    std::vector<Entry> heap_;
  };

  void advance_link(Link& link, Seconds now);
  Seconds next_departure(const Link& link) const;
  void schedule_departure(std::uint32_t link_index);
  // After a join: the departure queue is updated when every event of the current time has been handled, unless
  // the link's next departure is due now.
  void schedule_departure_after_joins(std::uint32_t link_index, Seconds now);
  void join(FlowId flow, Seconds now, std::vector<FlowId>& arrived);
  void depart(std::uint32_t link_index, Seconds now, std::vector<FlowId>& arrived);
  void link_done(FlowId flow, Seconds now, std::vector<FlowId>& arrived);
  void release(FlowId flow) { free_flows_.push_back(flow); }

  std::vector<LinkSpec> specs_;
  std::vector<Link> links_;
  bool predicts_;
  std::vector<double> joining_; // [link], with predicts_: bytes of the flows that started on routes through it and
                                // have not joined it yet
  std::vector<Flow> flows_;
  std::vector<FlowId> free_flows_;
  DepartureQueue departures_;
  std::vector<std::uint32_t> rescheduled_; // links whose next departure awaits the end of the current time
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_; // joins and arrivals
};

} // namespace sparsim
