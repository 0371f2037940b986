// The calibrated gradient source and the gradient statistics: the statistics against hand-made inputs and a
// brute-force re-implementation of their error-feedback loop; the layer tables against the models' real
// parameter counts; the source's determinism, scaling and embedding-row sparsity; and the source's
// statistics against the ranges measured on real gradients (algorithms.md, docs/gradients.md).
#include "sim/data/topk.hpp"
#include "sim/gradients/calibrated_source.hpp"
#include "sim/run/gradient_stats.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>
#include <random>
#include <set>

using namespace sparsim;

namespace {

SparseVector selection_of(std::vector<Index> indices)
{
  SparseVector s;
  s.indices = std::move(indices);
  s.values.assign(s.indices.size(), 1.0f);
  return s;
}

std::unique_ptr<GradientSource> calibrated(nlohmann::json spec, std::uint64_t n, std::uint64_t seed = 1)
{
  spec["source"] = "calibrated";
  return parse_gradient_source(JsonReader(spec, "gradients"), GradientContext{seed, n, 8, SPARSIM_SOURCE_DIR});
}

std::vector<float> generated(const GradientSource& source, std::uint64_t n, int rank, int iteration)
{
  std::vector<float> out(n);
  source.generate(rank, iteration, out);
  return out;
}

// A small deterministic source with distinct magnitudes, for the brute-force comparison.
class WaveSource final : public GradientSource {
public:
  std::string name() const override { return "wave"; }
  nlohmann::json to_json() const override { return {}; }
  void generate(RankId rank, int iteration, std::span<float> out) const override
  {
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i] = static_cast<float>(std::sin(0.37 * i + 1.3 * rank + 0.71 * iteration) * (1 + i % 7));
  }
};

// Top-k by sorting: larger magnitude first, smaller index first on ties; sorted by index.
std::vector<Index> brute_topk(const std::vector<float>& x, std::size_t k)
{
  std::vector<Index> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](Index a, Index b) {
    return std::fabs(x[a]) != std::fabs(x[b]) ? std::fabs(x[a]) > std::fabs(x[b]) : a < b;
  });
  order.resize(k);
  std::sort(order.begin(), order.end());
  return order;
}

double brute_jaccard(const std::vector<Index>& a, const std::vector<Index>& b)
{
  std::set<Index> both(a.begin(), a.end()), all(a.begin(), a.end());
  std::size_t common = 0;
  for (Index i : b)
    common += both.count(i);
  all.insert(b.begin(), b.end());
  return static_cast<double>(common) / static_cast<double>(all.size());
}

double brute_kurtosis(const std::vector<float>& x)
{
  const double mean = std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(x.size());
  double m2 = 0, m4 = 0;
  for (float v : x) {
    m2 += (v - mean) * (v - mean);
    m4 += std::pow(v - mean, 4);
  }
  m2 /= static_cast<double>(x.size());
  m4 /= static_cast<double>(x.size());
  return m4 / (m2 * m2);
}

} // namespace

TEST(GradientStats, JaccardIntersectionAndUnionOfKnownSets)
{
  const std::vector<Index> a{1, 2, 3, 4}, b{3, 4, 5}, c{7, 8};
  EXPECT_EQ(intersection_size(a, b), 2u);
  EXPECT_DOUBLE_EQ(jaccard(a, b), 2.0 / 5.0);
  EXPECT_DOUBLE_EQ(jaccard(a, a), 1.0);
  EXPECT_DOUBLE_EQ(jaccard(a, c), 0.0);
  EXPECT_DOUBLE_EQ(jaccard({}, {}), 1.0);
  EXPECT_EQ(union_size({selection_of(a), selection_of(b), selection_of(c)}), 7u);
}

