// Local selection in the rank loop: which entries of its accumulated gradient a rank contributes.
//
// Three policies (algorithms.md, "Ok-Topk, one iteration", step 2, and "Further baselines"):
// - "exact": the exact top-k by magnitude every iteration (TopkA, gTopk, SparCML).
// - "threshold_reuse": Ok-Topk's. Every `reevaluate_every` iterations (tau') the threshold is the exact k-th
//   largest |acc| and the selection is the exact top-k; in between the last threshold is reused, selecting
//   |acc| > threshold (strict), so the count m drifts around k. The reference implementation corrects the
//   threshold multiplicatively: before selecting, VGG raises it by `raise_factor` (at most `raise_max` times)
//   while m > raise_above * k; after selecting, if m left the window (low*k, high*k) the threshold is scaled
//   by `factor` for the next iteration (down when m was too small, up when too large).
// - "gaussian": Gaussiank's. The threshold comes from a normal fit of acc: mean + z * sigma, z the two-sided
//   standard normal quantile at the density (P(|Z| > z) = k / n), sigma the unbiased standard deviation; it
//   selects |acc| > threshold (strict), after the reference's correction of the fitted threshold, which differs
//   per model (GaussianCorrection). The fit misjudges k both ways: it over-selects on a heavy-tailed acc (early
//   iterations, no residual) and under-selects on one with a truncated tail (long error feedback), so m varies
//   by rank and iteration and the correction decides much of it.
#pragma once

#include "sim/base/json_reader.hpp"
#include "sim/base/units.hpp"
#include "sim/data/sparse.hpp"
#include "sim/gradients/source.hpp"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>

