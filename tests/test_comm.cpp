// The communicator on a hand-built two-link star: matching by (source, tag), timing of one-sided
// transfers, payload types and per-phase accounting.
#include "sim/comm/communicator.hpp"
#include "sim/comm/matcher.hpp"
#include "sim/network/simgrid/transport.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <random>
#include <simgrid/s4u.hpp>

#include <gtest/gtest.h>

using namespace sparsim;
namespace sg4 = simgrid::s4u;

namespace {

constexpr double kLatency = 1e-6;
constexpr double kBandwidth = 1e9;

// One engine per test process (ctest runs each TEST alone). Hosts on a star of split-duplex links.
struct Simulation {
  std::vector<std::string> args{"test", "--cfg=network/model:CM02", "--cfg=network/crosstraffic:0",
                                "--log=root.thresh:warning", "--log=xbt_cfg.thresh:warning"};
  std::vector<char*> argv;
  int argc;
  std::unique_ptr<sg4::Engine> engine;
  std::vector<sg4::Host*> hosts;

  explicit Simulation(int ranks)
  {
    for (auto& a : args)
      argv.push_back(a.data());
    argc = static_cast<int>(argv.size());
    engine = std::make_unique<sg4::Engine>(&argc, argv.data());
    auto* zone = sg4::create_star_zone("star");
    for (int i = 0; i < ranks; ++i) {
      auto* host = zone->create_host(fmt::format("h{}", i), 1e9);
      auto* link = zone->create_split_duplex_link(fmt::format("l{}", i), kBandwidth)->set_latency(kLatency);
      zone->add_route(host->get_netpoint(), nullptr, nullptr, nullptr, {{link, sg4::LinkInRoute::Direction::UP}}, true);
      hosts.push_back(host);
    }
    zone->seal();
  }
};

std::shared_ptr<const DenseBlock> block_of(std::vector<float> values)
{
  auto b = std::make_shared<DenseBlock>();
  b->length = values.size();
  b->values = std::move(values);
  return b;
}

} // namespace

TEST(Communicator, MatchesBySourceAndTagNotArrivalOrder)
{
  Simulation sim(3);
  SimGridTransport transport(sim.hosts);
  World world(transport, static_cast<int>(sim.hosts.size()), WireFormat{});
  std::vector<float> got_tag2, got_tag1, got_from2;
  sg4::Actor::create("r0", sim.hosts[0], [&] {
    Communicator comm(world, 0);
    std::vector<Request> sends; // non-blocking: rendezvous sends wait for their receive
    sends.push_back(comm.isend(1, 1, block_of({1, 1})));
    sends.push_back(comm.isend(1, 2, block_of({2, 2, 2})));
    comm.wait_all(sends);
  });
  sg4::Actor::create("r2", sim.hosts[2], [&] {
    Communicator comm(world, 2);
    comm.send(1, 1, block_of({9}));
  });
  sg4::Actor::create("r1", sim.hosts[1], [&] {
    Communicator comm(world, 1);
    got_tag2 = comm.recv<DenseBlock>(0, 2)->values;
    got_from2 = comm.recv<DenseBlock>(2, 1)->values;
    got_tag1 = comm.recv<DenseBlock>(0, 1)->values;
  });
  sim.engine->run();
  EXPECT_EQ(got_tag2, (std::vector<float>{2, 2, 2}));
  EXPECT_EQ(got_tag1, (std::vector<float>{1, 1}));
  EXPECT_EQ(got_from2, (std::vector<float>{9}));
}

TEST(Communicator, SameSourceAndTagArriveInPostingOrder)
{
  Simulation sim(2);
  SimGridTransport transport(sim.hosts);
  World world(transport, static_cast<int>(sim.hosts.size()), WireFormat{});
  std::vector<float> order;
  sg4::Actor::create("r0", sim.hosts[0], [&] {
    Communicator comm(world, 0);
    std::vector<Request> sends;
    for (float v : {3.f, 1.f, 2.f})
      sends.push_back(comm.isend(1, 5, block_of({v})));
    comm.wait_all(sends);
  });
  sg4::Actor::create("r1", sim.hosts[1], [&] {
    Communicator comm(world, 1);
    for (int i = 0; i < 3; ++i)
      order.push_back(comm.recv<DenseBlock>(0, 5)->values.at(0));
  });
  sim.engine->run();
  EXPECT_EQ(order, (std::vector<float>{3, 1, 2}));
}

