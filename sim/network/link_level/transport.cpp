#include "sim/network/link_level/transport.hpp"

#include <algorithm>
#include <utility>

namespace sparsim {

LinkLevelTransport::LinkLevelTransport(int ranks, RankParking& parking, std::vector<LinkSpec> links, LinkRoute route,
                                       LinkLoadCounter* link_loads)
    : ranks_(ranks)
    , parking_(parking)
    , network_(std::move(links), route.chosen_at_start())
    , route_(std::move(route))
    , link_loads_(link_loads)
    , active_(ranks) // every rank starts running at time 0
    , send_count_(static_cast<std::size_t>(ranks), 0)
    , pending_(static_cast<std::size_t>(ranks), 0)
{
}

void LinkLevelTransport::sleep_for(RankId rank, Seconds duration)
{
  schedule(rank, clock_ + duration);
  block(rank);
}

void LinkLevelTransport::align_ranks(RankId rank)
{
  at_barrier_.push_back(rank);
  if (static_cast<int>(at_barrier_.size()) < ranks_) {
    block(rank);
    return;
  }
  // The last to arrive lets the others go at the same time and runs on.
  for (RankId waiting : at_barrier_)
    if (waiting != rank)
      schedule(waiting, clock_);
  at_barrier_.clear();
}

void LinkLevelTransport::rank_finished(RankId rank)
{
  --active_;
  if (active_ == 0)
    advance(rank);
}

MessagePtr LinkLevelTransport::post_send(const PairFunction& pair, Outgoing outgoing)
{
  // The route's link loads, counted now unless the route is chosen when the transfer starts (adaptive routing).
  const std::span<const std::uint32_t> route =
      link_loads_ ? link_loads_->add(outgoing.source, outgoing.dest, outgoing.bytes, outgoing.iteration)
                  : std::span<const std::uint32_t>{};
  LinkMessage& fresh = spare_message();
  fresh.send_number = send_count_[outgoing.source]++;
  Pairing pairing = pair(spare_);
  if (!pairing.matched)
    spare_.reset(); // filed: the next post needs a new one
  auto& m = static_cast<LinkMessage&>(*pairing.message);
  m.source = outgoing.source;
  m.dest = outgoing.dest;
  m.bytes = outgoing.bytes;
  m.payload = std::move(outgoing.payload);
  m.type = outgoing.type;
  m.phase = outgoing.phase;
  m.iteration = outgoing.iteration;
  m.route_length = 0;
  if (!route.empty() && route.size() <= kKeptRouteLinks) {
    std::copy(route.begin(), route.end(), m.route.begin());
    m.route_length = static_cast<std::uint8_t>(route.size());
  }
  if (pairing.matched) {
    m.send_number = fresh.send_number;
    posted_now_.push_back(pairing.message);
  }
  return std::move(pairing.message);
}

MessagePtr LinkLevelTransport::post_receive(const PairFunction& pair, RankId receiver, RankId /*source*/, Tag /*tag*/)
{
  spare_message().dest = receiver;
  Pairing pairing = pair(spare_);
  if (pairing.matched)
    posted_now_.push_back(pairing.message);
  else
    spare_.reset(); // filed
  return std::move(pairing.message);
}

LinkLevelTransport::LinkMessage& LinkLevelTransport::spare_message()
{
  if (!spare_)
    spare_ = std::make_shared<LinkMessage>();
  return static_cast<LinkMessage&>(*spare_);
}

void LinkLevelTransport::wait(Message& message, bool is_receive)
{
  const Half half{.message = &message, .is_receive = is_receive};
  wait_all(is_receive ? message.dest : message.source, std::span(&half, 1));
}

void LinkLevelTransport::wait_all(RankId rank, std::span<const Half> halves)
{
  std::uint32_t pending = 0;
  for (const Half& half : halves) {
    auto& m = static_cast<LinkMessage&>(*half.message);
    if (m.arrived)
      continue;
    (half.is_receive ? m.receive_waiter : m.send_waiter) = rank;
    ++pending;
  }
  if (pending == 0)
    return;
  pending_[rank] = pending;
  block(rank);
}

void LinkLevelTransport::block(RankId rank)
{
  --active_;
  if (active_ == 0 && advance(rank))
    return;
  ++rank_parks_;
  parking_.park(rank);
}

bool LinkLevelTransport::advance(RankId caller)
{
  start_posted_transfers();
  // The network runs until the next rank is due; a message arriving then is delivered first.
  const auto next_wakeup = [&] { return wakeups_due_.empty() ? LinkSharingModel::kNever : wakeups_due_.top().time; };
  for (Seconds next = network_.next_event(); next <= next_wakeup() && next < LinkSharingModel::kNever;
       next = network_.next_event()) {
    clock_ = next;
    arrived_.clear();
    network_.handle_next_event(arrived_);
    for (LinkSharingModel::FlowId flow : arrived_)
      deliver(flow);
  }
  if (wakeups_due_.empty())
    return false; // nothing will ever happen again: every rank has finished, or a deadlock
  clock_ = wakeups_due_.top().time;
  std::vector<RankId> due;
  while (!wakeups_due_.empty() && wakeups_due_.top().time == clock_) {
    due.push_back(wakeups_due_.top().rank);
    wakeups_due_.pop();
  }
  // Everything is settled before the first wake: waking may let those ranks run before this call returns.
  active_ += static_cast<int>(due.size());
  const auto caller_entry = std::find(due.begin(), due.end(), caller);
  const bool caller_due = caller_entry != due.end();
  if (caller_due)
    due.erase(caller_entry);
  if (!due.empty())
    parking_.unpark(due);
  return caller_due;
}

void LinkLevelTransport::start_posted_transfers()
{
  std::sort(posted_now_.begin(), posted_now_.end(), [](const MessagePtr& a, const MessagePtr& b) {
    const auto& x = static_cast<const LinkMessage&>(*a);
    const auto& y = static_cast<const LinkMessage&>(*b);
    return x.source != y.source ? x.source < y.source : x.send_number < y.send_number;
  });
  for (MessagePtr& message : posted_now_) {
    const auto& m = static_cast<const LinkMessage&>(*message);
    slots_.assign(m.route.begin(), m.route.begin() + m.route_length);
    if (m.route_length == 0) {
      if (route_.chosen_at_start())
        choose_route(m);
      else
        route_.find(m.source, m.dest, m.send_number, slots_);
    }
    const LinkSharingModel::FlowId flow = network_.start(clock_, message->bytes, slots_);
    if (flow >= in_flight_.size())
      in_flight_.resize(flow + 1);
    in_flight_[flow] = std::move(message);
  }
  posted_now_.clear();
}

void LinkLevelTransport::choose_route(const LinkMessage& m)
{
  route_.find(m.source, m.dest, m.send_number, slots_);
  const Seconds minimal = network_.predicted_time(clock_, m.bytes, slots_);
  Seconds best = (1.0 - route_.minimal_bias) * minimal;
  bool nonminimal = false;
  for (std::size_t candidate = 0; candidate < route_.alternatives; ++candidate) {
    candidate_.clear();
    route_.alternative(m.source, m.dest, m.send_number, candidate, candidate_);
    const Seconds time = network_.predicted_time(clock_, m.bytes, candidate_);
    if (time < best) {
      best = time;
      slots_.swap(candidate_);
      nonminimal = true;
    }
  }
  nonminimal_routes_ += nonminimal ? 1 : 0;
  if (link_loads_)
    link_loads_->count(slots_, m.bytes, m.iteration);
}

void LinkLevelTransport::deliver(LinkSharingModel::FlowId flow)
{
  auto& m = static_cast<LinkMessage&>(*in_flight_[flow]);
  m.arrived = true;
  // A waiting rank runs again once the last half it waits on has arrived.
  for (const RankId waiter : {m.send_waiter, m.receive_waiter})
    if (waiter >= 0 && --pending_[waiter] == 0)
      schedule(waiter, clock_);
  in_flight_[flow].reset();
}

} // namespace sparsim
