#include "sim/network/mpi/transport.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <ctime>
#include <sched.h>
#include <stdexcept>

namespace sparsim {

namespace {
constexpr Seconds kFirstPause = 1e-9;      // the first sleep after an empty poll, with a poll_backoff
constexpr Seconds kAlignmentMargin = 1e-2; // with a global clock: how long after the barrier the ranks leave
} // namespace

MpiTransport::MpiTransport(MPI_Comm comm, MpiTransportOptions options)
    : comm_(comm)
    , options_(options)
{
  MPI_Comm_rank(comm_, &rank_);
  int* upper_bound = nullptr;
  int found = 0;
  MPI_Comm_get_attr(comm_, MPI_TAG_UB, &upper_bound, &found);
  tag_upper_bound_ = found ? *upper_bound : 32767; // the standard's guaranteed minimum
  int* clock_is_global = nullptr;
  MPI_Comm_get_attr(comm_, MPI_WTIME_IS_GLOBAL, &clock_is_global, &found);
  global_clock_ = found && clock_is_global && *clock_is_global;
  MPI_Barrier(comm_);
  start_ = MPI_Wtime();
}

void MpiTransport::sleep_for(RankId /*rank*/, Seconds duration)
{
  if (!options_.sleep_compute || duration <= 0)
    return;
#ifdef SPARSIM_UNDER_SMPI
  pause(duration); // SMPI's simulated sleep: the charge moves SMPI's clock as it moves the simulation's
#else
  // Busy until the time has passed: a sleep's wakeup lags by tens of microseconds, longer than many charges.
  const double until = MPI_Wtime() + duration;
  while (MPI_Wtime() < until) {
  }
#endif
}

void MpiTransport::align_ranks(RankId rank)
{
  MPI_Barrier(comm_);
  if (!global_clock_)
    return;
  // The processes leave the barrier at different times (its last messages reach them over different routes).
  // With one clock for all, they leave together instead: at an instant after the latest of them left, by a
  // margin far above the time an allreduce takes.
  const double left = MPI_Wtime();
  double latest = 0;
  MPI_Allreduce(&left, &latest, 1, MPI_DOUBLE, MPI_MAX, comm_);
  const double instant = latest + kAlignmentMargin;
  const double now = MPI_Wtime();
  if (now >= instant)
    throw std::runtime_error(fmt::format("rank {} reached the common instant of the alignment {} s late: the "
                                         "allreduce took longer than its margin of {} s",
                                         rank, now - instant, kAlignmentMargin));
  pause(instant - now);
}

void MpiTransport::rank_finished(RankId /*rank*/)
{
  std::vector<MpiMessage*> sends;
  for (const auto& send : sends_)
    sends.push_back(send.get());
  wait_for(sends);
  sends_.clear();
  if (!unmatched_.empty())
    throw std::logic_error(
        fmt::format("rank {} finished with {} receive(s) posted and never waited on", rank_, unmatched_.size()));
}

MessagePtr MpiTransport::post_send(const PairFunction& /*pair*/, Outgoing outgoing)
{
  if (outgoing.encoded.size() > static_cast<std::size_t>(INT_MAX))
    throw std::runtime_error(fmt::format("a message of {} bytes from rank {} to rank {}: MPI sends at most {} bytes "
                                         "in one message here",
                                         outgoing.encoded.size(), outgoing.source, outgoing.dest, INT_MAX));
  if (outgoing.tag > static_cast<Tag>(tag_upper_bound_))
    throw std::runtime_error(
        fmt::format("tag {} is above this MPI's largest tag (MPI_TAG_UB = {})", outgoing.tag, tag_upper_bound_));
  auto m = std::make_shared<MpiMessage>();
  m->source = outgoing.source;
  m->dest = outgoing.dest;
  m->bytes = outgoing.bytes;
  m->phase = outgoing.phase;
  m->tag = outgoing.tag;
  m->encoded = std::move(outgoing.encoded);
  MPI_Isend(m->encoded.data(), static_cast<int>(m->encoded.size()), MPI_BYTE, m->dest, static_cast<int>(m->tag), comm_,
            &m->request);
  sends_.push_back(m);
  release_completed_sends();
  return m;
}

void MpiTransport::release_completed_sends()
{
  // Testing every outstanding send on every post would cost O(sends^2) calls in a phase that posts P of them.
  if (sends_.size() < std::max<std::size_t>(64, 2 * sends_checked_at_))
    return;
  std::erase_if(sends_, [&](const auto& send) { return completes(*send); });
  sends_checked_at_ = sends_.size();
}

MessagePtr MpiTransport::post_receive(const PairFunction& /*pair*/, RankId receiver, RankId source, Tag tag)
{
  auto m = std::make_shared<MpiMessage>();
  m->source = source;
  m->dest = receiver;
  m->tag = tag;
  unmatched_.push_back(m);
  match_receives();
  return m;
}

bool MpiTransport::match_receives()
{
  if (unmatched_.empty())
    return false;
  int pending = 0;
  MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &pending, MPI_STATUS_IGNORE);
  if (!pending) // no message waits unreceived: none can match
    return false;
  bool any = false;
  for (auto it = unmatched_.begin(); it != unmatched_.end();) {
    MpiMessage& m = **it;
    int found = 0;
    MPI_Status status;
    MPI_Iprobe(m.source, static_cast<int>(m.tag), comm_, &found, &status);
    if (!found) {
      ++it;
      continue;
    }
    // The receive posted right away matches the message probed: the oldest from that source under that tag that
    // no posted receive has matched (one thread posts them all).
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    m.encoded.resize(static_cast<std::size_t>(count));
    m.bytes = static_cast<Bytes>(count);
    MPI_Irecv(m.encoded.data(), count, MPI_BYTE, m.source, static_cast<int>(m.tag), comm_, &m.request);
    m.matched = true;
    it = unmatched_.erase(it);
    any = true;
  }
  return any;
}

