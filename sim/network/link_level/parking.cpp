#include "sim/network/link_level/parking.hpp"

#include "sim/base/json_reader.hpp"

#include <stdexcept>
#include <string>

namespace sparsim {

void rethrow_rank_failure(std::exception_ptr failure, RankId rank)
{
  try {
    std::rethrow_exception(failure);
  } catch (const ConfigError&) {
    throw;
  } catch (const std::exception& e) {
    throw std::runtime_error("rank " + std::to_string(rank) + ": " + e.what());
  }
}

} // namespace sparsim
