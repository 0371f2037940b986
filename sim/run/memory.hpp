// Memory a run will need, estimated before it starts, so that a run that cannot fit is refused with the
// estimate in the message instead of dying out of memory half-way.
//
// Besides the data, every run holds the program, the platform and a part per rank (docs/scale.md). What
// dominates (docs/ARCHITECTURE.md, "Known limits"): sparse runs keep a dense residual of n floats per
// rank plus one shared gradient buffer; dense runs with real data keep n floats per rank plus the blocks in
// flight; verification keeps two n-long double vectors; selections are O(P k), messages are views of them,
// gathered results are shared; what grows with P^2 (a pointer per gathered part, a cut and a slice per region on
// every rank) each collective states itself (SparseAllreduce::held_memory).
#pragma once

#include "sim/run/config.hpp"

#include <cstdint>
#include <string>

namespace sparsim {

struct MemoryEstimate {
  double bytes = 0;
  std::string breakdown;    // "residuals 15.0GiB + selections 0.4GiB + ..."
  double records_bytes = 0; // of `bytes`, the per-iteration records (they grow with the iterations)
};
MemoryEstimate estimate_memory(const ExperimentConfig& config);

// Physical memory of this machine in bytes.
double physical_memory_bytes();
// Cores of this machine (at least 1): the default thread and job counts.
int machine_cores();

// Throws ConfigError (at "ranks", or at "iterations" when the per-iteration records are most of it) when the
// estimate exceeds 90% of physical memory.
void check_memory(const ExperimentConfig& config);

} // namespace sparsim
