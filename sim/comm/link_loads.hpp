// Link loads (links.csv): every message counts its bytes, when its send is posted, on each link of its route.
// Links are numbered by the caller as "slots" (the driver: each direction of each graph link, then the
// loopback; sim/run/link_labels.hpp), so this counter knows no topology and no network model.
#pragma once

#include "sim/base/units.hpp"

#include <array>
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
  std::span<const std::uint32_t> add(RankId source, RankId dest, Bytes bytes, int iteration);
  // Counts a message's bytes on the route the network model chose for it (adaptive routing).
  void count(std::span<const std::size_t> slots, Bytes bytes, int iteration);
  bool routes_chosen_at_start() const { return route_.chosen_at_start(); }
  const LinkRoute& route() const { return route_; }
  // [slot]: every message counted so far, the bytes still held per source (below) included.
  const std::vector<LinkLoad>& loads() const;

private:
  // A source's bytes on the route it used last are summed per source and added to that route's links only when
  // the source changes route, when the iteration changes (ranks align between iterations, so every source's
  // sums are then complete) or when the loads are read: a ring's steps touch one line per message instead of
  // one per link of its route. The sums are integers, so the order of adding them changes nothing.
  static constexpr std::size_t kInlineLinks = 8;
  struct alignas(64) LastRoute {
    RankId dest = -1;
    std::uint32_t length = 0; // links in the route: in `links` up to kInlineLinks, else in long_routes_[source]
    bool holding = false;     // it sent on the route in the latest iteration and its bytes are not added yet
    Bytes held_bytes = 0;
    std::uint64_t sends = 0; // the source's count of sends
    std::array<std::uint32_t, kInlineLinks> links{};
  };
  std::span<const std::uint32_t> links_of(RankId source) const;
  void add_held(RankId source) const;
  void add_every_held() const;
  void count_on(std::size_t slot, Bytes bytes, int iteration) const;

  LinkRoute route_;
  mutable std::vector<LinkLoad> loads_;
  mutable std::vector<LastRoute> last_routes_;          // [source rank]
  std::vector<std::vector<std::uint32_t>> long_routes_; // [source rank]: a route longer than kInlineLinks
  int latest_iteration_ = -1;                           // the iteration of the latest message (and of every held byte)
  std::vector<std::size_t> found_;                      // scratch: the route as the topology gives it
};

} // namespace sparsim
