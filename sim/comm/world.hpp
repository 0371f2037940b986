// The World: what all ranks of one simulation share, as named parts with narrow interfaces. The
// Communicator (one per rank) uses them; the driver reads them after the run.
#pragma once

#include "sim/comm/accounting.hpp"
#include "sim/comm/matcher.hpp"
#include "sim/comm/shared_results.hpp"
#include "sim/comm/trace_recorder.hpp"
#include "sim/comm/transport.hpp"
#include "sim/data/wire.hpp"

#include <atomic>
#include <cstdint>
#include <utility>

namespace sparsim {

class World {
public:
  // `ranks` ranks on `transport`.
  World(Transport& transport, int ranks, WireFormat wire)
      : transport_(transport)
      , ranks_(ranks)
      , wire_(wire)
      , matcher_(ranks)
      , traffic_(ranks)
  {
  }

  int size() const { return ranks_; }
  const WireFormat& wire() const { return wire_; }

  // The rate at which a rank reduces, merges and re-selects received data (compute.reduction): bytes of
  // memory traffic per second, 0 when that work is free in simulated time.
  void set_reduction_bandwidth(BytesPerSecond bandwidth) { reduction_bandwidth_ = bandwidth; }
  BytesPerSecond reduction_bandwidth() const { return reduction_bandwidth_; }
  // The rate of a selection done inside a collective (SparDL's block top-k), charged as the driver's local
  // selection is (compute.selection): bytes of memory traffic per second, 0 when selection is free.
  void set_selection_bandwidth(BytesPerSecond bandwidth) { selection_bandwidth_ = bandwidth; }
  BytesPerSecond selection_bandwidth() const { return selection_bandwidth_; }
  // Whether every payload sent is encoded as a real MPI backend sends it and checked against the bytes charged
  // (simulation.check_wire; sim/data/wire_codec.hpp).
  void set_check_wire(bool check) { check_wire_ = check; }
  bool check_wire() const { return check_wire_; }

  // Whether this process runs one rank of the World (a real MPI backend) rather than all of them.
  void set_one_rank_per_process(bool one) { one_rank_per_process_ = one; }
  bool one_rank_per_process() const { return one_rank_per_process_; }
  // How many ranks of this process take a result that `users` ranks compute from the same payloads
  // (SharedResults): all of them, or the one rank here.
  int users_here(int users) const { return one_rank_per_process_ ? 1 : users; }

  Transport& transport() { return transport_; }
  Matcher& matcher() { return matcher_; }
  PhaseNames& phases() { return phases_; }
  const PhaseNames& phases() const { return phases_; }
  TrafficStats& traffic() { return traffic_; }
  TraceRecorder& trace() { return trace_; }
  SharedResults& shared_results() { return shared_results_; }
  const SharedResults& shared_results() const { return shared_results_; }

  // Messages posted so far by all ranks (the run's progress display reads it from another thread).
  void count_message() { messages_posted_.fetch_add(1, std::memory_order_relaxed); }
  std::uint64_t messages_posted() const { return messages_posted_.load(std::memory_order_relaxed); }

  // A zero-cost barrier that lines all ranks up at the same simulated time (between iterations); `rank` calls.
  void align_ranks(RankId rank) { transport_.align_ranks(rank); }
  // Hands a rank its counters since the last call (one entry per phase id) and resets them.
  std::vector<PhaseStats> take_stats(RankId rank) { return traffic_.take(rank, phases_.names().size()); }

private:
  Transport& transport_;
  int ranks_;
  WireFormat wire_;
  BytesPerSecond reduction_bandwidth_ = 0;
  BytesPerSecond selection_bandwidth_ = 0;
  bool check_wire_ = false;
  bool one_rank_per_process_ = false;
  Matcher matcher_;
  PhaseNames phases_;
  TrafficStats traffic_;
  TraceRecorder trace_;
  SharedResults shared_results_;
  std::atomic<std::uint64_t> messages_posted_ = 0;
};

} // namespace sparsim
