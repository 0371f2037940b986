// The algorithm registry: every collective, selected by name from the config's "algorithm" object.
#pragma once

#include "algorithms/algorithm.hpp"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace sparsim {

struct AlgorithmEntry {
  std::string name;
  std::string kind;  // "dense" or "sparse"
  std::string summary;
  // Reads the algorithm's own parameters from the "algorithm" object ("name" is already consumed).
  std::function<std::unique_ptr<Algorithm>(JsonReader& params)> create;
};

const std::vector<AlgorithmEntry>& algorithm_registry();
// Reads "algorithm": {"name": ..., params...}; an unknown name is a ConfigError listing the known ones.
std::unique_ptr<Algorithm> parse_algorithm(JsonReader algorithm);

}  // namespace sparsim
