// Where sparsim finds its own data files: platform presets (configs/platforms), model tables
// (configs/models), example configs and notebooks.
#pragma once

#include <filesystem>

namespace sparsim {

// PREFIX/share/sparsim when this binary runs installed as PREFIX/bin/sparsim (`cmake --install build --prefix
// PREFIX`; the prefix may be moved as a whole), else the source tree the binary was built from.
const std::filesystem::path& data_dir();

// Whether data_dir() is an installed share folder rather than the source tree.
bool running_installed();

} // namespace sparsim
