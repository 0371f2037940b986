// Matching sends to receives: exactly by (source, tag), oldest first, per receiving rank. (SimGrid's own
// mailboxes match any source in FIFO order, which makes all-to-all phases fragile.)
#pragma once

#include "sim/comm/transport.hpp"

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace sparsim {

class Matcher {
public:
  explicit Matcher(int ranks)
      : inboxes_(static_cast<std::size_t>(ranks))
  {
  }

  // A send from `source` to `dest` under `tag` takes the oldest receive `dest` posted for (source, tag);
  // without one, `fresh` is filed as an unmatched send.
  Pairing pair_send(RankId source, RankId dest, Tag tag, MessagePtr fresh);
  // A receive by `dest` from `source` under `tag` takes the oldest such send; else `fresh` is filed.
  Pairing pair_receive(RankId dest, RankId source, Tag tag, MessagePtr fresh);

private:
  // The halves waiting under one key, oldest first: the oldest inline (most keys have one at a time), the
  // others after it.
  struct Queue {
    MessagePtr oldest;
    std::vector<MessagePtr> later;
  };
  // By (source, tag); for one key at most one of the two queues of an inbox is non-empty.
  using Queues = std::unordered_map<std::uint64_t, Queue>;
  struct Inbox {
    Queues unmatched_sends;
    Queues unmatched_receives;
  };
  static Pairing pair_half(Queues& theirs, Queues& ours, std::uint64_t key, MessagePtr fresh);

  std::vector<Inbox> inboxes_; // [receiving rank]
};

} // namespace sparsim