namespace sparsim {

// Gaussiank's correction of its fitted threshold, as the reference implementation's GaussianCompressor does it
// (Shigangli/Ok-Topk, {VGG,LSTM,BERT}/compression.py; the three models' code differs): when the first count m
// is below floor(k * lower_trigger), the threshold is divided by `lower_divisor` and m counted again while
// m < floor(k * lower_target), at most `lower_rounds` times; else when m > floor(k * upper_limit) (0: never), it
// is multiplied by `upper_factor` while m > floor(k * upper_limit), at most `upper_rounds` times. The fractions
// are kept as numerator and denominator so that floor(k * 3 / 4) is the reference's integer 3*k//4.
struct GaussianCorrection {
  struct Fraction {
    std::uint64_t numerator = 0, denominator = 1;
    std::uint64_t of(std::uint64_t k) const { return k * numerator / denominator; }
  };
  Fraction lower_trigger, lower_target;
  double lower_divisor = 1;
  int lower_rounds = 0;
  Fraction upper_limit; // 0: no upward correction
  double upper_factor = 1;
  int upper_rounds = 0;
};

// Threshold correction rules of the reference implementation, per model (algorithms.md).
struct ThresholdRules {
  std::string preset; // "vgg", "lstm", "bert"
  double low = 0;     // window (low*k, high*k) for the selected count m
  double high = 0;
  double factor = 1;           // scale applied for the next iteration when m leaves the window
  double raise_above = 0;      // before selecting: raise while m > raise_above * k ...
  double raise_factor = 1;     // ... by this factor ...
  int raise_max = 0;           // ... at most this many times (0: never)
  GaussianCorrection gaussian; // the same model's Gaussiank correction (policy "gaussian")
};
ThresholdRules threshold_rules(const std::string& preset);

enum class SelectionPolicy { exact, threshold_reuse, gaussian };
inline constexpr EnumNames<SelectionPolicy, 3> kSelectionPolicyNames{
    {{SelectionPolicy::exact, "exact"},
     {SelectionPolicy::threshold_reuse, "threshold_reuse"},
     {SelectionPolicy::gaussian, "gaussian"}}};
// What a rank keeps between iterations for error feedback (SelectionConfig::residual).
enum class ResidualKind { dense, none, mean_field };
inline constexpr EnumNames<ResidualKind, 3> kResidualKindNames{
    {{ResidualKind::dense, "dense"}, {ResidualKind::none, "none"}, {ResidualKind::mean_field, "mean_field"}}};

// Which entries an exact top-k selection sends (policy "exact", and "threshold_reuse" at re-evaluations):
// - "exact": the k largest magnitudes;
// - "strictly_above_kth": the entries strictly above the k-th largest magnitude (k - 1 when it is not tied), as
//   the reference implementation selects (torch.topk for the threshold, then |acc| > threshold): its Ok-Topk at
//   every re-evaluation, its TopkDSA at every call;
// - "strictly_above_kth_dropping_it": the same, and the residual also loses the top-k entries left out (the
//   k-th), as the reference's TopkDSA, which zeroes the whole top-k in its residual before selecting.
enum class TopKRule { exact, strictly_above_kth, strictly_above_kth_dropping_it };
inline constexpr EnumNames<TopKRule, 3> kTopKRuleNames{
    {{TopKRule::exact, "exact"},
     {TopKRule::strictly_above_kth, "strictly_above_kth"},
     {TopKRule::strictly_above_kth_dropping_it, "strictly_above_kth_dropping_it"}}};
// What a rank's residual gives up in an Ok-Topk re-evaluation iteration:
// - "selected_in_result": what it selected and U kept (the residual rule of Ok-Topk);
// - "reference_searchsorted": only what the reference's BERT and LSTM code finds (allreducer.py,
//   intersect1d_searchsorted): np.searchsorted of the rank's selected indices in U's indices ordered by
//   magnitude (torch.topk's order, not by index), so most lookups miss and the residual keeps values it has
//   already sent. Emulated exactly, numpy's carried search bounds included; U's ties in magnitude are ordered
//   by index.
enum class ReevaluationResidual { selected_in_result, reference_searchsorted };
inline constexpr EnumNames<ReevaluationResidual, 2> kReevaluationResidualNames{
    {{ReevaluationResidual::selected_in_result, "selected_in_result"},
     {ReevaluationResidual::reference_searchsorted, "reference_searchsorted"}}};

struct SelectionConfig {
  SelectionPolicy policy = SelectionPolicy::exact;
  int reevaluate_every = 32; // tau'
  ThresholdRules rules = threshold_rules("vgg");
  int warmup_iterations = 0; // dense iterations before sparsification (counted in the iterations)
  // What a rank keeps between iterations for error feedback (docs/scale.md):
  // - "dense": the exact residual, n floats per rank;
  // - "none": nothing; each iteration selects from the fresh gradient (acc = gradient). Exact for the first
  //   sparse iteration (the residual is zero after the dense warm-up), an approximation afterwards. For
  //   runs at scale, where P*n floats do not fit.
  // - "mean_field": with the candidates generation, one residual distribution per entry shared by all ranks plus
  //   each rank's exactly kept entries that the algorithm did not consume (sim/gradients/mean_field.hpp).
  ResidualKind residual = ResidualKind::dense;
  double carried_cap = 2; // "mean_field": a rank's carried store holds at most carried_cap * k entries
  TopKRule top_k = TopKRule::exact;
  ReevaluationResidual reevaluation_residual = ReevaluationResidual::selected_in_result;
  nlohmann::json to_json() const;
  // Every local selection is an exact top-k, so it holds exactly k entries (SparseInput::exactly_k).
  bool exact_top_k() const { return policy == SelectionPolicy::exact && top_k == TopKRule::exact; }
};
// Reads the config's "selection" object; `default_policy` comes from the algorithm. `candidates`: the gradients
// come as candidates (gradients.generation "candidates"), which keep no dense residual: "none" is the default,
// "mean_field" the model of error feedback and "dense" an error (and "mean_field" without candidates); nor do they
// allow a normal fit of the whole acc: policy "gaussian" is an error.
SelectionConfig parse_selection(JsonReader selection, SelectionPolicy default_policy, bool candidates = false);

// z with P(|Z| > z) = p for a standard normal Z, p in (0, 1] (std::invalid_argument otherwise).
double normal_two_sided_quantile(double p);
// Gaussiank's threshold before its correction: mean + z sigma over the entries of acc (sums in double; sigma
// with the n - 1 divisor, as torch.std), z = normal_two_sided_quantile(k / n); infinite (selects nothing) for
// k = 0.
double gaussian_fit_threshold(std::span<const float> acc, std::uint64_t k);

// What a selection cost in memory traffic, for the compute model: the streaming passes over acc (4 bytes per
// entry each) and the (index, value) pairs written (8 bytes each).
struct SelectionTraffic {
  std::uint64_t bytes_read = 0;
  std::uint64_t bytes_written = 0;
};

// What a rank's iteration costs outside the network, in simulated time (config "compute"), on `device` (a
// preset of sim/run/devices.hpp, default the P100):
// - training: the forward and backward pass that produce the gradient, charged at the start of every
//   iteration (dense warm-up ones too) as phase "compute": "none" (not at all), "model" (the training step
//   time of the gradient source's model table, configs/models/, moved from the table's device to `device`
//   at `precision`: resolve_training_step), or "fixed" (`forward_backward`);
// - selection (sparse iterations, phase "selection"; also the block top-k a collective that selects within
//   itself makes from the acc, SparDL): "free"; "memory_bandwidth": the kernel's memory
//   traffic over a device's memory bandwidth (default: an NVIDIA P100's 732 GB/s HBM2, the Piz Daint GPU,
//   NVIDIA P100 datasheet), i.e. a memory-bound kernel at full speed; "measured": this host's measured kernel
//   time times `measured_scale` (not deterministic: results vary from run to run; manifests say so; not for
//   SparDL, whose selections happen inside the collective);
// - staging (phase "staging"): "none", or "pcie": the dense gradient (4 bytes per entry) copied from the
//   device to the host before the collective and the dense result back after it, each over
//   `pcie_bandwidth`, as the reference implementation did (its collectives work on host arrays);
// - reduction (phase "reduction"): the work a rank does on received data (sums, merges, re-selections,
//   Communicator::charge_reduction): "free", or "memory_bandwidth": the bytes it reads and writes over
//   `reduction_bandwidth` (default: `memory_bandwidth`, the device; a host's bandwidth models host-side merges).
enum class TrainingCharge { none, model, fixed };
inline constexpr EnumNames<TrainingCharge, 3> kTrainingChargeNames{
    {{TrainingCharge::none, "none"}, {TrainingCharge::model, "model"}, {TrainingCharge::fixed, "fixed"}}};
enum class SelectionCharge { free, memory_bandwidth, measured };
inline constexpr EnumNames<SelectionCharge, 3> kSelectionChargeNames{
    {{SelectionCharge::free, "free"},
     {SelectionCharge::memory_bandwidth, "memory_bandwidth"},
     {SelectionCharge::measured, "measured"}}};
enum class StagingCharge { none, pcie };
inline constexpr EnumNames<StagingCharge, 2> kStagingChargeNames{
    {{StagingCharge::none, "none"}, {StagingCharge::pcie, "pcie"}}};
enum class ReductionCharge { free, memory_bandwidth };
inline constexpr EnumNames<ReductionCharge, 2> kReductionChargeNames{
    {{ReductionCharge::free, "free"}, {ReductionCharge::memory_bandwidth, "memory_bandwidth"}}};

struct ComputeModel {
  std::string device = "p100";    // the GPU (sim/run/devices.hpp): its memory bandwidth is memory_bandwidth's default
  bool device_given = false;      // compute.device was set (a model table's step then moves to that device)
  std::string precision = "fp32"; // "fp32" or "mixed": the arithmetic peak a moved training step scales with
  TrainingCharge training = TrainingCharge::none;
  Seconds forward_backward = 0; // charged per iteration (resolved from the model table for "model")
  SelectionCharge selection = SelectionCharge::memory_bandwidth;
  BytesPerSecond memory_bandwidth = 732e9;
  double measured_scale = 1.0;
  StagingCharge staging = StagingCharge::none;
  BytesPerSecond pcie_bandwidth = 12e9;
  ReductionCharge reduction = ReductionCharge::free;
  BytesPerSecond reduction_bandwidth = 732e9;
  // The rate Communicator::charge_reduction charges at: 0 for "free".
  BytesPerSecond charged_reduction_bandwidth() const
  {
    return reduction == ReductionCharge::free ? 0 : reduction_bandwidth;
  }
  // The bandwidth a selection inside a collective is charged at: memory_bandwidth under "memory_bandwidth",
  // else 0 (free; "measured" is refused for such collectives).
  BytesPerSecond charged_selection_bandwidth() const
  {
    return selection == SelectionCharge::memory_bandwidth ? memory_bandwidth : 0;
  }
  // One copy of an n-entry fp32 vector between device and host ("pcie" staging), else 0.
  Seconds staging_copy_time(std::uint64_t n) const;
  nlohmann::json to_json() const;
};
// Reads the config's "compute" object; `training = "model"` leaves `forward_backward` to the caller, which
// knows the gradient source (resolve_training_step).
ComputeModel parse_compute(JsonReader compute);
// A model table's training step on the compute model's device: the table's own figure on the table's own device
// at fp32 (its estimates are fp32); else its compute-bound part times the ratio of the two devices' arithmetic
// peaks (the table's at fp32, the device's at `precision`) and its memory-bound part times the ratio of their
// memory bandwidths. Throws a ConfigError when the device was set and the table names no device to move from.
Seconds resolve_training_step(const ComputeModel& compute, const TrainingStep& step);

// One rank's selector; keeps the reused threshold between iterations.
class LocalSelector {
public:
  explicit LocalSelector(SelectionConfig config)
      : config_(std::move(config))
  {
  }

