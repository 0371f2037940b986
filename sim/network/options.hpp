// The config's "network" object: which network model moves the messages, and its settings.
#pragma once

#include <string>

namespace sparsim {

// SimGrid network model settings. CM02 without cross traffic makes a lone message cost exactly
// latency + size / bandwidth and shares contended links max-min fairly (see docs/config.md).
struct NetworkOptions {
  std::string model = "CM02";
  bool crosstraffic = false;
};

} // namespace sparsim
