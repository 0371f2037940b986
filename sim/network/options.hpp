// The config's "network" object: which network model moves the messages, and its settings.
#pragma once

#include <string>

namespace sparsim {

// The network model and its settings (docs/config.md, docs/network-models.md). "CM02", "LV08" and "SMPI" are
// SimGrid's flow models, every message one max-min flow (CM02 without cross traffic: a lone message costs
// exactly latency + size / bandwidth, contended links are shared max-min fairly); "LinkLevel" is the
// link-level model, which times messages itself (sim/network/link_level/), much faster at scale.
struct NetworkOptions {
  static constexpr const char* kLinkLevel = "LinkLevel";
  std::string model = "CM02";
  bool crosstraffic = false;

  // Whether SimGrid's flows time the messages (otherwise the link-level model does).
  bool simgrid_flows() const { return model != kLinkLevel; }
};

} // namespace sparsim
