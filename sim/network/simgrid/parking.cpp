#include "sim/network/simgrid/parking.hpp"

#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/NetZone.hpp>
#include <simgrid/simix.hpp>

#include <stdexcept>

namespace sparsim {

SemaphoreParking::SemaphoreParking(int ranks)
{
  semaphores_.reserve(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r)
    semaphores_.push_back(simgrid::s4u::Semaphore::create(0));
}

void SemaphoreParking::unpark(const std::vector<RankId>& ranks)
{
  simgrid::kernel::actor::simcall_answered([&] {
    for (RankId rank : ranks)
      semaphores_[rank]->release(); // in the kernel already: no switch
  });
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
