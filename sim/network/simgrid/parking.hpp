// Blocking and waking rank actors for the link-level model (sim/network/link_level/): one SimGrid
// semaphore per rank. SimGrid's clock does not move in that model; its actors are only the ranks' contexts.
#pragma once

#include "sim/network/link_level/parking.hpp"

#include <simgrid/s4u/Semaphore.hpp>

#include <string>
#include <vector>

namespace simgrid::s4u {
class Host;
} // namespace simgrid::s4u

namespace sparsim {

class SemaphoreParking : public RankParking {
public:
  explicit SemaphoreParking(int ranks);
  void park(RankId rank) override { semaphores_[rank]->acquire(); }
  // One switch to SimGrid's kernel for all of them (a release from an actor is a switch of its own).
  void unpark(const std::vector<RankId>& ranks) override;

private:
  std::vector<simgrid::s4u::SemaphorePtr> semaphores_;
};

// A platform of one host for models that time messages themselves: every rank's actor runs on it. Call once
// the engine exists; `name` must be new to the engine.
simgrid::s4u::Host* build_single_host_platform(const std::string& name);

} // namespace sparsim
