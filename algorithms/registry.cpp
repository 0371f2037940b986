#include "algorithms/registry.hpp"

#include <set>
#include <stdexcept>

namespace sparsim {

// The algorithm files, each named once, in the order `sparsim algorithms` lists their collectives (and error
// messages list the valid names); within a file, its entries keep the order the file gives them. A new
// algorithm file adds its name here.
//
// Why the registry calls one function per file instead of each file registering itself with a static object
// (as SimGrid's SIMGRID_REGISTER_NETWORK_MODEL does from inside its shared library): sparsim_algorithms is a
// static library, and the linker copies an archive member into an executable only when something refers to
// it, so a file whose only reference is its own static registration object would silently drop out of
// sparsim, of every test and of the fuzz and benchmark programs. Keeping it in takes the linker's whole-archive
// mode ($<LINK_LIBRARY:WHOLE_ARCHIVE,...> needs CMake >= 3.24, the project asks for 3.22) or object files on
// every final link line, and the order of static initialisation across files is unspecified, so the listing
// would still need a sort key per algorithm. A call per file links every file in on any toolchain, builds the
// registry on first use (no static-initialisation order to depend on), and its order is the order below.
#define SPARSIM_ALGORITHM_FILES(FILE)                                                                                  \
  FILE(dense_ring)                                                                                                     \
  FILE(dense_recursive_doubling)                                                                                       \
  FILE(dense_rabenseifner)                                                                                             \
  FILE(dense_hierarchical)                                                                                             \
  FILE(topka)                                                                                                          \
  FILE(oktopk)                                                                                                         \
  FILE(gtopk)                                                                                                          \
  FILE(sparcml_ssar_recursive_double)                                                                                  \
  FILE(sparcml_split_allgather)                                                                                        \
  FILE(gaussiank)                                                                                                      \
  FILE(spardl)

#define SPARSIM_DECLARE_ALGORITHM_FILE(file) SPARSIM_ALGORITHM_FILE(file);
SPARSIM_ALGORITHM_FILES(SPARSIM_DECLARE_ALGORITHM_FILE)
#undef SPARSIM_DECLARE_ALGORITHM_FILE

const std::vector<AlgorithmEntry>& algorithm_registry()
{
  static const std::vector<AlgorithmEntry> entries = [] {
    std::vector<AlgorithmEntry> all;
    std::set<std::string> names;
    for (auto* registered_in : {
#define SPARSIM_LIST_ALGORITHM_FILE(file) &algorithms_registered_in_##file,
             SPARSIM_ALGORITHM_FILES(SPARSIM_LIST_ALGORITHM_FILE)
#undef SPARSIM_LIST_ALGORITHM_FILE
         })
      for (auto& entry : registered_in()) {
        if (!names.insert(entry.name).second)
          throw std::logic_error("algorithm registered twice: " + entry.name);
        all.push_back(std::move(entry));
      }
    return all;
  }();
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

} // namespace sparsim