TEST(GradientStats, RegionImbalanceOfKnownCounts)
{
  // n = 100, 4 regions of 25: counts 6, 2, 2, 2 over two ranks; busiest / mean = 6 / 3.
  const std::vector<SparseVector> selections{selection_of({0, 1, 2, 24, 30, 60}),
                                             selection_of({10, 20, 49, 70, 80, 99})};
  EXPECT_DOUBLE_EQ(region_imbalance(selections, 100, 4), 2.0);
  // Uneven regions: n = 10 in 3 regions [0, 3), [3, 6), [6, 10); counts 1, 1, 4.
  EXPECT_DOUBLE_EQ(region_imbalance({selection_of({0, 3, 6, 7, 8, 9})}, 10, 3), 2.0);
}

TEST(GradientStats, KurtosisOfKnownSamples)
{
  // {-2, -1, 0, 1, 2}: m2 = 2, m4 = 6.8, kurtosis 1.7; shifting the sample changes nothing.
  EXPECT_NEAR(kurtosis(std::vector<float>{-2, -1, 0, 1, 2}), 1.7, 1e-12);
  EXPECT_NEAR(kurtosis(std::vector<float>{8, 9, 10, 11, 12}), 1.7, 1e-12);
  // Two equally likely values: kurtosis 1.
  EXPECT_NEAR(kurtosis(std::vector<float>{-3, 3, -3, 3}), 1.0, 1e-12);
  EXPECT_TRUE(std::isnan(kurtosis(std::vector<float>{5, 5, 5})));
  // A normal sample: 3, up to the estimate's standard error sqrt(24 / n) = 0.005.
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> sample(1'000'000);
  for (float& v : sample)
    v = normal(rng);
  EXPECT_NEAR(kurtosis(sample), 3.0, 0.025);
}

TEST(GradientStats, MedianAndNormalQuantile)
{
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2.0);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median({std::nan(""), 4, 1}), 2.5);
  EXPECT_TRUE(std::isnan(median({})));
  EXPECT_DOUBLE_EQ(quantile({5, 1, 4, 2, 3, 6, 7, 8, 9, 10}, 0.9), 10.0); // position floor(9.0) = 9
  EXPECT_DOUBLE_EQ(quantile({5, 1, 4, 2, 3, 6, 7, 8, 9}, 0.9), 9.0);      // position floor(8.1) = 8
  EXPECT_DOUBLE_EQ(quantile({std::nan(""), 2, 1}, 0.5), 2.0);
  EXPECT_TRUE(std::isnan(quantile({}, 0.9)));
  EXPECT_NEAR(normal_two_sided_quantile(0.05), 1.959963984540054, 1e-12);
  EXPECT_NEAR(normal_two_sided_quantile(0.01), 2.5758293035489004, 1e-12);
  EXPECT_NEAR(normal_two_sided_quantile(1.0), 0.0, 1e-12);
}

