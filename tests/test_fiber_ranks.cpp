// The fiber rank runtime (sim/network/fibers/): the order in which ranks run, wakes that come before the park,
// ranks that wait forever, failures named by rank, stack overflows caught by the canary, and the link-level
// transport's clock with its ranks as fibers (no SimGrid engine in this process).
#include "sim/base/json_reader.hpp"
#include "sim/comm/matcher.hpp"
#include "sim/network/fibers/fiber_ranks.hpp"
#include "sim/network/link_level/transport.hpp"
#include "sim/network/models/link_slots.hpp"
#include "topologies/network_graph.hpp"
#include "topologies/topology.hpp"
#include "topology_specs.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace sparsim;

constexpr std::size_t kStack = 64 * 1024;

TEST(FiberRanks, RanksStartInRankOrderAndRunAgainInTheOrderTheyWereUnparked)
{
  FiberRanks fibers(4, kStack);
  std::vector<std::string> log;
  const int finished = fibers.run([&](RankId rank) {
    log.push_back("start " + std::to_string(rank));
    if (rank == 3) {
      fibers.unpark({2, 0, 1}); // they run once rank 3 returns, in this order
      return;
    }
    fibers.park(rank);
    log.push_back("woke " + std::to_string(rank));
  });
  EXPECT_EQ(finished, 4);
  EXPECT_EQ(log, (std::vector<std::string>{"start 0", "start 1", "start 2", "start 3", "woke 2", "woke 0", "woke 1"}));
}

TEST(FiberRanks, AParkAfterItsUnparkReturnsAtOnce)
{
  FiberRanks fibers(2, kStack);
  std::vector<std::string> log;
  const int finished = fibers.run([&](RankId rank) {
    if (rank == 0) {
      fibers.unpark({1}); // rank 1 has not run yet
      fibers.park(0);     // nobody wakes rank 0 again: it waits forever
      log.push_back("rank 0 woke");
      return;
    }
    fibers.park(1);
    log.push_back("rank 1 passed its park");
  });
  EXPECT_EQ(finished, 1);
  EXPECT_EQ(log, (std::vector<std::string>{"rank 1 passed its park"}));
}

// What a rank holds on its stack is destroyed when the rank is unwound.
struct CountsDestruction {
  int& count;
  ~CountsDestruction() { ++count; }
};

TEST(FiberRanks, RanksThatWaitForeverAreUnwoundAndNotCounted)
{
  FiberRanks fibers(3, kStack);
  int destroyed = 0;
  const int finished = fibers.run([&](RankId rank) {
    const CountsDestruction held{destroyed};
    if (rank != 1)
      fibers.park(rank);
  });
  EXPECT_EQ(finished, 1);
  EXPECT_EQ(destroyed, 3); // rank 1's on return, ranks 0 and 2's when unwound
}

TEST(FiberRanks, AFailureNamesItsRankAndStopsEveryOtherRank)
{
  FiberRanks fibers(3, kStack);
  int destroyed = 0;
  bool rank_2_ran = false;
  try {
    fibers.run([&](RankId rank) {
      const CountsDestruction held{destroyed};
      if (rank == 0)
        fibers.park(0);
      else if (rank == 1)
        throw std::logic_error("a broken invariant");
      rank_2_ran = true;
    });
    FAIL() << "the failure was not rethrown";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "rank 1: a broken invariant");
  }
  EXPECT_EQ(destroyed, 2); // rank 1's and the unwound rank 0's
  EXPECT_FALSE(rank_2_ran);
}

TEST(FiberRanks, ConfigErrorsPassUnchanged)
{
  FiberRanks fibers(2, kStack);
  try {
    fibers.run([&](RankId rank) {
      if (rank == 1)
        throw ConfigError("algorithm.teams", "3", "a divisor of ranks");
    });
    FAIL() << "the failure was not rethrown";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), "algorithm.teams");
  }
}

// Calls itself, in frames of a little over 128 bytes, until a frame lies below the address `limit`.
int recurse_below(std::uintptr_t limit)
{
  volatile char frame[128];
  frame[0] = 1;
  if (reinterpret_cast<std::uintptr_t>(&frame[0]) < limit)
    return frame[0];
  return recurse_below(limit) + frame[0];
}

