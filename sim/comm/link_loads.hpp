// Link loads (links.csv): every message adds its bytes, when its send is posted, to each link of its route.
// Links are numbered by the caller as "slots" (the driver: each direction of each graph link, then the
// loopback; sim/run/link_labels.hpp), so this counter knows no topology and no network model.
#pragma once

#include "sim/base/units.hpp"

#include <cstddef>
#include <functional>
#include <span>
#include <vector>

namespace sparsim {

// Bytes one link carried: in all, and in the iteration that loaded it most.
struct LinkLoad {
  bool crossed = false; // some message crossed it (empty ones included)
  Bytes total = 0;
  Bytes iteration_max = 0;
  Bytes current = 0; // in iteration `current_iteration`, the latest to use the link
  int current_iteration = -1;
};

// Appends the slots of the links a message from rank `source` to rank `dest` crosses.
using LinkRoute = std::function<void(RankId source, RankId dest, std::vector<std::size_t>& slots)>;

class LinkLoadCounter {
public:
  // Without a route nothing is counted.
  LinkLoadCounter(int ranks, LinkRoute route, std::size_t slots);

  // Returns the route's slots (valid until the source's next message; empty without a route).
  std::span<const std::size_t> add(RankId source, RankId dest, Bytes bytes, int iteration);
  const std::vector<LinkLoad>& loads() const { return loads_; } // [slot]

private:
  LinkRoute route_;
  std::vector<LinkLoad> loads_;
  // Per source rank, the route to the destination it sent to last (every step of a ring reuses it).
  struct LastRoute {
    RankId dest = -1;
    std::vector<std::size_t> slots;
  };
  std::vector<LastRoute> last_routes_;
};

} // namespace sparsim
