// The Transport of the link-level model: message timing computed here, link by link (link_model.hpp), instead
// of by SimGrid's max-min flows. The ranks stay engine actors (compute phases, the algorithms unchanged), but
// the simulated clock is this transport's: a discrete-event loop whose events are the model's (a message
// joins its links, leaves a link, arrives) and "rank r runs again at time t".
//
// How time moves: ranks run one at a time; a rank that waits (for a message, a compute phase, a barrier)
// stops being active. When the last active rank stops, no rank can post anything more at the current time,
// so it (1) starts in the model every transfer whose two halves were posted now, in the order of (source
// rank, the source's count of sends), (2) handles the model's events in time order until the next is later
// than the earliest rank wakeup, scheduling the ranks that wait on a message at its arrival, and (3) moves
// the clock to that wakeup and wakes every rank due then, in rank order. A wait therefore costs at most one
// switch of the waiting rank (a wait on several messages too: the rank runs again when the last of them has
// arrived, the time at which waiting on them one by one would end), and nothing depends on the order in which the
// engine runs its actors. A message's two halves complete at its arrival.
//
// Adaptive routing (LinkRoute::chosen_at_start): in step (1) each transfer takes, of its minimal route and its
// non-minimal candidates, the one with the shortest LinkSharingModel::predicted_time given everything started
// before it (a non-minimal one only when it beats the minimal route's by more than the bias), so that the
// transfers starting at one time see each other in the same fixed order.
//
// LIMITATIONS: those of link_model.hpp (equal shares per link instead of max-min, links of a route not
// coupled, latency paid once). Adaptive routing sees the load of every link of every candidate when the
// message starts (as UGAL-G, the global-information ideal of Jiang et al., ISCA 2009), where Aries' routers
// estimate it from local queues and congestion reports per packet; a message's route is chosen once. The
// estimate charges a message every byte queued on a link before it, as FIFO would: under the equal sharing
// here a short message beside long ones finishes sooner than predicted, so detours are taken a little more
// readily than the shares alone would justify.
#pragma once

#include "sim/comm/link_loads.hpp"
#include "sim/comm/transport.hpp"
#include "sim/network/link_level/link_model.hpp"
#include "sim/network/link_level/parking.hpp"

#include <array>
#include <cstdint>
#include <queue>
#include <vector>

namespace sparsim {

class LinkLevelTransport : public Transport {
public:
  // `ranks` ranks, each an actor that `parking` can block and wake; a message crosses the links `route` gives
  // (indices into `links`). Its link loads are counted in `link_loads` when given (over the same slots), on
  // the route it takes.
  LinkLevelTransport(int ranks, RankParking& parking, std::vector<LinkSpec> links, LinkRoute route,
                     LinkLoadCounter* link_loads = nullptr);

  Seconds now() const override { return clock_; }
  void sleep_for(RankId rank, Seconds duration) override;
  void align_ranks(RankId rank) override;
  void rank_finished(RankId rank) override;

  MessagePtr post_send(const PairFunction& pair, Outgoing outgoing) override;
  MessagePtr post_receive(const PairFunction& pair, RankId receiver, RankId source, Tag tag) override;
  void wait(Message& message, bool is_receive) override;
  void wait_all(RankId rank, std::span<const Half> halves) override;

  // The messages adaptive routing sent on a non-minimal route so far.
  std::uint64_t nonminimal_routes() const { return nonminimal_routes_; }
  // How many times a rank has stopped and been switched out so far (the host cost of waits).
  std::uint64_t rank_parks() const { return rank_parks_; }

private:
  static constexpr std::size_t kKeptRouteLinks = 16;
  struct LinkMessage : Message {
    std::uint64_t send_number = 0; // the source's count of sends before this one
    // Its route as the send's poster found it (route_length 0: not kept, found again at the start).
    std::array<std::uint32_t, kKeptRouteLinks> route{};
    std::uint8_t route_length = 0;
    int iteration = 0;
    bool arrived = false;
    RankId send_waiter = -1; // the rank waiting on each half, until it has arrived
    RankId receive_waiter = -1;
  };
  struct Wakeup {
    Seconds time;
    RankId rank;
    bool operator>(const Wakeup& other) const { return time != other.time ? time > other.time : rank > other.rank; }
  };

  // The message a post offers the matcher to file; kept for the next post when the post matched instead.
  LinkMessage& spare_message();
  void schedule(RankId rank, Seconds time) { wakeups_due_.push({time, rank}); }
  // The calling rank stops until its scheduled wakeup; the last one to stop moves time on.
  void block(RankId rank);
  // With no rank active: starts the transfers posted now, runs the network until the next rank wakeup and
  // wakes the ranks due then. Returns whether `caller` is among them (it then runs on without parking).
  bool advance(RankId caller);
  void start_posted_transfers();
  // Adaptive routing: puts into slots_ the route, of the minimal one and the candidates, that `m` takes.
  void choose_route(const LinkMessage& m);
  void deliver(LinkSharingModel::FlowId flow);

  int ranks_;
  RankParking& parking_;
  LinkSharingModel network_;
  LinkRoute route_;
  LinkLoadCounter* link_loads_; // where messages' link loads are counted (none: not counted)
  Seconds clock_ = 0;
  int active_;                            // ranks running (not blocked) at the current time
  std::vector<std::uint64_t> send_count_; // [source rank]
  std::vector<std::uint32_t> pending_;    // [rank]: halves it waits on that have not arrived
  MessagePtr spare_;
  std::vector<MessagePtr> posted_now_; // both halves posted at the current time, not yet started
  std::vector<MessagePtr> in_flight_;  // [flow id]
  std::priority_queue<Wakeup, std::vector<Wakeup>, std::greater<>> wakeups_due_;
  std::vector<RankId> at_barrier_;
  std::uint64_t nonminimal_routes_ = 0;
  std::uint64_t rank_parks_ = 0;
  std::vector<std::size_t> slots_;                // scratch route
  std::vector<std::size_t> candidate_;            // scratch route
  std::vector<LinkSharingModel::FlowId> arrived_; // scratch
};

} // namespace sparsim
