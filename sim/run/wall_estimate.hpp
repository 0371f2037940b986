// How long a run will take on the host, estimated before it starts (sparsim validate): the messages it will
// post (each algorithm's closed-form count, ClosedForm::messages) and its wall time from per-message and
// per-entry costs measured on this project's 2-core machine (docs/benchmarks.md, "Wall-time estimate").
//
// LIMITATIONS: a rough figure, within about a factor of 3 on the configs measured. The host cost per message
// grows with P (cache and TLB misses over the ranks' stacks: 2 us at P = 1024 to 6 us at P = 4096 for the
// link-level ring) and with contention under SimGrid's flows; the constants are medians at P = 256.
#pragma once

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

WallEstimate estimate_wall_time(const ExperimentConfig& config, int threads);

} // namespace sparsim
