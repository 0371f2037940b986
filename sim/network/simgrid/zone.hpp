// The SimGrid platform of a topology: one host per compute node ("node<i>", in node order) and one
// split-duplex SimGrid link per graph link ("X_UP" from the link's `from` vertex to its `to` vertex,
// "X_DOWN" back), in a NetZone of our own whose routes are the topology's route() (a subclass of SimGrid's
// kernel NetZoneImpl: the one place in sparsim that uses SimGrid's kernel routing API), so the simulation
// and the topology cannot disagree, routes cost O(hops) to compute and nothing is stored per node pair.
//
// LIMITATIONS
// - Relies on SimGrid's installed kernel headers (simgrid/kernel/routing/NetZoneImpl.hpp, 3.32); SimGrid 4.x
//   may change that interface, and this file is where to adapt.
// - A message from a node to itself crosses SimGrid's "__loopback__" link (FATPIPE; network/loopback-bw and
//   network/loopback-lat, 10 GB/s and 0 s by default), never a topology link.
#pragma once

#include "topologies/topology.hpp"

#include <vector>

namespace simgrid::s4u {
class Host;
}

namespace sparsim {

// Builds `topology`'s platform in the running engine (create it first: engine.hpp) and returns its compute
// nodes in node order. The zone (named after the topology's type) becomes the root zone, or a child of the
// root when one exists; it keeps a reference to `topology`, which must outlive the simulation.
std::vector<simgrid::s4u::Host*> build_platform(const Topology& topology);
// The same with the topology's graph already built.
std::vector<simgrid::s4u::Host*> build_platform(const Topology& topology, const NetworkGraph& graph);

} // namespace sparsim
