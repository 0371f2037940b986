// The config's "network" object: which network model moves the messages, and its settings.
#pragma once

#include <cstddef>
#include <string>

namespace sparsim {

// The network model and its settings (docs/config.md, docs/network-models.md). "CM02", "LV08" and "SMPI" are
// SimGrid's flow models, every message one max-min flow (CM02 without cross traffic: a lone message costs
// exactly latency + size / bandwidth, contended links are shared max-min fairly); "LinkLevel" is the
// link-level model, which times messages itself (sim/network/link_level/), much faster at scale.
struct NetworkOptions {
  static constexpr const char* kLinkLevel = "LinkLevel";
  // Rank runtimes: SimGrid's actors (needed by SimGrid's flows), or the project's fibers (sim/network/fibers/,
  // the link-level model only, and its default). Both run the same rank code and give the same results.
  static constexpr const char* kSimGridActors = "simgrid";
  static constexpr const char* kFibers = "fibers";
  // Each fiber's stack: what the deepest rank code needs (between 16 and 32 KiB, the SimGrid actors' measure in
  // engine.cpp) with room to spare; only the pages a rank reaches are made present.
  static constexpr std::size_t kDefaultFiberStack = 256 * 1024;
  static constexpr std::size_t kMinFiberStack = 16 * 1024;
  static constexpr std::size_t kMaxFiberStack = 64 * 1024 * 1024;
  std::string model = "CM02";
  bool crosstraffic = false;
  std::string runtime = kSimGridActors;
  std::size_t fiber_stack = kDefaultFiberStack;

  // Whether the ranks run as fibers (otherwise as SimGrid actors): then SimGrid does not run at all.
  bool fibers() const { return runtime == kFibers; }
};

// A runtime for people: "fibers", "SimGrid actors".
inline std::string runtime_description(const std::string& runtime)
{
  return runtime == NetworkOptions::kFibers ? "fibers" : "SimGrid actors";
}

} // namespace sparsim
