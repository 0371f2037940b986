#include "sim/run/gradient_stats.hpp"

#include "sim/base/parallel.hpp"
#include "sim/data/topk.hpp"
#include "sim/gradients/mean_field.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace sparsim {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double mean_pairwise_jaccard(const std::vector<SparseVector>& selections)
{
  double sum = 0;
  std::size_t pairs = 0;
  for (std::size_t r = 0; r < selections.size(); ++r)
    for (std::size_t s = r + 1; s < selections.size(); ++s, ++pairs)
      sum += jaccard(selections[r].indices, selections[s].indices);
  return pairs ? sum / static_cast<double>(pairs) : kNaN;
}

// |now n before| / |now|, mean over ranks; NaN without a previous iteration.
double mean_overlap(const std::vector<SparseVector>& now, const std::vector<SparseVector>& before)
{
  if (before.empty())
    return kNaN;
  double sum = 0;
  for (std::size_t r = 0; r < now.size(); ++r)
    sum += now[r].empty() ? 0.0
                          : static_cast<double>(intersection_size(now[r].indices, before[r].indices)) /
                                static_cast<double>(now[r].size());
  return sum / static_cast<double>(now.size());
}

std::size_t count_in_range(const SparseVector& selection, std::uint64_t begin, std::uint64_t end)
{
  const auto first = std::lower_bound(selection.indices.begin(), selection.indices.end(), begin);
  const auto last = std::lower_bound(selection.indices.begin(), selection.indices.end(), end);
  return static_cast<std::size_t>(last - first);
}

// The smallest magnitude in a top-k selection: the exact k-th largest |acc|.
double smallest_magnitude(const SparseVector& selection)
{
  double smallest = std::numeric_limits<double>::infinity();
  for (float v : selection.values)
    smallest = std::min(smallest, static_cast<double>(std::fabs(v)));
  return smallest;
}

// Gaussiank's first estimate, before its correction (gaussian_fit_threshold): the entries it selects over k.
double gaussian_fit_ratio(std::span<const float> acc, std::uint64_t k)
{
  const auto threshold = static_cast<float>(gaussian_fit_threshold(acc, k));
  return static_cast<double>(count_above(acc, threshold)) / static_cast<double>(k);
}

// A selection from candidates: positions in the candidates become the candidates' indices.
SparseVector to_indices(SparseVector selection, const std::vector<Index>& indices)
{
  for (Index& position : selection.indices)
    position = indices[position];
  return selection;
}

void zero_selected(std::span<float> acc, const SparseVector& selection)
{
  for (Index i : selection.indices)
    acc[i] = 0.0f;
}

} // namespace

std::size_t intersection_size(std::span<const Index> a, std::span<const Index> b)
{
  std::size_t common = 0;
  for (std::size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    if (a[i] < b[j]) {
      ++i;
    } else if (b[j] < a[i]) {
      ++j;
    } else {
      ++common;
      ++i;
      ++j;
    }
  }
  return common;
}

double jaccard(std::span<const Index> a, std::span<const Index> b)
{
  const std::size_t common = intersection_size(a, b);
  const std::size_t all = a.size() + b.size() - common;
  return all == 0 ? 1.0 : static_cast<double>(common) / static_cast<double>(all);
}

std::size_t union_size(const std::vector<SparseVector>& selections)
{
  std::vector<Index> all;
  for (const auto& s : selections)
    all.insert(all.end(), s.indices.begin(), s.indices.end());
  std::sort(all.begin(), all.end());
  return static_cast<std::size_t>(std::unique(all.begin(), all.end()) - all.begin());
}

double region_imbalance(const std::vector<SparseVector>& selections, std::uint64_t n, int regions)
{
  std::vector<std::size_t> counts(static_cast<std::size_t>(regions), 0);
  std::size_t total = 0;
  for (const auto& s : selections)
    for (int j = 0; j < regions; ++j) {
      const std::size_t c = count_in_range(s, j * n / regions, (j + 1) * n / regions);
      counts[static_cast<std::size_t>(j)] += c;
      total += c;
    }
  if (total == 0)
    return kNaN;
  const double mean = static_cast<double>(total) / regions;
  return static_cast<double>(*std::max_element(counts.begin(), counts.end())) / mean;
}

