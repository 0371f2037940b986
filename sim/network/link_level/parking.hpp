// How the link-level model blocks and wakes ranks: the ranks run in a rank runtime (SimGrid's actors,
// sim/network/simgrid/parking.hpp, or the project's fibers, sim/network/fibers/), but this model decides when
// each one runs.
#pragma once

#include "sim/base/units.hpp"

#include <exception>
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

// What a rank runtime does with the first exception a rank's body threw: a ConfigError is rethrown as it is (it
// names the config's path); any other exception becomes an std::runtime_error whose message names the rank.
[[noreturn]] void rethrow_rank_failure(std::exception_ptr failure, RankId rank);

} // namespace sparsim
