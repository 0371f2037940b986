// Link loads (links.csv): every message adds its bytes, when its send is posted, to each link of its route.
// Links are numbered by the caller as "slots" (the driver: each direction of each graph link, then the
// loopback; sim/run/link_labels.hpp), so this counter knows no topology and no network model.
#pragma once

#include "sim/base/units.hpp"

#include <cstddef>
#include <cstdint>
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

// The links a message crosses: find(source, dest, message, slots) appends the slots of the route of the
// message from rank `source` to rank `dest` that is the source's message number `message` (its count of sends
// before it). per_message: routes differ from message to message (Valiant routing), not only by the pair.
//
// Adaptive routing (`alternatives` > 0): find gives the minimal route, alternative(source, dest, message, c,
// slots) the non-minimal candidate c (0 <= c < alternatives), and the network model picks one of them when the
// transfer starts, by the load it sees then; a non-minimal one only when its predicted finish is below
// (1 - minimal_bias) times the minimal route's. The link loads then count the route the model chose.
struct LinkRoute {
  using Find = std::function<void(RankId source, RankId dest, std::uint64_t message, std::vector<std::size_t>& slots)>;
  using Alternative = std::function<void(RankId source, RankId dest, std::uint64_t message, std::size_t candidate,
                                         std::vector<std::size_t>& slots)>;
  Find find;
  bool per_message = false;
  Alternative alternative;
  std::size_t alternatives = 0;
  double minimal_bias = 0;
  explicit operator bool() const { return static_cast<bool>(find); }
  bool chosen_at_start() const { return alternatives > 0; }
};

class LinkLoadCounter {
public:
  // Without a route nothing is counted.
  LinkLoadCounter(int ranks, LinkRoute route, std::size_t slots);

  // Counts a message's bytes on its route and returns the route's slots (valid until the source's next message).
  // Empty, and nothing counted, without a route or when the network model chooses routes (count() then).
  std::span<const std::size_t> add(RankId source, RankId dest, Bytes bytes, int iteration);
  // Counts a message's bytes on the route the network model chose for it (adaptive routing).
  void count(std::span<const std::size_t> slots, Bytes bytes, int iteration);
  bool routes_chosen_at_start() const { return route_.chosen_at_start(); }
  const LinkRoute& route() const { return route_; }
  const std::vector<LinkLoad>& loads() const { return loads_; } // [slot]

private:
  LinkRoute route_;
  std::vector<LinkLoad> loads_;
  // Per source rank, its count of sends and the route to the destination it sent to last (every step of a
  // ring reuses it, unless routes are per message).
  struct LastRoute {
    RankId dest = -1;
    std::vector<std::size_t> slots;
  };
  std::vector<LastRoute> last_routes_;
  std::vector<std::uint64_t> sends_;
};

} // namespace sparsim
