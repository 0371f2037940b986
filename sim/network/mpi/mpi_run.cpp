#include "sim/network/mpi/mpi_run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <stdexcept>

namespace sparsim {

MpiRun::MpiRun(int ranks, MpiTransportOptions options)
    : ranks_(ranks)
    , transport_(MPI_COMM_WORLD, options)
    , no_link_loads_(ranks, LinkRoute{}, 0)
{
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
}

int MpiRun::run_ranks(const std::function<void(RankId)>& body)
{
  body(rank_);
  // Every process's body returned (a deadlock would have hung in a wait instead, as real MPI does).
  int finished = 1, all = 0;
  MPI_Allreduce(&finished, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  return all;
}

nlohmann::json MpiRun::manifest_fields() const
{
  return {{"real_run",
           {{"backend", "MPI"},
            {"mpi_library", mpi_library_version()},
            {"processes", ranks_},
            {"times", "measured with MPI_Wtime (host seconds), max over ranks per phase"},
            {"compute_charges", transport_.options().sleep_compute ? "slept (--sleep-compute)" : "not spent (0 s)"},
            {"waits", transport_.options().poll_backoff > 0
                          ? fmt::format("poll, sleeping up to {} s between empty polls (--poll-backoff)",
                                        transport_.options().poll_backoff)
                          : "poll, yielding the core between empty polls"},
            {"links_csv", "not written: a real run observes no link"}}}};
}

std::vector<std::vector<std::byte>> MpiRun::gather(std::span<const std::byte> bytes)
{
  if (bytes.size() > static_cast<std::size_t>(INT_MAX))
    throw std::runtime_error("gathering more than INT_MAX bytes from one rank");
  const int size = static_cast<int>(bytes.size());
  std::vector<int> sizes(rank_ == 0 ? ranks_ : 0);
  MPI_Gather(&size, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<int> offsets(sizes.size());
  long long total = 0;
  for (std::size_t r = 0; r < sizes.size(); ++r) {
    offsets[r] = static_cast<int>(total);
    total += sizes[r];
  }
  if (total > INT_MAX)
    throw std::runtime_error("gathering more than INT_MAX bytes into rank 0");
  std::vector<std::byte> all(static_cast<std::size_t>(total));
  MPI_Gatherv(bytes.data(), size, MPI_BYTE, all.data(), sizes.data(), offsets.data(), MPI_BYTE, 0, MPI_COMM_WORLD);
  std::vector<std::vector<std::byte>> parts;
  for (std::size_t r = 0; r < sizes.size(); ++r)
    parts.emplace_back(all.begin() + offsets[r], all.begin() + offsets[r] + sizes[r]);
  return parts;
}

void MpiRun::sum(std::span<double> values)
{
  constexpr std::size_t kChunk = std::size_t{1} << 26; // an int count, and bounded buffers inside MPI
  for (std::size_t begin = 0; begin < values.size(); begin += kChunk) {
    const std::size_t count = std::min(kChunk, values.size() - begin);
    MPI_Allreduce(MPI_IN_PLACE, values.data() + begin, static_cast<int>(count), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }
}

std::string mpi_library_version()
{
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(text, &length);
  const std::string version(text, static_cast<std::size_t>(length));
  return version.substr(0, version.find_first_of("\n,"));
}

} // namespace sparsim
