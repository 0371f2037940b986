// Shared plumbing of the topology parsers (internal to topologies/): link specs and counts read from JSON.
#pragma once

#include "sim/base/json_reader.hpp"
#include "topologies/network_graph.hpp"
#include "topologies/topology.hpp"

#include <cstddef>
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
// topology.routing of a dragonfly (inline or beside a platform file).
inline const std::vector<std::string> kDragonflyRoutings = {"minimal", "valiant"};

// Largest platform we build (compute nodes); a guard against typos that would exhaust memory.
constexpr std::size_t kMaxNodes = std::size_t{1} << 22;

// The topology parsers, one per file; `spec` has had its "type" read already.
std::unique_ptr<Topology> parse_star(JsonReader& spec);
std::unique_ptr<Topology> parse_fat_tree(JsonReader& spec);
std::unique_ptr<Topology> parse_dragonfly(JsonReader& spec);

} // namespace sparsim
