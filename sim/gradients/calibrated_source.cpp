#include "sim/gradients/calibrated_source.hpp"

#include "sim/base/page_faults.hpp"
#include "sim/base/parallel.hpp"
#include "sim/gradients/mean_field.hpp"
#include "sim/gradients/random_streams.hpp"
#include "sim/gradients/vector_math.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <fmt/format.h>
#include <numbers>
#include <numeric>

namespace sparsim {
namespace {

// Independent random streams: each factor of the model draws from its own salt of the seed.
constexpr std::uint64_t kSaltMagnitude = 0x6d61676e69747564ull;  // w_i
constexpr std::uint64_t kSaltShared = 0x7368617265646d69ull;     // m_i
constexpr std::uint64_t kSaltNoise = 0x6e6f6973657a7269ull;      // z_r,i
constexpr std::uint64_t kSaltIteration = 0x6974657261746963ull;  // c(t)
constexpr std::uint64_t kSaltRows = 0x726f77736163746full;       // row activity
constexpr std::uint64_t kSaltCandidates = 0x63616e6469646174ull; // the candidates generation's per-rank draws
constexpr std::uint64_t kSaltResidual = 0x7265736964756c73ull;   // the mean-field residual's per-rank draws
constexpr std::uint64_t kAllRanks = ~0ull;                       // the "rank" coordinate of shared draws
// The normal behind the log-normal magnitude w_i is clamped to +-4: without a cap, the one largest entry among
// millions (a 5-6 sigma draw, persistent for hot_set_drift iterations) decides the sample kurtosis alone.
constexpr double kLogMagnitudeCap = 4.0;

// Fills out[j] with the standard normals of entries first + j of the stream `base` (entry i uses half of pair
// i / 2; `first` is even).
void fill_normals(std::uint64_t base, std::size_t first, std::span<float> out)
{
  constexpr std::size_t kBlockPairs = 256;
  std::array<double, kBlockPairs> a, b;
  const std::size_t pairs = (out.size() + 1) / 2;
  for (std::size_t begin = 0; begin < pairs; begin += kBlockPairs) {
    const std::size_t count = std::min(kBlockPairs, pairs - begin);
    normal_pairs(base, first / 2 + begin, std::span(a).first(count), std::span(b).first(count));
    for (std::size_t pair = 0; pair < count; ++pair) {
      const std::size_t entry = 2 * (begin + pair);
      out[entry] = static_cast<float>(a[pair]);
      if (entry + 1 < out.size())
        out[entry + 1] = static_cast<float>(b[pair]);
    }
  }
}

// A standard normal per entry that drifts with time: at iteration t, with epoch e = floor(t / period) and
// phase f = t / period - e, the value is cos(pi f / 2) A_e + sin(pi f / 2) A_(e+1) for independent standard
// normals A_e. Every iteration's value is standard normal; after `period` iterations it is independent of
// the start; the path is continuous across epochs.
// Entries first + j into out[j] (`first` even).
void fill_drifting_normals(std::uint64_t seed, std::uint64_t salt, int iteration, double period, std::size_t first,
                           std::span<float> out)
{
  const double position = iteration / period;
  const double epoch = std::floor(position);
  const double phase = (position - epoch) * std::numbers::pi / 2;
  const auto e = static_cast<std::uint64_t>(epoch);
  const float weight_now = static_cast<float>(std::cos(phase));
  const float weight_next = static_cast<float>(std::sin(phase));
  std::vector<float> next(out.size());
  fill_normals(mix_coordinates(seed ^ salt, kAllRanks, e, 0), first, out);
  fill_normals(mix_coordinates(seed ^ salt, kAllRanks, e + 1, 0), first, next);
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = weight_now * out[i] + weight_next * next[i];
}

bool is_weight_kind(const std::string& kind) { return kind != "norm" && kind != "bias"; }

} // namespace

std::vector<FlatLayer> flatten_layers(const ModelTable& table, std::uint64_t n, double layer_scale_exponent,
                                      double output_layer_scale)
{
  const std::uint64_t total = table.total();
  const std::size_t count = table.layers.size();

  // Sizes: proportional shares of n, largest remainders first (exact when n is the table's total).
  std::vector<std::uint64_t> sizes(count);
  std::vector<unsigned __int128> remainders(count);
  std::uint64_t assigned = 0;
  for (std::size_t l = 0; l < count; ++l) {
    const unsigned __int128 scaled = static_cast<unsigned __int128>(table.layers[l].size) * n;
    sizes[l] = static_cast<std::uint64_t>(scaled / total);
    remainders[l] = scaled % total;
    assigned += sizes[l];
  }
  std::vector<std::size_t> order(count);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return remainders[a] > remainders[b]; });
  for (std::size_t j = 0; assigned < n; ++j, ++assigned)
    ++sizes[order[j]];

  // Scales: weight tensors by their (table) size; a bias or normalisation tensor takes the scale of the
  // nearest weight tensor registered before it (after it, for leading ones).
  std::vector<double> scales(count, 1.0);
  std::vector<std::size_t> owner(count, count);
  for (std::size_t l = 0, last = count; l < count; ++l) {
    if (is_weight_kind(table.layers[l].kind))
      last = l;
    owner[l] = last;
  }
  for (std::size_t l = count; l-- > 0;) // leading ones, back to front; a table without weights: the last layer
    if (owner[l] == count)
      owner[l] = l + 1 < count ? owner[l + 1] : l;
  for (std::size_t l = 0; l < count; ++l) {
    const double size = static_cast<double>(table.layers[owner[l]].size);
    scales[l] = std::pow(size / static_cast<double>(total), -layer_scale_exponent);
    if (table.layers[l].output)
      scales[l] *= output_layer_scale;
  }
  double mean_square = 0;
  for (std::size_t l = 0; l < count; ++l)
    mean_square += static_cast<double>(sizes[l]) * scales[l] * scales[l];
  const double normalise = mean_square > 0 ? std::sqrt(static_cast<double>(n) / mean_square) : 1.0;

  std::vector<FlatLayer> flat;
  std::uint64_t begin = 0;
  for (std::size_t j = 0; j < count; ++j) {
    const std::size_t l = table.flatten_order == "reverse" ? count - 1 - j : j;
    const ModelLayer& layer = table.layers[l];
    FlatLayer out{layer.name, layer.kind, begin, sizes[l], 0, layer.rows, layer.output, scales[l] * normalise};
    if (layer.rows > 0 && sizes[l] > 0) {
      const double rows = std::round(static_cast<double>(layer.rows) * sizes[l] / static_cast<double>(layer.size));
      out.rows = std::clamp<std::uint64_t>(static_cast<std::uint64_t>(rows), 1, sizes[l]);
    }
    begin += sizes[l];
    flat.push_back(std::move(out));
  }
  return flat;
}

