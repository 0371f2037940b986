// The link-level model (sim/network/link_level/) against its own arithmetic and against SimGrid's flow
// model (CM02, no cross traffic), the reference: lone messages exactly, contended patterns on their makespan.
#include "pattern_harness.hpp"
#include "sim/comm/matcher.hpp"
#include "sim/network/link_level/link_model.hpp"
#include "sim/network/link_level/transport.hpp"
#include "sim/network/models/link_slots.hpp"
#include "sim/network/simgrid/engine.hpp"
#include "sim/network/simgrid/parking.hpp"
#include "sim/network/simgrid/transport.hpp"
#include "sim/network/simgrid/zone.hpp"
#include "topologies/network_graph.hpp"
#include "topologies/topology.hpp"
#include "topology_specs.hpp"

#include <gtest/gtest.h>
#include <simgrid/s4u/Actor.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/NetZone.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <memory>
#include <nlohmann/json.hpp>

namespace {

using nlohmann::json;
using namespace sparsim;

// --- The model's arithmetic ------------------------------------------------------------------------------

// Runs the model until nothing is in flight; returns each flow's arrival, by the order the flows were started.
std::vector<Seconds> run_flows(LinkSharingModel& model, const std::vector<LinkSharingModel::FlowId>& started)
{
  std::vector<Seconds> arrival(started.size(), -1);
  std::vector<LinkSharingModel::FlowId> arrived;
  while (model.next_event() < LinkSharingModel::kNever) {
    const Seconds now = model.next_event();
    arrived.clear();
    model.handle_next_event(arrived);
    for (auto flow : arrived)
      for (std::size_t i = 0; i < started.size(); ++i)
        if (started[i] == flow && arrival[i] < 0)
          arrival[i] = now;
  }
  return arrival;
}

TEST(LinkSharingModel, LoneMessageTakesRouteLatencyPlusSizeOverBottleneck)
{
  LinkSharingModel model(std::vector<LinkSpec>{
      {.bandwidth = 10e9, .latency = 1e-6}, {.bandwidth = 4e9, .latency = 2e-6}, {.bandwidth = 10e9, .latency = 3e-6}});
  const auto arrival = run_flows(model, {model.start(5.0, 1'000'000, {0, 1, 2})});
  EXPECT_DOUBLE_EQ(arrival[0], 5.0 + 6e-6 + 1e6 / 4e9);
}

TEST(LinkSharingModel, FlowsJoiningALinkTogetherShareItAndFinishTogether)
{
  // Incast 3 -> 1 over each sender's own link (0, 1, 2) into the receiver's link 3.
  LinkSharingModel model(
      std::vector<LinkSpec>{{.bandwidth = 1e9}, {.bandwidth = 1e9}, {.bandwidth = 1e9}, {.bandwidth = 1e9}});
  const auto arrival =
      run_flows(model, {model.start(0, 1000, {0, 3}), model.start(0, 1000, {1, 3}), model.start(0, 1000, {2, 3})});
  for (Seconds t : arrival)
    EXPECT_DOUBLE_EQ(t, 3e-6);
}

TEST(LinkSharingModel, UnequalFlowsLeaveInOrderOfSize)
{
  // Processor sharing of one link: 1000 B and 3000 B together; the small one leaves after 2 x 1000 B have
  // been served (2 us), the large one is then alone for its last 2000 B (2 us more).
  LinkSharingModel model(std::vector<LinkSpec>{{.bandwidth = 1e9}});
  const auto arrival = run_flows(model, {model.start(0, 1000, {0}), model.start(0, 3000, {0})});
  EXPECT_DOUBLE_EQ(arrival[0], 2e-6);
  EXPECT_DOUBLE_EQ(arrival[1], 4e-6);
}

TEST(LinkSharingModel, LaterFlowTakesItsShareFromWhenItJoins)
{
  // 2000 B alone for 1 us (1000 B served), then shared with a 500 B flow: both at 0.5 GB/s until the small
  // one leaves at 2 us, then the first finishes its last 500 B alone at 2.5 us.
  LinkSharingModel model(std::vector<LinkSpec>{{.bandwidth = 1e9}});
  const auto first = model.start(0, 2000, {0});
  std::vector<LinkSharingModel::FlowId> arrived;
  ASSERT_DOUBLE_EQ(model.next_event(), 0); // the first joins
  model.handle_next_event(arrived);
  const auto second = model.start(1e-6, 500, {0});
  const auto arrival = run_flows(model, {first, second});
  EXPECT_DOUBLE_EQ(arrival[1], 2e-6);
  EXPECT_DOUBLE_EQ(arrival[0], 2.5e-6);
}

TEST(LinkSharingModel, FastLinkCarriesSlowerFlowsAtTheirOwnRate)
{
  // Four node links of 1 GB/s into one 4 GB/s uplink: each flow's share there is its node rate.
  LinkSharingModel model(
      {{.bandwidth = 1e9}, {.bandwidth = 1e9}, {.bandwidth = 1e9}, {.bandwidth = 1e9}, {.bandwidth = 4e9}});
  std::vector<LinkSharingModel::FlowId> flows;
  for (std::size_t node = 0; node < 4; ++node)
    flows.push_back(model.start(0, 1000, {node, 4}));
  for (Seconds t : run_flows(model, flows))
    EXPECT_DOUBLE_EQ(t, 1e-6);
}

TEST(LinkSharingModel, UnsharedLinkNeverMakesMessagesWait)
{
  LinkSharingModel model(std::vector<LinkSpec>{{.bandwidth = kLoopbackBandwidth, .latency = 0, .shared = false}});
  const auto arrival = run_flows(model, {model.start(0, 10'000, {0}), model.start(0, 10'000, {0})});
  EXPECT_DOUBLE_EQ(arrival[0], 1e-6);
  EXPECT_DOUBLE_EQ(arrival[1], 1e-6);
}

TEST(LinkSharingModel, EmptyMessagePaysOnlyTheLatency)
{
  LinkSharingModel model(
      std::vector<LinkSpec>{{.bandwidth = 1e9, .latency = 2e-6}, {.bandwidth = 1e9, .latency = 0, .shared = false}});
  const auto arrival = run_flows(model, {model.start(1.0, 0, {0}), model.start(1.0, 0, {1})});
  EXPECT_DOUBLE_EQ(arrival[0], 1.0 + 2e-6);
  EXPECT_DOUBLE_EQ(arrival[1], 1.0);
}

TEST(LinkSharingModel, RateIsBoundedByTheTcpWindowOverTwiceTheLatency)
{
  // 1 ms of latency: the window bound, 4194304 B / 2 ms = 2.1 GB/s, is below the 10 GB/s link.
  LinkSharingModel model(std::vector<LinkSpec>{{.bandwidth = 10e9, .latency = 1e-3}});
  const double bytes = 1e8;
  const auto arrival = run_flows(model, {model.start(0, static_cast<Bytes>(bytes), {0})});
  EXPECT_DOUBLE_EQ(arrival[0], 1e-3 + bytes / (kTcpGammaBytes / 2e-3));
}

TEST(LinkSharingModel, RejectsLinksWithoutBandwidth)
{
  EXPECT_THROW(LinkSharingModel(std::vector<LinkSpec>{{.bandwidth = 0}}), std::invalid_argument);
}

// The bytes about to join a link are kept only for a model that predicts (adaptive routing): a prediction from
// one that does not would miss them, so it is refused. One that does counts them.
TEST(LinkSharingModel, PredictsOnlyWhenMadeToAndCountsTheBytesAboutToJoin)
{
  LinkSharingModel plain(std::vector<LinkSpec>{{.bandwidth = 1e9, .latency = 1e-6}});
  EXPECT_THROW(plain.predicted_time(0, 1000, {0}), std::logic_error);

  LinkSharingModel predicting(std::vector<LinkSpec>{{.bandwidth = 1e9, .latency = 1e-6}}, true);
  EXPECT_DOUBLE_EQ(predicting.predicted_time(0, 1000, {0}), 1e-6 + 1000 / 1e9);
  predicting.start(0, 4000, {0}); // joins at 1 us: until then its bytes are about to join
  EXPECT_DOUBLE_EQ(predicting.predicted_time(0, 1000, {0}), 1e-6 + 5000 / 1e9);
}

// --- Patterns on both models -----------------------------------------------------------------------------

const std::filesystem::path kConfigs = std::filesystem::path(SPARSIM_SOURCE_DIR) / "configs";

std::unique_ptr<Topology> load(const json& spec) { return parse_topology(JsonReader(spec, "topology"), kConfigs); }

using sparsim::testing::first_nodes;
using sparsim::testing::PatternMessage;
using sparsim::testing::run_pattern;
using sparsim::testing::small_dragonfly_spec;
using sparsim::testing::star_spec;
// Four nodes per leaf switch and one uplink each: 4:1 oversubscribed at the first level.
json oversubscribed_fat_tree_spec() { return sparsim::testing::small_fat_tree_spec(); }

// A pattern under both models, in one process: the link-level model first (SimGrid's clock stays at 0 in it),
// then SimGrid's flows on the topology's platform.
struct PatternTimes {
  std::vector<Seconds> flows;
  std::vector<Seconds> link_level;
  Seconds flows_makespan() const { return *std::max_element(flows.begin(), flows.end()); }
  Seconds link_level_makespan() const { return *std::max_element(link_level.begin(), link_level.end()); }
};

PatternTimes run_both(const Topology& topology, int P, const std::vector<PatternMessage>& messages)
{
  start_engine();
  // Both platforms under one open root zone, before the engine first runs (which seals the root).
  simgrid::s4u::create_full_zone("root");
  const NetworkGraph graph = topology.graph();
  const std::vector<simgrid::s4u::Host*> link_level_hosts(P, build_single_host_platform("link_level"));
  const std::vector<simgrid::s4u::Host*> nodes = build_platform(topology, graph);
  const std::vector<simgrid::s4u::Host*> flow_hosts(nodes.begin(), nodes.begin() + P);
  const std::vector<std::size_t> rank_nodes = first_nodes(static_cast<std::size_t>(P));

  PatternTimes times;
  ActorParking parking(P);
  LinkLevelTransport link_level(P, parking, link_slot_specs(graph),
                                link_route(topology, rank_nodes, graph.edge_count()));
  times.link_level = run_pattern(link_level, link_level_hosts, messages);
  SimGridTransport flows(flow_hosts);
  times.flows = run_pattern(flows, flow_hosts, messages);
  return times;
}

// Every message alone, one after the other: rank 0 to every other rank (every hop class of the topology)
// and back, at sizes from 8 B to 64 MiB.
void expect_lone_messages_equal(const json& spec, int P)
{
  const auto topology = load(spec);
  std::vector<PatternMessage> messages;
  int wave = 0;
  for (Bytes bytes : {Bytes{8}, Bytes{4096}, Bytes{1} << 20, Bytes{64} << 20})
    for (RankId peer = 1; peer < P; ++peer) {
      messages.push_back({.source = 0, .dest = peer, .bytes = bytes, .wave = wave++});
      messages.push_back({.source = peer, .dest = 0, .bytes = bytes, .wave = wave++});
    }
  const PatternTimes times = run_both(*topology, P, messages);
  for (std::size_t i = 0; i < messages.size(); ++i) {
    // Each message starts when the previous one has arrived.
    const Seconds flows = times.flows[i] - (i ? times.flows[i - 1] : 0);
    const Seconds link_level = times.link_level[i] - (i ? times.link_level[i - 1] : 0);
    EXPECT_NEAR(link_level, flows, 1e-9 * flows)
        << messages[i].source << " -> " << messages[i].dest << ", " << messages[i].bytes << " B";
  }
}

TEST(NetworkModels, LoneMessageEqualOnTheStar) { expect_lone_messages_equal(star_spec(4), 4); }
TEST(NetworkModels, LoneMessageEqualOnTheFatTree) { expect_lone_messages_equal(oversubscribed_fat_tree_spec(), 24); }
TEST(NetworkModels, LoneMessageEqualOnTheDragonfly) { expect_lone_messages_equal(small_dragonfly_spec(), 90); }

TEST(NetworkModels, SelfMessageCrossesTheLoopbackOnBoth)
{
  const auto topology = load(star_spec(2));
  const PatternTimes times = run_both(*topology, 2, {{.source = 1, .dest = 1, .bytes = 1 << 20}});
  EXPECT_NEAR(times.link_level[0], times.flows[0], 1e-9 * times.flows[0]);
  EXPECT_NEAR(times.link_level[0], (1 << 20) / kLoopbackBandwidth, 1e-12);
}

// n ranks send to rank 0 at once: both models share rank 0's link among them; the last
// arrives at the same time.
void expect_incast_makespan_equal(const json& spec, int P)
{
  const auto topology = load(spec);
  std::vector<PatternMessage> messages;
  for (RankId source = 1; source < P; ++source)
    messages.push_back({.source = source, .dest = 0, .bytes = 1 << 20});
  const PatternTimes times = run_both(*topology, P, messages);
  EXPECT_NEAR(times.link_level_makespan(), times.flows_makespan(), 1e-9 * times.flows_makespan()) << "incast " << P - 1;
}

class Incast : public ::testing::TestWithParam<int> {};
TEST_P(Incast, MakespanEqualOnTheStar) { expect_incast_makespan_equal(star_spec(GetParam() + 1), GetParam() + 1); }
TEST_P(Incast, MakespanEqualOnTheOversubscribedFatTree)
{
  if (GetParam() < 24)
    expect_incast_makespan_equal(oversubscribed_fat_tree_spec(), GetParam() + 1);
}
INSTANTIATE_TEST_SUITE_P(Senders, Incast, ::testing::Values(2, 16, 64, 256),
                         [](const ::testing::TestParamInfo<int>& info) { return std::to_string(info.param); });

// A full all-to-all of equal messages in waves of `width` rotated steps (step s: rank r sends to r + s).
std::vector<PatternMessage> all_to_all_in_waves(int P, int width, Bytes bytes, int steps = -1)
{
  std::vector<PatternMessage> messages;
  if (steps < 0)
    steps = P - 1;
  for (int step = 1; step <= steps; ++step)
    for (RankId r = 0; r < P; ++r)
      messages.push_back({.source = r, .dest = (r + step) % P, .bytes = bytes, .wave = (step - 1) / width});
  return messages;
}

// The makespans of a pattern on both models: within `tolerance` of each other, and neither below the bound
// max over links of bytes / bandwidth.
void expect_makespans_close(const json& spec, int P, const std::vector<PatternMessage>& messages, double tolerance,
                            const std::string& what)
{
  const auto topology = load(spec);
  const PatternTimes times = run_both(*topology, P, messages);
  const double flows = times.flows_makespan();
  const double link_level = times.link_level_makespan();
  // The bound: the busiest link's bytes over its bandwidth.
  const NetworkGraph graph = topology->graph();
  const std::vector<LinkSpec> links = link_slot_specs(graph);
  std::vector<double> busy(links.size(), 0);
  const LinkRoute route = link_route(*topology, first_nodes(static_cast<std::size_t>(P)), graph.edge_count());
  for (const auto& m : messages) {
    std::vector<std::size_t> slots;
    route.find(m.source, m.dest, 0, slots); // minimal routes: the same for every message
    for (std::size_t slot : slots)
      busy[slot] += static_cast<double>(m.bytes) / links[slot].bandwidth;
  }
  const double bound = *std::max_element(busy.begin(), busy.end());
  std::cout << fmt::format("{}: flows {:.6g} s, link-level {:.6g} s ({:+.2f}%), link bound {:.6g} s\n", what, flows,
                           link_level, 100 * (link_level / flows - 1), bound);
  EXPECT_GE(flows, bound * (1 - 1e-9)) << what;
  EXPECT_GE(link_level, bound * (1 - 1e-9)) << what;
  EXPECT_NEAR(link_level, flows, tolerance * flows) << what;
}

// The contended patterns, each on the star, the oversubscribed fat tree and the Piz Daint preset (24 ranks).
enum class Platform { star, fat_tree, piz_daint };
json platform_spec(Platform platform)
{
  switch (platform) {
  case Platform::star:
    return star_spec(24);
  case Platform::fat_tree:
    return oversubscribed_fat_tree_spec();
  case Platform::piz_daint:
    break;
  }
  return {{"file", "platforms/piz_daint.json"}};
}
std::string platform_label(Platform platform)
{
  const char* names[] = {"star", "oversubscribed_fat_tree", "piz_daint"};
  return names[static_cast<int>(platform)];
}
void PrintTo(Platform platform, std::ostream* out) { *out << platform_label(platform); }
std::string platform_name(const ::testing::TestParamInfo<Platform>& info) { return platform_label(info.param); }

class Contended : public ::testing::TestWithParam<Platform> {};

TEST_P(Contended, PermutationStepMakespanWithinFivePercent)
{
  expect_makespans_close(platform_spec(GetParam()), 24, all_to_all_in_waves(24, 1, 1 << 20, 1), 0.05,
                         "permutation step");
}

TEST_P(Contended, WaveOfFourRotatedStepsMakespanWithinFivePercent)
{
  expect_makespans_close(platform_spec(GetParam()), 24, all_to_all_in_waves(24, 4, 1 << 20, 4), 0.05,
                         "wave of 4 rotated steps");
}

TEST_P(Contended, AllToAllInWavesMakespanWithinFivePercent)
{
  expect_makespans_close(platform_spec(GetParam()), 24, all_to_all_in_waves(24, 4, 1 << 18), 0.05,
                         "all-to-all in waves of 4");
}

INSTANTIATE_TEST_SUITE_P(Platforms, Contended,
                         ::testing::Values(Platform::star, Platform::fat_tree, Platform::piz_daint), platform_name);

// The link-level transport on a star of `P` nodes, its ranks on one host.
struct LinkLevelOnAStar {
  explicit LinkLevelOnAStar(int P)
      : topology((start_engine(), load(star_spec(P))))
      , graph(topology->graph())
      , hosts(P, build_single_host_platform("star" + std::to_string(P)))
      , parking(P)
      , transport(P, parking, link_slot_specs(graph),
                  link_route(*topology, first_nodes(static_cast<std::size_t>(P)), graph.edge_count()))
  {
  }
  std::unique_ptr<Topology> topology;
  NetworkGraph graph;
  std::vector<simgrid::s4u::Host*> hosts;
  ActorParking parking;
  LinkLevelTransport transport;
};

// Rank 0 waits for a message from rank 1 that is never sent.
void wait_for_a_send_that_never_comes(Transport& transport, Matcher& matcher)
{
  MessagePtr receive = transport.post_receive(
      [&](MessagePtr fresh) { return matcher.pair_receive(0, 1, 7, std::move(fresh)); }, 0, 1, 7);
  transport.wait(*receive, true);
}

// A receive whose send never comes: every rank blocks, the run ends, and the rank that waits is reported as
// not finished (the driver turns this into its deadlock error).
TEST(LinkLevelTransport, UnmatchedReceiveEndsTheRunWithThatRankUnfinished)
{
#if defined(__SANITIZE_ADDRESS__)
  // At the deadlock SimGrid unwinds the blocked rank's actor stack with an exception; ASan, which cannot follow
  // SimGrid's (uninstrumented) stack switches, reports that unwinding as a stack overflow of its own making.
  GTEST_SKIP() << "a deadlock's forced unwinding of an actor stack is misreported by AddressSanitizer";
#endif
  LinkLevelOnAStar star(2);
  Matcher matcher(2);
  const int finished = run_rank_actors(star.hosts, [&](RankId rank) {
    if (rank == 0)
      wait_for_a_send_that_never_comes(star.transport, matcher);
    else
      star.transport.sleep_for(1, 1e-3);
    star.transport.rank_finished(rank);
  });
  EXPECT_EQ(finished, 1);
  EXPECT_DOUBLE_EQ(star.transport.now(), 1e-3); // rank 1's sleep ran; nothing after it
}

// Compute phases and barriers move the model's clock like SimGrid's: a rank that sleeps longer holds the
// others at the barrier.
TEST(LinkLevelTransport, SleepsAndBarriersKeepTime)
{
  LinkLevelOnAStar star(3);
  std::vector<Seconds> left(3, -1);
  const int finished = run_rank_actors(star.hosts, [&](RankId rank) {
    star.transport.sleep_for(rank, 0.5 * (rank + 1));
    star.transport.align_ranks(rank);
    left[rank] = star.transport.now();
    star.transport.rank_finished(rank);
  });
  EXPECT_EQ(finished, 3);
  for (Seconds t : left)
    EXPECT_DOUBLE_EQ(t, 1.5);
}

// ActorParking never loses a wake, whichever way the unpark and the park meet: the rank already suspended,
// the rank asking to be suspended in the same round of SimGrid's kernel but after the unpark (the kernel timer's
// case), and the unpark before the park (the park returns at once).
TEST(ActorParking, WakesARankWhetherItParkedBeforeDuringOrAfterTheUnpark)
{
  start_engine();
  const std::vector<simgrid::s4u::Host*> hosts(6, build_single_host_platform("parking"));
  ActorParking parking(6);
  std::vector<double> woke(6, -1);
  const int finished = run_rank_actors(hosts, [&](RankId rank) {
    switch (rank) {
    case 0: // unparks rank 1 once it has been suspended for a while
      simgrid::s4u::this_actor::sleep_for(1);
      parking.unpark({1});
      break;
    case 2: // runs before rank 3 in the first round: its unpark is handled before rank 3's suspension
      parking.unpark({3});
      break;
    case 4: // unparks rank 5 before rank 5 parks
      parking.unpark({5});
      break;
    case 5:
      simgrid::s4u::this_actor::sleep_for(2);
      [[fallthrough]];
    default: // ranks 1, 3 and 5 park
      parking.park(rank);
      woke[rank] = simgrid::s4u::Engine::get_clock();
    }
  });
  EXPECT_EQ(finished, 6);
  EXPECT_DOUBLE_EQ(woke[1], 1);
  EXPECT_DOUBLE_EQ(woke[3], 0);
  EXPECT_DOUBLE_EQ(woke[5], 2);
}

// The same deadlock under SimGrid's flows: SimGrid kills the blocked rank, and that is not counted as the
// rank's own failure (it used to surface as an unknown exception instead of the driver's deadlock error).
TEST(SimGridTransport, UnmatchedReceiveEndsTheRunWithThatRankUnfinished)
{
#if defined(__SANITIZE_ADDRESS__)
  // At the deadlock SimGrid unwinds the blocked rank's actor stack with an exception; ASan, which cannot follow
  // SimGrid's (uninstrumented) stack switches, reports that unwinding as a stack overflow of its own making.
  GTEST_SKIP() << "a deadlock's forced unwinding of an actor stack is misreported by AddressSanitizer";
#endif
  start_engine();
  const auto topology = load(star_spec(2));
  const std::vector<simgrid::s4u::Host*> hosts = build_platform(*topology);
  SimGridTransport transport(hosts);
  Matcher matcher(2);
  const int finished = run_rank_actors(hosts, [&](RankId rank) {
    if (rank == 0) {
      MessagePtr receive = transport.post_receive(
          [&](MessagePtr fresh) { return matcher.pair_receive(0, 1, 7, std::move(fresh)); }, 0, 1, 7);
      transport.wait(*receive, true);
    }
    transport.rank_finished(rank);
  });
  EXPECT_EQ(finished, 1);
}

} // namespace
