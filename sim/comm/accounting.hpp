// What the Communicator counts: messages, bytes and simulated time per rank and phase, under interned phase
// names. Every message is counted under the sender's phase: by the sender (sent) when it posts it, by the
// receiver (received) when its receive completes.
#pragma once

#include "sim/base/units.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sparsim {

using PhaseId = std::uint32_t;

// Traffic and time of one rank in one phase.
struct PhaseStats {
  std::uint64_t msgs_sent = 0;
  std::uint64_t msgs_recv = 0;
  Bytes bytes_sent = 0;
  Bytes bytes_recv = 0;
  Seconds time = 0;
};

// When a rank enters a phase: simulated time, the rank, and how many phases that rank had entered before.
struct PhaseEntry {
  Seconds time = 0;
  RankId rank = 0;
  std::uint64_t sequence = 0;
  bool operator<(const PhaseEntry& other) const
  {
    return time != other.time ? time < other.time : rank != other.rank ? rank < other.rank : sequence < other.sequence;
  }
};

// Phase names interned to small ids; id 0 is "other" (anything outside a named phase). Ids follow the order in
// which the host happened to run the ranks; outputs list phases in order of their earliest entry instead
// (output_order), which depends only on the simulation, not on the rank runtime.
class PhaseNames {
public:
  PhaseId intern(std::string_view name, const PhaseEntry& entry);
  // The id of a phase some rank has entered (std::out_of_range for any other name).
  PhaseId id_of(std::string_view name) const;
  const std::vector<std::string>& names() const { return names_; }
  // The earliest entry into phase `id` so far.
  const PhaseEntry& first_entry(PhaseId id) const { return first_entries_[id]; }
  // Every id, "other" first, then by earliest entry: simulated time, then the lowest rank, then that rank's order.
  std::vector<PhaseId> output_order() const;

private:
  std::vector<std::string> names_{"other"};
  std::vector<PhaseEntry> first_entries_{PhaseEntry{}}; // [id]: the earliest entry so far
};

// Per rank, the counters of each phase since the rank last took them. Stored by phase, then rank: the ranks of a
// collective step count their messages one after the other, so neighbouring ranks' counters share cache lines.
class TrafficStats {
public:
  explicit TrafficStats(int ranks)
      : ranks_(static_cast<std::size_t>(ranks))
  {
  }

  PhaseStats& of(RankId rank, PhaseId phase);
  // Hands over a rank's counters (one entry per phase id below `phases`) and resets them.
  std::vector<PhaseStats> take(RankId rank, std::size_t phases);

private:
  std::size_t ranks_;
  std::vector<std::vector<PhaseStats>> stats_; // [phase][rank]
};

} // namespace sparsim
