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
    ours[key].push_back(fresh);
    return {std::move(fresh), false};
  }
  MessagePtr message = std::move(waiting->second.front());
  waiting->second.erase(waiting->second.begin());
  if (waiting->second.empty())
    theirs.erase(waiting);
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
