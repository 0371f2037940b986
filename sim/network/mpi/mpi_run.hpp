// A real MPI run as a NetworkRun (sim/network/models/network_model.hpp) and the ProcessGroup of its processes:
// this process runs one rank, its rank of MPI_COMM_WORLD, on the MpiTransport. No link is observed (no link
// loads); the manifest records the MPI library and whether compute charges were slept.
#pragma once

#include "sim/comm/process_group.hpp"
#include "sim/network/models/network_model.hpp"
#include "sim/network/mpi/transport.hpp"

#include <mpi.h>

#include <string>

namespace sparsim {

class MpiRun : public NetworkRun, public ProcessGroup {
public:
  // `ranks`: the config's ranks, which must equal the processes of MPI_COMM_WORLD (checked by the caller).
  MpiRun(int ranks, MpiTransportOptions options);

  Transport& transport() override { return transport_; }
  const LinkLoadCounter& link_loads() const override { return no_link_loads_; }
  // Runs body(this process's rank). An exception there ends the run: the caller aborts every process.
  int run_ranks(const std::function<void(RankId)>& body) override;
  nlohmann::json manifest_fields() const override;
  ProcessGroup* processes() override { return this; }

  RankId rank() const override { return rank_; }
  std::vector<std::vector<std::byte>> gather(std::span<const std::byte> bytes) override;
  void sum(std::span<double> values) override;

private:
  RankId rank_ = 0;
  int ranks_;
  MpiTransport transport_;
  LinkLoadCounter no_link_loads_;
};

// The MPI library's version text (MPI_Get_library_version), its first line.
std::string mpi_library_version();

} // namespace sparsim