TEST(Communicator, TransferTimeIsAlphaPlusSizeOverBandwidth)
{
  Simulation sim(2);
  SimGridTransport transport(sim.hosts);
  World world(transport, static_cast<int>(sim.hosts.size()), WireFormat{});
  double received_at = -1, sent_at = -1;
  const std::size_t elements = 250000; // 1 MB of fp32
  sg4::Actor::create("r0", sim.hosts[0], [&] {
    Communicator comm(world, 0);
    sg4::this_actor::sleep_for(0.5); // the receive is posted long before the send
    comm.send(1, 0, block_of(std::vector<float>(elements, 1.f)));
    sent_at = sg4::Engine::get_clock();
  });
  sg4::Actor::create("r1", sim.hosts[1], [&] {
    Communicator comm(world, 1);
    Request r = comm.irecv(0, 0);
    comm.wait(r);
    received_at = sg4::Engine::get_clock();
    EXPECT_EQ(comm.take<DenseBlock>(r)->values.size(), elements);
  });
  sim.engine->run();
  const double expected = 0.5 + 2 * kLatency + elements * 4.0 / kBandwidth;
  EXPECT_NEAR(received_at, expected, 1e-12);
  EXPECT_NEAR(sent_at, expected, 1e-12);
}

TEST(Communicator, TransferStartsWhenBothSidesHavePosted)
{
  Simulation sim(2);
  SimGridTransport transport(sim.hosts);
  World world(transport, static_cast<int>(sim.hosts.size()), WireFormat{});
  double send_done = -1, recv_done = -1;
  const std::size_t elements = 2500; // 10 kB
  sg4::Actor::create("r0", sim.hosts[0], [&] {
    Communicator comm(world, 0);
    comm.send(1, 0, block_of(std::vector<float>(elements, 1.f))); // posted at 0, receive posted at 0.25
    send_done = sg4::Engine::get_clock();
  });
  sg4::Actor::create("r1", sim.hosts[1], [&] {
    Communicator comm(world, 1);
    sg4::this_actor::sleep_for(0.25);
    comm.recv<DenseBlock>(0, 0);
    recv_done = sg4::Engine::get_clock();
  });
  sim.engine->run();
  const double expected = 0.25 + 2 * kLatency + elements * 4.0 / kBandwidth;
  EXPECT_NEAR(send_done, expected, 1e-12);
  EXPECT_NEAR(recv_done, expected, 1e-12);
}

TEST(Communicator, WrongPayloadTypeIsAnError)
{
  Simulation sim(2);
  SimGridTransport transport(sim.hosts);
  World world(transport, static_cast<int>(sim.hosts.size()), WireFormat{});
  bool threw = false;
  sg4::Actor::create("r0", sim.hosts[0], [&] {
    Communicator comm(world, 0);
    comm.send(1, 0, std::make_shared<const Counts>(Counts{{1, 2}}));
  });
  sg4::Actor::create("r1", sim.hosts[1], [&] {
    Communicator comm(world, 1);
    try {
      comm.recv<DenseBlock>(0, 0);
    } catch (const std::logic_error&) {
      threw = true;
    }
  });
  sim.engine->run();
  EXPECT_TRUE(threw);
}

TEST(Communicator, CountsMessagesBytesAndTimePerPhase)
{
  Simulation sim(2);
  WireFormat wire;
  wire.value_bytes = 2; // bf16 values: the size follows the wire format
  SimGridTransport transport(sim.hosts);
  World world(transport, static_cast<int>(sim.hosts.size()), wire);
  std::vector<PhaseStats> stats0, stats1;
  PhaseId first = 0, second = 0;
  sg4::Actor::create("r0", sim.hosts[0], [&] {
    Communicator comm(world, 0);
    {
      auto scope = comm.phase("first");
      comm.send(1, 0, block_of(std::vector<float>(1000, 0.f)));
      comm.send(1, 0, block_of(std::vector<float>(10, 0.f)));
    }
    {
      auto scope = comm.phase("second");
      comm.send(1, 1, std::make_shared<const Counts>(Counts{{1, 2, 3}}));
    }
    comm.flush_phase_time();
    stats0 = world.take_stats(0);
  });
  sg4::Actor::create("r1", sim.hosts[1], [&] {
    Communicator comm(world, 1);
    comm.recv<DenseBlock>(0, 0);
    comm.recv<DenseBlock>(0, 0);
    comm.recv<Counts>(0, 1);
    comm.flush_phase_time();
    sg4::this_actor::sleep_for(1); // let rank 0 finish its bookkeeping first
    stats1 = world.take_stats(1);
  });
  sim.engine->run();
  first = world.phases().id_of("first");
  second = world.phases().id_of("second");
  EXPECT_EQ(stats0[first].msgs_sent, 2u);
  EXPECT_EQ(stats0[first].bytes_sent, 2020u);
  EXPECT_EQ(stats0[second].bytes_sent, 12u); // metadata: 4-byte integers
  EXPECT_EQ(stats1[first].msgs_recv, 2u);
  EXPECT_EQ(stats1[first].bytes_recv, 2020u);
  EXPECT_EQ(stats1[second].bytes_recv, 12u);
  EXPECT_EQ(stats1[first].bytes_sent, 0u);
  const double first_time = 2 * (2 * kLatency) + 2020 / kBandwidth;
  EXPECT_NEAR(stats0[first].time, first_time, 1e-12);
  EXPECT_NEAR(stats0[second].time, 2 * kLatency + 12 / kBandwidth, 1e-12);
}