double kurtosis(std::span<const float> x)
{
  if (x.empty())
    return kNaN;
  double sum = 0;
  for (float v : x)
    sum += v;
  const double mean = sum / static_cast<double>(x.size());
  double m2 = 0, m4 = 0;
  for (float v : x) {
    const double d = v - mean;
    const double d2 = d * d;
    m2 += d2;
    m4 += d2 * d2;
  }
  m2 /= static_cast<double>(x.size());
  m4 /= static_cast<double>(x.size());
  return m2 > 0 ? m4 / (m2 * m2) : kNaN;
}

double median(std::vector<double> values)
{
  std::erase_if(values, [](double v) { return std::isnan(v); });
  if (values.empty())
    return kNaN;
  std::sort(values.begin(), values.end());
  const std::size_t half = values.size() / 2;
  return values.size() % 2 ? values[half] : (values[half - 1] + values[half]) / 2;
}

double quantile(std::vector<double> values, double q)
{
  std::erase_if(values, [](double v) { return std::isnan(v); });
  if (values.empty())
    return kNaN;
  std::sort(values.begin(), values.end());
  const auto position = static_cast<std::size_t>(q * static_cast<double>(values.size()));
  return values[std::min(position, values.size() - 1)];
}

GradientStats measure_gradient_stats(const GradientSource& source, const GradientStatsOptions& options)
{
  const int P = options.ranks;
  const std::uint64_t n = options.n;
  const std::uint64_t k = options.k;
  if (P < 1 || n == 0 || k == 0 || k > n || options.iterations < 1 || options.warmup < 0)
    throw std::invalid_argument("measure_gradient_stats: needs ranks >= 1, 0 < k <= n, iterations >= 1");

  GradientStats stats;
  stats.options = options;
  const bool candidates = source.generates_candidates();
  const bool mean_field = candidates && options.mean_field;
  stats.candidates = candidates;
  // The dense loops: the gradient and the error-feedback residuals (not with candidates).
  const std::size_t dense = candidates ? 0 : n;
  std::vector<float> gradient(dense);
  std::vector<std::vector<float>> residual(candidates ? 0 : P, std::vector<float>(dense, 0.0f));
  std::vector<std::vector<float>> reuse_residual(candidates ? 0 : P, std::vector<float>(dense, 0.0f));
  std::vector<LocalSelector> selectors(P, LocalSelector(options.reuse));
  std::vector<LocalSelector> raw_selectors(P, LocalSelector(options.reuse));
  std::vector<SparseVector> selected(P), raw_selected(P), previous, raw_previous;
  std::vector<double> previous_threshold(P, kNaN), raw_previous_threshold(P, kNaN);
  std::vector<double> reuse_ratios, raw_reuse_ratios, reuse_only_ratios;
  std::size_t selected_total = 0, raw_total = 0;
  const std::size_t layer_count = options.layers.size();
  std::vector<std::size_t> layer_hits(layer_count, 0), raw_layer_hits(layer_count, 0); // selections per layer
  // The candidates generation's error feedback: a mean-field residual per loop. Offline a rank's residual gives
  // up everything it selected, so nothing is carried.
  MeanFieldResidual exact_residual(mean_field ? n : 0, P, 0), reuse_residual_model(mean_field ? n : 0, P, 0);
  std::vector<RankId> all_ranks(static_cast<std::size_t>(P));
  std::iota(all_ranks.begin(), all_ranks.end(), 0);
  // The ranks' mean-field candidates, consecutive ranks per thread (each rank's draw is its own: the same for any
  // thread count).
  const int threads = std::max(1, std::min(options.threads, P));
  auto draw_over_threads = [&](const MeanFieldResidual& residual, const FreshGradientModel& fresh, double floor,
                               const std::vector<std::uint64_t>& needed, std::vector<SparseVector>& out) {
    out.assign(static_cast<std::size_t>(P), SparseVector{});
    parallel_blocks(static_cast<std::size_t>(P), (static_cast<std::size_t>(P) + threads - 1) / threads, threads,
                    [&](std::size_t begin, std::size_t end) {
                      std::vector<SparseVector> drawn;
                      const std::span<const RankId> ranks(all_ranks.data() + begin, end - begin);
                      residual.candidates_at_least(fresh, ranks, floor,
                                                   std::span<const std::uint64_t>(needed.data() + begin, end - begin),
                                                   drawn);
                      std::move(drawn.begin(), drawn.end(), out.begin() + static_cast<std::ptrdiff_t>(begin));
                    });
  };

  const int last = options.warmup + options.iterations;
  for (int t = 0; t < last; ++t) {
    const bool measured = t >= options.warmup;
    const bool raw_needed = t + 1 >= options.warmup; // the raw selection of the iteration before the first one
    IterationStats it;
    it.iteration = t;
    it.reevaluation = !selectors.front().reuse_threshold(t).has_value(); // the same for every rank
    double drift_sum = 0, raw_drift_sum = 0;
    int drift_count = 0, raw_drift_count = 0;
    // Candidates: one floor for the iteration, below every raw threshold reused and leaving k for a top-k.
    const double floor = candidates ? candidate_floor(source, raw_selectors, t, k, true, 1) : 0.0;
    std::vector<SparseVector> all_candidates, exact_candidates, reuse_candidates;
    if (candidates)
      candidates_for_top_k(source, all_ranks, t, floor, std::vector<std::uint64_t>(all_ranks.size(), k),
                           all_candidates);
    FreshGradientModel fresh;
    std::vector<double> reuse_thresholds;
    if (mean_field) { // acc = residual + gradient under each loop's mean-field residual
      if (!source.fresh_model(t, threads, fresh))
        throw std::invalid_argument("measure_gradient_stats: the mean-field residual needs a fresh-gradient model");
      const double exact_floor = std::max(MeanFieldResidual::top_k_floor_at_least(previous_threshold),
                                          candidate_floor_for_top_k(source, t, k, 1));
      exact_residual.prepare(fresh, exact_floor, threads);
      draw_over_threads(exact_residual, fresh, exact_floor, std::vector<std::uint64_t>(P, k), exact_candidates);
      std::vector<std::uint64_t> needed;
      for (const LocalSelector& selector : selectors) {
        needed.push_back(selector.reuse_threshold(t) ? 0 : k);
        reuse_thresholds.push_back(selector.threshold());
      }
      const double reuse_floor =
          candidate_floor(source, selectors, t, k, false, 1, MeanFieldResidual::top_k_floor_at_least(reuse_thresholds));
      reuse_residual_model.prepare(fresh, reuse_floor, threads);
      draw_over_threads(reuse_residual_model, fresh, reuse_floor, needed, reuse_candidates);
    }
    for (int r = 0; r < P; ++r) {
      SparseVector rank_candidates;
      if (candidates) {
        rank_candidates = std::move(all_candidates[static_cast<std::size_t>(r)]);
      } else {
        source.generate(r, t, gradient);
        if (measured)
          it.raw_kurtosis += kurtosis(gradient) / P;
      }
      // Raw gradients: the exact top-k, and the threshold reuse (the selector runs every iteration).
      SelectionTraffic traffic; // memory traffic: not a statistic of the gradients
      if (raw_needed || measured) {
        raw_selected[r] = candidates ? to_indices(select_topk(rank_candidates.values, k), rank_candidates.indices)
                                     : select_topk(gradient, k);
        const double threshold = smallest_magnitude(raw_selected[r]);
        if (measured) {
          it.raw_selected_kurtosis += kurtosis(raw_selected[r].values) / P;
          if (!std::isnan(raw_previous_threshold[r]) && raw_previous_threshold[r] > 0) {
            raw_drift_sum += std::fabs(threshold / raw_previous_threshold[r] - 1);
            ++raw_drift_count;
          }
        }
        raw_previous_threshold[r] = threshold;
      }
      const SparseVector raw_reused = candidates ? raw_selectors[r].select_candidates(rank_candidates, n, k, t, traffic)
                                                 : raw_selectors[r].select(gradient, k, t, traffic);
      if (measured) {
        const double ratio = static_cast<double>(raw_reused.size()) / static_cast<double>(k);
        raw_reuse_ratios.push_back(ratio);
        it.raw_reuse_mean_ratio += ratio / P;
        it.raw_reuse_max_ratio = std::max(it.raw_reuse_max_ratio, ratio);
      }
      if (candidates && !mean_field)
        continue;

      // Error feedback with the exact top-k: from the dense acc, or from the mean-field residual's candidates.
      if (mean_field) {
        const SparseVector& acc = exact_candidates[static_cast<std::size_t>(r)];
        selected[r] = to_indices(select_topk(acc.values, k), acc.indices);
      } else {
        std::vector<float>& acc = residual[r];
        for (std::uint64_t i = 0; i < n; ++i)
          acc[i] += gradient[i];
        selected[r] = select_topk(acc, k);
        if (measured) {
          it.acc_kurtosis += kurtosis(acc) / P;
          it.gaussian_fit_ratio += gaussian_fit_ratio(acc, k) / P;
        }
        zero_selected(acc, selected[r]);
      }
      const double threshold = smallest_magnitude(selected[r]);
      if (measured) {
        it.selected_kurtosis += kurtosis(selected[r].values) / P;
        if (!std::isnan(previous_threshold[r]) && previous_threshold[r] > 0) {
          drift_sum += std::fabs(threshold / previous_threshold[r] - 1);
          ++drift_count;
        }
      }
      previous_threshold[r] = threshold;

      // Error feedback with Ok-Topk's threshold reuse.
      SparseVector reused;
      if (mean_field) {
        reused = selectors[r].select_candidates(reuse_candidates[static_cast<std::size_t>(r)], n, k, t, traffic);
      } else {
        std::vector<float>& reuse_acc = reuse_residual[r];
        for (std::uint64_t i = 0; i < n; ++i)
          reuse_acc[i] += gradient[i];
        reused = selectors[r].select(reuse_acc, k, t, traffic);
        zero_selected(reuse_acc, reused);
      }
      if (measured) {
        const double ratio = static_cast<double>(reused.size()) / static_cast<double>(k);
        reuse_ratios.push_back(ratio);
        if (!it.reevaluation)
          reuse_only_ratios.push_back(ratio);
        it.reuse_selected.push_back(reused.size());
        it.reuse_mean_ratio += ratio / P;
        it.reuse_max_ratio = std::max(it.reuse_max_ratio, ratio);
      }
    }

    if (mean_field) { // both residuals move on: what stayed below the ranks' median threshold
      exact_residual.update(fresh, MeanFieldResidual::truncation_of(previous_threshold), threads);
      std::vector<double> thresholds;
      for (const LocalSelector& selector : selectors)
        thresholds.push_back(selector.threshold());
      reuse_residual_model.update(fresh, MeanFieldResidual::truncation_of(thresholds), threads);
    }
    if (measured) {
      if (candidates) // no whole acc or gradient to take the kurtosis of, nor to fit a normal to
        for (double IterationStats::*field :
             {&IterationStats::acc_kurtosis, &IterationStats::gaussian_fit_ratio, &IterationStats::raw_kurtosis})
          it.*field = kNaN;
      if (candidates && !mean_field) {
        for (double IterationStats::*field :
             {&IterationStats::jaccard, &IterationStats::union_ratio, &IterationStats::overlap_previous,
              &IterationStats::region_imbalance, &IterationStats::threshold_drift, &IterationStats::reuse_mean_ratio,
              &IterationStats::reuse_max_ratio, &IterationStats::selected_kurtosis})
          it.*field = kNaN;
      } else {
        it.jaccard = mean_pairwise_jaccard(selected);
        it.union_ratio = static_cast<double>(union_size(selected)) / (static_cast<double>(P) * k);
        it.overlap_previous = mean_overlap(selected, previous);
        it.region_imbalance = region_imbalance(selected, n, P);
        it.threshold_drift = drift_count ? drift_sum / drift_count : kNaN;
      }
      it.raw_jaccard = mean_pairwise_jaccard(raw_selected);
      it.raw_overlap_previous = mean_overlap(raw_selected, raw_previous);
      it.raw_union_ratio = static_cast<double>(union_size(raw_selected)) / (static_cast<double>(P) * k);
      it.raw_region_imbalance = region_imbalance(raw_selected, n, P);
      it.raw_threshold_drift = raw_drift_count ? raw_drift_sum / raw_drift_count : kNaN;
      for (int r = 0; r < P; ++r) {
        raw_total += raw_selected[r].size();
        for (std::size_t l = 0; l < layer_count; ++l) {
          const LayerRange& layer = options.layers[l];
          raw_layer_hits[l] += count_in_range(raw_selected[r], layer.begin, layer.begin + layer.size);
          if (!candidates || mean_field)
            layer_hits[l] += count_in_range(selected[r], layer.begin, layer.begin + layer.size);
        }
        if (!candidates || mean_field)
          selected_total += selected[r].size();
      }
      stats.iterations.push_back(it);
    }
    previous = selected;
    if (raw_needed)
      raw_previous = raw_selected;
  }

  auto median_of = [&](double IterationStats::*field) {
    std::vector<double> values;
    for (const auto& it : stats.iterations)
      values.push_back(it.*field);
    stats.median.*field = median(values);
  };
  for (auto field :
       {&IterationStats::jaccard, &IterationStats::union_ratio, &IterationStats::overlap_previous,
        &IterationStats::region_imbalance, &IterationStats::acc_kurtosis, &IterationStats::threshold_drift,
        &IterationStats::gaussian_fit_ratio, &IterationStats::selected_kurtosis, &IterationStats::raw_kurtosis,
        &IterationStats::raw_jaccard, &IterationStats::raw_overlap_previous, &IterationStats::raw_union_ratio,
        &IterationStats::raw_region_imbalance, &IterationStats::raw_selected_kurtosis,
        &IterationStats::raw_threshold_drift, &IterationStats::reuse_mean_ratio, &IterationStats::reuse_max_ratio,
        &IterationStats::raw_reuse_mean_ratio, &IterationStats::raw_reuse_max_ratio})
    median_of(field);
  stats.median.iteration = -1;
  auto median_and_max = [](const std::vector<double>& ratios, double& median_ratio, double& max_ratio) {
    median_ratio = median(ratios);
    max_ratio = ratios.empty() ? kNaN : *std::max_element(ratios.begin(), ratios.end());
  };
  median_and_max(reuse_ratios, stats.reuse_median_ratio, stats.reuse_max_ratio);
  median_and_max(reuse_only_ratios, stats.reuse_only_median_ratio, stats.reuse_only_max_ratio);
  stats.reuse_p90_ratio = quantile(reuse_ratios, 0.9);
  stats.reuse_only_p90_ratio = quantile(reuse_only_ratios, 0.9);
  median_and_max(raw_reuse_ratios, stats.raw_reuse_median_ratio, stats.raw_reuse_max_ratio);
  // Per-layer shares of the selections, and the output layers' share over their share of n.
  auto share = [](std::size_t hits, std::size_t total) {
    return total > 0 ? static_cast<double>(hits) / static_cast<double>(total) : kNaN;
  };
  std::uint64_t output_size = 0;
  double output_share = 0, raw_output_share = 0;
  for (std::size_t l = 0; l < layer_count; ++l) {
    stats.layer_shares.push_back(share(layer_hits[l], selected_total));
    stats.raw_layer_shares.push_back(share(raw_layer_hits[l], raw_total));
    if (options.layers[l].output) {
      output_size += options.layers[l].size;
      output_share += stats.layer_shares.back();
      raw_output_share += stats.raw_layer_shares.back();
    }
  }
  const double output_fraction = static_cast<double>(output_size) / static_cast<double>(n);
  stats.output_share_ratio = output_size > 0 ? output_share / output_fraction : kNaN;
  stats.raw_output_share_ratio = output_size > 0 ? raw_output_share / output_fraction : kNaN;
  return stats;
}

