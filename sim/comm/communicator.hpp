// The communicator: point-to-point messages between simulated ranks, carrying real payloads. The only
// interface the algorithms use; it knows no network model (sim/comm/transport.hpp moves the messages).
//
// Model (rendezvous, as MPI uses for large messages and as the alpha-beta closed forms assume): a message's
// transfer starts when both its send and its matching receive have been posted; the transport then moves
// wire_bytes(payload) bytes between the two ranks. The handshake itself is not charged. Receives match by
// (source, tag), in posting order per (source, tag) (sim/comm/matcher.hpp). A send completes when its data
// has arrived, and so does the matching receive.
//
// Accounting: every message is counted under the sender's phase when it was posted: by its sender (sent) when
// the send is posted, by its receiver (received) when its receive completes; each rank writes only its own
// counters. Phase time is the simulated time each rank spends while the phase is current. The simulated size
// of a message is wire_bytes(payload), never a number an algorithm passes in.
//
// Link loads (links.csv) are the transport's to count (sim/comm/transport.hpp). Tracing: in the one iteration
// chosen for a trace, each rank records its phase segments and its waits on messages (sparsim run --trace,
// sim/output/trace.hpp).
#pragma once

#include "sim/base/units.hpp"
#include "sim/comm/world.hpp"
#include "sim/data/wire.hpp"
#include "sim/data/wire_codec.hpp"

#include <array>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <typeindex>
#include <utility>
#include <vector>

namespace sparsim {

// A posted send or receive. Complete it with Communicator::wait / wait_all.
class Request {
public:
  Request() = default;
  bool is_receive() const { return receive_; }
  bool done() const { return done_; }

private:
  friend class Communicator;
  bool receive_ = false;
  bool done_ = false;
  RankId peer_ = -1;
  Tag tag_ = 0;
  MessagePtr message_;
};

// One rank's view of the World; used only from that rank's actor.
class Communicator {
public:
  Communicator(World& world, RankId rank);

  RankId rank() const { return rank_; }
  int size() const { return world_.size(); }
  const WireFormat& wire() const { return world_.wire(); }

  // Non-blocking send of an immutable payload; its simulated size is wire_bytes(*payload, wire()). With
  // simulation.check_wire the payload is also encoded as a real backend sends it and checked against that size.
  template <class T> Request isend(RankId dest, Tag tag, std::shared_ptr<const T> payload)
  {
    WireBuffer encoded; // where bytes move, the message itself: exactly the bytes charged
    if (world_.check_wire())
      encoded = check_encoding(*payload, wire());
    else if (moves_bytes_)
      encoded = encode_charged(*payload, wire());
    Bytes bytes = wire_bytes(*payload, wire());
    return post_send(dest, tag, std::static_pointer_cast<const void>(std::move(payload)), typeid(T), bytes,
                     moves_bytes_ ? std::move(encoded) : WireBuffer());
  }
  Request irecv(RankId source, Tag tag);
  void wait(Request& request);
  void wait_all(std::span<Request> requests);

  // The payload of a completed receive. Throws std::logic_error if the sender sent another type.
  template <class T> std::shared_ptr<const T> take(Request& request)
  {
    if (!request.done_ || !request.receive_)
      throw std::logic_error("Communicator::take on a receive that has not completed");
    decode_arrived<T>(request, [&](WireBytes bytes) { return decode_payload<T>(bytes, wire()); });
    if (request.message_->type != typeid(T))
      throw std::logic_error("Communicator::take: payload type mismatch from rank " + std::to_string(request.peer_));
    return std::static_pointer_cast<const T>(request.message_->payload);
  }

  // Blocking forms.
  template <class T> void send(RankId dest, Tag tag, std::shared_ptr<const T> payload)
  {
    Request r = isend(dest, tag, std::move(payload));
    wait(r);
  }
  template <class T> std::shared_ptr<const T> recv(RankId source, Tag tag)
  {
    Request r = irecv(source, tag);
    wait(r);
    return take<T>(r);
  }
  // Send to one peer and receive from another, both in flight at once (a ring step); returns when both have
  // arrived.
  template <class T>
  std::shared_ptr<const T> sendrecv(RankId dest, std::shared_ptr<const T> payload, RankId source, Tag tag)
  {
    std::array<Request, 2> both;
    both[1] = isend(dest, tag, std::move(payload));
    both[0] = irecv(source, tag);
    wait_all(both);
    return take<T>(both[0]);
  }