// The statistics of measure_gradient_stats against a direct re-implementation of their definitions.
TEST(GradientStats, MatchesBruteForceErrorFeedbackLoop)
{
  const WaveSource source;
  GradientStatsOptions options;
  options.ranks = 3;
  options.n = 997;
  options.k = 23;
  options.warmup = 2;
  options.iterations = 5;
  options.reuse = SelectionConfig{
      .policy = SelectionPolicy::threshold_reuse, .reevaluate_every = 3, .rules = threshold_rules("vgg")};
  options.layers = {{"first", "fc", 0, 100, false}, {"out", "fc", 100, 50, true}, {"rest", "conv", 150, 847, false}};
  const GradientStats stats = measure_gradient_stats(source, options);
  ASSERT_EQ(stats.iterations.size(), 5u);

  const int P = options.ranks;
  const std::size_t n = options.n, k = options.k;
  std::vector<std::vector<float>> residual(P, std::vector<float>(n, 0.0f)), reuse_residual = residual;
  std::vector<LocalSelector> selectors(P, LocalSelector(options.reuse));
  std::vector<std::vector<Index>> previous(P), raw_previous(P);
  std::vector<double> previous_threshold(P, 0);
  std::vector<double> ratios, reuse_only_ratios;
  std::size_t output_hits = 0, total = 0, raw_first_hits = 0;
  for (int t = 0; t < options.warmup + options.iterations; ++t) {
    std::vector<std::vector<Index>> selected(P), raw(P);
    std::vector<std::uint64_t> reuse_counts;
    double acc_kurtosis = 0, raw_kurtosis = 0, drift = 0, fit = 0, reuse_mean = 0;
    for (int r = 0; r < P; ++r) {
      std::vector<float> g(n);
      source.generate(r, t, g);
      raw[r] = brute_topk(g, k);
      raw_kurtosis += brute_kurtosis(g) / P;
      for (std::size_t i = 0; i < n; ++i)
        residual[r][i] += g[i];
      selected[r] = brute_topk(residual[r], k);
      double threshold = INFINITY, sum = 0, squares = 0;
      for (Index i : selected[r])
        threshold = std::min(threshold, static_cast<double>(std::fabs(residual[r][i])));
      // Gaussiank's fit: mean + z sigma, sigma with the n - 1 divisor.
      for (float v : residual[r])
        sum += v;
      for (float v : residual[r])
        squares += (v - sum / n) * (v - sum / n);
      const auto cut =
          static_cast<float>(sum / n + std::sqrt(squares / (n - 1)) * normal_two_sided_quantile(double(k) / n));
      fit += static_cast<double>(
                 std::count_if(residual[r].begin(), residual[r].end(), [&](float v) { return std::fabs(v) > cut; })) /
             k / P;
      acc_kurtosis += brute_kurtosis(residual[r]) / P;
      drift += std::fabs(threshold / previous_threshold[r] - 1) / P;
      previous_threshold[r] = threshold;
      for (Index i : selected[r])
        residual[r][i] = 0;
      for (std::size_t i = 0; i < n; ++i)
        reuse_residual[r][i] += g[i];
      SelectionTraffic traffic;
      const SparseVector reused = selectors[r].select(reuse_residual[r], k, t, traffic);
      for (Index i : reused.indices)
        reuse_residual[r][i] = 0;
      if (t >= options.warmup) {
        ratios.push_back(static_cast<double>(reused.size()) / k);
        if (t % 3 != 0) // re-evaluated every 3 iterations: an exact top-k
          reuse_only_ratios.push_back(static_cast<double>(reused.size()) / k);
      }
      reuse_counts.push_back(reused.size());
      reuse_mean += static_cast<double>(reused.size()) / k / P;
    }
    if (t >= options.warmup) {
      const IterationStats& it = stats.iterations[t - options.warmup];
      SCOPED_TRACE(t);
      double jaccard_sum = 0, raw_jaccard_sum = 0, overlap = 0, raw_overlap = 0;
      std::set<Index> all;
      std::vector<double> regions(P, 0);
      for (int r = 0; r < P; ++r) {
        for (int s = r + 1; s < P; ++s) {
          jaccard_sum += brute_jaccard(selected[r], selected[s]) / 3; // 3 pairs
          raw_jaccard_sum += brute_jaccard(raw[r], raw[s]) / 3;
        }
        overlap += static_cast<double>(std::count_if(
                       selected[r].begin(), selected[r].end(),
                       [&](Index i) { return std::binary_search(previous[r].begin(), previous[r].end(), i); })) /
                   k / P;
        raw_overlap +=
            static_cast<double>(std::count_if(
                raw[r].begin(), raw[r].end(),
                [&](Index i) { return std::binary_search(raw_previous[r].begin(), raw_previous[r].end(), i); })) /
            k / P;
        all.insert(selected[r].begin(), selected[r].end());
        for (Index i : selected[r]) {
          for (int j = 0; j < P; ++j) // region j = [floor(j n / P), floor((j+1) n / P))
            regions[j] += i >= j * n / P && i < (j + 1) * n / P;
          output_hits += i >= 100 && i < 150;
        }
        raw_first_hits += std::count_if(raw[r].begin(), raw[r].end(), [](Index i) { return i < 100; });
        total += k;
      }
      EXPECT_NEAR(it.jaccard, jaccard_sum, 1e-12);
      EXPECT_NEAR(it.raw_jaccard, raw_jaccard_sum, 1e-12);
      EXPECT_NEAR(it.overlap_previous, overlap, 1e-12);
      EXPECT_NEAR(it.raw_overlap_previous, raw_overlap, 1e-12);
      EXPECT_NEAR(it.union_ratio, static_cast<double>(all.size()) / (P * k), 1e-12);
      EXPECT_NEAR(it.region_imbalance, *std::max_element(regions.begin(), regions.end()) / (double(P * k) / P), 1e-12);
      EXPECT_NEAR(it.acc_kurtosis, acc_kurtosis, 1e-9);
      EXPECT_NEAR(it.raw_kurtosis, raw_kurtosis, 1e-9);
      EXPECT_NEAR(it.threshold_drift, drift, 1e-12);
      EXPECT_NEAR(it.gaussian_fit_ratio, fit, 1e-12);
      EXPECT_NEAR(it.reuse_mean_ratio, reuse_mean, 1e-12);
      EXPECT_EQ(it.reevaluation, t % 3 == 0);
      EXPECT_EQ(it.reuse_selected, reuse_counts);
    }
    previous = selected;
    raw_previous = raw;
  }
  EXPECT_DOUBLE_EQ(stats.reuse_median_ratio, median(ratios));
  EXPECT_DOUBLE_EQ(stats.reuse_max_ratio, *std::max_element(ratios.begin(), ratios.end()));
  // The 90th percentile: the value at position floor(0.9 N) of the N sorted ratios (N = 15: position 13).
  ASSERT_EQ(ratios.size(), 15u);
  std::vector<double> sorted = ratios;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_DOUBLE_EQ(stats.reuse_p90_ratio, sorted[13]);
  // The reuse iterations only: measured t = 2..6, re-evaluated at 3 and 6, so t = 2, 4, 5 (9 ratios).
  ASSERT_EQ(reuse_only_ratios.size(), 9u);
  EXPECT_DOUBLE_EQ(stats.reuse_only_median_ratio, median(reuse_only_ratios));
  EXPECT_DOUBLE_EQ(stats.reuse_only_max_ratio, *std::max_element(reuse_only_ratios.begin(), reuse_only_ratios.end()));
  sorted = reuse_only_ratios;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_DOUBLE_EQ(stats.reuse_only_p90_ratio, sorted[8]);
  const nlohmann::json json = stats.to_json(true);
  EXPECT_DOUBLE_EQ(json["threshold_reuse"]["p90_ratio"].get<double>(), stats.reuse_p90_ratio);
  EXPECT_DOUBLE_EQ(json["threshold_reuse"]["reuse_iterations"]["median_ratio"].get<double>(),
                   stats.reuse_only_median_ratio);
  ASSERT_EQ(json["per_iteration"].size(), 5u);
  EXPECT_EQ(json["per_iteration"][1]["iteration"], 3);
  EXPECT_EQ(json["per_iteration"][1]["reevaluation"], true);
  EXPECT_DOUBLE_EQ(json["per_iteration"][2]["jaccard"].get<double>(), stats.iterations[2].jaccard);
  EXPECT_EQ(json["per_iteration"][4]["reuse_selected"].get<std::vector<std::uint64_t>>(),
            stats.iterations[4].reuse_selected);
  EXPECT_FALSE(stats.to_json().contains("per_iteration"));
  EXPECT_NEAR(stats.output_share_ratio, static_cast<double>(output_hits) / total / (50.0 / n), 1e-12);
  ASSERT_EQ(stats.layer_shares.size(), 3u);
  EXPECT_NEAR(stats.layer_shares[1], static_cast<double>(output_hits) / total, 1e-12);
  EXPECT_NEAR(stats.layer_shares[0] + stats.layer_shares[1] + stats.layer_shares[2], 1.0, 1e-12);
  EXPECT_NEAR(stats.raw_layer_shares[0], static_cast<double>(raw_first_hits) / total, 1e-12);
  EXPECT_EQ(stats.to_json()["layers"][1]["name"], "out");
}