nlohmann::json CalibratedParams::to_json() const
{
  return {{"model", model},
          {"heavy_tail", heavy_tail},
          {"hot_set_drift", hot_set_drift},
          {"shared_fraction", shared_fraction},
          {"shared_drift", shared_drift},
          {"layer_scale_exponent", layer_scale_exponent},
          {"output_layer_scale", output_layer_scale},
          {"iteration_jitter", iteration_jitter},
          {"noise_tail", noise_tail},
          {"tokens_per_batch", tokens_per_batch},
          {"zipf_exponent", zipf_exponent},
          {"generation", generation}};
}

CalibratedSource::CalibratedSource(const ModelTable& table, CalibratedParams params, std::uint64_t seed,
                                   std::uint64_t n)
    : params_(std::move(params))
    , training_step_(table.training_step)
    , seed_(seed)
    , n_(n)
{
  layers_ = flatten_layers(table, n, params_.layer_scale_exponent, params_.output_layer_scale);
  row_probability_.resize(layers_.size());
  row_factor_.resize(layers_.size());
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    const FlatLayer& layer = layers_[l];
    if (layer.rows == 0)
      continue;
    row_sparse_ranges_.push_back({static_cast<Index>(layer.begin), static_cast<Index>(layer.begin + layer.size)});
    // Token frequencies: Zipf over the table's rows, most frequent first (row r has frequency rank r + 1).
    double harmonic = 0;
    for (std::uint64_t r = layer.table_rows; r >= 1; --r)
      harmonic += std::pow(static_cast<double>(r), -params_.zipf_exponent);
    for (std::uint64_t row = 0; row < layer.rows; ++row) {
      const double rank = std::floor((row + 0.5) * static_cast<double>(layer.table_rows) / layer.rows) + 1;
      const double frequency = std::pow(rank, -params_.zipf_exponent) / harmonic;
      const double expected_count = params_.tokens_per_batch * frequency;
      const double present = -std::expm1(params_.tokens_per_batch * std::log1p(-frequency));
      row_probability_[l].push_back(present);
      row_factor_[l].push_back(std::sqrt(expected_count / present));
    }
  }
  if (params_.generation == "candidates")
    magnitude_.emplace(params_.noise_tail);
}

