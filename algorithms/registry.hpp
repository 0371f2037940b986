// The algorithm registry: every collective, selected by name from the config's "algorithm" object.
//
// Each algorithm file registers its collectives next to their code, the name written once (as SimGrid's
// network models register): the file defines its registration function with SPARSIM_ALGORITHM_FILE and
// returns one algorithm_entry per collective, e.g. in dense_ring.cpp
//
//   SPARSIM_ALGORITHM_FILE(dense_ring)
//   {
//     return {algorithm_entry<DenseRing>(DenseRing::kName, "ring reduce-scatter then ...",
//                                        [](JsonReader&) { return std::make_unique<DenseRing>(); })};
//   }
//
// and the class's name() returns the same constant. registry.cpp names each file once, in its list of
// algorithm files (SPARSIM_ALGORITHM_FILES), which also fixes the listing order; it says why a file is
// named there rather than registering itself through a static object.
#pragma once

#include "algorithms/algorithm.hpp"

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace sparsim {

struct AlgorithmEntry {
  std::string name;
  std::string kind; // "dense" or "sparse"
  std::string summary;
  // Reads the algorithm's own parameters from the "algorithm" object ("name" is already consumed).
  std::function<std::unique_ptr<Algorithm>(JsonReader& params)> create;
};

// The entry of collective A: its name, a one-line summary (`sparsim algorithms`) and its factory, which reads
// A's parameters and returns a std::unique_ptr<A>. The kind follows from A's interface.
template <class A, class Factory>
AlgorithmEntry algorithm_entry(std::string_view name, std::string_view summary, Factory create)
{
  constexpr bool dense = std::is_base_of_v<DenseAllreduce, A>;
  static_assert(dense != std::is_base_of_v<SparseAllreduce, A>, "a collective is either dense or sparse");
  static_assert(std::is_convertible_v<std::invoke_result_t<Factory, JsonReader&>, std::unique_ptr<A>>,
                "the factory returns a std::unique_ptr<A>");
  return {std::string(name), dense ? "dense" : "sparse", std::string(summary),
          [create = std::move(create)](JsonReader& params) -> std::unique_ptr<Algorithm> { return create(params); }};
}

// Declares (or, followed by a body, defines) the registration function of algorithm file `file`: it returns
// the file's entries, in the order they are listed.
#define SPARSIM_ALGORITHM_FILE(file) std::vector<::sparsim::AlgorithmEntry> algorithms_registered_in_##file()

// Every entry: the files in registry.cpp's order, each file's entries in its own order.
const std::vector<AlgorithmEntry>& algorithm_registry();
// Reads "algorithm": {"name": ..., params...}; an unknown name is a ConfigError listing the known ones.
std::unique_ptr<Algorithm> parse_algorithm(JsonReader algorithm);

} // namespace sparsim