nlohmann::json GradientStats::to_json(bool per_iteration) const
{
  auto number = [](double v) { return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v); };
  nlohmann::json layers = nlohmann::json::array();
  for (std::size_t l = 0; l < options.layers.size(); ++l) {
    const LayerRange& layer = options.layers[l];
    layers.push_back({{"name", layer.name},
                      {"kind", layer.kind},
                      {"begin", layer.begin},
                      {"size", layer.size},
                      {"output", layer.output},
                      {"share", number(layer_shares[l])},
                      {"raw_share", number(raw_layer_shares[l])}});
  }
  nlohmann::json result = {{"ranks", options.ranks},
                           {"n", options.n},
                           {"k", options.k},
                           {"iterations", options.iterations},
                           {"warmup", options.warmup},
                           {"generation", candidates ? "candidates" : "dense"},
                           {"error_feedback",
                            {{"jaccard", number(median.jaccard)},
                             {"union_ratio", number(median.union_ratio)},
                             {"overlap_previous", number(median.overlap_previous)},
                             {"region_imbalance", number(median.region_imbalance)},
                             {"acc_kurtosis", number(median.acc_kurtosis)},
                             {"threshold_drift", number(median.threshold_drift)},
                             {"gaussian_fit_ratio", number(median.gaussian_fit_ratio)},
                             {"selected_kurtosis", number(median.selected_kurtosis)},
                             {"output_share_ratio", number(output_share_ratio)}}},
                           {"raw",
                            {{"kurtosis", number(median.raw_kurtosis)},
                             {"jaccard", number(median.raw_jaccard)},
                             {"overlap_previous", number(median.raw_overlap_previous)},
                             {"union_ratio", number(median.raw_union_ratio)},
                             {"region_imbalance", number(median.raw_region_imbalance)},
                             {"selected_kurtosis", number(median.raw_selected_kurtosis)},
                             {"threshold_drift", number(median.raw_threshold_drift)},
                             {"reuse_median_ratio", number(raw_reuse_median_ratio)},
                             {"reuse_max_ratio", number(raw_reuse_max_ratio)},
                             {"output_share_ratio", number(raw_output_share_ratio)}}},
                           {"threshold_reuse",
                            {{"rules", options.reuse.rules.preset},
                             {"reevaluate_every", options.reuse.reevaluate_every},
                             {"median_ratio", number(reuse_median_ratio)},
                             {"max_ratio", number(reuse_max_ratio)},
                             {"p90_ratio", number(reuse_p90_ratio)},
                             {"reuse_iterations",
                              {{"median_ratio", number(reuse_only_median_ratio)},
                               {"p90_ratio", number(reuse_only_p90_ratio)},
                               {"max_ratio", number(reuse_only_max_ratio)}}}}},
                           {"layers", layers}};
  if (per_iteration) {
    nlohmann::json rows = nlohmann::json::array();
    for (const IterationStats& it : iterations)
      rows.push_back({{"iteration", it.iteration},
                      {"reevaluation", it.reevaluation},
                      {"jaccard", number(it.jaccard)},
                      {"union_ratio", number(it.union_ratio)},
                      {"overlap_previous", number(it.overlap_previous)},
                      {"region_imbalance", number(it.region_imbalance)},
                      {"acc_kurtosis", number(it.acc_kurtosis)},
                      {"threshold_drift", number(it.threshold_drift)},
                      {"gaussian_fit_ratio", number(it.gaussian_fit_ratio)},
                      {"selected_kurtosis", number(it.selected_kurtosis)},
                      {"raw_kurtosis", number(it.raw_kurtosis)},
                      {"raw_jaccard", number(it.raw_jaccard)},
                      {"raw_overlap_previous", number(it.raw_overlap_previous)},
                      {"raw_union_ratio", number(it.raw_union_ratio)},
                      {"raw_region_imbalance", number(it.raw_region_imbalance)},
                      {"raw_selected_kurtosis", number(it.raw_selected_kurtosis)},
                      {"raw_threshold_drift", number(it.raw_threshold_drift)},
                      {"raw_reuse_mean_ratio", number(it.raw_reuse_mean_ratio)},
                      {"raw_reuse_max_ratio", number(it.raw_reuse_max_ratio)},
                      {"reuse_mean_ratio", number(it.reuse_mean_ratio)},
                      {"reuse_max_ratio", number(it.reuse_max_ratio)},
                      {"reuse_selected", it.reuse_selected}});
    result["per_iteration"] = std::move(rows);
  }
  return result;
}

