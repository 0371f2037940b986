// Small topologies the tests build, as config "topology" objects.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace sparsim::testing {

// Node i for rank i (linear placement) for `ranks` ranks.
inline std::vector<std::size_t> first_nodes(std::size_t ranks)
{
  std::vector<std::size_t> nodes(ranks);
  for (std::size_t i = 0; i < ranks; ++i)
    nodes[i] = i;
  return nodes;
}

// n nodes on one crossbar: 10 GB/s, 1 us per link.
inline nlohmann::json star_spec(int nodes)
{
  return {{"type", "star"}, {"nodes", nodes}, {"bandwidth", "10GBps"}, {"latency", "1us"}};
}

// A small dragonfly (90 nodes) with several parallel global links, so that gateway choice matters.
inline nlohmann::json small_dragonfly_spec()
{
  return {{"type", "dragonfly"},
          {"groups", 5},
          {"chassis", 3},
          {"routers", 3},
          {"nodes", 2},
          {"global_links", 3},
          {"global_ports", 2},
          {"links",
           {{"node", {{"bandwidth", "5.25GBps"}, {"latency", "650ns"}}},
            {"intra_chassis", {{"bandwidth", "5.25GBps"}, {"latency", "100ns"}}},
            {"intra_group", {{"bandwidth", "5.25GBps"}, {"latency", "150ns"}, {"cables", 3}}},
            {"global", {{"bandwidth", "4.7GBps"}, {"latency", "400ns"}}}}}};
}

// A 3-level fat tree of 24 nodes: four nodes per leaf switch and one uplink each (4:1 oversubscribed at the
// first level), 500 ns node links, a 200 Gb/s top level.
inline nlohmann::json small_fat_tree_spec()
{
  return {{"type", "fat_tree"},
          {"levels", 3},
          {"down", {4, 2, 3}},
          {"up", {1, 2, 3}},
          {"bandwidth", "100Gbps"},
          {"latency", "100ns"},
          {"per_level", {{{"latency", "500ns"}}, nlohmann::json::object(), {{"bandwidth", "200Gbps"}}}}};
}

// The platforms whole-run tests compare on: a star, the oversubscribed fat tree preset and the Piz Daint
// dragonfly preset.
enum class RunPlatform { star, fat_tree, dragonfly };

inline const char* name_of(RunPlatform platform)
{
  const char* names[] = {"star", "fat_tree", "dragonfly"};
  return names[static_cast<int>(platform)];
}

// Its config "topology" object (the star with `star_nodes` nodes).
inline nlohmann::json run_platform_spec(RunPlatform platform, int star_nodes)
{
  switch (platform) {
  case RunPlatform::star:
    return star_spec(star_nodes);
  case RunPlatform::fat_tree:
    return {{"file", std::string(SPARSIM_SOURCE_DIR) + "/configs/platforms/fat_tree_4096.json"}};
  case RunPlatform::dragonfly:
    break;
  }
  return {{"file", std::string(SPARSIM_SOURCE_DIR) + "/configs/platforms/piz_daint.json"}};
}

// One algorithm on one of those platforms: a parameter of whole-run tests, named "<algorithm>_<platform>".
struct RunPoint {
  std::string algorithm;
  RunPlatform platform;
};
inline std::string label(const RunPoint& point) { return point.algorithm + "_" + name_of(point.platform); }
inline void PrintTo(const RunPoint& point, std::ostream* out) { *out << label(point); }

} // namespace sparsim::testing
