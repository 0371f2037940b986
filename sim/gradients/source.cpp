#include "sim/gradients/source.hpp"

#include "sim/gradients/calibrated_source.hpp"
#include "sim/gradients/replay_source.hpp"
#include "sim/gradients/training_source.hpp"
#include "sim/gradients/vector_math.hpp"

#include <cmath>
#include <stdexcept>

namespace sparsim {
namespace {

std::uint64_t splitmix64(std::uint64_t x)
{
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform value i of a stream: splitmix64(base + i) mapped to [-1, 1).
[[gnu::always_inline]] inline float uniform_value(std::uint64_t base, std::size_t i)
{
  const std::uint64_t bits = splitmix64(base + i);
  return static_cast<float>(static_cast<double>(bits >> 11) * 0x1.0p-52 - 1.0);
}

void fill_uniform_portable(std::uint64_t base, std::span<float> out)
{
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = uniform_value(base, i);
}

// The same loop vectorized for AVX-512 (64-bit multiplies in vector registers). The arithmetic is exact
// integer work, exact conversions and the same two roundings, so the values are bit-identical.
[[gnu::target("avx512f,avx512dq,avx512vl"), gnu::optimize("O3")]] void fill_uniform_avx512(std::uint64_t base,
                                                                                           std::span<float> out)
{
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = uniform_value(base, i);
}

void fill_uniform(std::uint64_t base, std::span<float> out)
{
  if (vector_math::avx512_loops_supported())
    fill_uniform_avx512(base, out);
  else
    fill_uniform_portable(base, out);
}

// Uniform values in [-1, 1): the simplest dense workload for the dense baselines.
class UniformSource final : public GradientSource {
public:
  explicit UniformSource(std::uint64_t seed)
      : seed_(seed)
  {
  }
  std::string name() const override { return "uniform"; }
  nlohmann::json to_json() const override { return {{"source", "uniform"}}; }
  void generate(RankId rank, int iteration, std::span<float> out) const override
  {
    fill_uniform(mix_coordinates(seed_, rank, iteration, 0), out);
  }
  bool concurrent_generate() const override { return true; }

private:
  std::uint64_t seed_;
};

// Small integers in [-8, 8]: every partial sum is exact in fp32 (up to 2^20 ranks), so reductions can be
// checked for exact equality whatever the summation order.
class IntegerSource final : public GradientSource {
public:
  explicit IntegerSource(std::uint64_t seed)
      : seed_(seed)
  {
  }
  std::string name() const override { return "integers"; }
  nlohmann::json to_json() const override { return {{"source", "integers"}}; }
  void generate(RankId rank, int iteration, std::span<float> out) const override
  {
    const std::uint64_t base = mix_coordinates(seed_, rank, iteration, 0);
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i] = static_cast<float>(static_cast<int>(splitmix64(base + i) % 17) - 8);
  }
  bool concurrent_generate() const override { return true; }

private:
  std::uint64_t seed_;
};

} // namespace

std::uint64_t mix_coordinates(std::uint64_t seed, std::uint64_t rank, std::uint64_t iteration, std::uint64_t index)
{
  return splitmix64(splitmix64(splitmix64(splitmix64(seed) ^ rank) ^ iteration) ^ index);
}

void GradientSource::candidates(std::span<const RankId>, int, double, std::vector<SparseVector>&) const
{
  throw std::logic_error(name() + " gradients have no candidates generation");
}

double GradientSource::candidate_floor(int, double, int) const
{
  throw std::logic_error(name() + " gradients have no candidates generation");
}

double candidate_floor_for_top_k(const GradientSource& source, int iteration, std::uint64_t k, int threads)
{
  const double expected = 1.02 * static_cast<double>(k) + 8 * std::sqrt(static_cast<double>(k)) + 16;
  return source.candidate_floor(iteration, expected, threads);
}

void candidates_for_top_k(const GradientSource& source, std::span<const RankId> ranks, int iteration, double floor,
                          std::span<const std::uint64_t> needed, std::vector<SparseVector>& out)
{
  source.candidates(ranks, iteration, floor, out);
  for (std::size_t s = 0; s < ranks.size(); ++s)
    for (double lower = floor; out[s].size() < needed[s] && lower > 0;) {
      lower = lower > 1e-30 * floor ? lower / 2 : 0.0;
      out[s] = source.candidates(ranks[s], iteration, lower);
    }
}

std::unique_ptr<GradientSource> parse_gradient_source(JsonReader gradients, const GradientContext& context)
{
  const std::string source =
      gradients.get_enum("source", {"uniform", "integers", "fashion_mnist_mlp", "replay", "calibrated"}, "uniform");
  if (source != "calibrated" && gradients.get_enum("generation", {"dense", "candidates"}, "dense") != "dense")
    gradients.fail("generation", "candidates", "\"dense\": only the calibrated source has the candidates generation");
  std::unique_ptr<GradientSource> created;
  if (source == "calibrated")
    created = make_calibrated_source(gradients, context);
  else if (source == "fashion_mnist_mlp")
    created = make_training_source(gradients, context);
  else if (source == "integers")
    created = std::make_unique<IntegerSource>(context.seed);
  else if (source == "replay")
    created = make_replay_source(gradients, context);
  else
    created = std::make_unique<UniformSource>(context.seed);
  gradients.finish();
  return created;
}

} // namespace sparsim
