// Statistics of a gradient source under top-k sparsification with error feedback, measured offline (no
// network, no SimGrid): the figures of algorithms.md's "What real gradients look like", so that a synthetic
// source can be compared with real gradients (docs/gradients.md).
//
// Per iteration t and rank r, with residual_r = 0 at the start:
//   acc_r = residual_r + grad_r(t);  S_r = exact top-k of acc_r;  residual_r = acc_r with S_r zeroed.
// A second loop runs the same recurrence with Ok-Topk's threshold reuse (LocalSelector) instead of the exact
// top-k, for the selected counts m. A third set of figures uses the raw gradients' exact top-k (no error
// feedback), and a fourth Ok-Topk's threshold reuse on the raw gradients. `warmup` iterations run the loops
// before anything is measured (the residuals start at zero, far from their steady state).
//
// A source with the candidates generation (its scale mode) has no dense gradient: only the raw figures that
// need no dense vector are measured (the others are NaN), from candidates above the iteration's lowest floor.
#pragma once

#include "sim/data/sparse.hpp"
#include "sim/gradients/source.hpp"
#include "sim/run/selection.hpp"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

namespace sparsim {

struct GradientStatsOptions {
  int ranks = 8;
  std::uint64_t n = 0;
  std::uint64_t k = 0;
  int iterations = 20; // measured iterations
  int warmup = 0;      // iterations run before measuring
  SelectionConfig reuse{
      .policy = SelectionPolicy::threshold_reuse, .reevaluate_every = 32, .rules = threshold_rules("vgg")};
  // The model's layers in the gradient (GradientSource::layer_ranges); empty: no per-layer shares, and no
  // output layer's share (the layers marked output).
  std::vector<LayerRange> layers;
  // With the candidates generation: run the error-feedback loops with the mean-field residual (else their
  // figures are NaN).
  bool mean_field = false;
  // Host threads for the mean-field residual's plan, update and the ranks' draws (the figures do not depend on it).
  int threads = 1;
};

// The figures of one measured iteration. Undefined values (e.g. overlap with a previous iteration in the
// very first one) are NaN.
struct IterationStats {
  int iteration = 0;
  bool reevaluation = false; // the threshold-reuse loops select an exact top-k (no threshold to reuse)
  // Error feedback, exact top-k.
  double jaccard = 0;            // |S_r n S_s| / |S_r u S_s|, mean over rank pairs r < s
  double union_ratio = 0;        // |union of S_r| / (P k)
  double overlap_previous = 0;   // |S_r(t) n S_r(t-1)| / |S_r(t)|, mean over ranks
  double region_imbalance = 0;   // selections (all ranks) in the busiest of P equal index regions / mean
  double acc_kurtosis = 0;       // kurtosis of acc_r, mean over ranks
  double threshold_drift = 0;    // |th_r(t) / th_r(t-1) - 1| for the exact k-th largest |acc_r|, mean over ranks
  double gaussian_fit_ratio = 0; // count of |acc| above a normal fit's threshold for k / k, mean over ranks
  double selected_kurtosis = 0;  // kurtosis of the selected values, mean over ranks
  // Raw gradients (no error feedback).
  double raw_kurtosis = 0;
  double raw_jaccard = 0;
  double raw_overlap_previous = 0;
  double raw_union_ratio = 0;
  double raw_region_imbalance = 0;
  double raw_selected_kurtosis = 0;
  double raw_threshold_drift = 0;
  double raw_reuse_mean_ratio = 0; // threshold reuse on the raw gradients: m_r / k, mean and max over ranks
  double raw_reuse_max_ratio = 0;
  // Threshold reuse with error feedback: m_r / k, mean and max over ranks.
  double reuse_mean_ratio = 0;
  double reuse_max_ratio = 0;
  // Threshold reuse with error feedback: each rank's count m_r (empty when that loop does not run).
  std::vector<std::uint64_t> reuse_selected;
};

struct GradientStats {
  GradientStatsOptions options;
  std::vector<IterationStats> iterations;
  IterationStats median;         // median over the measured iterations of every figure (NaNs skipped)
  double reuse_median_ratio = 0; // median of m_r / k over all measured (rank, iteration) pairs
  double reuse_max_ratio = 0;    // maximum of m_r / k over them
  double reuse_p90_ratio = 0;    // their 90th percentile: the value at position floor(0.9 N) of the N sorted
  // The same three over the reuse iterations only (re-evaluations, an exact top-k of k entries, left out).
  double reuse_only_median_ratio = 0;
  double reuse_only_p90_ratio = 0;
  double reuse_only_max_ratio = 0;
  double output_share_ratio = 0; // output layer's share of all S_r / its share of n (error feedback)
  double raw_output_share_ratio = 0;
  // Per layer of options.layers: its share of all S_r over the measured iterations (error feedback; NaN
  // without it), and of the raw gradients' top-k.
  std::vector<double> layer_shares;
  std::vector<double> raw_layer_shares;
  double raw_reuse_median_ratio = 0;
  double raw_reuse_max_ratio = 0;
  bool candidates = false; // measured from candidates: the figures that need a dense vector are NaN
  // With `per_iteration`, also each measured iteration's figures ("per_iteration", with the ranks' m_r).
  nlohmann::json to_json(bool per_iteration = false) const;
};

GradientStats measure_gradient_stats(const GradientSource& source, const GradientStatsOptions& options);
// The figures as text, one per line, each next to the range measured on real gradients (algorithms.md).
std::string format_gradient_stats(const GradientStats& stats);

// Building blocks (index lists sorted ascending, without duplicates).
std::size_t intersection_size(std::span<const Index> a, std::span<const Index> b);
double jaccard(std::span<const Index> a, std::span<const Index> b); // 1 when both are empty
std::size_t union_size(const std::vector<SparseVector>& selections);
// Sum of all selections' entries in the busiest of `regions` equal index regions [floor(j n / R),
// floor((j+1) n / R)) over the mean count per region.
double region_imbalance(const std::vector<SparseVector>& selections, std::uint64_t n, int regions);
// Pearson kurtosis m4 / m2^2 about the mean (3 for a normal distribution); NaN for a constant sample.
double kurtosis(std::span<const float> x);
// Median of the non-NaN values (mean of the two middle ones for an even count); NaN when there are none.
double median(std::vector<double> values);
// The value at position floor(q N) (at most N - 1) of the N sorted non-NaN values; NaN when there are none.
double quantile(std::vector<double> values, double q);

} // namespace sparsim
