// SimGrid's engine for a run: its options from the config's "network" object, and the rank actors.
#pragma once

#include "sim/base/units.hpp"

#include <functional>
#include <string>
#include <vector>

namespace simgrid::s4u {
class Engine;
class Host;
} // namespace simgrid::s4u

namespace sparsim {

// SimGrid command-line options: `flow_model` (SimGrid's network/model: "CM02", "LV08" or "SMPI") with or
// without its acknowledgement traffic (network/crosstraffic).
std::vector<std::string> simgrid_options(const std::string& flow_model, bool crosstraffic);
// The installed SimGrid's version, "3.32.0".
std::string simgrid_version();
// Starts SimGrid's engine with those options. The engine exists once per process: the first call creates
// it, later calls return it unchanged.
simgrid::s4u::Engine& start_engine(const std::string& flow_model = "CM02", bool crosstraffic = false);

// Runs `body(rank)` as one SimGrid actor per rank (actor "rank<r>" on rank_hosts[r]) until the simulation
// ends. The first exception a rank throws stops every rank and is rethrown here (rethrow_rank_failure). Returns how
// many ranks' bodies returned: fewer than the ranks when some never finished (a deadlock).
int run_rank_actors(const std::vector<simgrid::s4u::Host*>& rank_hosts, const std::function<void(RankId)>& body);

} // namespace sparsim
