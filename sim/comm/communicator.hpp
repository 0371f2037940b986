// The communicator: point-to-point messages between simulated ranks, carrying real payloads.
//
// Transport model (rendezvous, as MPI uses for large messages and as the alpha-beta closed forms assume):
// a message's transfer starts when both its send and its matching receive have been posted; it is then a
// SimGrid transfer of wire_bytes(payload) bytes between the two ranks' hosts. The handshake itself is not
// charged. Receives match by (source, tag), in posting order per (source, tag); SimGrid's own mailboxes
// match any source in FIFO order, which makes all-to-all phases fragile, so each unmatched message gets a
// mailbox of its own (reused once matched). A send completes when its data has arrived, and so does the
// matching receive. (SimGrid 3.32's host-to-host Comm::sendto_async is not used: it registers every
// transfer in one global list that each completion scans, which made the cost per message grow with
// the number of messages in flight; see docs/scale.md.)
//
// Accounting: every message is counted when its send is posted, for the sender (sent) and the receiver
// (received), under the sender's current phase. Phase time is the simulated time each rank spends while
// the phase is current. The simulated size of a message is wire_bytes(payload), never a number an
// algorithm passes in.
//
// Link loads: every message also adds its bytes, when its send is posted, to each SimGrid link of the route
// between the two ranks' hosts (links.csv). Tracing: in the one iteration chosen for a trace, each rank
// records its phase segments and its waits on messages (sparsim run --trace, sim/output/trace.hpp).
#pragma once

#include "sim/base/units.hpp"
#include "sim/data/wire.hpp"

#include <simgrid/s4u/Barrier.hpp>
#include <simgrid/s4u/Comm.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <typeindex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace simgrid::s4u {
class Host;
class Mailbox;
}  // namespace simgrid::s4u
namespace simgrid::kernel::resource {
class StandardLinkImpl;
}

namespace sparsim {

using Tag = std::uint32_t;
using PhaseId = std::uint32_t;

// Traffic and time of one rank in one phase.
struct PhaseStats {
  std::uint64_t msgs_sent = 0;
  std::uint64_t msgs_recv = 0;
  Bytes bytes_sent = 0;
  Bytes bytes_recv = 0;
  Seconds time = 0;
};

// Bytes one SimGrid link carried: in all, and in the iteration that loaded it most.
struct LinkLoad {
  Bytes total = 0;
  Bytes iteration_max = 0;
  Bytes current = 0;  // in iteration `current_iteration`, the latest to use the link
  int current_iteration = -1;
};

// One slice of a rank's timeline in the traced iteration: the iteration itself, a segment of time in one
// phase, or a wait on one message (from Communicator::wait until the message has arrived).
struct TraceSlice {
  enum class Kind : std::uint8_t { iteration, phase, send_wait, receive_wait };
  Kind kind = Kind::phase;
  PhaseId phase = 0;  // the phase current at the time (iteration slices: 0)
  Seconds begin = 0;
  Seconds end = 0;
  RankId peer = -1;   // waits: the other rank
  Tag tag = 0;        // waits
  Bytes bytes = 0;    // waits: the message's simulated size
};

// One message, shared by its send and receive requests. Each side posts its half of a SimGrid transfer on the
// message's mailbox, which holds nothing else while the message is unmatched; SimGrid starts the transfer when
// both halves are there and each side waits on its own half.
struct Message {
  RankId source = -1;
  RankId dest = -1;
  Bytes bytes = 0;
  std::shared_ptr<const void> payload;  // null until a send fills a posted receive
  std::type_index type{typeid(void)};
  simgrid::s4u::Mailbox* mailbox = nullptr;
  void* landing = nullptr;  // where SimGrid's receive half stores the (unused) data pointer
};

// State shared by all ranks of one simulation: hosts, pending messages, counters, phase names.
class World {
public:
  World(std::vector<simgrid::s4u::Host*> rank_hosts, WireFormat wire);

  int size() const { return static_cast<int>(hosts_.size()); }
  const WireFormat& wire() const { return wire_; }
  simgrid::s4u::Host* host(RankId rank) const { return hosts_[rank]; }

  // The rate at which a rank reduces, merges and re-selects received data (compute.reduction): bytes of
  // memory traffic per second, 0 when that work is free in simulated time.
  void set_reduction_bandwidth(BytesPerSecond bandwidth) { reduction_bandwidth_ = bandwidth; }
  BytesPerSecond reduction_bandwidth() const { return reduction_bandwidth_; }

  // Phase names are interned to small ids; id 0 is "other" (anything outside a named phase).
  PhaseId intern_phase(std::string_view name);
  const std::vector<std::string>& phase_names() const { return phase_names_; }

