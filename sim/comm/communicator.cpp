#include "sim/comm/communicator.hpp"

namespace sparsim {

Communicator::Communicator(World& world, RankId rank)
    : world_(world)
    , rank_(rank)
    , moves_bytes_(world.transport().moves_bytes())
    , counts_receives_(world.transport().carries_phase())
    , phase_started_(world.transport().now())
{
}

Request Communicator::post_send(RankId dest, Tag tag, std::shared_ptr<const void> payload, std::type_index type,
                                Bytes bytes, WireBuffer encoded)
{
  if (dest < 0 || dest >= size())
    throw std::out_of_range("send to rank " + std::to_string(dest) + " of " + std::to_string(size()));
  PhaseStats& sent = world_.traffic().of(rank_, phase_);
  sent.msgs_sent += 1;
  sent.bytes_sent += bytes;
  if (!counts_receives_) { // the message carries no phase: the sender counts it for the receiver, under its own
    PhaseStats& delivered = world_.traffic().of(dest, phase_);
    delivered.msgs_recv += 1;
    delivered.bytes_recv += bytes;
  }
  world_.count_message();

  Request request;
  request.peer_ = dest;
  request.tag_ = tag;
  Matcher& matcher = world_.matcher();
  request.message_ = world_.transport().post_send(
      [&](MessagePtr fresh) { return matcher.pair_send(rank_, dest, tag, std::move(fresh)); },
      Outgoing{.source = rank_,
               .dest = dest,
               .tag = tag,
               .bytes = bytes,
               .payload = std::move(payload),
               .type = type,
               .phase = phase_,
               .iteration = iteration_,
               .encoded = std::move(encoded)});
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
  Matcher& matcher = world_.matcher();
  request.message_ = world_.transport().post_receive(
      [&](MessagePtr fresh) { return matcher.pair_receive(rank_, source, tag, std::move(fresh)); }, rank_, source, tag);
  return request;
}

void Communicator::wait(Request& request)
{
  if (request.done_)
    return;
  Transport& transport = world_.transport();
  const Seconds started = tracing_ ? transport.now() : 0;
  transport.wait(*request.message_, request.receive_);
  if (tracing_)
    world_.trace().record(rank_,
                          {.kind = request.receive_ ? TraceSlice::Kind::receive_wait : TraceSlice::Kind::send_wait,
                           .phase = phase_,
                           .begin = started,
                           .end = transport.now(),
                           .peer = request.peer_,
                           .tag = request.tag_,
                           .bytes = request.message_->bytes});
  complete(request);
}

void Communicator::wait_all(std::span<Request> requests)
{
  // Transfers progress on their own once started, so waiting in order finishes at the same simulated
  // time as waiting for whichever completes first. The traced iteration waits one by one, to record each
  // wait; otherwise the transport waits for all at once (for the link-level model: one wakeup, not one per
  // request).
  if (tracing_) {
    for (auto& request : requests)
      wait(request);
    return;
  }
  std::vector<Half>& halves = waiting_;
  halves.clear();
  for (const Request& request : requests)
    if (!request.done_)
      halves.push_back({.message = request.message_.get(), .is_receive = request.receive_});
  if (!halves.empty())
    world_.transport().wait_all(rank_, halves);
  for (auto& request : requests)
    if (!request.done_)
      complete(request);
}

void Communicator::complete(Request& request)
{
  request.done_ = true;
  if (request.receive_ && counts_receives_) {
    const Message& message = *request.message_;
    PhaseStats& received = world_.traffic().of(rank_, message.phase);
    received.msgs_recv += 1;
    received.bytes_recv += message.bytes;
  } else if (!request.receive_) {
    request.message_.reset(); // the sender keeps nothing once delivered
  }
}

void Communicator::switch_phase(PhaseId next)
{
  const Seconds now = world_.transport().now();
  world_.traffic().of(rank_, phase_).time += now - phase_started_;
  if (tracing_ && now > phase_started_)
    world_.trace().record(rank_,
                          {.kind = TraceSlice::Kind::phase, .phase = phase_, .begin = phase_started_, .end = now});
  phase_ = next;
  phase_started_ = now;
}

void Communicator::start_iteration(int iteration)
{
  iteration_ = iteration;
  tracing_ = iteration == world_.trace().traced_iteration();
  iteration_started_ = world_.transport().now();
}

void Communicator::finish_iteration()
{
  if (tracing_)
    world_.trace().record(
        rank_, {.kind = TraceSlice::Kind::iteration, .begin = iteration_started_, .end = world_.transport().now()});
  tracing_ = false;
}

void Communicator::charge_reduction(Bytes bytes)
{
  const BytesPerSecond bandwidth = world_.reduction_bandwidth();
  if (bandwidth > 0 && bytes > 0)
    spend("reduction", static_cast<double>(bytes) / bandwidth);
}

void Communicator::charge_selection(Bytes bytes)
{
  const BytesPerSecond bandwidth = world_.selection_bandwidth();
  if (bandwidth > 0 && bytes > 0)
    spend("selection", static_cast<double>(bytes) / bandwidth);
}

void Communicator::spend(std::string_view phase_name, Seconds duration)
{
  if (duration > 0) {
    auto scope = phase(phase_name);
    world_.transport().sleep_for(rank_, duration);
  }
}

void Communicator::flush_phase_time() { switch_phase(phase_); }

void Communicator::restart_phase_clock() { phase_started_ = world_.transport().now(); }

Communicator::PhaseScope::PhaseScope(Communicator& comm, PhaseId phase)
    : comm_(comm)
    , previous_(comm.phase_)
{
  comm_.switch_phase(phase);
}

Communicator::PhaseScope::~PhaseScope() { comm_.switch_phase(previous_); }

} // namespace sparsim
