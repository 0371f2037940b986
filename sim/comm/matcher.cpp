#include "sim/comm/matcher.hpp"

#include <bit>
#include <utility>

namespace sparsim {
namespace {
std::uint64_t match_key(RankId source, Tag tag) { return (static_cast<std::uint64_t>(source) << 32) | tag; }
} // namespace

Matcher::Queues::Entry* Matcher::Queues::find(std::uint64_t key)
{
  if (used_ == 0)
    return nullptr;
  const std::size_t mask = entries_.size() - 1;
  for (std::size_t i = home(key);; i = (i + 1) & mask) {
    if (entries_[i].key == key)
      return &entries_[i];
    if (entries_[i].key == kNoKey)
      return nullptr;
  }
}

Matcher::Queues::Entry& Matcher::Queues::add(std::uint64_t key)
{
  if (2 * (used_ + 1) > entries_.size())
    grow();
  const std::size_t mask = entries_.size() - 1;
  std::size_t i = home(key);
  while (entries_[i].key != kNoKey)
    i = (i + 1) & mask;
  entries_[i].key = key;
  ++used_;
  return entries_[i];
}

void Matcher::Queues::remove(Entry& entry)
{
  // Backward shift: move each later entry of the probe run into the hole when its home allows it.
  const std::size_t mask = entries_.size() - 1;
  std::size_t hole = static_cast<std::size_t>(&entry - entries_.data());
  for (std::size_t i = (hole + 1) & mask; entries_[i].key != kNoKey; i = (i + 1) & mask) {
    const std::size_t wanted = home(entries_[i].key);
    // The entry at i may fill the hole if its home is not in (hole, i] (cyclically).
    if (((i - wanted) & mask) >= ((i - hole) & mask)) {
      entries_[hole] = std::move(entries_[i]);
      hole = i;
    }
  }
  entries_[hole].key = kNoKey;
  entries_[hole].queue = Queue{};
  --used_;
  if (used_ == 0 && entries_.size() > kKeptCapacity)
    entries_ = std::vector<Entry>(); // a burst of keys (an incast) leaves no large table behind
}

void Matcher::Queues::grow()
{
  std::vector<Entry> old = std::move(entries_);
  const std::size_t capacity = old.empty() ? 8 : 2 * old.size();
  entries_ = std::vector<Entry>(capacity);
  shift_ = 64 - std::countr_zero(capacity);
  used_ = 0;
  for (Entry& entry : old)
    if (entry.key != kNoKey)
      add(entry.key).queue = std::move(entry.queue);
}

Pairing Matcher::pair_half(Queues& theirs, Queues& ours, std::uint64_t key, MessagePtr fresh)
{
  Queues::Entry* waiting = theirs.find(key);
  if (!waiting) {
    Queues::Entry* entry = ours.find(key);
    Queue& queue = entry ? entry->queue : ours.add(key).queue;
    (queue.oldest ? queue.later.emplace_back() : queue.oldest) = fresh;
    return {std::move(fresh), false};
  }
  Queue& queue = waiting->queue;
  MessagePtr message = std::move(queue.oldest);
  if (queue.later.empty()) {
    theirs.remove(*waiting);
  } else {
    queue.oldest = std::move(queue.later.front());
    queue.later.erase(queue.later.begin());
  }
  return {std::move(message), true};
}

Pairing Matcher::pair_send(RankId source, RankId dest, Tag tag, MessagePtr fresh)
{
  Inbox& inbox = inboxes_[dest];
  return pair_half(inbox.unmatched_receives, inbox.unmatched_sends, match_key(source, tag), std::move(fresh));
}

Pairing Matcher::pair_receive(RankId dest, RankId source, Tag tag, MessagePtr fresh)
{
  Inbox& inbox = inboxes_[dest];
  return pair_half(inbox.unmatched_sends, inbox.unmatched_receives, match_key(source, tag), std::move(fresh));
}

} // namespace sparsim