std::string format_gradient_stats(const GradientStats& stats)
{
  const GradientStatsOptions& o = stats.options;
  const IterationStats& m = stats.median;
  std::string text = fmt::format("P = {}, n = {}, k = {}; medians over {} iteration(s) after {} of warm-up\n", o.ranks,
                                 o.n, o.k, o.iterations, o.warmup);
  if (stats.candidates && o.mean_field)
    text += "candidates generation: error feedback by the mean-field residual; no dense vector, so no kurtosis of "
            "whole gradients and no normal fit (nan)\n";
  else if (stats.candidates)
    text += "candidates generation: no dense vector, so no error feedback (selection.residual \"mean_field\" models "
            "it) and no kurtosis of whole gradients (nan)\n";
  auto line = [&](const char* name, double value, const char* real) {
    text += fmt::format("  {:<52} {:>9.4g}   real: {}\n", name, value, real);
  };
  text += "error feedback, exact top-k:\n";
  line("Jaccard of two ranks' selections", m.jaccard, "0.01-0.04");
  line("union of the P selections / (P k)", m.union_ratio, "0.75-0.94");
  line("selection kept from the previous iteration", m.overlap_previous, "about 0.03");
  line("busiest of P equal regions / mean", m.region_imbalance, "1.4-2.2");
  line("output layer's share of selections / its share of n", stats.output_share_ratio, "15-27");
  line("kurtosis of acc", m.acc_kurtosis, "close to a normal's 3");
  line("Gaussian-fit threshold: selected / k", m.gaussian_fit_ratio, "0.05-0.6");
  line("exact threshold change per iteration", m.threshold_drift, "0.02-0.06");
  line("kurtosis of the selected values", m.selected_kurtosis, "-");
  text += "raw gradients (no error feedback), exact top-k:\n";
  line("kurtosis", m.raw_kurtosis, "80-450");
  line("Jaccard of two ranks' selections", m.raw_jaccard, "0.1-0.2");
  line("selection kept from the previous iteration", m.raw_overlap_previous, "0.25-0.35");
  line("union of the P selections / (P k)", m.raw_union_ratio, "-");
  line("busiest of P equal regions / mean", m.raw_region_imbalance, "-");
  line("output layer's share of selections / its share of n", stats.raw_output_share_ratio, "-");
  line("kurtosis of the selected values", m.raw_selected_kurtosis, "-");
  line("exact threshold change per iteration", m.raw_threshold_drift, "-");
  line("threshold reuse: selected m / k, median", stats.raw_reuse_median_ratio, "-");
  line("threshold reuse: selected m / k, maximum", stats.raw_reuse_max_ratio, "-");
  text += fmt::format("error feedback, threshold reuse (rules \"{}\", exact every {} iterations):\n",
                      o.reuse.rules.preset, o.reuse.reevaluate_every);
  line("selected m / k, median over ranks and iterations", stats.reuse_median_ratio, "about 0.55");
  line("selected m / k, maximum", stats.reuse_max_ratio, "about 1.6");
  line("selected m / k, 90th percentile", stats.reuse_p90_ratio, "-");
  line("reuse iterations only: m / k, median", stats.reuse_only_median_ratio, "-");
  line("reuse iterations only: m / k, 90th percentile", stats.reuse_only_p90_ratio, "-");
  line("reuse iterations only: m / k, maximum", stats.reuse_only_max_ratio, "-");
  return text;
}

} // namespace sparsim
