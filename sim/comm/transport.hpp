// The transport: what moves a message between two ranks and keeps simulated time. The Communicator matches
// sends to receives, counts bytes and keeps phases; a transport (a network model) decides when a message has
// arrived. The first implementation is SimGrid's flow model (sim/network/simgrid/transport.hpp).
//
// Contract (rendezvous): a message's transfer starts when both its halves, the send and the receive, are
// posted; each side then waits on its own half, which completes when the data has arrived. The payload is
// never copied: the receiver takes the sender's shared object.
//
// A transport counts the link loads of the messages it moves (links.csv), when a send is posted, on the route
// the message takes: the route the topology gives, or the one the transport chose (adaptive routing).
#pragma once

#include "sim/base/units.hpp"
#include "sim/comm/accounting.hpp"
#include "sim/comm/link_loads.hpp"
#include "sim/data/wire_codec.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <type_traits>
#include <typeindex>

namespace sparsim {

using Tag = std::uint32_t;

// One message, shared by its send and its receive. A transport derives its own message type for its
// per-message state (Transport::new_message).
struct Message {
  virtual ~Message() = default;
  RankId source = -1;
  RankId dest = -1;
  Bytes bytes = 0;
  std::shared_ptr<const void> payload; // null until the send is posted
  std::type_index type{typeid(void)};
  PhaseId phase = 0; // the sender's phase when it posted the send (the receiver counts the message under it)
  // A transport that moves bytes (Transport::moves_bytes) carries the encoded payload here instead of `payload`;
  // the receiver decodes it when it takes it (sim/data/wire_codec.hpp).
  WireBuffer encoded = {};
};
using MessagePtr = std::shared_ptr<Message>;

// Which message a newly posted half belongs to: the oldest one the other side posted first under the same
// (source, tag) (`matched`: this half starts the transfer), or a new one, filed for the other half to find.
struct Pairing {
  MessagePtr message;
  bool matched = false;
};
// The Communicator's matcher for one half (sim/comm/matcher.hpp); `fresh` is the message to file when
// nothing matches. A reference to the caller's function, valid for the post it is passed to (no copy, no
// allocation per message).
class PairFunction {
public:
  template <class F>
  requires(!std::is_same_v<std::remove_cvref_t<F>, PairFunction>)
      PairFunction(F&& function) // NOLINT(google-explicit-constructor): passed as a lambda
      : function_(const_cast<void*>(static_cast<const void*>(&function)))
      , call_(
            [](void* f, MessagePtr fresh) { return (*static_cast<std::remove_reference_t<F>*>(f))(std::move(fresh)); })
  {
  }
  Pairing operator()(MessagePtr fresh) const { return call_(function_, std::move(fresh)); }

private:
  void* function_;
  Pairing (*call_)(void*, MessagePtr);
};

// One half of a message a rank waits on.
struct Half {
  Message* message;
  bool is_receive;
};

// What a send puts into its message.
struct Outgoing {
  RankId source = -1;
  RankId dest = -1;
  Tag tag = 0;
  Bytes bytes = 0;
  std::shared_ptr<const void> payload;
  std::type_index type{typeid(void)};
  PhaseId phase = 0;
  // The iteration it belongs to (its link loads count in that iteration).
  int iteration = 0;
  // The payload's bytes, for a transport that moves bytes (empty otherwise).
  WireBuffer encoded = {};
};

class Transport {
public:
  virtual ~Transport() = default;

  // Simulated time now.
  virtual Seconds now() const = 0;
  // Spends `duration` of simulated time on the calling rank `rank` (compute phases).
  virtual void sleep_for(RankId rank, Seconds duration) = 0;
  // A zero-cost barrier: every rank leaves it at the same simulated time. `rank` is the caller.
  virtual void align_ranks(RankId rank) = 0;
  // The calling rank's body has returned: it posts and waits no more.
  virtual void rank_finished(RankId rank) = 0;

  // Whether messages travel as bytes between processes (a real MPI backend): the sender then encodes its
  // payload into Outgoing::encoded and the receiver decodes Message::encoded. A simulation's transport hands the
  // shared payload over instead.
  virtual bool moves_bytes() const { return false; }
  // Whether a received message carries its sender's phase (Message::phase). A transport between processes does
  // not (phase ids are per process, and the bytes on the wire are the payload's only): the sender then counts
  // each message for its receiver as well, in its own process, and the run gathers those counts afterwards.
  virtual bool carries_phase() const { return true; }

  // Posting a half: a transport within one process calls `pair` exactly once, at a moment when no other rank
  // can post, with a new message of its own type, and returns the message the half belongs to; a send writes
  // `outgoing` into it before its transfer can start. A transport between processes matches the halves
  // itself (MPI's matching, by source and tag in posting order) and never calls `pair`.
  virtual MessagePtr post_send(const PairFunction& pair, Outgoing outgoing) = 0;
  // `receiver` is the calling rank; it receives from `source` under `tag` (what `pair` matches on).
  virtual MessagePtr post_receive(const PairFunction& pair, RankId receiver, RankId source, Tag tag) = 0;
  // Blocks the calling rank until its half of `message` has completed (is_receive: the receive half).
  virtual void wait(Message& message, bool is_receive) = 0;
  // Blocks the calling rank `rank` until every one of `halves` has completed: the same simulated time as
  // waiting on them one after the other, which is what this default does.
  virtual void wait_all(RankId rank, std::span<const Half> halves)
  {
    (void)rank;
    for (const Half& half : halves)
      wait(*half.message, half.is_receive);
  }
};

} // namespace sparsim