  // Selects from `acc` for `iteration`; sorted by index. `traffic` receives the memory traffic it modelled.
  // With `buffer`, the kernels write into it (its capacity reused across calls: no fresh pages to fault in) and
  // the result is a copy of exactly its size.
  SparseVector select(std::span<const float> acc, std::uint64_t k, int iteration, SelectionTraffic& traffic,
                      SparseVector* buffer = nullptr);
  // The same selection from an acc of n entries given as its candidates: the entries above a floor, every
  // other entry being at most the floor in magnitude. Exact when the floor is at most reuse_threshold() and,
  // for an exact top-k, at least k candidates exceed it. The traffic is the dense kernel's (n entries).
  SparseVector select_candidates(const SparseVector& candidates, std::uint64_t n, std::uint64_t k, int iteration,
                                 SelectionTraffic& traffic, SparseVector* buffer = nullptr);
  // Policy "gaussian" from candidates: the normal fit's threshold `fit` comes from a model of the whole acc (its
  // mean and standard deviation); exact when the floor is at most the fit after its largest downward correction.
  SparseVector select_candidates_gaussian(const SparseVector& candidates, std::uint64_t n, std::uint64_t k, double fit,
                                          SelectionTraffic& traffic, SparseVector* buffer = nullptr);
  // The threshold the selection of `iteration` starts from when it reuses one (raising only increases it);
  // nothing when it is an exact top-k (policy "exact", no threshold yet, or a re-evaluation iteration).
  std::optional<double> reuse_threshold(int iteration) const;
  double threshold() const { return used_threshold_; } // the threshold of the last selection
  // Indices the last selection took out of acc without sending them (top_k "strictly_above_kth_dropping_it"),
  // in index order; the residual loses them too.
  const std::vector<Index>& dropped() const { return dropped_; }

private:
  // select() over the values of acc; `indices` maps their positions to indices (nullptr: the identity).
  SparseVector select_from(std::span<const float> values, const std::vector<Index>* indices, std::uint64_t n,
                           std::uint64_t k, int iteration, SelectionTraffic& traffic, SparseVector* buffer,
                           std::optional<double> gaussian_fit = std::nullopt);
  // top_k "strictly_above_kth...": removes the entries at the threshold (the k-th magnitude, and its ties).
  void keep_strictly_above_threshold(SparseVector& selection);
  // The threshold of policy "gaussian": the fit, corrected; counts a pass over n entries per count it makes.
  double corrected_gaussian_threshold(std::span<const float> acc, double fit, std::uint64_t n, std::uint64_t k,
                                      SelectionTraffic& traffic) const;

