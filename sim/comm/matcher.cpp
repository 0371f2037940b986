#include "sim/comm/matcher.hpp"

#include <utility>

namespace sparsim {
namespace {
std::uint64_t match_key(RankId source, Tag tag) { return (static_cast<std::uint64_t>(source) << 32) | tag; }
} // namespace

Pairing Matcher::pair_half(Queues& theirs, Queues& ours, std::uint64_t key, MessagePtr fresh)
{
  auto waiting = theirs.find(key);
  if (waiting == theirs.end()) {
    Queue& queue = ours[key];
    (queue.oldest ? queue.later.emplace_back() : queue.oldest) = fresh;
    return {std::move(fresh), false};
  }
  Queue& queue = waiting->second;
  MessagePtr message = std::move(queue.oldest);
  if (queue.later.empty()) {
    theirs.erase(waiting);
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
