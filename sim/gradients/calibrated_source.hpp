// The calibrated gradient source: synthetic gradients with the statistics of real ones (docs/gradients.md).
//
// A rank's gradient is a pure function of (seed, rank, iteration, index), built from a model's layer table
// (configs/models/*.json) flattened in the model's order:
//
//   g_r[i](t) = c(t) s(layer) w_i(t) row_r(t) (sqrt(shared) m_i(t) + sqrt(1 - shared) z_r,i(t) v_r,i(t))
//
// - s(layer): layer scale, a power of the layer's size (small layers get larger entries), times a factor
//   for the model's output layer;
// - w_i(t): a persistent heavy-tailed (log-normal) magnitude per entry that drifts slowly: the hot set;
// - m_i(t): a component shared by all ranks (the full-batch gradient), drifting slowly;
// - z_r,i(t) v_r,i(t): per-rank noise (the mini-batch's sampling noise), fresh every iteration: a normal
//   times a log-normal factor (heavy tails that do not persist);
// - c(t): a per-iteration scale common to all ranks (batches differ in gradient norm);
// - row_r(t): for row-sparse embeddings (BERT's word embedding), 0 for the rows of tokens not in rank r's
//   batch, else a factor growing with the token's expected count.
//
// The rank-independent factors of an iteration are computed once and cached (2n floats); each rank then
// costs one Box-Muller pair and one exp per entry. Nothing is kept per rank.
//
// The candidates generation ("generation": "candidates", the scale mode) draws only a rank's entries above a
// floor from the same model (sim/gradients/candidate_sampler.hpp): the shared part as above, then work
// proportional to the candidates per rank. Its realisation differs from the dense one (other random numbers);
// its distribution is the same.
#pragma once

#include "sim/gradients/candidate_sampler.hpp"
#include "sim/gradients/model_table.hpp"
#include "sim/gradients/noise_magnitude.hpp"
#include "sim/gradients/source.hpp"

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace sparsim {

// A layer of the flattened gradient: where it lives in [0, n) after scaling to n.
struct FlatLayer {
  std::string name;
  std::string kind;
  std::uint64_t begin = 0;
  std::uint64_t size = 0;
  std::uint64_t rows = 0;       // scaled row count of a row-sparse embedding (0: dense)
  std::uint64_t table_rows = 0; // the table's row count (token frequency ranks)
  bool output = false;
  double scale = 1; // s(layer), normalised so that the mean of s^2 over all n entries is 1
};

// The table's layers in flattening order, sized to n: each layer gets floor(size * n / total) entries and
// the remaining entries go to the layers with the largest fractional parts (earliest first on ties), so the
// proportions are kept and the sizes sum to n. Layers may become empty when n is small.
std::vector<FlatLayer> flatten_layers(const ModelTable& table, std::uint64_t n, double layer_scale_exponent,
                                      double output_layer_scale);

// The generator's parameters; docs/gradients.md gives each one's effect and how the defaults were calibrated.
struct CalibratedParams {
  std::string model = "vgg16";
  double heavy_tail = 0.95;          // sigma of the log-normal magnitude w_i
  double hot_set_drift = 60;         // iterations over which w_i is replaced by an independent draw
  double shared_fraction = 0.05;     // share of the variance common to all ranks
  double shared_drift = 30;          // iterations over which m_i is replaced by an independent draw
  double layer_scale_exponent = 0.3; // s(layer) proportional to size^-exponent
  double output_layer_scale = 1.2;   // extra factor on the output layer's s
  double iteration_jitter = 0.6;     // standard deviation of log c(t)
  double noise_tail = 0.25;          // sigma of the fresh log-normal factor on z (heavy tails of the noise)
  double tokens_per_batch = 4096;    // tokens in one rank's batch (row-sparse embeddings)
  double zipf_exponent = 1.0;        // token frequencies ~ rank^-exponent
  std::string generation = "dense";  // "dense" (every entry) or "candidates" (the scale mode)
  nlohmann::json to_json() const;
};

class CalibratedSource final : public GradientSource {
public:
  CalibratedSource(const ModelTable& table, CalibratedParams params, std::uint64_t seed, std::uint64_t n);

  std::string name() const override { return "calibrated"; }
  nlohmann::json to_json() const override;
  void generate(RankId rank, int iteration, std::span<float> out) const override;
  bool concurrent_generate() const override { return true; } // the shared part is cached under a mutex
  std::optional<TrainingStep> training_step() const override;
  bool generates_candidates() const override { return magnitude_.has_value(); }
  using GradientSource::candidates;
  void candidates(std::span<const RankId> ranks, int iteration, double floor,
                  std::vector<SparseVector>& out) const override;
  double candidate_floor(int iteration, double expected, int threads) const override;
  void prepare_candidates(int iteration, double floor, int threads) const override
  {
    if (magnitude_)
      candidate_plan(iteration, floor, threads);
  }

  bool fresh_model(int iteration, int threads, FreshGradientModel& out) const override;

  std::vector<LayerRange> layer_ranges() const override;
  const std::vector<FlatLayer>& layers() const { return layers_; }
  const CalibratedParams& params() const { return params_; }

private:
  // The rank-independent part of one iteration: g = mean + noise * z (times the row mask).
  struct SharedPart {
    int iteration = 0;
    std::vector<float> mean;
    std::vector<float> noise;
  };
  // `threads`: host threads that compute it when it is not cached (the result does not depend on them).
  std::shared_ptr<const SharedPart> shared_part(int iteration, int threads = 1) const;
  std::shared_ptr<const SharedPart> compute_shared_part(int iteration, int threads) const;
  double iteration_shock(int iteration) const; // log c(t) / iteration_jitter: a standard normal
  // Whether entry i's row is in rank's batch (true outside row-sparse embeddings): the dense generator's draw.
  bool row_present(RankId rank, int iteration, Index i) const;
  // The probability of that (1 outside row-sparse embeddings).
  double row_presence(Index i) const;
  const FlatLayer* row_sparse_layer(Index i, std::size_t& layer) const;
  struct PlanEntry {
    std::shared_ptr<const SharedPart> part;
    std::shared_ptr<const CandidatePlan> plan;
  };
  PlanEntry candidate_plan(int iteration, double floor, int threads = 1) const;

  CalibratedParams params_;
  std::optional<TrainingStep> training_step_;
  std::uint64_t seed_;
  std::uint64_t n_;
  std::vector<FlatLayer> layers_;
  // Per layer (empty for dense layers), per row: probability that the row's token is in a rank's batch, and
  // the factor of the row's entries when it is (the square root of the token's expected count given that).
  std::vector<std::vector<double>> row_probability_;
  std::vector<std::vector<double>> row_factor_;
  std::vector<IndexRange> row_sparse_ranges_; // the row-sparse embeddings' entries
  mutable std::mutex cache_mutex_;
  mutable std::shared_ptr<const SharedPart> cache_;
  // The candidates generation: the noise's tabulated magnitude, the last plans (one per floor asked for) and
  // the expected-count histogram of the current iteration.
  std::optional<NoiseMagnitude> magnitude_;
  mutable std::mutex plan_mutex_;
  mutable std::vector<PlanEntry> plans_;
  mutable int counter_iteration_ = -1;
  mutable std::shared_ptr<const CandidateCounter> counter_;
};

// The "calibrated" branch of parse_gradient_source: reads its keys from `gradients` (not finish()).
std::unique_ptr<GradientSource> make_calibrated_source(JsonReader& gradients, const GradientContext& context);

} // namespace sparsim