// Each rank writes only its own counters: the receiver counts a message when its receive completes (not when
// the sender posts it), under the sender's phase that the message carries, not the receiver's.
TEST(Communicator, ReceiverCountsAMessageWhenItsReceiveCompletesUnderTheSendersPhase)
{
  Simulation sim(2);
  SimGridTransport transport(sim.hosts);
  World world(transport, static_cast<int>(sim.hosts.size()), WireFormat{});
  std::vector<PhaseStats> before_wait, after_wait;
  sg4::Actor::create("r0", sim.hosts[0], [&] {
    Communicator comm(world, 0);
    auto scope = comm.phase("sending");
    comm.send(1, 0, block_of(std::vector<float>(100, 0.f)));
  });
  sg4::Actor::create("r1", sim.hosts[1], [&] {
    Communicator comm(world, 1);
    auto scope = comm.phase("receiving");
    sg4::this_actor::sleep_for(1); // rank 0 has posted its send by now
    Request request = comm.irecv(0, 0);
    before_wait = world.take_stats(1);
    comm.wait(request);
    after_wait = world.take_stats(1);
  });
  sim.engine->run();
  const PhaseId sending = world.phases().id_of("sending"), receiving = world.phases().id_of("receiving");
  before_wait.resize(world.phases().names().size());
  for (const PhaseStats& stats : before_wait)
    EXPECT_EQ(stats.msgs_recv, 0u);
  ASSERT_GT(after_wait.size(), std::max(sending, receiving));
  EXPECT_EQ(after_wait[sending].msgs_recv, 1u);
  EXPECT_EQ(after_wait[sending].bytes_recv, 400u);
  EXPECT_EQ(after_wait[receiving].msgs_recv, 0u);
}

