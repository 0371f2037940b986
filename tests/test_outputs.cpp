// The outputs for plotting and inspection, through the CLI: links.csv (bytes per SimGrid link, by level and
// direction) against the per-rank counts of ranks.csv and the routing rules of the topologies, and the
// --trace timeline (Chrome trace event JSON) against ranks.csv and results.csv.
#include "sparsim_cli.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

using namespace sparsim::testing;

namespace {

using Row = std::map<std::string, std::string>;

nlohmann::json star(int nodes)
{
  return {{"type", "star"}, {"nodes", nodes}, {"bandwidth", "10GBps"}, {"latency", "1us"}};
}

// 3 groups x 2 chassis x 2 routers x 2 nodes = 24 nodes, one global link per group pair.
constexpr int kDragonflyNodesPerGroup = 8;
nlohmann::json dragonfly()
{
  const nlohmann::json link = {{"bandwidth", "5GBps"}, {"latency", "500ns"}};
  return {{"type", "dragonfly"},
          {"groups", 3},
          {"chassis", 2},
          {"routers", 2},
          {"nodes", 2},
          {"global_links", 1},
          {"global_ports", 1},
          {"links", {{"node", link}, {"intra_chassis", link}, {"intra_group", link}, {"global", link}}}};
}

nlohmann::json experiment(const std::string& name, int ranks, const nlohmann::json& topology,
                          const nlohmann::json& algorithm, int iterations)
{
  nlohmann::json config = {{"name", name},
                           {"ranks", ranks},
                           {"iterations", iterations},
                           {"topology", topology},
                           {"algorithm", {{"name", algorithm}}},
                           {"workload", {{"n", 20011}}}};
  if (algorithm != "dense_ring") {
    config["workload"]["density"] = 0.02;
    config["selection"] = {{"policy", "threshold_reuse"}, {"reevaluate_every", 2}};
    config["compute"] = {{"selection", "memory_bandwidth"}, {"memory_bandwidth", "100GBps"}};
  }
  return config;
}

// Sum of a ranks.csv column per rank (all iterations, or one iteration when `iteration` >= 0).
std::map<int, double> per_rank(const std::filesystem::path& dir, const std::string& column, int iteration = -1)
{
  std::map<int, double> sums;
  for (auto& row : read_csv(dir / "ranks.csv"))
    if (iteration < 0 || std::stoi(row["iteration"]) == iteration)
      sums[std::stoi(row["rank"])] += number(row, column);
  return sums;
}

// The largest per-iteration sum of a ranks.csv column for one rank.
double busiest_iteration(const std::filesystem::path& dir, const std::string& column, int rank)
{
  std::map<int, double> per_iteration;
  for (auto& row : read_csv(dir / "ranks.csv"))
    if (std::stoi(row["rank"]) == rank)
      per_iteration[std::stoi(row["iteration"])] += number(row, column);
  double most = 0;
  for (auto& [iteration, bytes] : per_iteration)
    most = std::max(most, bytes);
  return most;
}

std::map<std::string, Row> links_by_name(const std::filesystem::path& dir)
{
  std::map<std::string, Row> links;
  for (auto& row : read_csv(dir / "links.csv"))
    links[row["link"]] = row;
  return links;
}

// On a star, node r's up link carries exactly what rank r sent, its down link what it received, in total
// and in the busiest iteration; nothing else carries bytes.
void expect_star_links_match_ranks(const CliResult& run, int ranks)
{
  const auto links = links_by_name(run.dir);
  const auto sent = per_rank(run.dir, "bytes_sent");
  const auto received = per_rank(run.dir, "bytes_recv");
  EXPECT_EQ(links.size(), 2u * ranks) << "a link that carried nothing is listed, or a loaded one is missing";
  for (int r = 0; r < ranks; ++r) {
    const std::string name = "node" + std::to_string(r) + "_crossbar";
    ASSERT_TRUE(links.count(name + "_UP") && links.count(name + "_DOWN")) << name;
    const Row& up = links.at(name + "_UP");
    const Row& down = links.at(name + "_DOWN");
    EXPECT_EQ(up.at("level"), "node");
    EXPECT_EQ(up.at("direction"), "up");
    EXPECT_EQ(down.at("direction"), "down");
    EXPECT_GT(sent.at(r), 0);
    EXPECT_EQ(number(up, "bytes"), sent.at(r)) << name;
    EXPECT_EQ(number(down, "bytes"), received.at(r)) << name;
    EXPECT_EQ(number(up, "bytes_iteration_max"), busiest_iteration(run.dir, "bytes_sent", r)) << name;
    EXPECT_EQ(number(down, "bytes_iteration_max"), busiest_iteration(run.dir, "bytes_recv", r)) << name;
  }
}

} // namespace

