#include "algorithms/registry.hpp"

namespace sparsim {

// Factories, one per algorithm file.
std::unique_ptr<Algorithm> make_dense_ring(JsonReader& params);
std::unique_ptr<Algorithm> make_dense_recursive_doubling(JsonReader& params);
std::unique_ptr<Algorithm> make_dense_rabenseifner(JsonReader& params);
std::unique_ptr<Algorithm> make_topka(JsonReader& params);
std::unique_ptr<Algorithm> make_oktopk(JsonReader& params);
std::unique_ptr<Algorithm> make_sparcml_ssar_recursive_double(JsonReader& params);
std::unique_ptr<Algorithm> make_sparcml_ssar_split_allgather(JsonReader& params);
std::unique_ptr<Algorithm> make_sparcml_dsar_split_allgather(JsonReader& params);
std::unique_ptr<Algorithm> make_gtopk(JsonReader& params);

const std::vector<AlgorithmEntry>& algorithm_registry()
{
  static const std::vector<AlgorithmEntry> entries = {
      {"dense_ring", "dense", "ring reduce-scatter then ring allgather, P-1 steps each", make_dense_ring},
      {"dense_recursive_doubling", "dense", "log P rounds exchanging the whole vector",
       make_dense_recursive_doubling},
      {"dense_rabenseifner", "dense", "recursive-halving reduce-scatter then recursive-doubling allgather",
       make_dense_rabenseifner},
      {"topka", "sparse", "exact local top-k, allgather of the selections, union sum", make_topka},
      {"oktopk", "sparse", "Ok-Topk: balanced split-and-reduce, global threshold, balanced allgatherv", make_oktopk},
      {"gtopk", "sparse", "local top-k, reduction tree re-selecting top-k at each merge, broadcast", make_gtopk},
      {"sparcml_ssar_recursive_double", "sparse",
       "SparCML: log P rounds swapping and summing the whole sparse vector (fill-in), union sum",
       make_sparcml_ssar_recursive_double},
      {"sparcml_ssar_split_allgather", "sparse",
       "SparCML: sparse reduce-scatter to static region owners, Bruck allgather of the sparse regions, union sum",
       make_sparcml_ssar_split_allgather},
      {"sparcml_dsar_split_allgather", "sparse",
       "SparCML: as the SSAR split allgather, regions switch to dense when cheaper (switch: per_region, global)",
       make_sparcml_dsar_split_allgather},
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
