// Gradient sources: what each rank feeds the collective in each iteration.
//
// Every source is deterministic in (seed, rank, iteration): the generators are pure functions of those and
// the index, so any rank's gradient can be regenerated (for verification, or instead of being stored at
// scale); replayed and trained sources read files or depend on the updates applied so far.
#pragma once

#include "sim/base/json_reader.hpp"
#include "sim/base/units.hpp"
#include "sim/data/sparse.hpp"
#include "sim/gradients/model_table.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace sparsim {

struct FreshGradientModel;

class GradientSource {
public:
  virtual ~GradientSource() = default;
  virtual std::string name() const = 0;
  virtual nlohmann::json to_json() const = 0;
  // Writes rank `rank`'s gradient of iteration `iteration` into `out` (out.size() = n).
  virtual void generate(RankId rank, int iteration, std::span<float> out) const = 0;
  // Whether generate may be called from several threads at once.
  virtual bool concurrent_generate() const { return false; }
  // Closed-loop sources (a model being trained) receive each iteration's allreduce result once, after all
  // ranks finished the iteration and before any rank generates the next gradient: the sum over ranks of
  // their contributions (sparse U, or the dense sum). Open-loop sources ignore it.
  virtual void apply_update(int /*iteration*/, const SparseVector& /*sum*/, int /*ranks*/) {}
  virtual void apply_dense_update(int /*iteration*/, std::span<const float> /*sum*/, int /*ranks*/) {}
  // Whether the source is closed-loop (uses apply_update).
  virtual bool closed_loop() const { return false; }
  // One training step (forward + backward of a rank's mini-batch) of the model behind the gradients, when the
  // source knows one (calibrated: its model table's "compute" object; replay: the sidecar's or gradients.model's).
  virtual std::optional<TrainingStep> training_step() const { return std::nullopt; }
  // The model's layers in the gradient, in index order, when the source knows them (calibrated: its table
  // sized to n; replay: the recording's layer table); empty otherwise.
  virtual std::vector<LayerRange> layer_ranges() const { return {}; }
  // The candidates generation (scale mode; docs/gradients.md): instead of the dense gradient, the entries of
  // a rank's gradient whose magnitude exceeds `floor`, sorted by index, in work proportional to their number,
  // distributed as the dense gradient's entries above the floor. Only sources that say so support it. out[s]
  // receives the candidates of ranks[s] (its capacity is reused); one call for several ranks shares their
  // memory traffic, the result of a rank does not depend on the others.
  virtual bool generates_candidates() const { return false; }
  virtual void candidates(std::span<const RankId> ranks, int iteration, double floor,
                          std::vector<SparseVector>& out) const;
  SparseVector candidates(RankId rank, int iteration, double floor) const
  {
    std::vector<SparseVector> out;
    candidates(std::span(&rank, 1), iteration, floor, out);
    return std::move(out[0]);
  }
  // Builds now what candidates() of (iteration, floor) would build at its first call (the state shared by ranks),
  // on up to `threads` host threads (the results do not depend on them).
  virtual void prepare_candidates(int /*iteration*/, double /*floor*/, int /*threads*/) const {}
  // The floor above which a rank's gradient of `iteration` has `expected` entries on average (0 when even
  // every nonzero entry is fewer).
  virtual double candidate_floor(int /*iteration*/, double /*expected*/, int /*threads*/ = 1) const;
  // The candidates generation's model of the iteration's fresh gradient, for the mean-field residual
  // (sim/gradients/mean_field.hpp); false when the source has none.
  virtual bool fresh_model(int /*iteration*/, int /*threads*/, FreshGradientModel& /*out*/) const { return false; }
  // Lines of training progress for the summary (loss, accuracy); empty for open-loop sources.
  virtual nlohmann::json training_log() const { return nlohmann::json::array(); }
};

// What a source may need to know about the experiment.
struct GradientContext {
  std::uint64_t seed = 1;
  std::uint64_t n = 0; // workload.n
  int ranks = 1;
  std::filesystem::path config_dir; // resolves relative file names (replay files, datasets)
  int iterations = 0;               // the run's iterations (0: not known, e.g. gradient statistics)
  bool phantom_data = false;        // workload.data "phantom": the collectives move no values
};

// Reads the config's "gradients" object: {"source": "uniform"} (default), {"source": "integers"}, ...
std::unique_ptr<GradientSource> parse_gradient_source(JsonReader gradients, const GradientContext& context);

// The candidates generation for an exact top-k of `k` per rank: a floor expected to leave 1.02 k candidates
// (plus 8 standard deviations), and ranks' candidates above a floor with at least needed[s] for ranks[s] (a
// rank that got fewer draws again from half the floor, down to every nonzero entry; rare by the floor's margin).
double candidate_floor_for_top_k(const GradientSource& source, int iteration, std::uint64_t k, int threads = 1);
void candidates_for_top_k(const GradientSource& source, std::span<const RankId> ranks, int iteration, double floor,
                          std::span<const std::uint64_t> needed, std::vector<SparseVector>& out);

// A 64-bit mix of the four coordinates (splitmix64 finaliser chained), the counter-based RNG behind
// every source.
std::uint64_t mix_coordinates(std::uint64_t seed, std::uint64_t rank, std::uint64_t iteration, std::uint64_t index);

} // namespace sparsim
