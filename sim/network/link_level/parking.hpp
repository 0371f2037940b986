// How the link-level model blocks and wakes ranks: the ranks stay actors of the engine (SimGrid's, in
// sim/network/simgrid/parking.hpp), but this model decides when each one runs.
#pragma once

#include "sim/base/units.hpp"

#include <vector>

namespace sparsim {

class RankParking {
public:
  virtual ~RankParking() = default;
  // Blocks the calling rank `rank` until unpark(rank) (returns at once if unpark came first).
  virtual void park(RankId rank) = 0;
  // Lets every rank of `ranks` run again, in that order, once the caller blocks or yields.
  virtual void unpark(const std::vector<RankId>& ranks) = 0;
};

} // namespace sparsim
