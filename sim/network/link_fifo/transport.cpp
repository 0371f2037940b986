#include "sim/network/link_fifo/transport.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace sparsim {

LinkFifoTransport::LinkFifoTransport(int ranks, RankParking& parking, std::vector<LinkSpec> links, LinkRoute route)
    : ranks_(ranks)
    , parking_(parking)
    , model_(std::move(links))
    , route_(std::move(route))
    , active_(ranks) // every rank starts running at time 0
    , send_count_(static_cast<std::size_t>(ranks), 0)
{
}

void LinkFifoTransport::sleep_for(RankId rank, Seconds duration)
{
  schedule(rank, clock_ + duration);
  block(rank);
}

void LinkFifoTransport::align_ranks(RankId rank)
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

void LinkFifoTransport::rank_finished(RankId rank)
{
  --active_;
  if (active_ == 0)
    advance(rank);
}

MessagePtr LinkFifoTransport::post_send(const PairFunction& pair, Outgoing outgoing)
{
  auto fresh = std::make_shared<FifoMessage>();
  fresh->send_number = send_count_[outgoing.source]++;
  Pairing pairing = pair(fresh);
  auto& m = static_cast<FifoMessage&>(*pairing.message);
  m.source = outgoing.source;
  m.dest = outgoing.dest;
  m.bytes = outgoing.bytes;
  m.payload = std::move(outgoing.payload);
  m.type = outgoing.type;
  if (pairing.matched) {
    m.send_number = fresh->send_number;
    started(pairing.message);
  }
  return std::move(pairing.message);
}

MessagePtr LinkFifoTransport::post_receive(const PairFunction& pair, RankId receiver)
{
  auto fresh = std::make_shared<FifoMessage>();
  fresh->dest = receiver;
  Pairing pairing = pair(fresh);
  if (pairing.matched)
    started(pairing.message);
  return std::move(pairing.message);
}

void LinkFifoTransport::wait(Message& message, bool is_receive)
{
  auto& m = static_cast<FifoMessage&>(message);
  const RankId rank = is_receive ? m.dest : m.source;
  if (m.timed) {
    if (m.arrival <= clock_)
      return;
    schedule(rank, m.arrival);
  } else {
    (is_receive ? m.receive_waiter : m.send_waiter) = rank;
  }
  block(rank);
}

void LinkFifoTransport::block(RankId rank)
{
  --active_;
  if (active_ == 0 && advance(rank))
    return;
  parking_.park(rank);
}

bool LinkFifoTransport::advance(RankId caller)
{
  time_started_transfers();
  if (wakeups_due_.empty())
    return false; // nothing will ever happen again: every rank has finished, or a deadlock
  clock_ = wakeups_due_.top().time;
  std::vector<RankId> due;
  while (!wakeups_due_.empty() && wakeups_due_.top().time == clock_) {
    due.push_back(wakeups_due_.top().rank);
    wakeups_due_.pop();
  }
  // Everything is booked before the first wake: waking may let those ranks run before this call returns.
  active_ += static_cast<int>(due.size());
  wakeups_ += due.size();
  bool caller_due = false;
  for (RankId rank : due) {
    if (rank == caller)
      caller_due = true;
    else
      parking_.unpark(rank);
  }
  return caller_due;
}

void LinkFifoTransport::time_started_transfers()
{
  std::sort(started_now_.begin(), started_now_.end(), [](const MessagePtr& a, const MessagePtr& b) {
    const auto& x = static_cast<const FifoMessage&>(*a);
    const auto& y = static_cast<const FifoMessage&>(*b);
    return x.source != y.source ? x.source < y.source : x.send_number < y.send_number;
  });
  for (const MessagePtr& message : started_now_) {
    auto& m = static_cast<FifoMessage&>(*message);
    slots_.clear();
    route_(m.source, m.dest, slots_);
    m.arrival = model_.transfer(clock_, m.bytes, slots_);
    m.timed = true;
    ++transfers_;
    if (m.send_waiter >= 0)
      schedule(m.send_waiter, m.arrival);
    if (m.receive_waiter >= 0)
      schedule(m.receive_waiter, m.arrival);
  }
  started_now_.clear();
}

} // namespace sparsim
