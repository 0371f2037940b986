// How long a run will take on the host, estimated before it starts (sparsim validate): the messages it will
// post (each algorithm's closed-form count, ClosedForm::messages) and its wall time from per-message and
// per-entry costs measured on this project's 2-core machine (docs/benchmarks.md, "Wall-time estimate").
//
// LIMITATIONS: a rough figure, within about a factor of 3 on the configs measured. The host cost per message
// is measured at a few rank counts and interpolated (it grows with P: cache and TLB misses over the ranks'
// stacks, 1.7 us at P = 256 to 6 us at P = 4096 for the link-level ring); under SimGrid's flows it also grows
// with contention, which the estimate knows nothing of. The collectives' host work on the data is one cost per
// selected pair for every sparse algorithm.
#pragma once

#include "sim/network/models/network_model.hpp"
#include "sim/run/config.hpp"

#include <string>

namespace sparsim {

struct WallEstimate {
  double messages = 0; // posted by all ranks over the run
  double messages_per_iteration = 0;
  bool messages_upper_bound = false; // the counts are bounds (the algorithm's depends on the data)
  Seconds selection_stage = 0;       // host time preparing the sparse ranks' selections, on `threads` threads
  Seconds network = 0;               // host time of the simulation itself: messages, collectives' local work
  Seconds total() const { return selection_stage + network; }
};

// The estimate under the config's network model, or under `model` (validate prints the estimate under the
// model the config's is compared with beside it: NetworkModel::compared_with).
WallEstimate estimate_wall_time(const ExperimentConfig& config, int threads);
WallEstimate estimate_wall_time(const ExperimentConfig& config, int threads, const NetworkModel& model);

// Runs estimated above this get a warning from validate and when they start.
constexpr Seconds kLongRun = 3600;
// The warning for a run estimated above kLongRun ("" below it), from its estimates under its own network model
// (`wall`) and under the model it is compared with (`other`): the estimate, and the other model's when it is
// much shorter.
std::string long_run_warning(const ExperimentConfig& config, const WallEstimate& wall, const WallEstimate& other);

} // namespace sparsim