TEST(LinksCsv, StarDenseRingLoadsEachNodeLinkWithItsRanksTraffic)
{
  CliResult run = run_config(experiment("links_ring", 6, star(6), "dense_ring", 2), "links_ring");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  expect_star_links_match_ranks(run, 6);
  // The ring sends each rank's 2(P-1) chunks of a 20011-float vector split into 6 (sizes 3336 and 3335).
  const auto sent = per_rank(run.dir, "bytes_sent");
  for (auto& [rank, bytes] : sent) {
    EXPECT_GE(bytes, 2 * 2 * 5 * 3335 * 4.0) << rank;
    EXPECT_LE(bytes, 2 * 2 * 5 * 3336 * 4.0) << rank;
  }
  const auto manifest = nlohmann::json::parse(read_text(run.dir / "manifest.json"));
  const auto files = manifest.at("files");
  EXPECT_NE(std::find(files.begin(), files.end(), "links.csv"), files.end()) << files;
}

TEST(LinksCsv, StarSparseIterationsKeepTheirBusiestIteration)
{
  // Threshold reuse makes the volume differ between iterations, so the busiest one is not the mean.
  CliResult run = run_config(experiment("links_topka", 5, star(5), "topka", 4), "links_topka");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  expect_star_links_match_ranks(run, 5);
  bool uneven = false;
  for (auto& [name, row] : links_by_name(run.dir))
    uneven = uneven || number(row, "bytes_iteration_max") * 4 != number(row, "bytes");
  EXPECT_TRUE(uneven) << "every iteration carried the same bytes: the busiest-iteration check proves nothing";
}

TEST(LinksCsv, DragonflyLevelsFollowTheRoutes)
{
  // One iteration, traced: the trace's send waits list every message with its peer and size.
  const int ranks = 24;
  const auto dir = scratch_dir("links_dragonfly");
  std::ofstream(dir / "config.json") << experiment("links_dragonfly", ranks, dragonfly(), "oktopk", 1).dump(2);
  CliResult run = run_cli("run " + (dir / "config.json").string() + " --out " + (dir / "out").string() +
                          " --quiet --trace " + (dir / "trace.json").string());
  run.dir = dir / "out";
  ASSERT_EQ(run.exit_code, 0) << run.output;

  std::map<std::string, double> by_level_direction;
  for (auto& row : read_csv(run.dir / "links.csv"))
    by_level_direction[row["level"] + "/" + row["direction"]] += number(row, "bytes");
  for (auto& [key, bytes] : by_level_direction)
    EXPECT_TRUE(key.rfind("node/", 0) == 0 || key.rfind("intra_chassis/", 0) == 0 ||
                key.rfind("intra_group/", 0) == 0 || key.rfind("global/", 0) == 0)
        << "unexpected level/direction " << key;

  // Every message leaves through its source node's link (up) and arrives through its destination's (down).
  double sent = 0, received = 0;
  for (auto& [rank, bytes] : per_rank(run.dir, "bytes_sent"))
    sent += bytes;
  for (auto& [rank, bytes] : per_rank(run.dir, "bytes_recv"))
    received += bytes;
  EXPECT_GT(sent, 0);
  EXPECT_EQ(by_level_direction["node/up"], sent);
  EXPECT_EQ(by_level_direction["node/down"], received);

  // Minimal routes cross exactly one global link between groups and none within a group.
  const auto trace = nlohmann::json::parse(read_text(dir / "trace.json"));
  double between_groups = 0;
  for (auto& event : trace.at("traceEvents"))
    if (event.value("name", "") == "send" && event.at("ph") == "X") {
      const int source = event.at("tid");
      const int dest = event.at("args").at("peer");
      if (source / kDragonflyNodesPerGroup != dest / kDragonflyNodesPerGroup)
        between_groups += event.at("args").at("bytes").get<double>();
    }
  EXPECT_GT(between_groups, 0);
  EXPECT_EQ(by_level_direction["global/up"] + by_level_direction["global/down"], between_groups);
}

