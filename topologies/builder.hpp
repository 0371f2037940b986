// Shared plumbing of the topology parsers (internal to topologies/): link specs and counts read from JSON.
#pragma once

#include "sim/base/json_reader.hpp"
#include "topologies/network_graph.hpp"
#include "topologies/topology.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sparsim {

// Bandwidth (per direction) and latency of one class of links.
struct LinkSpec {
  BytesPerSecond bandwidth = 0;
  Seconds latency = 0;
};
// Reads the required "bandwidth" and "latency" keys of `reader`.
LinkSpec read_link_spec(JsonReader& reader);
// {"bandwidth": "5.25GBps", "latency": "650ns"}: unit strings that parse back to exactly the same values.
nlohmann::json link_spec_json(const LinkSpec& spec);

// Reads a count key in [1, max] (sizes are never zero).
std::size_t read_count(JsonReader& reader, std::string_view key, std::size_t max,
                       std::optional<std::int64_t> fallback = std::nullopt);
// topology.routing (inline or beside a platform file), by type: the first is the default and static.
inline const std::vector<std::string> kDragonflyRoutings = {"minimal", "valiant", "adaptive"};
inline const std::vector<std::string> kFatTreeRoutings = {"d_mod_k", "random"};

// splitmix64's finaliser: a fixed, well-spread hash (tie-breaks, routes drawn per message).
inline std::uint64_t mix64(std::uint64_t x)
{
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// Largest platform we build (compute nodes); a guard against typos that would exhaust memory.
constexpr std::size_t kMaxNodes = std::size_t{1} << 22;

// The topology parsers, one per file; `spec` has had its "type" read already.
std::unique_ptr<Topology> parse_star(JsonReader& spec);
std::unique_ptr<Topology> parse_fat_tree(JsonReader& spec);
std::unique_ptr<Topology> parse_dragonfly(JsonReader& spec);
// The network with G GPUs per node from the spec's "node" object (topologies/multi_gpu.cpp); the network
// itself where G is 1.
std::unique_ptr<Topology> with_multi_gpu_nodes(std::unique_ptr<Topology> network, JsonReader& node);

} // namespace sparsim
