#include "sim/comm.hpp"

#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>

namespace sparsim {
namespace {
std::uint64_t match_key(RankId source, Tag tag) { return (static_cast<std::uint64_t>(source) << 32) | tag; }
}  // namespace

World::World(std::vector<simgrid::s4u::Host*> rank_hosts, WireFormat wire)
    : hosts_(std::move(rank_hosts))
    , wire_(wire)
    , inboxes_(hosts_.size())
    , stats_(hosts_.size())
    , phase_names_{"other"}
    , barrier_(simgrid::s4u::Barrier::create(static_cast<unsigned>(hosts_.size())))
{
  for (auto& inbox : inboxes_)
    inbox.wakeup = simgrid::s4u::Semaphore::create(0);
}

PhaseId World::intern_phase(std::string_view name)
{
  for (PhaseId id = 0; id < phase_names_.size(); ++id)
    if (phase_names_[id] == name)
      return id;
  phase_names_.emplace_back(name);
  return static_cast<PhaseId>(phase_names_.size() - 1);
}

PhaseStats& World::stats(RankId rank, PhaseId phase)
{
  auto& per_phase = stats_[rank];
  if (per_phase.size() <= phase)
    per_phase.resize(phase + 1);
  return per_phase[phase];
}

std::vector<PhaseStats> World::take_stats(RankId rank)
{
  std::vector<PhaseStats> taken = std::move(stats_[rank]);
  stats_[rank].clear();
  taken.resize(phase_names_.size());
  return taken;
}

Communicator::Communicator(World& world, RankId rank)
    : world_(world), rank_(rank), phase_started_(simgrid::s4u::Engine::get_clock())
{
}

Request Communicator::post_send(RankId dest, Tag tag, std::shared_ptr<const void> payload, std::type_index type,
                                Bytes bytes)
{
  if (dest < 0 || dest >= size())
    throw std::out_of_range("send to rank " + std::to_string(dest) + " of " + std::to_string(size()));
  auto& sent = world_.stats(rank_, phase_);
  sent.msgs_sent += 1;
  sent.bytes_sent += bytes;
  auto& received = world_.stats(dest, phase_);
  received.msgs_recv += 1;
  received.bytes_recv += bytes;

  Request request;
  request.peer_ = dest;
  request.tag_ = tag;
  request.message_.transfer =
      simgrid::s4u::Comm::sendto_async(world_.host(rank_), world_.host(dest), bytes);
  request.message_.payload = std::move(payload);
  request.message_.type = type;

  // Leave the message in the receiver's inbox and wake the receiver if it waits for exactly this one.
  auto& inbox = world_.inboxes_[dest];
  const std::uint64_t key = match_key(rank_, tag);
  inbox.pending[key].push_back(request.message_);
  if (inbox.waiting && inbox.waiting_for == key) {
    inbox.waiting = false;
    inbox.wakeup->release();
  }
  return request;
}

Request Communicator::irecv(RankId source, Tag tag)
{
  if (source < 0 || source >= size())
    throw std::out_of_range("receive from rank " + std::to_string(source) + " of " + std::to_string(size()));
  Request request;
  request.receive_ = true;
  request.peer_ = source;
  request.tag_ = tag;
  try_match(request);
  return request;
}

bool Communicator::try_match(Request& request)
{
  if (request.message_.transfer)
    return true;
  auto& inbox = world_.inboxes_[rank_];
  auto it = inbox.pending.find(match_key(request.peer_, request.tag_));
  if (it == inbox.pending.end())
    return false;
  request.message_ = std::move(it->second.front());
  it->second.erase(it->second.begin());
  if (it->second.empty())
    inbox.pending.erase(it);
  return true;
}

void Communicator::wait(Request& request)
{
  if (request.done_)
    return;
  if (request.receive_) {
    // Block until the matching send has been posted, then until its data has arrived.
    auto& inbox = world_.inboxes_[rank_];
    while (!try_match(request)) {
      inbox.waiting = true;
      inbox.waiting_for = match_key(request.peer_, request.tag_);
      inbox.wakeup->acquire();
    }
  }
  request.message_.transfer->wait();
  request.done_ = true;
  if (!request.receive_)
    request.message_ = Envelope{};  // the sender keeps nothing once delivered
}

void Communicator::wait_all(std::vector<Request>& requests)
{
  // Transfers progress on their own once posted, so waiting in order finishes at the same simulated
  // time as waiting for whichever completes first.
  for (auto& request : requests)
    wait(request);
}

void Communicator::switch_phase(PhaseId next)
{
  const Seconds now = simgrid::s4u::Engine::get_clock();
  world_.stats(rank_, phase_).time += now - phase_started_;
  phase_ = next;
  phase_started_ = now;
}

void Communicator::flush_phase_time() { switch_phase(phase_); }

Communicator::PhaseScope::PhaseScope(Communicator& comm, PhaseId phase) : comm_(comm), previous_(comm.phase_)
{
  comm_.switch_phase(phase);
}

Communicator::PhaseScope::~PhaseScope() { comm_.switch_phase(previous_); }

}  // namespace sparsim