// Valiant routing (link-level model): a message between groups crosses two global links, one within a group
// none; the manifest's link_levels sum links.csv by level.
TEST(LinksCsv, DragonflyValiantCrossesTwoGlobalLinksAndTheManifestSumsTheLevels)
{
  const int ranks = 24;
  nlohmann::json topology = dragonfly();
  topology["routing"] = "valiant";
  nlohmann::json config = experiment("links_valiant", ranks, topology, "dense_ring", 1);
  config["network"] = {{"model", "LinkLevel"}};
  CliResult run = run_config(config, "links_valiant");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::map<std::string, double> by_level, busiest, links;
  for (auto& row : read_csv(run.dir / "links.csv")) {
    by_level[row["level"]] += number(row, "bytes");
    busiest[row["level"]] = std::max(busiest[row["level"]], number(row, "bytes"));
    links[row["level"]] += 1;
  }
  // The ring: rank r sends to r + 1, so the messages between groups are those of ranks 7, 15 and 23.
  const auto sent = per_rank(run.dir, "bytes_sent");
  double between_groups = 0;
  for (int r = kDragonflyNodesPerGroup - 1; r < ranks; r += kDragonflyNodesPerGroup)
    between_groups += sent.at(r);
  EXPECT_GT(between_groups, 0);
  EXPECT_EQ(by_level["global"], 2 * between_groups);

  const auto manifest = nlohmann::json::parse(read_text(run.dir / "manifest.json"));
  EXPECT_EQ(manifest.at("config").at("topology").at("routing"), "valiant");
  std::set<std::string> seen;
  for (const auto& level : manifest.at("link_levels")) {
    const std::string name = level.at("level");
    seen.insert(name);
    EXPECT_EQ(level.at("bytes").get<double>(), by_level[name]) << name;
    EXPECT_EQ(level.at("links").get<double>(), links[name]) << name;
    EXPECT_EQ(level.at("busiest_link_bytes").get<double>(), busiest[name]) << name;
    EXPECT_DOUBLE_EQ(level.at("mean_link_bytes").get<double>(), by_level[name] / links[name]) << name;
  }
  EXPECT_EQ(seen.size(), by_level.size());
}

// Adaptive routing (link-level model): links.csv counts the route the model chose for each message when it
// started. Checked without knowing those routes: bytes are conserved at every router (what enters leaves),
// every message leaves and enters through its nodes' links, and against the same run under minimal routing
// every count but the time is unchanged, the global links carry at least as much (detours cross two) and
// the manifest counts the messages sent on a detour.
TEST(LinksCsv, DragonflyAdaptiveCountsTheRoutesTheModelChose)
{
  const int ranks = 24;
  auto run_with = [&](const std::string& routing) {
    nlohmann::json topology = dragonfly();
    topology["routing"] = routing;
    nlohmann::json config = experiment("links_" + routing, ranks, topology, "oktopk", 2);
    config["network"] = {{"model", "LinkLevel"}};
    return run_config(config, "links_" + routing);
  };
  const CliResult adaptive = run_with("adaptive"), minimal = run_with("minimal");
  ASSERT_EQ(adaptive.exit_code, 0) << adaptive.output;
  ASSERT_EQ(minimal.exit_code, 0) << minimal.output;

  std::map<std::string, double> by_level, minimal_by_level, into, out_of;
  for (auto& row : read_csv(adaptive.dir / "links.csv")) {
    const double bytes = number(row, "bytes");
    by_level[row["level"]] += bytes;
    // "<from>_<to>[_k]_UP": up from `from` to `to`, down the other way.
    const std::string& name = row["link"];
    const std::size_t first = name.find('_'), second = name.find('_', first + 1);
    const std::string from = name.substr(0, first), to = name.substr(first + 1, second - first - 1);
    const bool up = row["direction"] == "up";
    out_of[up ? from : to] += bytes;
    into[up ? to : from] += bytes;
  }
  for (auto& row : read_csv(minimal.dir / "links.csv"))
    minimal_by_level[row["level"]] += number(row, "bytes");
  for (auto& [vertex, bytes] : into)
    if (vertex.rfind("node", 0) != 0) {
      EXPECT_EQ(bytes, out_of[vertex]) << "router " << vertex << " does not pass on what it receives";
    }
  double sent = 0;
  for (auto& [rank, bytes] : per_rank(adaptive.dir, "bytes_sent"))
    sent += bytes;
  EXPECT_GT(sent, 0);
  EXPECT_EQ(by_level["node"], 2 * sent);
  EXPECT_EQ(by_level["node"], minimal_by_level["node"]);
  EXPECT_GE(by_level["global"], minimal_by_level["global"]);
  EXPECT_LE(by_level["global"], 2 * minimal_by_level["global"]);

  const auto manifest = nlohmann::json::parse(read_text(adaptive.dir / "manifest.json"));
  const double detours = manifest.at("nonminimal_routes").get<double>();
  EXPECT_GT(detours, 0) << "no message took a detour: the test shows nothing about chosen routes";
  EXPECT_LE(detours, manifest.at("simulated_messages").get<double>());
  EXPECT_GT(by_level["global"] + by_level["intra_group"] + by_level["intra_chassis"],
            minimal_by_level["global"] + minimal_by_level["intra_group"] + minimal_by_level["intra_chassis"]);
  EXPECT_FALSE(nlohmann::json::parse(read_text(minimal.dir / "manifest.json")).contains("nonminimal_routes"));
  // Only time depends on the routes: every rank's counts per phase are those of minimal routing.
  auto counts = [](const std::filesystem::path& dir) {
    std::vector<std::string> rows;
    for (auto& row : read_csv(dir / "ranks.csv"))
      rows.push_back(row["iteration"] + " " + row["rank"] + " " + row["phase"] + " " + row["msgs_sent"] + " " +
                     row["bytes_sent"] + " " + row["msgs_recv"] + " " + row["bytes_recv"]);
    return rows;
  };
  EXPECT_EQ(counts(adaptive.dir), counts(minimal.dir));
}