  // Hands a rank its counters since the last call (one entry per phase id) and resets them.
  std::vector<PhaseStats> take_stats(RankId rank);

  // A zero-cost barrier that lines all ranks up at the same simulated time (between iterations).
  void align_ranks() { barrier_->wait(); }

  // Bytes per SimGrid link (by its kernel object, s4u::Link::get_impl()) over the run so far; links that
  // carried nothing are absent.
  using LinkLoads = std::unordered_map<const simgrid::kernel::resource::StandardLinkImpl*, LinkLoad>;
  const LinkLoads& link_loads() const { return link_loads_; }

  // Records the timeline of iteration `iteration` (see Communicator::start_iteration); -1: none.
  void trace_iteration(int iteration)
  {
    traced_iteration_ = iteration;
    traces_.assign(iteration >= 0 ? hosts_.size() : 0, {});
  }
  int traced_iteration() const { return traced_iteration_; }
  // Hands over each rank's slices of the traced iteration, in the order they ended.
  std::vector<std::vector<TraceSlice>> take_trace() { return std::move(traces_); }

  // Host work that every rank would repeat on the same payloads (TopkA sums the same P gathered selections
  // on every rank): the first rank to ask runs `compute`, the others take the same object. The key is the
  // computation (the type of `compute`: each lambda has its own) and the exact list of input payloads; the
  // entry holds the inputs (so no other payload can take their addresses while it lives) and is dropped once
  // `users` ranks have taken it. Only for pure, deterministic functions of the inputs and of what the call
  // site passes alike on every rank: the shared result is then bitwise what each rank would compute.
  template <class T, class Compute>
  auto shared_result(const std::vector<std::shared_ptr<const T>>& inputs, int users, const Compute& compute)
  {
    using Result = decltype(compute());  // a std::shared_ptr<const R>
    SharedKey key{typeid(Compute), {}};
    key.second.reserve(inputs.size());
    for (const auto& input : inputs)
      key.second.push_back(reinterpret_cast<std::uintptr_t>(input.get()));
    // Only the rank that computes copies the inputs into the entry.
    auto keep = [&] { return std::make_shared<const std::vector<std::shared_ptr<const T>>>(inputs); };
    return std::static_pointer_cast<typename Result::element_type>(
        shared_result_erased(std::move(key), users, keep, [&] { return compute(); }));
  }
  // Results computed, taken, and still waiting for ranks to take them (0 after every complete iteration).
  std::uint64_t shared_results_computed() const { return shared_computed_; }
  std::uint64_t shared_results_taken() const { return shared_taken_; }
  std::size_t shared_results_pending() const { return shared_results_.size(); }

private:
  friend class Communicator;
  using MessagePtr = std::shared_ptr<Message>;
  // Per receiving rank, by (source, tag), oldest first: sends whose receive is not posted yet, and posted
  // receives whose send has not come yet (for one key at most one of the two is non-empty).
  using Queues = std::unordered_map<std::uint64_t, std::vector<MessagePtr>>;
  struct Inbox {
    Queues unmatched_sends;
    Queues unmatched_receives;
  };
  // One half of a message (a send or a receive) looks for its other half: the oldest message the other side
  // filed under `key` in `theirs` (matched: posting this half starts the transfer), or else a new message,
  // with a mailbox of its own, filed in `ours` for the other half to find.
  struct Pairing {
    MessagePtr message;
    bool matched = false;
  };
  Pairing pair_half(Queues& theirs, Queues& ours, std::uint64_t key);
  // Mailboxes are reused: one is taken for each unmatched message and returned once both halves are posted.
  simgrid::s4u::Mailbox* take_mailbox();
  void return_mailbox(simgrid::s4u::Mailbox* mailbox) { free_mailboxes_.push_back(mailbox); }
  PhaseStats& stats(RankId rank, PhaseId phase);
  // Adds a message's bytes to every link of the route from `source`'s host to `dest`'s.
  void add_link_bytes(RankId source, RankId dest, Bytes bytes, int iteration);

  std::vector<simgrid::s4u::Host*> hosts_;
  WireFormat wire_;
  std::vector<Inbox> inboxes_;
  std::vector<simgrid::s4u::Mailbox*> free_mailboxes_;
  std::size_t mailboxes_created_ = 0;
  std::vector<std::vector<PhaseStats>> stats_;
  std::vector<std::string> phase_names_;
  BytesPerSecond reduction_bandwidth_ = 0;
  simgrid::s4u::BarrierPtr barrier_;
  LinkLoads link_loads_;
  // Per source rank, the loads of the links to the destination it sent to last (a ring step reuses it).
  struct LastRoute {
    RankId dest = -1;
    std::vector<LinkLoad*> loads;
  };
  std::vector<LastRoute> last_routes_;
  std::vector<simgrid::kernel::resource::StandardLinkImpl*> route_;  // scratch for add_link_bytes
  int traced_iteration_ = -1;
  std::vector<std::vector<TraceSlice>> traces_;  // [rank], filled during the traced iteration only

