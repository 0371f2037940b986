// Writes what smpirun needs to run an MPI program where `sparsim run CONFIG` runs its ranks:
// the hostfile (one host per line, in rank order: the config's placement) and, on stdout, the SimGrid options
// of the config's network model, one per line (the options sparsim starts its engine with).
//
// Usage: sparsim_smpi_setup CONFIG HOSTFILE
#include "sim/network/models/network_model.hpp"
#include "sim/network/simgrid/engine.hpp"
#include "sim/run/config.hpp"
#include "topologies/network_graph.hpp"

#include <cstdio>
#include <exception>
#include <fstream>

int main(int argc, char** argv)
{
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s CONFIG HOSTFILE\n", argv[0]);
    return 2;
  }
  try {
    const sparsim::ExperimentConfig config = sparsim::load_config(argv[1]);
    const sparsim::NetworkGraph graph = config.topology->graph();
    std::ofstream hostfile(argv[2]);
    for (std::size_t node : config.rank_nodes())
      hostfile << graph.vertex_name(node) << '\n';
    if (!hostfile.flush())
      throw std::runtime_error(std::string("cannot write ") + argv[2]);
    for (const std::string& option : sparsim::simgrid_options(
             sparsim::network_model(config.network.model).simgrid_model, config.network.crosstraffic))
      std::printf("%s\n", option.c_str());
  } catch (const sparsim::ConfigError& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return 2;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "sparsim_smpi_setup: %s\n", error.what());
    return 1;
  }
  return 0;
}
