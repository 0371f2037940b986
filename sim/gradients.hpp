// Gradient sources: what each rank feeds the collective in each iteration.
//
// Every source is a pure function of (seed, rank, iteration, index), so runs are reproducible and any
// rank's gradient can be regenerated (for verification, or instead of being stored at scale).
#pragma once

#include "sim/json_reader.hpp"
#include "sim/units.hpp"

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

namespace sparsim {

class GradientSource {
public:
  virtual ~GradientSource() = default;
  virtual std::string name() const = 0;
  virtual nlohmann::json to_json() const = 0;
  // Writes rank `rank`'s gradient of iteration `iteration` into `out` (out.size() = n).
  virtual void generate(RankId rank, int iteration, std::span<float> out) const = 0;
};

// Reads the config's "gradients" object: {"source": "uniform"} (default) or {"source": "integers"}.
std::unique_ptr<GradientSource> parse_gradient_source(JsonReader gradients, std::uint64_t seed);

// A 64-bit mix of the four coordinates (splitmix64 finaliser chained), the counter-based RNG behind
// every source.
std::uint64_t mix_coordinates(std::uint64_t seed, std::uint64_t rank, std::uint64_t iteration, std::uint64_t index);

}  // namespace sparsim