bool MpiTransport::completes(MpiMessage& m)
{
  if (m.done)
    return true;
  if (m.request == MPI_REQUEST_NULL) // a receive not matched yet
    return false;
  int flag = 0;
  MPI_Test(&m.request, &flag, MPI_STATUS_IGNORE);
  if (!flag)
    return false;
  finished(m);
  return true;
}

void MpiTransport::finished(MpiMessage& m)
{
  m.done = true;
  if (!m.matched) // a send: its buffer is free again
    m.encoded = WireBuffer();
}

void MpiTransport::block_until_one_completes(std::span<MpiMessage* const> messages)
{
  requests_.clear();
  pending_.clear();
  for (MpiMessage* m : messages)
    if (!m->done) {
      requests_.push_back(m->request);
      pending_.push_back(m);
    }
  int index = MPI_UNDEFINED;
  MPI_Waitany(static_cast<int>(requests_.size()), requests_.data(), &index, MPI_STATUS_IGNORE);
  if (index == MPI_UNDEFINED)
    throw std::logic_error("MPI_Waitany found no active request to wait on");
  pending_[static_cast<std::size_t>(index)]->request = MPI_REQUEST_NULL; // freed by MPI_Waitany
  finished(*pending_[static_cast<std::size_t>(index)]);
}

void MpiTransport::wait_for(std::span<MpiMessage* const> messages)
{
  Seconds backoff = kFirstPause; // the next sleep between empty polls
  for (;;) {
    const bool matched = match_receives();
    bool all = true;
    for (MpiMessage* m : messages)
      all = completes(*m) && all;
    if (all)
      return;
    if (matched) {
      backoff = kFirstPause;
      continue;
    }
    if (unmatched_.empty()) {
      // Every receive this rank posted has its message: nothing it could do would help a peer, so block (MPI
      // completes the transfers; SMPI advances its clock to the next completion, without polling).
      block_until_one_completes(messages);
      backoff = kFirstPause;
      continue;
    }
    idle(backoff);
    backoff = std::min(2 * backoff, options_.poll_backoff);
  }
}

void MpiTransport::idle(Seconds backoff) const
{
  if (options_.poll_backoff <= 0)
    sched_yield();
  else
    pause(backoff);
}

void MpiTransport::pause(Seconds duration)
{
  const double whole = std::floor(duration);
  const timespec span{static_cast<time_t>(whole), static_cast<long>((duration - whole) * 1e9)};
  nanosleep(&span, nullptr);
}

void MpiTransport::wait(Message& message, bool /*is_receive*/)
{
  MpiMessage* m = &static_cast<MpiMessage&>(message);
  wait_for(std::span<MpiMessage* const>(&m, 1));
}

void MpiTransport::wait_all(RankId /*rank*/, std::span<const Half> halves)
{
  waiting_.clear();
  for (const Half& half : halves)
    waiting_.push_back(static_cast<MpiMessage*>(half.message));
  wait_for(waiting_);
}

} // namespace sparsim
