// SimGrid platform plugin: the platform of a sparsim experiment config, for SMPI.
//
// `smpirun -platform libsparsim_smpi_platform.so` makes SimGrid dlopen this library and call load_platform()
// (SimGrid 3.32 loads platforms from .so files). It reads the sparsim config named by the environment variable
// SPARSIM_SMPI_CONFIG and builds its "topology" with sparsim's own builders (topologies/, sim/network/simgrid/zone),
// the same code and the same host names ("node<i>") as `sparsim run`. Which hosts the ranks run on is the hostfile's
// business (sparsim_smpi_setup writes it from the config's placement).
#include "sim/base/json_reader.hpp"
#include "sim/network/simgrid/zone.hpp"
#include "topologies/topology.hpp"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <simgrid/s4u/Engine.hpp>

extern "C" void load_platform(const simgrid::s4u::Engine&)
{
  const char* config_file = std::getenv("SPARSIM_SMPI_CONFIG");
  if (!config_file || !*config_file) {
    std::fprintf(stderr, "sparsim_smpi_platform: set SPARSIM_SMPI_CONFIG to a sparsim experiment config\n");
    std::exit(2);
  }
  try {
    nlohmann::json document;
    std::ifstream in(config_file);
    if (!in)
      throw std::runtime_error(std::string("cannot read ") + config_file);
    document = nlohmann::json::parse(in);
    sparsim::JsonReader root(document, "");
    // The zone routes with the topology for the whole simulation: it lives as long as the process.
    static const std::unique_ptr<sparsim::Topology> topology =
        sparsim::parse_topology(root.object("topology"), std::filesystem::path(config_file).parent_path());
    sparsim::build_platform(*topology);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "sparsim_smpi_platform: %s: %s\n", config_file, error.what());
    std::exit(2);
  }
}