std::vector<LayerRange> CalibratedSource::layer_ranges() const
{
  std::vector<LayerRange> ranges;
  for (const FlatLayer& layer : layers_)
    ranges.push_back({layer.name, layer.kind, layer.begin, layer.size, layer.output});
  return ranges;
}

nlohmann::json CalibratedSource::to_json() const
{
  nlohmann::json json = params_.to_json();
  json["source"] = "calibrated";
  return json;
}

std::optional<TrainingStep> CalibratedSource::training_step() const { return training_step_; }

std::shared_ptr<const CalibratedSource::SharedPart> CalibratedSource::shared_part(int iteration, int threads) const
{
  {
    std::lock_guard lock(cache_mutex_);
    if (cache_ && cache_->iteration == iteration)
      return cache_;
  }
  auto part = compute_shared_part(iteration, threads);
  std::lock_guard lock(cache_mutex_);
  cache_ = part;
  return part;
}

double CalibratedSource::iteration_shock(int iteration) const
{
  double z = 0, unused = 0;
  normal_pair(
      stream_bits(mix_coordinates(seed_ ^ kSaltIteration, kAllRanks, static_cast<std::uint64_t>(iteration), 0), 0), z,
      unused);
  return z;
}

std::shared_ptr<const CalibratedSource::SharedPart> CalibratedSource::compute_shared_part(int iteration,
                                                                                          int threads) const
{
  auto part = std::make_shared<SharedPart>();
  part->iteration = iteration;
  // Two fresh arrays of n floats every iteration (1 GiB for BERT-base): their pages are faulted in at once.
  reserve_faulted_in(part->mean, n_);
  reserve_faulted_in(part->noise, n_);
  part->mean.resize(n_);
  part->noise.resize(n_);
  const double iteration_scale = std::exp(params_.iteration_jitter * iteration_shock(iteration));
  // exp(sigma G - sigma^2) has mean square 1 for a standard normal G.
  const double sigma = params_.heavy_tail;
  const double shared_weight = std::sqrt(params_.shared_fraction);
  const double noise_weight = std::sqrt(1.0 - params_.shared_fraction);
  // Every entry on its own, in blocks of 2^20 (even) entries over the host threads.
  parallel_blocks(n_, std::size_t{1} << 20, threads, [&](std::size_t begin, std::size_t end) {
    const std::span<float> magnitude(part->noise.data() + begin, end - begin); // w_i, then the noise amplitude
    const std::span<float> shared(part->mean.data() + begin, end - begin);     // m_i, then the mean
    fill_drifting_normals(seed_, kSaltMagnitude, iteration, params_.hot_set_drift, begin, magnitude);
    fill_drifting_normals(seed_, kSaltShared, iteration, params_.shared_drift, begin, shared);
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      const FlatLayer& layer = layers_[l];
      const std::uint64_t first = std::max<std::uint64_t>(layer.begin, begin);
      const std::uint64_t last = std::min<std::uint64_t>(layer.begin + layer.size, end);
      if (first >= last)
        continue;
      const double layer_scale = iteration_scale * layer.scale;
      // The output layer's entries are not heavy-tailed: every class's error meets every feature.
      const double layer_sigma = layer.output ? 0.0 : sigma;
      // In chunks, so that vector_math takes the exponentials of a whole chunk at once.
      constexpr std::uint64_t kChunk = 256;
      std::array<double, kChunk> factor;
      for (std::uint64_t chunk = first; chunk < last; chunk += kChunk) {
        const std::uint64_t count = std::min(kChunk, last - chunk);
        const std::span<double> factors = std::span(factor).first(count);
        for (std::uint64_t j = 0; j < count; ++j) {
          const double w = magnitude[chunk + j - begin];
          factors[j] = layer_sigma * std::clamp(w, -kLogMagnitudeCap, kLogMagnitudeCap) - layer_sigma * layer_sigma;
        }
        vector_math::exp(factors, factors);
        for (std::uint64_t j = 0; j < count; ++j) {
          const std::uint64_t i = chunk + j;
          float& w = magnitude[i - begin];
          float& m = shared[i - begin];
          double amplitude = layer_scale * factors[j];
          if (layer.rows > 0)
            amplitude *= row_factor_[l][(i - layer.begin) * layer.rows / layer.size];
          m = static_cast<float>(amplitude * shared_weight * m);
          w = static_cast<float>(amplitude * noise_weight);
        }
      }
    }
  });
  return part;
}

