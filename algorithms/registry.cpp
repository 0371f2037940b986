#include "algorithms/registry.hpp"

namespace sparsim {

// Factories, one per algorithm file.
std::unique_ptr<Algorithm> make_dense_ring(JsonReader& params);
std::unique_ptr<Algorithm> make_dense_recursive_doubling(JsonReader& params);
std::unique_ptr<Algorithm> make_dense_rabenseifner(JsonReader& params);
std::unique_ptr<Algorithm> make_topka(JsonReader& params);

const std::vector<AlgorithmEntry>& algorithm_registry()
{
  static const std::vector<AlgorithmEntry> entries = {
      {"dense_ring", "dense", "ring reduce-scatter then ring allgather, P-1 steps each", make_dense_ring},
      {"dense_recursive_doubling", "dense", "log P rounds exchanging the whole vector",
       make_dense_recursive_doubling},
      {"dense_rabenseifner", "dense", "recursive-halving reduce-scatter then recursive-doubling allgather",
       make_dense_rabenseifner},
      {"topka", "sparse", "exact local top-k, allgather of the selections, union sum", make_topka},
  };
  return entries;
}

std::unique_ptr<Algorithm> parse_algorithm(JsonReader algorithm)
{
  std::vector<std::string> names;
  for (const auto& entry : algorithm_registry())
    names.push_back(entry.name);
  const std::string name = algorithm.get_enum("name", names);
  for (const auto& entry : algorithm_registry())
    if (entry.name == name) {
      auto created = entry.create(algorithm);
      algorithm.finish();
      return created;
    }
  throw std::logic_error("unreachable: algorithm " + name);
}

}  // namespace sparsim