  SelectionConfig config_;
  double threshold_ = 0; // the threshold the next reuse starts from
  double used_threshold_ = 0;
  bool have_threshold_ = false;
  std::vector<Index> dropped_;
};

// The indices of `selection` (ascending) that np.searchsorted finds in `order` (side "left", numpy's search with
// the bounds it carries from one ascending key to the next), i.e. the reference's intersect1d_searchsorted;
// `order` may be unsorted, and then most lookups miss.
std::vector<Index> found_by_searchsorted(std::span<const Index> selection, std::span<const Index> order);
// U's indices in the order of the reference's global top-k: by magnitude, largest first; ties by index.
std::vector<Index> indices_by_magnitude(const SparseVector& result);

// The candidates generation's floor (gradients.generation "candidates") for an iteration of these selectors: the
// lowest threshold any of them reuses and, when one of them selects an exact top-k (or `top_k_anyway`), at most
// the floor expected to leave enough candidates for a top-k of k (candidate_floor_for_top_k) or, if higher,
// `top_k_floor_at_least` (the mean-field residual's guess from the last thresholds; a rank left with fewer than k
// candidates draws again lower).
double candidate_floor(const GradientSource& source, std::span<const LocalSelector> selectors, int iteration,
                       std::uint64_t k, bool top_k_anyway, int threads, double top_k_floor_at_least = 0);

} // namespace sparsim
