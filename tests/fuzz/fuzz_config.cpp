// libFuzzer target: bytes as the text of an experiment config, through the code `sparsim validate` runs
// before it builds the platform (JSON parse, parse_config, the memory check), plus the resolved config a
// manifest records. A ConfigError is the expected answer to bad input; any other exception, a crash or
// undefined behaviour is a finding. (Building the SimGrid platform is left out: SimGrid's engine can be
// created only once per process.)
#include "sim/run/config.hpp"
#include "sim/run/memory.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // Relative file references (replay .npy files, platform files) resolve against the npy seed corpus.
  const std::filesystem::path config_dir = SPARSIM_SOURCE_DIR "/tests/fuzz/corpus/npy";
  try {
    const sparsim::ExperimentConfig config =
        sparsim::parse_config(sparsim::parse_json_text(text, "fuzz input"), config_dir);
    sparsim::check_memory(config);
    (void)config.resolved().dump();
  } catch (const sparsim::ConfigError&) {
  }
  return 0;
}
