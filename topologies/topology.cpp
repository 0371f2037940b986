// Topology specs (inline or from a platform file), rank placement and contention-free route figures.
#include "topologies/topology.hpp"

#include "sim/base/data_files.hpp"
#include "topologies/builder.hpp"
#include "topologies/network_graph.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fstream>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <stdexcept>

namespace sparsim {
namespace {

std::unique_ptr<Topology> parse_spec(JsonReader& spec)
{
  const std::string type = spec.get_enum("type", {"star", "fat_tree", "dragonfly"});
  std::unique_ptr<Topology> topology;
  if (type == "star")
    topology = parse_star(spec);
  else if (type == "fat_tree")
    topology = parse_fat_tree(spec);
  else
    topology = parse_dragonfly(spec);
  if (spec.has("node")) {
    JsonReader node = spec.object("node");
    topology = with_multi_gpu_nodes(std::move(topology), node);
  }
  if (topology->rails() > 1 && topology->rails() != topology->gpus_per_node())
    spec.fail("rails", std::to_string(topology->rails()),
              fmt::format("the GPUs per node (topology.node.gpus, {}): one rail per GPU", topology->gpus_per_node()));
  spec.finish();
  return topology;
}

// A uniform integer in [0, bound), by rejection, so that it is the same on every standard library.
std::uint64_t uniform_below(std::mt19937_64& rng, std::uint64_t bound)
{
  const std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  const std::uint64_t limit = max - max % bound;
  std::uint64_t x = rng();
  while (x >= limit)
    x = rng();
  return x % bound;
}

// Up to this many ranks, summarize_routes() looks at every ordered pair.
constexpr std::size_t kAllPairsRanks = 64;

} // namespace

std::unique_ptr<Topology> parse_topology(JsonReader topology, const std::filesystem::path& config_dir)
{
  if (!topology.has("file"))
    return parse_spec(topology);

  if (topology.has("type"))
    topology.fail("type", topology.raw("type"), "no \"type\" next to \"file\" (the platform file gives the type)");
  const std::string file = topology.get_string("file");
  // The routing rule may be chosen beside a platform file (the same platform, routed otherwise).
  std::optional<std::string> routing;
  if (topology.has("routing"))
    routing = topology.get_string("routing");
  std::optional<nlohmann::json> adaptive; // adaptive routing's parameters, with it
  if (topology.has("adaptive"))
    adaptive = topology.raw("adaptive");
  topology.finish();

  const std::filesystem::path candidates[] = {config_dir / file, data_dir() / "configs" / file};
  const auto found = std::find_if(std::begin(candidates), std::end(candidates), [](const std::filesystem::path& path) {
    return std::filesystem::is_regular_file(path);
  });
  if (found == std::end(candidates))
    topology.fail(
        "file", file,
        fmt::format("a platform file (looked for {} and {})", candidates[0].string(), candidates[1].string()));

  nlohmann::json document;
  try {
    std::ifstream in(*found);
    document = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& error) {
    topology.fail("file", file, fmt::format("a readable JSON file ({}: {})", found->string(), error.what()));
  }
  if (routing) {
    const nlohmann::json type = document.is_object() ? document.value("type", nlohmann::json()) : nlohmann::json();
    const std::vector<std::string>* choices = type == "dragonfly"  ? &kDragonflyRoutings
                                              : type == "fat_tree" ? &kFatTreeRoutings
                                                                   : nullptr;
    if (!choices)
      topology.fail("routing", fmt::format("\"{}\"", *routing),
                    fmt::format("no \"routing\" beside a platform that is not a dragonfly or a fat tree ({})", file));
    if (std::find(choices->begin(), choices->end(), *routing) == choices->end())
      topology.fail("routing", fmt::format("\"{}\"", *routing),
                    fmt::format("one of \"{}\" (the routings of a {}, {})", fmt::join(*choices, "\", \""),
                                type.get<std::string>(), file));
    document["routing"] = *routing;
  }
  if (adaptive) {
    if (routing != "adaptive")
      topology.fail("adaptive", *adaptive, "no \"adaptive\" parameters unless \"routing\" is \"adaptive\"");
    document["adaptive"] = *adaptive;
  }
  // Errors inside the file name it: "topology(platforms/piz_daint.json).groups".
  JsonReader spec(document, fmt::format("{}({})", topology.path(), file));
  return parse_spec(spec);
}

Placement parse_placement(JsonReader placement)
{
  Placement result;
  result.type = placement.get_enum("type", {"linear", "spread", "random"}, "linear");
  if (result.type == "random")
    result.seed = static_cast<std::uint64_t>(placement.get_int("seed", 0, 0));
  placement.finish();
  return result;
}

std::vector<std::size_t> place_ranks(const Placement& placement, int ranks, std::size_t node_count,
                                     std::size_t gpus_per_node)
{
  if (ranks < 1 || static_cast<std::size_t>(ranks) > node_count)
    throw std::invalid_argument(fmt::format("place_ranks: {} ranks do not fit on {} nodes", ranks, node_count));
  std::vector<std::size_t> nodes(node_count);
  std::iota(nodes.begin(), nodes.end(), std::size_t{0});
  if (placement.type == "random") {
    // Fisher-Yates with our own bounded draws: std::shuffle differs between standard libraries.
    std::mt19937_64 rng(placement.seed);
    for (std::size_t i = node_count - 1; i > 0; --i)
      std::swap(nodes[i], nodes[uniform_below(rng, i + 1)]);
  } else if (placement.type == "spread") {
    const std::size_t machine_nodes = node_count / gpus_per_node;
    for (std::size_t r = 0; r < node_count; ++r)
      nodes[r] = (r % machine_nodes) * gpus_per_node + r / machine_nodes;
  } else if (placement.type != "linear") {
    throw std::invalid_argument("place_ranks: unknown placement type " + placement.type);
  }
  nodes.resize(static_cast<std::size_t>(ranks));
  return nodes;
}

void HopList::push(std::size_t link, bool up)
{
  if (size_ == kCapacity)
    throw std::logic_error(fmt::format("HopList: a route longer than {} links", kCapacity));
  hops_[size_++] = Hop{link, up};
}

RouteSummary summarize_routes(const Topology& topology, const std::vector<std::size_t>& rank_nodes)
{
  return summarize_routes(topology, topology.graph(), rank_nodes);
}

RouteSummary summarize_routes(const Topology& topology, const NetworkGraph& graph,
                              const std::vector<std::size_t>& rank_nodes)
{
  RouteSummary summary;
  const std::size_t ranks = rank_nodes.size();
  const std::size_t gpus_per_node = topology.gpus_per_node();
  bool first = true;
  bool first_intra = true;
  bool first_inter = true;
  auto add_to_level = [](RouteSummary::Level& level, bool& first_of_level, Seconds latency, BytesPerSecond bandwidth) {
    if (first_of_level) {
      level = {latency, bandwidth};
      first_of_level = false;
      return;
    }
    level.latency_max = std::max(level.latency_max, latency);
    level.bandwidth_min = std::min(level.bandwidth_min, bandwidth);
  };
  auto visit = [&](std::size_t a, std::size_t b) {
    HopList hops;
    topology.route(rank_nodes[a], rank_nodes[b], hops);
    Seconds latency = 0;
    BytesPerSecond bandwidth = std::numeric_limits<BytesPerSecond>::infinity();
    for (const Hop& hop : hops) {
      const NetworkGraph::Link& link = graph.link(hop.link);
      latency += link.latency;
      bandwidth = std::min(bandwidth, link.bandwidth);
    }
    const int hop_count = static_cast<int>(hops.size());
    if (rank_nodes[a] / gpus_per_node == rank_nodes[b] / gpus_per_node)
      add_to_level(summary.intra_node, first_intra, latency, bandwidth);
    else
      add_to_level(summary.inter_node, first_inter, latency, bandwidth);
    if (first) {
      summary.latency_min = summary.latency_max = latency;
      summary.bandwidth_min = summary.bandwidth_max = bandwidth;
      summary.hops_max = hop_count;
      first = false;
      return;
    }
    summary.latency_min = std::min(summary.latency_min, latency);
    summary.latency_max = std::max(summary.latency_max, latency);
    summary.bandwidth_min = std::min(summary.bandwidth_min, bandwidth);
    summary.bandwidth_max = std::max(summary.bandwidth_max, bandwidth);
    summary.hops_max = std::max(summary.hops_max, hop_count);
  };

  if (ranks <= kAllPairsRanks) {
    for (std::size_t a = 0; a < ranks; ++a)
      for (std::size_t b = 0; b < ranks; ++b)
        if (a != b)
          visit(a, b);
  } else {
    for (std::size_t b = 1; b < ranks; ++b)
      visit(0, b);
    for (std::size_t a = 1; a + 1 < ranks; ++a)
      visit(a, a + 1);
  }
  return summary;
}

} // namespace sparsim