TEST(ModelTables, TotalsAndOrderOfTheReferenceModels)
{
  struct Expected {
    const char* model;
    std::uint64_t total;
    const char* first_flattened;
    const char* output;
  };
  for (const Expected& e :
       {Expected{"vgg16", 14'728'266, "classifier.bias", "classifier.weight"},
        Expected{"lstm_an4", 27'569'568, "fc.0.module.1.weight", "fc.0.module.1.weight"},
        Expected{"bert_base", 133'547'324, "bert.embeddings.word_embeddings.weight", "cls.seq_relationship.weight"},
        Expected{"resnet_fmnist", 480'450, "stem.weight", "fc.weight"}}) {
    SCOPED_TRACE(e.model);
    const ModelTable table = read_model_table(model_table_path(e.model, "."));
    EXPECT_EQ(table.total(), e.total);
    const auto flat = flatten_layers(table, table.total(), 0.3, 1.2);
    ASSERT_EQ(flat.size(), table.layers.size());
    EXPECT_EQ(flat.front().name, e.first_flattened);
    // layer_ranges (a replayed recording's layers) puts them at the same places.
    const std::vector<LayerRange> ranges = layer_ranges(table);
    ASSERT_EQ(ranges.size(), flat.size());
    for (std::size_t l = 0; l < flat.size(); ++l) {
      EXPECT_EQ(ranges[l].name, flat[l].name);
      EXPECT_EQ(ranges[l].begin, flat[l].begin);
      EXPECT_EQ(ranges[l].output, flat[l].output);
    }
    // At n = total every layer keeps its size, back to back.
    std::uint64_t begin = 0;
    for (const auto& layer : flat) {
      EXPECT_EQ(layer.begin, begin);
      begin += layer.size;
      const auto it = std::find_if(table.layers.begin(), table.layers.end(),
                                   [&](const ModelLayer& l) { return l.name == layer.name; });
      ASSERT_NE(it, table.layers.end());
      EXPECT_EQ(layer.size, it->size);
      if (layer.name == e.output) {
        EXPECT_TRUE(layer.output);
      }
    }
    EXPECT_EQ(begin, e.total);
  }
  // VGG-16: 13 conv layers with bias and batch norm, one classifier.
  const ModelTable vgg = read_model_table(model_table_path("vgg16", "."));
  EXPECT_EQ(std::count_if(vgg.layers.begin(), vgg.layers.end(), [](const ModelLayer& l) { return l.kind == "conv"; }),
            13);
}

TEST(ModelTables, ScalingToSmallNKeepsProportions)
{
  const ModelTable table = read_model_table(model_table_path("lstm_an4", "."));
  for (std::uint64_t n : {1ull << 18, 1'000'003ull, 77ull}) {
    SCOPED_TRACE(n);
    const auto flat = flatten_layers(table, n, 0.3, 1.2);
    std::uint64_t sum = 0;
    for (const auto& layer : flat) {
      EXPECT_EQ(layer.begin, sum);
      sum += layer.size;
      const auto it = std::find_if(table.layers.begin(), table.layers.end(),
                                   [&](const ModelLayer& l) { return l.name == layer.name; });
      EXPECT_LT(std::fabs(static_cast<double>(layer.size) - static_cast<double>(it->size) * n / table.total()), 1.0);
    }
    EXPECT_EQ(sum, n);
  }
}

TEST(ModelTables, BadTablesAreConfigErrors)
{
  const auto dir = std::filesystem::temp_directory_path() / ("sparsim-calibrated-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "wrong_total.json")
      << R"({"name": "x", "flatten_order": "forward", "total": 7, "layers": [{"name": "a", "size": 5, "kind": "fc"}]})";
  std::ofstream(dir / "bad_shape.json") << R"({"name": "x", "flatten_order": "forward",
                                             "layers": [{"name": "a", "size": 6, "kind": "fc", "shape": [2, 2]}]})";
  for (const char* file : {"wrong_total.json", "bad_shape.json", "missing.json"}) {
    SCOPED_TRACE(file);
    nlohmann::json spec = {{"source", "calibrated"}, {"model", file}};
    try {
      parse_gradient_source(JsonReader(spec, "gradients"), GradientContext{1, 100, 2, dir});
      ADD_FAILURE() << "accepted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.path(), "gradients.model");
    }
  }
  nlohmann::json unknown = {{"source", "calibrated"}, {"heavy_tails", 1}};
  EXPECT_THROW(parse_gradient_source(JsonReader(unknown, "gradients"), GradientContext{1, 100, 2, dir}), ConfigError);
  std::filesystem::remove_all(dir);
}

TEST(CalibratedSource, DeterministicPerSeedRankAndIteration)
{
  const std::uint64_t n = 1 << 16;
  const auto a = calibrated({{"model", "vgg16"}}, n);
  const auto b = calibrated({{"model", "vgg16"}}, n);
  const auto other_seed = calibrated({{"model", "vgg16"}}, n, 2);
  // The same coordinates give the same bytes, whatever was generated before (the cache holds one iteration).
  const auto first = generated(*a, n, 3, 5);
  generated(*a, n, 3, 4);
  const auto again = generated(*a, n, 3, 5);
  const auto fresh = generated(*b, n, 3, 5);
  EXPECT_EQ(std::memcmp(first.data(), again.data(), n * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(first.data(), fresh.data(), n * sizeof(float)), 0);
  // Another seed, rank or iteration changes (almost) every entry.
  for (const auto& different : {generated(*other_seed, n, 3, 5), generated(*a, n, 4, 5), generated(*a, n, 3, 6)}) {
    std::size_t equal = 0;
    for (std::size_t i = 0; i < n; ++i)
      equal += different[i] == first[i];
    EXPECT_LT(equal, n / 1000);
  }
  for (float v : first)
    ASSERT_TRUE(std::isfinite(v));
}

// BERT's word embedding: a row is all zero (token not in the batch) or all nonzero, the most frequent tokens'
// rows are always present, and the share of present rows matches the Zipf model's expectation; other layers
// are dense.
TEST(CalibratedSource, BertWordEmbeddingRowsFollowTheBatchTokens)
{
  const std::uint64_t n = 1 << 20;
  const auto source = calibrated({{"model", "bert_base"}}, n);
  const auto& layers = dynamic_cast<const CalibratedSource&>(*source).layers();
  const FlatLayer& word = layers.front();
  ASSERT_EQ(word.name, "bert.embeddings.word_embeddings.weight");
  ASSERT_GT(word.rows, 100u);

  // Row j stands for the table row of frequency rank floor((j + 0.5) V / rows) + 1, present in a batch of T
  // tokens with probability q_j = 1 - (1 - f)^T for its Zipf frequency f. Compare the share of present rows,
  // over all rows and over the most frequent quarter, with the expectation (4 binomial standard errors).
  const double V = 30522, T = 4096;
  const int samples = 4;
  double harmonic = 0;
  for (int r = 1; r <= 30522; ++r)
    harmonic += 1.0 / r;
  std::vector<double> q(word.rows);
  for (std::uint64_t j = 0; j < word.rows; ++j)
    q[j] = 1 - std::pow(1 - 1.0 / (std::floor((j + 0.5) * V / word.rows) + 1) / harmonic, T);

  for (const std::uint64_t rows : {word.rows, word.rows / 4}) {
    SCOPED_TRACE(rows);
    double expected = 0, variance = 0, present = 0;
    for (std::uint64_t j = 0; j < rows; ++j) {
      expected += q[j] * samples;
      variance += q[j] * (1 - q[j]) * samples;
    }
    for (int rank = 0; rank < samples; ++rank) {
      const auto g = generated(*source, n, rank, 7);
      for (std::uint64_t j = 0; j < rows; ++j) {
        const std::uint64_t first = (j * word.size + word.rows - 1) / word.rows;
        const std::uint64_t last = ((j + 1) * word.size + word.rows - 1) / word.rows;
        const auto zeros = std::count(g.begin() + word.begin + first, g.begin() + word.begin + last, 0.0f);
        ASSERT_TRUE(zeros == 0 || zeros == static_cast<long>(last - first)) << "row " << j;
        present += zeros == 0;
      }
      EXPECT_EQ(std::count(g.begin() + word.begin + word.size, g.end(), 0.0f), 0) << "dense layers";
    }
    EXPECT_NEAR(present, expected, 4 * std::sqrt(variance));
  }
}

// The calibrated source at a test-sized VGG-16 (P = 8, n = 2^18, 1% density) against the ranges measured on
// real gradients (algorithms.md, "What real gradients look like"); docs/gradients.md records the values.
TEST(CalibratedSource, StatisticsMatchRealGradients)
{
  const std::uint64_t n = 1 << 18;
  const auto source = calibrated({{"model", "vgg16"}}, n);
  GradientStatsOptions options;
  options.ranks = 8;
  options.n = n;
  options.k = n / 100;
  options.warmup = 40; // the residuals start at zero; their build-up takes tens of iterations
  options.iterations = 30;
  options.layers = source->layer_ranges();
  ASSERT_EQ(options.layers.size(), dynamic_cast<const CalibratedSource&>(*source).layers().size());
  const GradientStats stats = measure_gradient_stats(*source, options);
  const IterationStats& m = stats.median;
  std::cout << format_gradient_stats(stats);

  // With error feedback: nearly disjoint selections, skewed regions, an output layer well above its share.
  EXPECT_GE(m.jaccard, 0.01);
  EXPECT_LE(m.jaccard, 0.04);
  EXPECT_GE(m.union_ratio, 0.75);
  EXPECT_LE(m.union_ratio, 0.94);
  EXPECT_GE(m.region_imbalance, 1.4);
  EXPECT_LE(m.region_imbalance, 2.2);
  EXPECT_GE(stats.output_share_ratio, 15);
  EXPECT_LE(stats.output_share_ratio, 27);
  // "About 3% kept": a selection that changes almost completely.
  EXPECT_LE(m.overlap_previous, 0.10);
  // acc is close to normal (kurtosis 3), unlike the raw gradients.
  EXPECT_LE(m.acc_kurtosis, 6);
  EXPECT_GE(m.threshold_drift, 0.02);
  EXPECT_LE(m.threshold_drift, 0.06);
  // Raw gradients: heavy-tailed, a persistent hot set, more overlap between ranks.
  EXPECT_GE(m.raw_kurtosis, 80);
  EXPECT_LE(m.raw_kurtosis, 450);
  EXPECT_GE(m.raw_overlap_previous, 0.25);
  EXPECT_LE(m.raw_overlap_previous, 0.35);
  EXPECT_GE(m.raw_jaccard, 0.1);
  EXPECT_LE(m.raw_jaccard, 0.2);
  // Threshold reuse with the VGG rules: m mostly below k, at most a few times k.
  EXPECT_GE(stats.reuse_median_ratio, 0.3);
  EXPECT_LE(stats.reuse_median_ratio, 1.0);
  EXPECT_LE(stats.reuse_max_ratio, 3.0);
}
