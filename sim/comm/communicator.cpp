#include "sim/comm/communicator.hpp"

#include <simgrid/s4u/Actor.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Mailbox.hpp>

#include <algorithm>


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
    , last_routes_(hosts_.size())
{
}

simgrid::s4u::Mailbox* World::take_mailbox()
{
  if (free_mailboxes_.empty())
    return simgrid::s4u::Mailbox::by_name("sparsim/" + std::to_string(mailboxes_created_++));
  simgrid::s4u::Mailbox* mailbox = free_mailboxes_.back();
  free_mailboxes_.pop_back();
  return mailbox;
}

PhaseId World::intern_phase(std::string_view name)
{
  for (PhaseId id = 0; id < phase_names_.size(); ++id)
    if (phase_names_[id] == name)
      return id;
  phase_names_.emplace_back(name);
  return static_cast<PhaseId>(phase_names_.size() - 1);
}

std::shared_ptr<const void> World::shared_result_erased(SharedKey key, int users,
                                                        const std::function<std::shared_ptr<const void>()>& keep,
                                                        const std::function<std::shared_ptr<const void>()>& compute)
{
  auto found = shared_results_.find(key);
  if (found == shared_results_.end()) {
    found = shared_results_.emplace(std::move(key), SharedEntry{keep(), compute(), users}).first;
    ++shared_computed_;
  }
  ++shared_taken_;
  std::shared_ptr<const void> result = found->second.result;
  if (--found->second.remaining <= 0)
    shared_results_.erase(found);
  return result;
}

PhaseStats& World::stats(RankId rank, PhaseId phase)
{
  auto& per_phase = stats_[rank];
  if (per_phase.size() <= phase)
    per_phase.resize(phase + 1);
  return per_phase[phase];
}

void World::add_link_bytes(RankId source, RankId dest, Bytes bytes, int iteration)
{
  LastRoute& route = last_routes_[source];
  if (route.dest != dest) {
    route_.clear();
    hosts_[source]->route_to(hosts_[dest], route_, nullptr);
    route.dest = dest;
    route.loads.clear();
    for (const auto* link : route_)
      route.loads.push_back(&link_loads_[link]);  // elements of an unordered_map stay where they are
  }
  // Messages of one iteration are all posted before any of the next (ranks align between iterations),
  // so a link's count for an iteration starts when the first message of that iteration crosses it.
  for (LinkLoad* load_of_link : route.loads) {
    LinkLoad& load = *load_of_link;
    if (load.current_iteration != iteration) {
      load.current_iteration = iteration;
      load.current = 0;
    }
    load.current += bytes;
    load.total += bytes;
    load.iteration_max = std::max(load.iteration_max, load.current);
  }
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

World::Pairing World::pair_half(Queues& theirs, Queues& ours, std::uint64_t key)
{
  // Take a mailbox before looking: creating one yields to SimGrid, and the queues must not change between
  // the look-up and the filing.
  simgrid::s4u::Mailbox* mailbox = take_mailbox();
  auto waiting = theirs.find(key);
  if (waiting == theirs.end()) {
    auto message = std::make_shared<Message>();
    message->mailbox = mailbox;
    ours[key].push_back(message);
    return {std::move(message), false};
  }
  return_mailbox(mailbox);
  MessagePtr message = std::move(waiting->second.front());
  waiting->second.erase(waiting->second.begin());
  if (waiting->second.empty())
    theirs.erase(waiting);
  return {std::move(message), true};
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
  world_.add_link_bytes(rank_, dest, bytes, iteration_);

  Request request;
  request.peer_ = dest;
  request.tag_ = tag;
  auto& inbox = world_.inboxes_[dest];
  const World::Pairing pairing =
      world_.pair_half(inbox.unmatched_receives, inbox.unmatched_sends, match_key(rank_, tag));
  request.message_ = pairing.message;
  Message& message = *request.message_;
  message.source = rank_;
  message.dest = dest;
  message.bytes = bytes;
  message.payload = std::move(payload);
  message.type = type;
  request.transfer_ = message.mailbox->put_async(&message, bytes);
  if (pairing.matched)
    world_.return_mailbox(message.mailbox);  // both halves are posted: SimGrid has emptied it
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
  auto& inbox = world_.inboxes_[rank_];
  const World::Pairing pairing =
      world_.pair_half(inbox.unmatched_sends, inbox.unmatched_receives, match_key(source, tag));
  request.message_ = pairing.message;
  Message& message = *request.message_;
  request.transfer_ = message.mailbox->get_async(&message.landing);
  if (pairing.matched)
    world_.return_mailbox(message.mailbox);  // both halves are posted: SimGrid has emptied it
  return request;
}

void Communicator::wait(Request& request)
{
  if (request.done_)
    return;
  const Seconds started = tracing_ ? simgrid::s4u::Engine::get_clock() : 0;
  request.transfer_->wait();
  request.transfer_ = nullptr;
  request.done_ = true;
  if (tracing_)
    world_.traces_[rank_].push_back({request.receive_ ? TraceSlice::Kind::receive_wait : TraceSlice::Kind::send_wait,
                                     phase_, started, simgrid::s4u::Engine::get_clock(), request.peer_, request.tag_,
                                     request.message_->bytes});
  if (!request.receive_)
    request.message_.reset();  // the sender keeps nothing once delivered
}

void Communicator::wait_all(std::vector<Request>& requests)
{
  // Transfers progress on their own once started, so waiting in order finishes at the same simulated
  // time as waiting for whichever completes first.
  for (auto& request : requests)
    wait(request);
}

void Communicator::switch_phase(PhaseId next)
{
  const Seconds now = simgrid::s4u::Engine::get_clock();
  world_.stats(rank_, phase_).time += now - phase_started_;
  if (tracing_ && now > phase_started_)
    world_.traces_[rank_].push_back({TraceSlice::Kind::phase, phase_, phase_started_, now});
  phase_ = next;
  phase_started_ = now;
}

void Communicator::start_iteration(int iteration)
{
  iteration_ = iteration;
  tracing_ = iteration == world_.traced_iteration_;
  iteration_started_ = simgrid::s4u::Engine::get_clock();
}

void Communicator::finish_iteration()
{
  if (tracing_)
    world_.traces_[rank_].push_back(
        {TraceSlice::Kind::iteration, 0, iteration_started_, simgrid::s4u::Engine::get_clock()});
  tracing_ = false;
}

void Communicator::charge_reduction(Bytes bytes)
{
  const BytesPerSecond bandwidth = world_.reduction_bandwidth();
  if (bandwidth > 0 && bytes > 0) {
    auto scope = phase("reduction");
    simgrid::s4u::this_actor::sleep_for(static_cast<double>(bytes) / bandwidth);
  }
}

void Communicator::flush_phase_time() { switch_phase(phase_); }

void Communicator::restart_phase_clock() { phase_started_ = simgrid::s4u::Engine::get_clock(); }

Communicator::PhaseScope::PhaseScope(Communicator& comm, PhaseId phase) : comm_(comm), previous_(comm.phase_)
{
  comm_.switch_phase(phase);
}

Communicator::PhaseScope::~PhaseScope() { comm_.switch_phase(previous_); }

}  // namespace sparsim
