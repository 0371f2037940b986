// The processes a run's ranks are spread over. A simulation runs every rank in one process and has no group; a
// real MPI run (sparsim-mpi, sim/network/mpi/) runs one rank per process, and the driver gathers what the ranks
// recorded into process 0, which checks the results and writes the outputs.
#pragma once

#include "sim/base/units.hpp"

#include <cstddef>
#include <span>
#include <vector>

namespace sparsim {

class ProcessGroup {
public:
  virtual ~ProcessGroup() = default;
  // The rank this process runs.
  virtual RankId rank() const = 0;
  // Every process's `bytes`, in rank order, at process 0; nothing elsewhere. Every process must call it.
  virtual std::vector<std::vector<std::byte>> gather(std::span<const std::byte> bytes) = 0;
  // `values` summed element by element over the processes, in every process. Every process must call it.
  virtual void sum(std::span<double> values) = 0;
};

} // namespace sparsim
