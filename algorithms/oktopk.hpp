// Ok-Topk's split schedule, exposed for tests: in step s (1..P-1) rank r sends to `dest` and receives from
// `source`. With rotation (the shared rotated_step, algorithms/steps.hpp) every step is a permutation (no rank
// receives two messages in one step).
#pragma once

#include "algorithms/steps.hpp"
#include "sim/base/units.hpp"

namespace sparsim {

using SplitStep = ExchangeStep;
SplitStep oktopk_split_step(RankId r, int ranks, int step, bool rotation);

} // namespace sparsim