TEST(FiberRanks, AStackOverflowEndsTheRunWithAnErrorNamingTheRank)
{
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer stops the overflow itself, at its first write into the redzones of rank 0's frames below.
  GTEST_SKIP() << "AddressSanitizer reports the overflow (stack-buffer-underflow) before the canary can";
#endif
  FiberRanks fibers(3, 16 * 1024);
  bool rank_2_ran = false;
  try {
    fibers.run([&](RankId rank) {
      if (rank == 1) { // 22 KiB down a 16 KiB stack and its page of slack: into the top of rank 0's stack
        const char here = 0;
        (void)recurse_below(reinterpret_cast<std::uintptr_t>(&here) - 22 * 1024);
      }
      if (rank == 2)
        rank_2_ran = true;
      fibers.park(rank);
    });
    FAIL() << "the overflow was not reported";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), "network.fiber_stack");
    EXPECT_NE(std::string(e.what()).find("rank 1 overflowed its fiber stack"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(rank_2_ran); // no rank runs after the overflow is seen
}

TEST(FiberRanks, TheDeepestStackReachIsMeasuredToThePage)
{
  FiberRanks fibers(4, 128 * 1024);
  fibers.run([&](RankId rank) {
    if (rank == 2) { // 40 KiB below its first frame
      const char here = 0;
      (void)recurse_below(reinterpret_cast<std::uintptr_t>(&here) - 40 * 1024);
    }
    fibers.park(rank);
  });
  const FiberRanks::StackReach reach = fibers.deepest_stack_reach();
  EXPECT_EQ(reach.rank, 2);
  // The body's first frame lies a little below the stack's top; the reach counts whole pages.
  EXPECT_GE(reach.bytes, 40 * 1024);
  EXPECT_LE(reach.bytes, 40 * 1024 + 8 * 1024);
}

// The link-level transport on a star of `P` nodes, its ranks as fibers.
struct LinkLevelFibersOnAStar {
  explicit LinkLevelFibersOnAStar(int P)
      : topology(parse_topology(JsonReader(sparsim::testing::star_spec(P), "topology"), "."))
      , graph(topology->graph())
      , fibers(P, kStack)
      , transport(P, fibers, link_slot_specs(graph),
                  link_route(*topology, sparsim::testing::first_nodes(static_cast<std::size_t>(P)), graph.edge_count()))
  {
  }
  std::unique_ptr<Topology> topology;
  NetworkGraph graph;
  FiberRanks fibers;
  LinkLevelTransport transport;
};

// A receive whose send never comes: the run ends and that rank is not counted (the driver's deadlock error).
// Unlike SimGrid's actors, the fibers' unwinding runs under the address sanitizer too.
TEST(LinkLevelTransportOnFibers, UnmatchedReceiveEndsTheRunWithThatRankUnfinished)
{
  LinkLevelFibersOnAStar star(2);
  Matcher matcher(2);
  const int finished = star.fibers.run([&](RankId rank) {
    if (rank == 0) {
      MessagePtr receive = star.transport.post_receive(
          [&](MessagePtr fresh) { return matcher.pair_receive(0, 1, 7, std::move(fresh)); }, 0, 1, 7);
      star.transport.wait(*receive, true);
    } else {
      star.transport.sleep_for(1, 1e-3);
    }
    star.transport.rank_finished(rank);
  });
  EXPECT_EQ(finished, 1);
  EXPECT_DOUBLE_EQ(star.transport.now(), 1e-3);
}

TEST(LinkLevelTransportOnFibers, SleepsAndBarriersKeepTime)
{
  LinkLevelFibersOnAStar star(3);
  std::vector<Seconds> left(3, -1);
  const int finished = star.fibers.run([&](RankId rank) {
    star.transport.sleep_for(rank, 0.5 * (rank + 1));
    star.transport.align_ranks(rank);
    left[rank] = star.transport.now();
    star.transport.rank_finished(rank);
  });
  EXPECT_EQ(finished, 3);
  for (Seconds t : left)
    EXPECT_DOUBLE_EQ(t, 1.5);
}

} // namespace
