// The Transport of a real MPI run (sparsim-mpi): one rank per process, messages as the bytes the simulation
// charges (sim/data/wire_codec.hpp) moved by MPI point-to-point calls, times measured with MPI_Wtime.
//
// Sends are MPI_Isend of the encoded payload. A receive does not know its size in advance (a sparse
// selection's length is the sender's), so it is found with MPI_Iprobe and posted with MPI_Irecv for the probed
// size at once (one thread posts every receive, so the receive takes the message probed; SimGrid's SMPI has no
// MPI_Improbe). Receives are matched lazily, in the order they were posted (MPI's non-overtaking order per
// source and tag): every wait first tries to match every posted receive, not only the one it waits for, so a
// rank waiting on a large send (rendezvous: it needs the peer's matching receive) never holds back a receive a
// peer's wait depends on. A matching pass first asks whether any message at all waits unreceived (one
// MPI_Iprobe of any source and tag) before probing each posted receive.
//
// How a wait waits: while some posted receive has no message yet, it polls (match, then MPI_Test), and between
// polls that found nothing yields the core, so more processes than cores (the tests oversubscribe) still
// progress; or, with a `poll_backoff`, sleeps, 1 ns after the first empty poll and doubling up to
// `poll_backoff`. Under SMPI that sleep is simulated (smpi_helpers.h turns nanosleep into smpi_nanosleep): a
// receive is then posted at most `poll_backoff` after its message was sent. Once every posted receive has its
// message, nothing this rank could do would help a peer, and the wait blocks in MPI_Waitany (under SMPI the
// clock jumps to the completion).
//
// Simulated time is the host's: now() is MPI_Wtime since the transport was made; align_ranks is MPI_Barrier.
// Where MPI_Wtime is one clock for every process (MPI_WTIME_IS_GLOBAL: SMPI says so), align_ranks then also
// lets every process leave at one instant (an allreduce of the barrier's exit times, and a sleep to 10 ms after
// the latest), as the simulation's zero-cost barrier does; otherwise they leave as MPI_Barrier releases them.
// The compute model's charges (training step, selection, reductions) are not spent by default (the GPU work is
// not run), or spent when `sleep_compute` is set: busy-waiting on MPI_Wtime, or built for SMPI
// (SPARSIM_UNDER_SMPI) as SMPI's simulated sleep.
//
// LIMITATIONS: a message is at most INT_MAX bytes and a tag at most MPI_TAG_UB (a clear error otherwise); without a
// global clock the barrier aligns the processes only as closely as MPI_Barrier does (a few microseconds on one
// host).
#pragma once

#include "sim/comm/transport.hpp"

#include <mpi.h>

#include <memory>
#include <vector>

namespace sparsim {

struct MpiTransportOptions {
  bool sleep_compute = false; // spend the compute model's charges as busy waits
  Seconds poll_backoff = 0;   // the longest sleep between empty polls; 0: yield the core instead
};

class MpiTransport : public Transport {
public:
  // The calling process's rank of `comm` is the rank it runs.
  MpiTransport(MPI_Comm comm, MpiTransportOptions options);

  Seconds now() const override { return MPI_Wtime() - start_; }
  void sleep_for(RankId rank, Seconds duration) override;
  void align_ranks(RankId rank) override;
  void rank_finished(RankId rank) override;
  bool moves_bytes() const override { return true; }
  bool carries_phase() const override { return false; }

  MessagePtr post_send(const PairFunction& pair, Outgoing outgoing) override;
  MessagePtr post_receive(const PairFunction& pair, RankId receiver, RankId source, Tag tag) override;
  void wait(Message& message, bool is_receive) override;
  void wait_all(RankId rank, std::span<const Half> halves) override;

  const MpiTransportOptions& options() const { return options_; }

private:
  struct MpiMessage : Message {
    Tag tag = 0;
    MPI_Request request = MPI_REQUEST_NULL; // the send, or the receive once matched
    bool matched = false;                   // a receive: its message found (MPI_Iprobe)
    bool done = false;
  };

  // Matches every posted receive whose message has arrived, in posting order; returns whether any matched.
  bool match_receives();
  // Frees the buffers of the sends that have completed, checking them only once their number has doubled.
  void release_completed_sends();
  // Between two polls that found nothing: yields the core, or sleeps `backoff` (see poll_backoff).
  void idle(Seconds backoff) const;
  // Sleeps `duration` (simulated under SMPI).
  static void pause(Seconds duration);
  // Whether `m` has completed (tests its request once).
  bool completes(MpiMessage& m);
  // Marks `m` done (its request completed) and frees a send's bytes.
  void finished(MpiMessage& m);
  // Blocks until one of the unfinished `messages` completes: MPI_Waitany. Every one of them has its request
  // (no receive is unmatched).
  void block_until_one_completes(std::span<MpiMessage* const> messages);
  // Polls until every one of `messages` has completed.
  void wait_for(std::span<MpiMessage* const> messages);

  MPI_Comm comm_;
  RankId rank_;
  int tag_upper_bound_;
  MpiTransportOptions options_;
  bool global_clock_ = false; // MPI_WTIME_IS_GLOBAL: one clock for every process (SMPI's simulated time)
  double start_;
  std::size_t sends_checked_at_ = 0;                   // sends_.size() after the last release_completed_sends
  std::vector<std::shared_ptr<MpiMessage>> unmatched_; // receives posted and not matched, in posting order
  std::vector<std::shared_ptr<MpiMessage>> sends_;     // sends posted, kept until done (MPI reads their bytes)
  std::vector<MpiMessage*> waiting_, pending_;         // scratch
  std::vector<MPI_Request> requests_;                  // scratch
};

} // namespace sparsim
