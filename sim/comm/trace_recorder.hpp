// The timeline of one traced iteration (sparsim run --trace): each rank's phase segments and waits.
#pragma once

#include "sim/base/units.hpp"
#include "sim/comm/accounting.hpp"
#include "sim/comm/transport.hpp"

#include <cstdint>
#include <utility>
#include <vector>

namespace sparsim {

// One slice of a rank's timeline in the traced iteration: the iteration itself, a segment of time in one
// phase, or a wait on one message (from Communicator::wait until the message has arrived).
struct TraceSlice {
  enum class Kind : std::uint8_t { iteration, phase, send_wait, receive_wait };
  Kind kind = Kind::phase;
  PhaseId phase = 0; // the phase current at the time (iteration slices: 0)
  Seconds begin = 0;
  Seconds end = 0;
  RankId peer = -1; // waits: the other rank
  Tag tag = 0;      // waits
  Bytes bytes = 0;  // waits: the message's simulated size
};

class TraceRecorder {
public:
  // Records the timeline of iteration `iteration` of `ranks` ranks; -1: none.
  void trace_iteration(int iteration, int ranks)
  {
    traced_iteration_ = iteration;
    slices_.assign(iteration >= 0 ? static_cast<std::size_t>(ranks) : 0, {});
  }
  int traced_iteration() const { return traced_iteration_; }
  void record(RankId rank, const TraceSlice& slice) { slices_[rank].push_back(slice); }
  // Hands over each rank's slices of the traced iteration, in the order they ended.
  std::vector<std::vector<TraceSlice>> take() { return std::move(slices_); }

private:
  int traced_iteration_ = -1;
  std::vector<std::vector<TraceSlice>> slices_; // [rank], filled during the traced iteration only
};

} // namespace sparsim
