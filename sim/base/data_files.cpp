#include "sim/base/data_files.hpp"

#include <system_error>

namespace sparsim {
namespace {

// PREFIX/share/sparsim for a binary at PREFIX/bin/sparsim, when that folder holds sparsim's configs; else empty.
std::filesystem::path installed_share_dir()
{
  std::error_code error;
  const std::filesystem::path binary = std::filesystem::canonical("/proc/self/exe", error);
  if (error)
    return {};
  const std::filesystem::path share = binary.parent_path().parent_path() / "share" / "sparsim";
  return std::filesystem::is_directory(share / "configs", error) ? share : std::filesystem::path();
}

} // namespace

const std::filesystem::path& data_dir()
{
  static const std::filesystem::path dir = [] {
    const std::filesystem::path installed = installed_share_dir();
    return installed.empty() ? std::filesystem::path(SPARSIM_SOURCE_DIR) : installed;
  }();
  return dir;
}

bool running_installed() { return data_dir() != std::filesystem::path(SPARSIM_SOURCE_DIR); }

} // namespace sparsim