// computed_once: the first of the ranks that hold the same payloads computes, the others take that object;
// the entry goes once every rank has taken it, so the same payloads ask again compute again, and other
// payloads (or the same payloads in another order) never share a result.
TEST(Communicator, ComputedOnceIsSharedByAllRanksAndDroppedAfterTheLast)
{
  constexpr int P = 3;
  Simulation sim(P);
  SimGridTransport transport(sim.hosts);
  World world(transport, static_cast<int>(sim.hosts.size()), WireFormat{});
  const auto a = block_of({1.0f});
  const auto b = block_of({2.0f});
  int computations = 0;
  std::vector<std::shared_ptr<const DenseBlock>> first(P), second(P), reversed(P), other_computation(P);
  std::weak_ptr<const DenseBlock> temporary; // an input only the entry keeps alive
  std::vector<bool> temporary_alive(P);
  for (int r = 0; r < P; ++r)
    sg4::Actor::create("r" + std::to_string(r), sim.hosts[r], [&, r] {
      Communicator comm(world, r);
      auto sum_of = [&](const std::vector<std::shared_ptr<const DenseBlock>>& parts) {
        return comm.computed_once(parts, [&] {
          ++computations;
          return block_of({parts[0]->values[0] * 10 + parts[1]->values[0]});
        });
      };
      first[r] = sum_of({a, b});
      sg4::this_actor::sleep_for(1.0); // every rank has taken the first result
      second[r] = sum_of({a, b});
      reversed[r] = sum_of({b, a});
      // Another computation on the same inputs is not confused with the sum.
      other_computation[r] = comm.computed_once(std::vector{a, b}, [&] { return block_of({-1.0f}); });
      // An input dropped by the rank that created it stays alive in the entry until the last rank has taken
      // the result, and no longer.
      sg4::this_actor::sleep_for(static_cast<double>(r));
      std::shared_ptr<const DenseBlock> fresh;
      if (r == 0) {
        fresh = block_of({5.0f});
        temporary = fresh;
      }
      const auto held =
          comm.computed_once(std::vector{r == 0 ? fresh : temporary.lock()}, [] { return block_of({6.0f}); });
      fresh.reset();
      temporary_alive[r] = !temporary.expired();
    });
  sim.engine->run();
  EXPECT_EQ(computations, 3); // {a, b} twice (the first entry was dropped), {b, a} once
  for (int r = 0; r < P; ++r) {
    EXPECT_EQ(first[r], first[0]) << "rank " << r;
    EXPECT_EQ(second[r], second[0]) << "rank " << r;
    EXPECT_EQ(reversed[r], reversed[0]) << "rank " << r;
  }
  EXPECT_NE(first[0], second[0]);
  EXPECT_EQ(first[0]->values, std::vector<float>{12.0f});
  EXPECT_EQ(reversed[0]->values, std::vector<float>{21.0f});
  for (int r = 0; r < P; ++r)
    EXPECT_EQ(other_computation[r]->values, std::vector<float>{-1.0f}) << "rank " << r;
  EXPECT_EQ(temporary_alive, (std::vector<bool>{true, true, false}));
  EXPECT_EQ(world.shared_results().computed(), 5u);
  EXPECT_EQ(world.shared_results().taken(), 5u * P);
  EXPECT_EQ(world.shared_results().pending(), 0u);
}

// The matcher against a brute-force reference (a list of unmatched halves per receiving rank, searched from the
// oldest): many sources and tags at once in one inbox (its table grows and entries collide and move back on
// removal), halves of both kinds interleaved, several halves per key. Every pairing must be the reference's.
TEST(Matcher, PairsExactlyAsABruteForceReference)
{
  constexpr int kRanks = 3;
  Matcher matcher(kRanks);
  struct Filed {
    bool is_send;
    RankId source;
    Tag tag;
    MessagePtr message;
  };
  std::vector<std::vector<Filed>> reference(kRanks); // [dest], oldest first
  std::uint64_t state = 12345;
  auto draw = [&](std::uint64_t bound) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % bound;
  };
  int matched = 0;
  for (int post = 0; post < 200000; ++post) {
    const bool is_send = draw(2) == 0;
    const RankId dest = static_cast<RankId>(draw(kRanks));
    // Few keys most of the time, bursts of many (up to 300 sources) now and then.
    const RankId source = static_cast<RankId>(post % 5000 < 1000 ? draw(300) : draw(4));
    const Tag tag = static_cast<Tag>(draw(3) * 1'000'000);
    auto fresh = std::make_shared<Message>();
    const Pairing pairing =
        is_send ? matcher.pair_send(source, dest, tag, fresh) : matcher.pair_receive(dest, source, tag, fresh);
    auto& filed = reference[dest];
    const auto other = std::find_if(filed.begin(), filed.end(), [&](const Filed& f) {
      return f.is_send != is_send && f.source == source && f.tag == tag;
    });
    if (other == filed.end()) {
      ASSERT_FALSE(pairing.matched) << "post " << post;
      ASSERT_EQ(pairing.message, fresh) << "post " << post;
      filed.push_back({is_send, source, tag, fresh});
    } else {
      ASSERT_TRUE(pairing.matched) << "post " << post;
      ASSERT_EQ(pairing.message, other->message) << "post " << post;
      filed.erase(other);
      ++matched;
    }
  }
  EXPECT_GT(matched, 50000);
}