  // Whether a Bundle's receiver must state its layout (take_bundle): where bytes move, and in a simulation with
  // simulation.check_wire, which checks it. Otherwise the shared Bundle carries it and take<Bundle<T>> serves.
  bool bundle_layouts_needed() const { return moves_bytes_ || world_.check_wire(); }
  // The payload of a completed receive of a Bundle whose layout the receiver knows: its parts' owners and each
  // part's bytes, in order. Where bytes move they cut the parts apart; in a simulation the Bundle arrives whole
  // and must match them (std::logic_error otherwise: the receiver's expectation is part of the algorithm).
  template <class T>
  std::shared_ptr<const Bundle<T>> take_bundle(Request& request, std::vector<RankId> owners,
                                               std::span<const Bytes> part_bytes)
  {
    if (!request.done_ || !request.receive_)
      throw std::logic_error("Communicator::take_bundle on a receive that has not completed");
    if (moves_bytes_) {
      decode_arrived<Bundle<T>>(
          request, [&](WireBytes bytes) { return decode_bundle<T>(bytes, std::move(owners), part_bytes, wire()); });
      return take<Bundle<T>>(request);
    }
    auto bundle = take<Bundle<T>>(request);
    bool matches = bundle->owners == owners && bundle->parts.size() == part_bytes.size();
    for (std::size_t i = 0; matches && i < part_bytes.size(); ++i)
      matches = wire_bytes(*bundle->parts[i], wire()) == part_bytes[i];
    if (!matches)
      throw std::logic_error("Communicator::take_bundle: the bundle from rank " + std::to_string(request.peer_) +
                             " is not the layout its receiver expects");
    return bundle;
  }

  // A result every rank of the World computes identically from the same payloads, computed once
  // (SharedResults with all ranks as users; with one rank per process, by each rank).
  template <class T, class Compute>
  auto computed_once(const std::vector<std::shared_ptr<const T>>& inputs, const Compute& compute)
  {
    return world_.shared_results().get(inputs, world_.users_here(size()), compute);
  }
  // The same for a result exactly `users` ranks compute from the same payloads (a group of ranks).
  template <class T, class Compute>
  auto computed_once_by(const std::vector<std::shared_ptr<const T>>& inputs, int users, const Compute& compute)
  {
    return world_.shared_results().get(inputs, world_.users_here(users), compute);
  }

  // Simulated time now.
  Seconds now() const { return world_.transport().now(); }
  // Local work of `duration` simulated seconds, attributed to `phase` (nothing when it is zero).
  void spend(std::string_view phase, Seconds duration);

  // Local work on received data (a sum, a merge, a re-selection) that moves `bytes` through memory: charged
  // in simulated time as phase "reduction" at the World's reduction bandwidth, nothing when that is free.
  // Every rank that would do the work charges it, also where the result is computed once for all.
  void charge_reduction(Bytes bytes);
  // A selection inside the collective (a block's top-k) that moves `bytes` through memory: charged as phase
  // "selection" at the World's selection bandwidth, nothing when that is free.
  void charge_selection(Bytes bytes);

  // Phases: `auto scope = comm.phase("reduce_scatter");` attributes traffic and time to the phase until
  // the scope ends, then returns to the enclosing phase.
  class PhaseScope {
  public:
    PhaseScope(Communicator& comm, PhaseId phase);
    ~PhaseScope();
    PhaseScope(const PhaseScope&) = delete;
    PhaseScope& operator=(const PhaseScope&) = delete;

  private:
    Communicator& comm_;
    PhaseId previous_;
  };
  PhaseScope phase(std::string_view name)
  {
    return PhaseScope(*this,
                      world_.phases().intern(name, {.time = now(), .rank = rank_, .sequence = phases_entered_++}));
  }

  // Iteration bounds: link loads are kept per iteration, and the World's traced iteration is recorded
  // between the two calls (call finish_iteration after flush_phase_time).
  void start_iteration(int iteration);
  void finish_iteration();

  // Closes the running phase's time segment (call before harvesting stats).
  void flush_phase_time();
  // Starts the running phase's time segment now, dropping the time since the last flush (barrier waits).
  void restart_phase_clock();

private:
  // Where bytes move, a received message's payload is decoded the first time it is taken: the receiver names its
  // type (`decode` makes it from the bytes).
  template <class T, class Decode> void decode_arrived(Request& request, const Decode& decode)
  {
    Message& message = *request.message_;
    if (!moves_bytes_ || message.payload)
      return;
    message.payload = decode(WireBytes(message.encoded));
    message.type = typeid(T);
    message.encoded = WireBuffer();
  }
  Request post_send(RankId dest, Tag tag, std::shared_ptr<const void> payload, std::type_index type, Bytes bytes,
                    WireBuffer encoded);
  void switch_phase(PhaseId next);
  // Marks a waited request done; a receive counts its message for this rank under the sender's phase.
  void complete(Request& request);

  World& world_;
  RankId rank_;
  bool moves_bytes_;     // the transport moves encoded bytes (Transport::moves_bytes)
  bool counts_receives_; // a receive counts its message here (Transport::carries_phase); else its sender does
  PhaseId phase_ = 0;
  std::uint64_t phases_entered_ = 0;
  Seconds phase_started_ = 0;
  int iteration_ = 0;
  bool tracing_ = false; // in the traced iteration
  Seconds iteration_started_ = 0;
  std::vector<Half> waiting_; // wait_all's scratch
};

} // namespace sparsim