namespace {

// A trace's complete events of one rank.
std::vector<nlohmann::json> slices_of(const nlohmann::json& trace, int rank)
{
  std::vector<nlohmann::json> slices;
  for (auto& event : trace.at("traceEvents"))
    if (event.at("ph") == "X" && event.at("tid") == rank)
      slices.push_back(event);
  return slices;
}

bool within(const nlohmann::json& inner, const nlohmann::json& outer)
{
  const double slack = 1e-6; // microseconds; far below any simulated latency here
  const double begin = inner.at("ts"), end = begin + inner.at("dur").get<double>();
  const double outer_begin = outer.at("ts"), outer_end = outer_begin + outer.at("dur").get<double>();
  return begin >= outer_begin - slack && end <= outer_end + slack;
}

} // namespace

TEST(Trace, TimelineOfTheChosenIterationMatchesTheCounts)
{
  const int ranks = 6, iterations = 3, traced = 1;
  const auto dir = scratch_dir("trace");
  std::ofstream(dir / "config.json") << experiment("trace", ranks, star(ranks), "oktopk", iterations).dump(2);
  CliResult run =
      run_cli("run " + (dir / "config.json").string() + " --out " + (dir / "out").string() + " --quiet --trace " +
              (dir / "trace.json").string() + " --trace-iteration " + std::to_string(traced));
  run.dir = dir / "out";
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto trace = nlohmann::json::parse(read_text(dir / "trace.json"));
  EXPECT_EQ(trace.at("otherData").at("iteration"), traced);

  // One named thread per rank.
  std::map<int, std::string> threads;
  for (auto& event : trace.at("traceEvents"))
    if (event.at("ph") == "M" && event.at("name") == "thread_name")
      threads[event.at("tid")] = event.at("args").at("name");
  ASSERT_EQ(threads.size(), static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r)
    EXPECT_EQ(threads[r], "rank " + std::to_string(r));

  const auto sent = per_rank(run.dir, "bytes_sent", traced);
  const auto received = per_rank(run.dir, "bytes_recv", traced);
  std::map<std::pair<int, std::string>, double> phase_time; // (rank, phase) -> seconds, from ranks.csv
  for (auto& row : read_csv(run.dir / "ranks.csv"))
    if (std::stoi(row["iteration"]) == traced)
      phase_time[{std::stoi(row["rank"]), row["phase"]}] += number(row, "time_s");
  double iteration_time = 0;
  for (auto& row : total_rows(run.dir))
    if (std::stoi(row["iteration"]) == traced)
      iteration_time = number(row, "sim_time_s");

  double longest_iteration = 0;
  for (int r = 0; r < ranks; ++r) {
    const auto slices = slices_of(trace, r);
    std::vector<nlohmann::json> iteration, phases, waits;
    for (auto& slice : slices)
      (slice.at("cat") == "iteration" ? iteration : slice.at("cat") == "phase" ? phases : waits).push_back(slice);
    ASSERT_EQ(iteration.size(), 1u) << "rank " << r;
    EXPECT_EQ(iteration[0].at("name"), "iteration " + std::to_string(traced));
    longest_iteration = std::max(longest_iteration, iteration[0].at("dur").get<double>());

    // Phase segments add up to ranks.csv's phase times and lie inside the iteration.
    std::map<std::pair<int, std::string>, double> traced_time;
    for (auto& phase : phases) {
      EXPECT_TRUE(within(phase, iteration[0])) << phase;
      traced_time[{r, phase.at("name")}] += phase.at("dur").get<double>() * 1e-6;
    }
    for (auto& [key, seconds] : phase_time) {
      if (key.first != r)
        continue;
      EXPECT_NEAR(traced_time[key], seconds, 1e-12) << "rank " << r << " phase " << key.second;
    }
    for (auto& [key, seconds] : traced_time)
      EXPECT_TRUE(phase_time.count(key)) << "rank " << r << " traced phase " << key.second << " not in ranks.csv";

    // Waits: their bytes add up to ranks.csv's; each that took time lies in a segment of its phase.
    double wait_sent = 0, wait_received = 0;
    for (auto& wait : waits) {
      const double bytes = wait.at("args").at("bytes");
      (wait.at("name") == "send" ? wait_sent : wait_received) += bytes;
      EXPECT_NE(wait.at("args").at("peer"), r);
      EXPECT_TRUE(within(wait, iteration[0])) << wait;
      const bool in_its_phase = std::any_of(phases.begin(), phases.end(), [&](const nlohmann::json& phase) {
        return phase.at("name") == wait.at("args").at("phase") && within(wait, phase);
      });
      EXPECT_TRUE(in_its_phase || wait.at("dur").get<double>() == 0) << wait;
    }
    EXPECT_GT(wait_sent, 0);
    EXPECT_EQ(wait_sent, sent.at(r)) << "rank " << r;
    EXPECT_EQ(wait_received, received.at(r)) << "rank " << r;
  }
  // The iteration's time in results.csv is the slowest rank's.
  EXPECT_NEAR(longest_iteration * 1e-6, iteration_time, 1e-12);
}

