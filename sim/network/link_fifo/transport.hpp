// The Transport of the link-level FIFO model: message timing computed here, link by link, instead of by
// SimGrid's max-min flows. The ranks stay engine actors (compute phases, the algorithms unchanged), but the
// simulated clock is this transport's: it is a small discrete-event loop whose events are "rank r runs again
// at time t".
//
// How time moves: ranks run one at a time; a rank that waits (for a message, a compute phase, a barrier)
// stops being active. When the last active rank stops, no rank can post anything more at the current time,
// so it (1) times every transfer that started now, in the order of (source rank, the source's send count),
// booking their links (link_model.hpp) and scheduling the ranks that wait on them at their arrival, then
// (2) moves the clock to the earliest scheduled time and wakes every rank due then, in rank order. A wait
// therefore costs at most one switch of the waiting rank, and the order of same-time messages never depends
// on how the engine schedules its actors. A message's two halves complete at its arrival.
//
// LIMITATIONS: those of link_model.hpp (FIFO links instead of max-min sharing, infinite buffers, latency
// paid once).
#pragma once

#include "sim/comm/link_loads.hpp"
#include "sim/comm/transport.hpp"
#include "sim/network/link_fifo/link_model.hpp"
#include "sim/network/link_fifo/parking.hpp"

#include <cstdint>
#include <queue>
#include <vector>

namespace sparsim {

class LinkFifoTransport : public Transport {
public:
  // `ranks` ranks, each an actor that `parking` can block and wake; a message crosses the links `route` gives
  // (indices into `links`, the slots the World counts link loads by).
  LinkFifoTransport(int ranks, RankParking& parking, std::vector<LinkSpec> links, LinkRoute route);

  Seconds now() const override { return clock_; }
  void sleep_for(RankId rank, Seconds duration) override;
  void align_ranks(RankId rank) override;
  void rank_finished(RankId rank) override;

  MessagePtr post_send(const PairFunction& pair, Outgoing outgoing) override;
  MessagePtr post_receive(const PairFunction& pair, RankId receiver) override;
  void wait(Message& message, bool is_receive) override;

  // Figures of the run so far (the benchmarks print them).
  std::uint64_t transfers() const { return transfers_; }
  std::uint64_t wakeups() const { return wakeups_; }

private:
  struct FifoMessage : Message {
    std::uint64_t send_number = 0; // the source's count of sends before this one
    bool timed = false;
    Seconds arrival = 0;
    RankId send_waiter = -1; // the rank waiting on each half before the arrival was known
    RankId receive_waiter = -1;
  };
  struct Wakeup {
    Seconds time;
    RankId rank;
    bool operator>(const Wakeup& other) const
    {
      return time != other.time ? time > other.time : rank > other.rank;
    }
  };

  void started(MessagePtr message) { started_now_.push_back(std::move(message)); }
  void schedule(RankId rank, Seconds time) { wakeups_due_.push({time, rank}); }
  // The calling rank stops until its scheduled wakeup; the last one to stop moves time on.
  void block(RankId rank);
  // With no rank active: times the transfers that started now and wakes the ranks due next. Returns whether
  // `caller` is among them (it then runs on without parking).
  bool advance(RankId caller);
  void time_started_transfers();

  int ranks_;
  RankParking& parking_;
  LinkFifoModel model_;
  LinkRoute route_;
  Seconds clock_ = 0;
  int active_;                            // ranks running (not blocked) at the current time
  std::vector<std::uint64_t> send_count_; // [source rank]
  std::vector<MessagePtr> started_now_;   // matched at the current time, not yet timed
  std::priority_queue<Wakeup, std::vector<Wakeup>, std::greater<>> wakeups_due_;
  std::vector<RankId> at_barrier_;
  std::vector<std::size_t> slots_; // scratch route
  std::uint64_t transfers_ = 0;
  std::uint64_t wakeups_ = 0;
};

} // namespace sparsim