void CalibratedSource::generate(RankId rank, int iteration, std::span<float> out) const
{
  if (out.size() != n_)
    throw std::invalid_argument(
        fmt::format("calibrated source: gradient of {} entries asked, n is {}", out.size(), n_));
  const auto part = shared_part(iteration);
  // Per-rank noise: a normal times a fresh log-normal factor (a normal variance mixture), one Box-Muller pair
  // (A, B) per entry; exp(tau B - tau^2) has mean square 1. In blocks, so that normal_pairs and vector_math
  // compute the transcendental functions of a whole block at once.
  const std::uint64_t base =
      mix_coordinates(seed_ ^ kSaltNoise, static_cast<std::uint64_t>(rank), static_cast<std::uint64_t>(iteration), 0);
  const double tau = params_.noise_tail;
  constexpr std::size_t kBlock = 256;
  std::array<double, kBlock> a, factor;
  for (std::size_t begin = 0; begin < n_; begin += kBlock) {
    const std::size_t count = std::min(kBlock, n_ - begin);
    const std::span<double> factor_block = std::span(factor).first(count);
    normal_pairs(base, begin, std::span(a).first(count), factor_block); // A, and B into factor
    for (double& b : factor_block)
      b = tau * b - tau * tau;
    vector_math::exp(factor_block, factor_block);
    for (std::size_t j = 0; j < count; ++j)
      out[begin + j] = part->mean[begin + j] + part->noise[begin + j] * static_cast<float>(a[j] * factor[j]);
  }

  // Row-sparse embeddings: rows whose token is not in this rank's batch get no gradient.
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    const FlatLayer& layer = layers_[l];
    if (layer.rows == 0)
      continue;
    const std::uint64_t base =
        mix_coordinates(seed_ ^ kSaltRows, static_cast<std::uint64_t>(rank), static_cast<std::uint64_t>(iteration), l);
    for (std::uint64_t row = 0; row < layer.rows; ++row) {
      if (uniform01(stream_bits(base, row)) < row_probability_[l][row])
        continue;
      const std::uint64_t first = (row * layer.size + layer.rows - 1) / layer.rows;
      const std::uint64_t last = ((row + 1) * layer.size + layer.rows - 1) / layer.rows;
      std::fill(out.begin() + static_cast<std::ptrdiff_t>(layer.begin + first),
                out.begin() + static_cast<std::ptrdiff_t>(layer.begin + last), 0.0f);
    }
  }
}

const FlatLayer* CalibratedSource::row_sparse_layer(Index i, std::size_t& layer) const
{
  for (std::size_t l = 0; l < layers_.size(); ++l)
    if (layers_[l].rows > 0 && i >= layers_[l].begin && i - layers_[l].begin < layers_[l].size) {
      layer = l;
      return &layers_[l];
    }
  return nullptr;
}

bool CalibratedSource::row_present(RankId rank, int iteration, Index i) const
{
  std::size_t l = 0;
  const FlatLayer* layer = row_sparse_layer(i, l);
  if (!layer)
    return true;
  const std::uint64_t row = (i - layer->begin) * layer->rows / layer->size;
  const std::uint64_t base =
      mix_coordinates(seed_ ^ kSaltRows, static_cast<std::uint64_t>(rank), static_cast<std::uint64_t>(iteration), l);
  return uniform01(stream_bits(base, row)) < row_probability_[l][row];
}

double CalibratedSource::row_presence(Index i) const
{
  std::size_t l = 0;
  const FlatLayer* layer = row_sparse_layer(i, l);
  return layer ? row_probability_[l][(i - layer->begin) * layer->rows / layer->size] : 1.0;
}

CalibratedSource::PlanEntry CalibratedSource::candidate_plan(int iteration, double floor, int threads) const
{
  std::lock_guard lock(plan_mutex_);
  std::erase_if(plans_, [&](const PlanEntry& e) { return e.part->iteration != iteration; });
  for (const PlanEntry& e : plans_)
    if (e.plan->floor() == floor)
      return e;
  PlanEntry entry;
  entry.part = shared_part(iteration, threads);
  entry.plan = std::make_shared<CandidatePlan>(entry.part->mean, entry.part->noise, floor, *magnitude_, threads);
  if (plans_.size() >= 3) // a rank short of candidates asks for a lower floor; the others keep theirs
    plans_.erase(plans_.begin());
  plans_.push_back(entry);
  return entry;
}