// A bundle's receiver states the layout it expects (owners, each part's bytes): a real run cuts the parts apart
// with it, so in a simulation a layout that is not the bundle's is an error, not ignored.
TEST(Communicator, TakeBundleChecksTheLayoutTheReceiverExpects)
{
  Simulation sim(2);
  SimGridTransport transport(sim.hosts);
  World world(transport, static_cast<int>(sim.hosts.size()), WireFormat{});
  bool right_layout_taken = false, wrong_owners_refused = false, wrong_sizes_refused = false;
  sg4::Actor::create("r0", sim.hosts[0], [&] {
    Communicator comm(world, 0);
    for (int i = 0; i < 3; ++i) {
      auto bundle = std::make_shared<Bundle<DenseBlock>>();
      bundle->owners = {0, 1};
      bundle->parts = {block_of({1, 2}), block_of({3})};
      comm.send(1, 7, std::shared_ptr<const Bundle<DenseBlock>>(std::move(bundle)));
    }
  });
  sg4::Actor::create("r1", sim.hosts[1], [&] {
    Communicator comm(world, 1);
    const std::vector<Bytes> sizes = {8, 4};
    auto take = [&](std::vector<RankId> owners, std::vector<Bytes> part_bytes) {
      Request request = comm.irecv(0, 7);
      comm.wait(request);
      return comm.take_bundle<DenseBlock>(request, std::move(owners), part_bytes);
    };
    right_layout_taken = take({0, 1}, sizes)->parts[1]->values == std::vector<float>{3};
    try {
      take({1, 0}, sizes);
    } catch (const std::logic_error&) {
      wrong_owners_refused = true;
    }
    try {
      take({0, 1}, {4, 8});
    } catch (const std::logic_error&) {
      wrong_sizes_refused = true;
    }
  });
  sim.engine->run();
  EXPECT_TRUE(right_layout_taken);
  EXPECT_TRUE(wrong_owners_refused);
  EXPECT_TRUE(wrong_sizes_refused);
}

// The link loads are held per source and added later (link_loads.hpp): the result must equal counting every
// message on every link of its route at once, for routes that change, routes longer than the inline ones, routes
// per message, empty messages and iterations.
TEST(LinkLoadCounter, EqualsCountingEachMessageOnItsRouteAtOnce)
{
  constexpr int kRanks = 6;
  constexpr std::size_t kSlots = 40;
  for (const bool per_message : {false, true}) {
    // A route of 1 to 12 links that depends on the pair (and, per message, on the message number).
    LinkRoute route;
    route.per_message = per_message;
    route.find = [per_message](RankId source, RankId dest, std::uint64_t message, std::vector<std::size_t>& slots) {
      const std::uint64_t key = static_cast<std::uint64_t>(source * 7 + dest * 13) + (per_message ? message : 0);
      const std::size_t length = 1 + key % 12;
      for (std::size_t i = 0; i < length; ++i)
        slots.push_back((key * 5 + i * 3) % kSlots);
    };
    LinkLoadCounter counter(kRanks, route, kSlots);
    std::vector<LinkLoad> expected(kSlots);
    std::vector<std::uint64_t> sends(kRanks, 0);
    std::mt19937_64 rng(per_message ? 2 : 1);
    for (int iteration = 0; iteration < 3; ++iteration)
      for (int m = 0; m < 200; ++m) {
        const RankId source = static_cast<RankId>(rng() % kRanks);
        const RankId dest = static_cast<RankId>(rng() % 3 == 0 ? rng() % kRanks : (source + 1) % kRanks);
        const Bytes bytes = rng() % 5 == 0 ? 0 : rng() % 1000;
        std::vector<std::size_t> slots;
        route.find(source, dest, sends[source]++, slots);
        const std::span<const std::uint32_t> returned = counter.add(source, dest, bytes, iteration);
        ASSERT_TRUE(std::equal(returned.begin(), returned.end(), slots.begin(), slots.end()));
        for (const std::size_t slot : slots) {
          LinkLoad& load = expected[slot];
          load.crossed = true;
          if (load.current_iteration != iteration)
            load = {.crossed = true,
                    .total = load.total,
                    .iteration_max = load.iteration_max,
                    .current_iteration = iteration};
          load.current += bytes;
          load.total += bytes;
          load.iteration_max = std::max(load.iteration_max, load.current);
        }
        if (m % 67 == 0) { // read in the middle of an iteration too
          const std::vector<LinkLoad>& loads = counter.loads();
          for (std::size_t s = 0; s < kSlots; ++s)
            ASSERT_EQ(loads[s].total, expected[s].total) << "slot " << s;
        }
      }
    const std::vector<LinkLoad>& loads = counter.loads();
    for (std::size_t s = 0; s < kSlots; ++s) {
      EXPECT_EQ(loads[s].crossed, expected[s].crossed) << "slot " << s;
      EXPECT_EQ(loads[s].total, expected[s].total) << "slot " << s;
      EXPECT_EQ(loads[s].iteration_max, expected[s].iteration_max) << "slot " << s;
    }
  }
}