  using SharedKey = std::pair<std::type_index, std::vector<std::uintptr_t>>;  // computation, input addresses
  std::shared_ptr<const void> shared_result_erased(SharedKey key, int users,
                                                   const std::function<std::shared_ptr<const void>()>& keep,
                                                   const std::function<std::shared_ptr<const void>()>& compute);
  struct SharedEntry {
    std::shared_ptr<const void> inputs;  // kept alive: their addresses are the key
    std::shared_ptr<const void> result;
    int remaining = 0;  // ranks yet to take it
  };
  std::map<SharedKey, SharedEntry> shared_results_;
  std::uint64_t shared_computed_ = 0;
  std::uint64_t shared_taken_ = 0;
};

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
  std::shared_ptr<Message> message_;
  simgrid::s4u::CommPtr transfer_;  // this side's half of the SimGrid transfer
};

// One rank's view of the World; used only from that rank's actor.
class Communicator {
public:
  Communicator(World& world, RankId rank);

  RankId rank() const { return rank_; }
  int size() const { return world_.size(); }
  const WireFormat& wire() const { return world_.wire(); }

  // Non-blocking send of an immutable payload; its simulated size is wire_bytes(*payload, wire()).
  template <class T> Request isend(RankId dest, Tag tag, std::shared_ptr<const T> payload)
  {
    Bytes bytes = wire_bytes(*payload, wire());
    return post_send(dest, tag, std::static_pointer_cast<const void>(std::move(payload)), typeid(T), bytes);
  }
  Request irecv(RankId source, Tag tag);
  void wait(Request& request);
  void wait_all(std::vector<Request>& requests);

  // The payload of a completed receive. Throws std::logic_error if the sender sent another type.
  template <class T> std::shared_ptr<const T> take(Request& request)
  {
    if (!request.done_ || !request.receive_)
      throw std::logic_error("Communicator::take on a receive that has not completed");
    if (request.message_->type != typeid(T))
      throw std::logic_error("Communicator::take: payload type mismatch from rank " +
                             std::to_string(request.peer_));
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
  // Send to one peer and receive from another, both in flight at once (a ring step).
  template <class T>
  std::shared_ptr<const T> sendrecv(RankId dest, std::shared_ptr<const T> payload, RankId source, Tag tag)
  {
    Request s = isend(dest, tag, std::move(payload));
    Request r = irecv(source, tag);
    wait(r);
    wait(s);
    return take<T>(r);
  }

  // A result every rank of the World computes identically from the same payloads, computed once
  // (World::shared_result with all ranks as users).
  template <class T, class Compute>
  auto computed_once(const std::vector<std::shared_ptr<const T>>& inputs, const Compute& compute)
  {
    return world_.shared_result(inputs, size(), compute);
  }
  // The same for a result exactly `users` ranks compute from the same payloads (a group of ranks).
  template <class T, class Compute>
  auto computed_once_by(const std::vector<std::shared_ptr<const T>>& inputs, int users, const Compute& compute)
  {
    return world_.shared_result(inputs, users, compute);
  }

  // Local work on received data (a sum, a merge, a re-selection) that moves `bytes` through memory: charged
  // in simulated time as phase "reduction" at the World's reduction bandwidth, nothing when that is free.
  // Every rank that would do the work charges it, also where the result is computed once for all.
  void charge_reduction(Bytes bytes);

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
  PhaseScope phase(std::string_view name) { return PhaseScope(*this, world_.intern_phase(name)); }

  // Iteration bounds: link loads are kept per iteration, and the World's traced iteration is recorded
  // between the two calls (call finish_iteration after flush_phase_time).
  void start_iteration(int iteration);
  void finish_iteration();

  // Closes the running phase's time segment (call before harvesting stats).
  void flush_phase_time();
  // Starts the running phase's time segment now, dropping the time since the last flush (barrier waits).
  void restart_phase_clock();

private:
  Request post_send(RankId dest, Tag tag, std::shared_ptr<const void> payload, std::type_index type, Bytes bytes);
  void switch_phase(PhaseId next);

  World& world_;
  RankId rank_;
  PhaseId phase_ = 0;
  Seconds phase_started_ = 0;
  int iteration_ = 0;
  bool tracing_ = false;  // in the traced iteration
  Seconds iteration_started_ = 0;
};

}  // namespace sparsim