void CalibratedSource::candidates(std::span<const RankId> ranks, int iteration, double floor,
                                  std::vector<SparseVector>& out) const
{
  if (!magnitude_)
    return GradientSource::candidates(ranks, iteration, floor, out);
  const PlanEntry entry = candidate_plan(iteration, floor);
  std::vector<std::uint64_t> streams;
  for (RankId rank : ranks)
    streams.push_back(mix_coordinates(seed_ ^ kSaltCandidates, static_cast<std::uint64_t>(rank),
                                      static_cast<std::uint64_t>(iteration), 0));
  entry.plan->sample(
      streams, row_sparse_ranges_, [&](std::size_t slot, Index i) { return row_present(ranks[slot], iteration, i); },
      out);
}

bool CalibratedSource::fresh_model(int iteration, int threads, FreshGradientModel& out) const
{
  if (!magnitude_)
    return false;
  const auto part = shared_part(iteration, threads);
  out.owner = part;
  out.iteration = iteration;
  out.mean = part->mean;
  out.noise = part->noise;
  out.magnitude = &*magnitude_;
  out.row_sparse = row_sparse_ranges_;
  out.presence = [this](Index i) { return row_presence(i); };
  out.present = [this, iteration](RankId rank, Index i) { return row_present(rank, iteration, i); };
  out.streams = seed_ ^ kSaltResidual;
  return true;
}

double CalibratedSource::candidate_floor(int iteration, double expected, int threads) const
{
  if (!magnitude_)
    return GradientSource::candidate_floor(iteration, expected, threads);
  std::shared_ptr<const CandidateCounter> counter;
  {
    std::lock_guard lock(plan_mutex_);
    if (counter_iteration_ != iteration) {
      const auto part = shared_part(iteration, threads);
      counter_ = std::make_shared<CandidateCounter>(
          part->mean, part->noise, row_sparse_ranges_, [&](Index i) { return row_presence(i); }, *magnitude_, threads);
      counter_iteration_ = iteration;
    }
    counter = counter_;
  }
  return counter->floor_for(expected);
}

std::unique_ptr<GradientSource> make_calibrated_source(JsonReader& gradients, const GradientContext& context)
{
  CalibratedParams params;
  params.model = gradients.get_string("model", params.model);
  params.heavy_tail = gradients.get_number("heavy_tail", params.heavy_tail, 0.0, 3.0);
  params.hot_set_drift = gradients.get_number("hot_set_drift", params.hot_set_drift, 0.0, 1e9, true);
  params.shared_fraction = gradients.get_number("shared_fraction", params.shared_fraction, 0.0, 1.0);
  params.shared_drift = gradients.get_number("shared_drift", params.shared_drift, 0.0, 1e9, true);
  params.layer_scale_exponent = gradients.get_number("layer_scale_exponent", params.layer_scale_exponent, 0.0, 2.0);
  params.output_layer_scale = gradients.get_number("output_layer_scale", params.output_layer_scale, 0.0, 1e6, true);
  params.iteration_jitter = gradients.get_number("iteration_jitter", params.iteration_jitter, 0.0, 3.0);
  params.noise_tail = gradients.get_number("noise_tail", params.noise_tail, 0.0, 3.0);
  params.tokens_per_batch = gradients.get_number("tokens_per_batch", params.tokens_per_batch, 1.0, 1e12);
  params.zipf_exponent = gradients.get_number("zipf_exponent", params.zipf_exponent, 0.0, 4.0);
  params.generation = gradients.get_enum("generation", {"dense", "candidates"}, params.generation);

  ModelTable table;
  try {
    table = read_model_table(model_table_path(params.model, context.config_dir));
  } catch (const ConfigError& e) {
    gradients.fail(
        "model", params.model,
        fmt::format("\"vgg16\", \"lstm_an4\", \"bert_base\", \"resnet_fmnist\" or a valid layer table file ({})",
                    e.what()));
  }
  if (context.n > 0xFFFFFFFFull)
    gradients.fail("model", params.model, "workload.n below 2^32 (sparse indices are 32-bit)");
  return std::make_unique<CalibratedSource>(table, std::move(params), context.seed, context.n);
}

} // namespace sparsim
