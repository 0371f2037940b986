#include "sim/network/simgrid/parking.hpp"

#include <simgrid/kernel/Timer.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/NetZone.hpp>
#include <simgrid/simix.hpp>

#include <stdexcept>

namespace sparsim {

ActorParking::ActorParking(int ranks)
    : actors_(static_cast<std::size_t>(ranks), nullptr)
    , states_(static_cast<std::size_t>(ranks), State::running)
{
}

void ActorParking::park(RankId rank)
{
  if (states_[rank] == State::woken_early) {
    states_[rank] = State::running;
    return;
  }
  actors_[rank] = simgrid::s4u::Actor::self();
  states_[rank] = State::suspending;
  simgrid::s4u::this_actor::suspend(); // until unpark sets it running again
}

void ActorParking::unpark(const std::vector<RankId>& ranks)
{
  simgrid::kernel::actor::simcall_answered([&] {
    const bool timer_set = !deferred_.empty();
    for (RankId rank : ranks) {
      if (states_[rank] != State::suspending) {
        states_[rank] = State::woken_early;
        continue;
      }
      states_[rank] = State::running;
      if (actors_[rank]->is_suspended())
        actors_[rank]->resume(); // in the kernel already: no switch
      else
        deferred_.push_back(rank);
    }
    if (!timer_set && !deferred_.empty())
      simgrid::kernel::timer::Timer::set(simgrid::s4u::Engine::get_clock(), [this] { resume_deferred(); });
  });
}

void ActorParking::resume_deferred()
{
  for (RankId rank : deferred_) {
    if (!actors_[rank]->is_suspended())
      throw std::logic_error("ActorParking: a rank asked to be suspended was not when the kernel's round ended");
    actors_[rank]->resume();
  }
  deferred_.clear();
}

simgrid::s4u::Host* build_single_host_platform(const std::string& name)
{
  if (!simgrid::s4u::Engine::has_instance())
    throw std::logic_error("build_single_host_platform: create the simgrid::s4u::Engine first");
  simgrid::s4u::NetZone* zone = simgrid::s4u::create_full_zone(name);
  if (simgrid::s4u::NetZone* root = simgrid::s4u::Engine::get_instance()->get_netzone_root(); root && root != zone)
    zone->set_parent(root);
  simgrid::s4u::Host* host = zone->create_host(name + "_host", 1e9);
  zone->seal();
  return host;
}

} // namespace sparsim
