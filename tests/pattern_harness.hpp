// Runs a traffic pattern (messages posted wave by wave) on a Transport, as the network model tests do.
#pragma once

#include "sim/comm/matcher.hpp"
#include "sim/comm/transport.hpp"
#include "sim/network/simgrid/engine.hpp"

#include <simgrid/s4u/Host.hpp>

#include <algorithm>
#include <vector>

namespace sparsim::testing {

// One message of a pattern. A rank posts its messages wave by wave: all of wave w at once, then it waits for
// them all before posting wave w + 1 (as the algorithms' exchanges in waves do).
struct PatternMessage {
  RankId source = 0;
  RankId dest = 0;
  Bytes bytes = 0;
  int wave = 0;
};

// When each message's receive completed, from the pattern's start, under one network model.
std::vector<Seconds> run_pattern(Transport& transport, const std::vector<simgrid::s4u::Host*>& rank_hosts,
                                 const std::vector<PatternMessage>& messages)
{
  const int P = static_cast<int>(rank_hosts.size());
  Matcher matcher(P);
  std::vector<Seconds> arrival(messages.size(), -1);
  int waves = 0;
  for (const auto& m : messages)
    waves = std::max(waves, m.wave + 1);
  const Seconds start = transport.now();
  run_rank_actors(rank_hosts, [&](RankId rank) {
    for (int wave = 0; wave < waves; ++wave) {
      std::vector<std::pair<std::size_t, MessagePtr>> receives;
      std::vector<MessagePtr> sends;
      for (std::size_t i = 0; i < messages.size(); ++i) {
        const PatternMessage& m = messages[i];
        const Tag tag = static_cast<Tag>(i);
        if (m.wave != wave)
          continue;
        if (m.source == rank)
          sends.push_back(transport.post_send(
              [&](MessagePtr fresh) { return matcher.pair_send(m.source, m.dest, tag, std::move(fresh)); },
              Outgoing{.source = m.source, .dest = m.dest, .bytes = m.bytes, .payload = nullptr}));
        if (m.dest == rank)
          receives.emplace_back(
              i, transport.post_receive(
                     [&](MessagePtr fresh) { return matcher.pair_receive(m.dest, m.source, tag, std::move(fresh)); },
                     rank, m.source, tag));
      }
      for (auto& [index, message] : receives) {
        transport.wait(*message, true);
        arrival[index] = transport.now() - start;
      }
      for (auto& message : sends)
        transport.wait(*message, false);
    }
    transport.rank_finished(rank);
  });
  return arrival;
}

} // namespace sparsim::testing