TEST(Trace, DefaultsToTheLastIteration)
{
  const auto dir = scratch_dir("trace_last");
  std::ofstream(dir / "config.json") << experiment("trace_last", 3, star(3), "dense_ring", 3).dump(2);
  CliResult run = run_cli("run " + (dir / "config.json").string() + " --out " + (dir / "out").string() +
                          " --quiet --trace " + (dir / "trace.json").string());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto trace = nlohmann::json::parse(read_text(dir / "trace.json"));
  EXPECT_EQ(trace.at("otherData").at("iteration"), 2);
  int iterations = 0;
  for (auto& event : trace.at("traceEvents"))
    if (event.at("ph") == "X" && event.at("cat") == "iteration") {
      EXPECT_EQ(event.at("name"), "iteration 2");
      ++iterations;
    }
  EXPECT_EQ(iterations, 3);
}

TEST(Trace, RejectsAnIterationOutsideTheRun)
{
  const auto dir = scratch_dir("trace_bad");
  std::ofstream(dir / "config.json") << experiment("trace_bad", 3, star(3), "dense_ring", 3).dump(2);
  const std::string base = "run " + (dir / "config.json").string() + " --out " + (dir / "out").string();
  CliResult past = run_cli(base + " --trace " + (dir / "trace.json").string() + " --trace-iteration 3");
  EXPECT_EQ(past.exit_code, 2) << past.output;
  EXPECT_NE(past.output.find("--trace-iteration 3"), std::string::npos) << past.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "trace.json"));
  CliResult alone = run_cli(base + " --trace-iteration 0");
  EXPECT_EQ(alone.exit_code, 2) << alone.output;
  EXPECT_NE(alone.output.find("--trace-iteration goes with --trace"), std::string::npos) << alone.output;
}
