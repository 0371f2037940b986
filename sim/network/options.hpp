// The config's "network" object: which network model moves the messages, and its settings.
#pragma once

#include <string>

namespace sparsim {

// The network model and its settings (docs/config.md, docs/network-models.md). "CM02", "LV08" and "SMPI" are
// SimGrid's flow models, every message one max-min flow (CM02 without cross traffic: a lone message costs
// exactly latency + size / bandwidth, contended links are shared max-min fairly); "LinkFIFO" is the
// link-level FIFO model, which times messages itself (sim/network/link_fifo/), much faster at scale.
struct NetworkOptions {
  static constexpr const char* kLinkFifo = "LinkFIFO";
  std::string model = "CM02";
  bool crosstraffic = false;

  // Whether SimGrid's flows time the messages (otherwise the link-level FIFO model does).
  bool simgrid_flows() const { return model != kLinkFifo; }
};

} // namespace sparsim
