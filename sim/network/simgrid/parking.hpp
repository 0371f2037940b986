// Blocking and waking rank actors for the link-level model (sim/network/link_level/): a rank parks by suspending
// its SimGrid actor and is woken by resuming it. SimGrid's clock does not move in that model; its actors are only
// the ranks' contexts.
#pragma once

#include "sim/network/link_level/parking.hpp"

#include <simgrid/s4u/Actor.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace simgrid::s4u {
class Host;
} // namespace simgrid::s4u

namespace sparsim {

// Suspending and resuming an actor allocates nothing (a semaphore's acquisition allocates an activity on each
// wait), which matters at one park per message.
//
// A suspension takes effect only when SimGrid's kernel handles it, after every actor of the current round has
// run; an unpark handled before it (the unparking rank ran earlier in the round) cannot resume the rank yet. Such
// ranks are resumed by a kernel timer at the current time, which fires once the round's requests are handled.
class ActorParking : public RankParking {
public:
  explicit ActorParking(int ranks);
  void park(RankId rank) override;
  // One switch to SimGrid's kernel for all of them (a resume from an actor is a switch of its own).
  void unpark(const std::vector<RankId>& ranks) override;

private:
  enum class State : std::uint8_t {
    running,
    suspending, // parked and not unparked yet (the kernel may not have suspended it yet)
    woken_early // unparked while not parked: its next park returns at once
  };
  void resume_deferred();

  std::vector<simgrid::s4u::Actor*> actors_; // [rank], known from its first park
  std::vector<State> states_;                // [rank]
  std::vector<RankId> deferred_;             // unparked while suspending: resumed by the timer
};

// A platform of one host for models that time messages themselves: every rank's actor runs on it. Call once
// the engine exists; `name` must be new to the engine.
simgrid::s4u::Host* build_single_host_platform(const std::string& name);

} // namespace sparsim
