// Matching sends to receives: exactly by (source, tag), oldest first, per receiving rank. (SimGrid's own
// mailboxes match any source in FIFO order, which makes all-to-all phases fragile.)
#pragma once

#include "sim/comm/transport.hpp"

#include <cstdint>
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
  // The queues of one inbox by key (source, tag): open addressing with linear probing in a power-of-two table
  // at most half full, entries removed by shifting their successors back (no tombstones). An inbox holds a
  // few keys at a time (a wave's sources), so a lookup touches one or two cache lines and filing a half
  // allocates nothing.
  class Queues {
  public:
    static constexpr std::uint64_t kNoKey = ~std::uint64_t{0}; // no (source >= 0, tag) pair has it
    static constexpr std::size_t kKeptCapacity = 64;           // an emptied table larger than this is freed
    struct Entry {
      std::uint64_t key = kNoKey;
      Queue queue;
    };
    Entry* find(std::uint64_t key); // null when absent
    Entry& add(std::uint64_t key);  // key not present
    void remove(Entry& entry);

  private:
    std::size_t home(std::uint64_t key) const { return (key * 0x9E3779B97F4A7C15ULL) >> shift_; }
    void grow();

    std::vector<Entry> entries_;
    std::size_t used_ = 0;
    int shift_ = 64;
  };
  // For one key at most one of the two is non-empty.
  struct Inbox {
    Queues unmatched_sends;
    Queues unmatched_receives;
  };
  static Pairing pair_half(Queues& theirs, Queues& ours, std::uint64_t key, MessagePtr fresh);

  std::vector<Inbox> inboxes_; // [receiving rank]
};

} // namespace sparsim
