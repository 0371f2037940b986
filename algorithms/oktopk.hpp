// Ok-Topk's split schedule, exposed for tests: in step s (1..P-1) rank r sends to `dest` and receives from
// `source`. With rotation every step is a permutation (no rank receives two messages in one step).
#pragma once

#include "sim/base/units.hpp"

#include <utility>

namespace sparsim {

struct SplitStep {
  RankId dest;
  RankId source;
};
SplitStep oktopk_split_step(RankId r, int ranks, int step, bool rotation);

}  // namespace sparsim
