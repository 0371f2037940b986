// The candidates generation (the calibrated source's scale mode): the tabulated noise against the mixture it
// stands for (quadrature, and Monte Carlo of the dense generator's Box-Muller draws), the bucketed sampler's
// inclusion probabilities against the closed form per entry, the calibrated source's candidates against its own
// dense gradients (counts, magnitudes and thresholds above floors, embedding rows), selection from candidates
// against selection from the dense vector, and the config's rules.
#include "sim/data/topk.hpp"
#include "sim/gradients/calibrated_source.hpp"
#include "sim/gradients/candidate_sampler.hpp"
#include "sim/gradients/noise_magnitude.hpp"
#include "sim/gradients/random_streams.hpp"
#include "sim/run/config.hpp"
#include "sim/run/gradient_stats.hpp"
#include "sim/run/selection.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

using namespace sparsim;

namespace {

std::unique_ptr<GradientSource> calibrated(nlohmann::json spec, std::uint64_t n, std::uint64_t seed = 1)
{
  spec["source"] = "calibrated";
  return parse_gradient_source(JsonReader(spec, "gradients"), GradientContext{seed, n, 8, SPARSIM_SOURCE_DIR});
}

std::size_t count_above_floor(const std::vector<float>& g, double floor)
{
  return static_cast<std::size_t>(
      std::count_if(g.begin(), g.end(), [&](float v) { return std::fabs(v) > static_cast<float>(floor); }));
}

} // namespace

TEST(NoiseMagnitude, LogSurvivalFindsTheSameCellAsAFullSearch)
{
  // log_survival narrows its search by the double bits of x (a bucket index); a plain binary search over the whole
  // table (its grid read back through magnitude(j / kStepsPerUnit)) must give the same value, bit for bit, at
  // random magnitudes and at every grid point and its neighbours, where a wrong bucket edge would show.
  for (double tau : {0.0, 0.25, 1.0}) {
    const NoiseMagnitude table(tau);
    std::vector<double> grid;
    for (int j = 0; j <= static_cast<int>(NoiseMagnitude::kMaxY) * NoiseMagnitude::kStepsPerUnit; ++j)
      grid.push_back(table.magnitude(static_cast<double>(j) / NoiseMagnitude::kStepsPerUnit));
    auto full_search = [&](double x) {
      if (x <= 0)
        return 0.0;
      if (x >= grid.back())
        return NoiseMagnitude::kMaxY;
      const auto j = static_cast<std::size_t>(std::upper_bound(grid.begin(), grid.end(), x) - grid.begin()) - 1;
      const double span = grid[j + 1] - grid[j];
      const double fraction = span > 0 ? (x - grid[j]) / span : 0.0;
      return (static_cast<double>(j) + fraction) / NoiseMagnitude::kStepsPerUnit;
    };
    std::vector<double> points;
    std::mt19937_64 rng(9);
    std::uniform_real_distribution<double> exponent(-12, std::log2(grid.back()) + 1);
    for (int i = 0; i < 200000; ++i)
      points.push_back(std::exp2(exponent(rng)));
    for (std::size_t j = 0; j < grid.size(); j += 7)
      for (double x : {std::nextafter(grid[j], 0.0), grid[j], std::nextafter(grid[j], 1e9)})
        points.push_back(x);
    std::size_t differing = 0;
    for (double x : points)
      differing += table.log_survival(x) != full_search(x);
    EXPECT_EQ(differing, 0u) << "tau " << tau;
  }
}

TEST(NoiseMagnitude, TableFollowsTheMixtureItStandsFor)
{
  for (double tau : {0.0, 0.25, 1.0, 3.0}) {
    const NoiseMagnitude table(tau);
    for (double y = 0.01; y < NoiseMagnitude::kMaxY; y *= 1.07) {
      const double x = table.magnitude(y);
      EXPECT_NEAR(NoiseMagnitude::mixture_log_survival(tau, x), y, 1e-4 * std::max(1.0, y))
          << "tau " << tau << ", y " << y << ", x " << x;
      EXPECT_NEAR(table.log_survival(x), y, 1e-9 * std::max(1.0, y)); // the table's own inverse
    }
    EXPECT_EQ(table.upper_tail(0), 0.5);
    EXPECT_NEAR(table.upper_tail(-1.3) + table.upper_tail(1.3), 1.0, 1e-15); // symmetric noise
  }
  // Without the log-normal factor the noise is a standard normal.
  for (double x : {0.5, 2.0, 5.0, 10.0})
    EXPECT_NEAR(NoiseMagnitude::mixture_log_survival(0, x), -std::log(std::erfc(x / std::sqrt(2.0))), 1e-12);
}

TEST(NoiseMagnitude, MatchesTheDenseGeneratorsBoxMullerDraws)
{
  // The dense generator's noise: Z exp(tau B - tau^2) from one Box-Muller pair per entry.
  const double tau = 0.25;
  const NoiseMagnitude table(tau);
  const int draws = 2'000'000;
  std::vector<double> thresholds = {0.5, 1.0, 2.0, 3.0, 4.0};
  std::vector<int> above(thresholds.size(), 0);
  for (int d = 0; d < draws; ++d) {
    double z = 0, b = 0;
    normal_pair(stream_bits(12345, static_cast<std::uint64_t>(d)), z, b);
    const double x = std::fabs(z * std::exp(tau * b - tau * tau));
    for (std::size_t t = 0; t < thresholds.size(); ++t)
      above[t] += x > thresholds[t];
  }
  for (std::size_t t = 0; t < thresholds.size(); ++t) {
    const double p = std::exp(-table.log_survival(thresholds[t]));
    const double sd = std::sqrt(draws * p * (1 - p));
    EXPECT_NEAR(above[t], draws * p, 5 * sd) << "P(|X| > " << thresholds[t] << ")";
  }
}

TEST(CandidatePlan, EveryEntryIsKeptWithItsExactProbability)
{
  // Entries with spread-out noise and means (a few without noise, a few with means beyond the floor), one
  // floor; many independent ranks.
  const std::size_t entries = 600;
  const double floor = 1.0;
  std::vector<float> mean(entries), noise(entries);
  for (std::size_t i = 0; i < entries; ++i) {
    noise[i] = static_cast<float>(i % 50 == 7 ? 0.0 : std::exp(-3.0 + 4.0 * static_cast<double>(i) / entries));
    mean[i] = static_cast<float>(0.3 * noise[i] * std::sin(static_cast<double>(i)) + (i % 50 == 7 ? 1.5 : 0.0));
    if (i % 25 == 13) // means beyond the floor, either sign: the far side exceeds it for small |X| too
      mean[i] = static_cast<float>(i % 2 ? 1.2 : -1.2);
  }
  const NoiseMagnitude magnitude(0.25);
  const CandidatePlan plan(mean, noise, floor, magnitude);
  const int ranks = 4000;
  std::vector<int> kept(entries, 0);
  double value_sum_check = 0;
  for (int r = 0; r < ranks; ++r) {
    std::vector<SparseVector> out;
    const std::uint64_t stream = mix_coordinates(7, r, 0, 0);
    plan.sample(
        std::span(&stream, 1), {}, [](std::size_t, Index) { return false; }, out);
    const SparseVector& c = out[0];
    ASSERT_TRUE(std::is_sorted(c.indices.begin(), c.indices.end()));
    for (std::size_t e = 0; e < c.size(); ++e) {
      ASSERT_GT(std::fabs(c.values[e]), floor);
      ++kept[c.indices[e]];
      value_sum_check += c.values[e];
    }
  }
  double chi = 0;
  int tested = 0;
  for (std::size_t i = 0; i < entries; ++i) {
    const double p = noise[i] > 0 ? magnitude.upper_tail((floor - mean[i]) / noise[i]) +
                                        magnitude.upper_tail((floor + mean[i]) / noise[i])
                                  : (std::fabs(mean[i]) > floor ? 1.0 : 0.0);
    const double expected = ranks * p;
    const double sd = std::sqrt(ranks * p * (1 - p));
    if (sd == 0) {
      EXPECT_EQ(kept[i], expected) << "entry " << i;
      continue;
    }
    EXPECT_NEAR(kept[i], expected, 5.5 * sd + 0.5) << "entry " << i << ", p = " << p;
    if (expected > 5) {
      chi += (kept[i] - expected) * (kept[i] - expected) / (sd * sd);
      ++tested;
    }
  }
  ASSERT_GT(tested, 100);
  // The sum of squared z-scores of independent counts: mean `tested`, standard deviation sqrt(2 tested).
  EXPECT_LT(std::fabs(chi - tested), 5 * std::sqrt(2.0 * tested)) << "chi^2 " << chi << " over " << tested;
  EXPECT_TRUE(std::isfinite(value_sum_check));
}

TEST(CandidatePlan, ZeroFloorKeepsEveryNonzeroEntry)
{
  std::vector<float> mean = {0.0f, 1.0f, -2.0f, 0.0f}, noise = {1.0f, 0.5f, 0.0f, 0.0f};
  const NoiseMagnitude magnitude(0.25);
  const CandidatePlan plan(mean, noise, 0.0, magnitude);
  for (std::uint64_t stream = 0; stream < 50; ++stream) {
    std::vector<SparseVector> out;
    plan.sample(
        std::span(&stream, 1), {}, [](std::size_t, Index) { return false; }, out);
    const SparseVector& c = out[0];
    ASSERT_EQ(c.indices, (std::vector<Index>{0, 1, 2}));
    EXPECT_EQ(c.values[2], -2.0f);
  }
}

TEST(CalibratedCandidates, MatchTheDenseGradientsAboveFloors)
{
  // One source, both generations: counts, magnitudes and per-layer shares of the entries above floors,
  // summed over ranks, and each rank's exact k-th largest magnitude.
  const std::uint64_t n = 1 << 18;
  const auto dense = calibrated({{"model", "vgg16"}}, n);
  const auto scale = calibrated({{"model", "vgg16"}, {"generation", "candidates"}}, n);
  ASSERT_TRUE(scale->generates_candidates());
  ASSERT_FALSE(dense->generates_candidates());
  const auto& layers = dynamic_cast<const CalibratedSource&>(*dense).layers();
  const int ranks = 24;
  const std::uint64_t k = n / 100;
  for (int iteration : {0, 5}) {
    const double floor = scale->candidate_floor(iteration, 1.5 * k);
    std::size_t dense_count = 0, scale_count = 0;
    std::vector<double> dense_layer(layers.size(), 0), scale_layer(layers.size(), 0);
    std::vector<float> dense_top, scale_top; // magnitudes above floor, pooled
    double dense_threshold = 0, scale_threshold = 0;
    std::vector<float> g(n);
    for (int r = 0; r < ranks; ++r) {
      dense->generate(r, iteration, g);
      const SparseVector c = scale->candidates(r, iteration, floor);
      dense_count += count_above_floor(g, floor);
      scale_count += c.size();
      for (std::size_t l = 0; l < layers.size(); ++l)
        for (std::uint64_t i = layers[l].begin; i < layers[l].begin + layers[l].size; ++i)
          dense_layer[l] += std::fabs(g[i]) > static_cast<float>(floor);
      for (std::size_t e = 0; e < c.size(); ++e) {
        scale_top.push_back(std::fabs(c.values[e]));
        const auto layer = std::upper_bound(layers.begin(), layers.end(), c.indices[e],
                                            [](Index i, const FlatLayer& l) { return i < l.begin; }) -
                           1;
        scale_layer[static_cast<std::size_t>(layer - layers.begin())] += 1;
      }
      for (float v : g)
        if (std::fabs(v) > static_cast<float>(floor))
          dense_top.push_back(std::fabs(v));
      // The k-th largest magnitude: of the dense vector, and of the candidates (exact when there are k).
      ASSERT_GE(c.size(), k);
      dense_threshold += kth_largest_magnitude(g, k) / ranks;
      scale_threshold += kth_largest_magnitude(c.values, k) / ranks;
    }
    // Counts: Poisson-like around the same expectation (the floor's expected count is 1.5 k per rank).
    const double sd = std::sqrt(static_cast<double>(dense_count));
    EXPECT_NEAR(static_cast<double>(scale_count), static_cast<double>(dense_count), 6 * sd * std::sqrt(2.0))
        << "iteration " << iteration;
    EXPECT_NEAR(static_cast<double>(scale_count) / ranks, 1.5 * k, 0.1 * k) << "the floor's expected count";
    EXPECT_NEAR(scale_threshold / dense_threshold, 1.0, 0.01) << "iteration " << iteration;
    // Magnitudes above the floor: quantiles of the pooled samples.
    std::sort(dense_top.begin(), dense_top.end());
    std::sort(scale_top.begin(), scale_top.end());
    for (double q : {0.1, 0.5, 0.9, 0.99}) {
      const double d = dense_top[static_cast<std::size_t>(q * dense_top.size())];
      const double s = scale_top[static_cast<std::size_t>(q * scale_top.size())];
      EXPECT_NEAR(s / d, 1.0, q < 0.95 ? 0.02 : 0.06) << "quantile " << q;
    }
    // Per layer (the layers with at least 400 entries above the floor in all).
    for (std::size_t l = 0; l < layers.size(); ++l) {
      if (dense_layer[l] >= 400) {
        EXPECT_NEAR(scale_layer[l], dense_layer[l], 6 * std::sqrt(2 * dense_layer[l])) << layers[l].name;
      }
    }
  }
}

TEST(CalibratedCandidates, DeterministicAndIndependentOfCallOrder)
{
  const std::uint64_t n = 1 << 16;
  const auto a = calibrated({{"model", "lstm_an4"}, {"generation", "candidates"}}, n, 5);
  const auto b = calibrated({{"model", "lstm_an4"}, {"generation", "candidates"}}, n, 5);
  const double floor = a->candidate_floor(3, 500);
  const SparseVector a3 = a->candidates(3, 3, floor);
  const SparseVector a1 = a->candidates(1, 3, floor);
  EXPECT_EQ(b->candidates(1, 3, floor), a1);
  EXPECT_EQ(b->candidates(3, 3, floor), a3);
  EXPECT_NE(a1, a3);
  EXPECT_EQ(b->candidate_floor(3, 500), floor);
  const auto other_seed = calibrated({{"model", "lstm_an4"}, {"generation", "candidates"}}, n, 6);
  EXPECT_NE(other_seed->candidates(1, 3, floor), a1);
}

TEST(CalibratedCandidates, EmbeddingRowsAbsentFromTheBatchHaveNoCandidates)
{
  // BERT's word embedding is row-sparse: the candidates of a rank lie in the rows its dense gradient has.
  const std::uint64_t n = 1 << 20;
  const auto dense = calibrated({{"model", "bert_base"}}, n);
  const auto scale = calibrated({{"model", "bert_base"}, {"generation", "candidates"}}, n);
  std::vector<float> g(n);
  std::size_t in_embeddings = 0;
  for (int r = 0; r < 4; ++r) {
    dense->generate(r, 2, g);
    const SparseVector c = scale->candidates(r, 2, scale->candidate_floor(2, 0.2 * n));
    for (std::size_t e = 0; e < c.size(); ++e) {
      const Index i = c.indices[e];
      ASSERT_NE(g[i], 0.0f) << "rank " << r << ": candidate " << i << " in a row the dense gradient zeroed";
    }
    for (const auto& layer : dynamic_cast<const CalibratedSource&>(*scale).layers())
      if (layer.rows > 0)
        in_embeddings += static_cast<std::size_t>(std::count_if(c.indices.begin(), c.indices.end(), [&](Index i) {
          return i >= layer.begin && i < layer.begin + layer.size;
        }));
  }
  EXPECT_GT(in_embeddings, 1000u);
}

TEST(LocalSelectorCandidates, SameSelectionsAsFromTheDenseVector)
{
  // Threshold reuse and re-evaluation over iterations: the selector fed with the entries above a floor below
  // its threshold selects exactly what the one fed with the dense vector does.
  const std::uint64_t n = 1 << 16, k = 600;
  const auto source = calibrated({{"model", "vgg16"}}, n);
  SelectionConfig config{
      .policy = SelectionPolicy::threshold_reuse, .reevaluate_every = 4, .rules = threshold_rules("vgg")};
  LocalSelector from_dense(config), from_candidates(config);
  std::vector<float> g(n);
  for (int t = 0; t < 12; ++t) {
    source->generate(0, t, g);
    const auto reused = from_candidates.reuse_threshold(t);
    EXPECT_EQ(reused.has_value(), t % 4 != 0 && t > 0);
    // Floor: the reused threshold, else the (2k)-th largest magnitude.
    const double floor = reused ? *reused : kth_largest_magnitude(g, 2 * k);
    SparseVector candidates;
    for (Index i = 0; i < n; ++i)
      if (std::fabs(g[i]) > static_cast<float>(floor) * (1 - 1e-6f)) {
        candidates.indices.push_back(i);
        candidates.values.push_back(g[i]);
      }
    SelectionTraffic dense_traffic, candidate_traffic;
    const SparseVector expected = from_dense.select(g, k, t, dense_traffic);
    EXPECT_EQ(from_candidates.select_candidates(candidates, n, k, t, candidate_traffic), expected) << "iteration " << t;
    EXPECT_EQ(candidate_traffic.bytes_read, dense_traffic.bytes_read);
    EXPECT_EQ(candidate_traffic.bytes_written, dense_traffic.bytes_written);
  }
}

TEST(CalibratedCandidates, ConfigRules)
{
  nlohmann::json config = {{"ranks", 4},
                           {"topology", {{"type", "star"}, {"nodes", 4}, {"bandwidth", "10Gbps"}, {"latency", "1us"}}},
                           {"workload", {{"n", 4096}, {"density", 0.05}}},
                           {"algorithm", {{"name", "topka"}}},
                           {"gradients", {{"source", "calibrated"}, {"model", "vgg16"}, {"generation", "candidates"}}}};
  // Error feedback by default, modelled: "mean_field"; "dense" refused at its path.
  EXPECT_EQ(parse_config(config, SPARSIM_SOURCE_DIR).selection.residual, ResidualKind::mean_field);
  config["selection"] = {{"residual", "dense"}};
  try {
    parse_config(config, SPARSIM_SOURCE_DIR);
    FAIL() << "a dense residual was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("selection.residual"), std::string::npos) << e.what();
  }
  // A normal fit of the whole accumulated gradient (Gaussiank's selection) comes from the mean-field model: with
  // the default residual it is accepted, with "none" (no model of acc) refused.
  config["selection"] = {{"policy", "gaussian"}};
  EXPECT_EQ(parse_config(config, SPARSIM_SOURCE_DIR).selection.policy, SelectionPolicy::gaussian);
  config["selection"] = {{"policy", "gaussian"}, {"residual", "none"}};
  try {
    parse_config(config, SPARSIM_SOURCE_DIR);
    FAIL() << "a Gaussian fit was accepted with candidates and no residual";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("selection.policy"), std::string::npos) << e.what();
  }
  // The reference's BERT code (its searchsorted lookups need the dense residual) refuses the default residual
  // at the path its preset fills in, and names the way out; with "none" it runs.
  nlohmann::json reference = config;
  reference["algorithm"] = {{"name", "oktopk"}};
  reference["reference_code"] = "bert";
  reference.erase("selection");
  try {
    parse_config(reference, SPARSIM_SOURCE_DIR);
    FAIL() << "the reference's searchsorted lookups were accepted with the mean-field residual";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("selection.reevaluation_residual"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("\"none\""), std::string::npos) << e.what();
  }
  reference["selection"] = {{"residual", "none"}};
  EXPECT_EQ(parse_config(reference, SPARSIM_SOURCE_DIR).selection.reevaluation_residual,
            ReevaluationResidual::reference_searchsorted);
  config.erase("selection");
  // Only the calibrated source has the candidates generation.
  config["gradients"] = {{"source", "uniform"}, {"generation", "candidates"}};
  try {
    parse_config(config, SPARSIM_SOURCE_DIR);
    FAIL() << "uniform gradients accepted the candidates generation";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("gradients.generation"), std::string::npos) << e.what();
  }
}

TEST(ExponentialZiggurat, DrawsFollowTheExponentialDistribution)
{
  const ExponentialZiggurat exponential;
  const int draws = 2'000'000;
  const std::vector<double> points = {0.01, 0.1, 0.5, 1.0, 2.0, 4.0, 7.0, 7.7, 9.0, 12.0};
  // Both entry points: 64 bits from the stream, and 32 given bits (then the stream when they fall outside).
  for (bool given_bits : {false, true}) {
    SCOPED_TRACE(given_bits ? "draw32" : "draw");
    std::vector<int> above(points.size(), 0);
    double sum = 0;
    std::uint64_t counter = 0;
    for (int d = 0; d < draws; ++d) {
      const double x = given_bits ? exponential.draw32(static_cast<std::uint32_t>(stream_bits(99, d)), 4242, counter)
                                  : exponential.draw(4242, counter);
      ASSERT_GE(x, 0);
      sum += x;
      for (std::size_t p = 0; p < points.size(); ++p)
        above[p] += x > points[p];
    }
    EXPECT_NEAR(sum / draws, 1.0, 5.0 / std::sqrt(draws));
    for (std::size_t p = 0; p < points.size(); ++p) {
      const double q = std::exp(-points[p]);
      EXPECT_NEAR(above[p], draws * q, 5 * std::sqrt(draws * q * (1 - q)) + 1) << "P(E > " << points[p] << ")";
    }
    // Most draws take one stream value (1.1% fall outside a layer's rectangle and take two or three).
    EXPECT_LT(static_cast<double>(counter) / draws, given_bits ? 0.05 : 1.05);
  }
}

TEST(NoiseMagnitude, SampledTailMatchesTheDenseGeneratorsNoise)
{
  // |X| as the candidates generation draws it, L^-1(E) for E from 32 given bits, against the dense generator's
  // Z exp(tau B - tau^2): quantiles far into the tail, from 4 M draws each.
  const double tau = 0.25;
  const NoiseMagnitude table(tau);
  const ExponentialZiggurat exponential;
  const int draws = 4'000'000;
  std::vector<float> dense(draws), sampled(draws);
  std::uint64_t counter = 0;
  for (int d = 0; d < draws; ++d) {
    double z = 0, b = 0;
    normal_pair(stream_bits(31, static_cast<std::uint64_t>(d)), z, b);
    dense[d] = static_cast<float>(std::fabs(z * std::exp(tau * b - tau * tau)));
    sampled[d] = static_cast<float>(
        table.magnitude(exponential.draw32(static_cast<std::uint32_t>(stream_bits(32, d)), 33, counter)));
  }
  std::sort(dense.begin(), dense.end());
  std::sort(sampled.begin(), sampled.end());
  for (double q : {0.5, 0.9, 0.99, 0.999, 0.9999}) {
    const auto at = static_cast<std::size_t>(q * draws);
    // The quantile's sampling error: sqrt(q (1 - q) / N) / density, about 1% of it at 0.9999 here.
    EXPECT_NEAR(sampled[at] / dense[at], 1.0, q < 0.999 ? 0.005 : 0.015) << "quantile " << q;
  }
}

TEST(CalibratedCandidates, StatisticsMatchTheDenseSourceWithoutErrorFeedback)
{
  // sparsim stats of the three model tables, both generations, P = 16: the figures the candidates generation
  // measures (the raw gradients' selections: no error feedback) within bands of the dense source's.
  for (const char* model : {"vgg16", "lstm_an4", "bert_base"}) {
    const std::uint64_t n = 1 << 18;
    const auto dense = calibrated({{"model", model}}, n, 11);
    const auto scale = calibrated({{"model", model}, {"generation", "candidates"}}, n, 11);
    GradientStatsOptions options;
    options.ranks = 16;
    options.n = n;
    options.k = n / 100;
    options.iterations = 24; // threshold reuse over 24 iterations: re-evaluations at 0 and 16
    options.reuse.reevaluate_every = 16;
    const GradientStats d = measure_gradient_stats(*dense, options);
    const GradientStats s = measure_gradient_stats(*scale, options);
    EXPECT_FALSE(d.candidates);
    EXPECT_TRUE(s.candidates);
    EXPECT_TRUE(std::isnan(s.median.jaccard)) << "no error feedback from candidates";
    auto within = [&](const char* what, double scale_value, double dense_value, double band) {
      EXPECT_NEAR(scale_value / dense_value, 1.0, band)
          << model << ": " << what << " " << scale_value << " against " << dense_value;
    };
    within("Jaccard", s.median.raw_jaccard, d.median.raw_jaccard, 0.05);
    within("union / (P k)", s.median.raw_union_ratio, d.median.raw_union_ratio, 0.02);
    within("kept from the previous iteration", s.median.raw_overlap_previous, d.median.raw_overlap_previous, 0.05);
    within("busiest region / mean", s.median.raw_region_imbalance, d.median.raw_region_imbalance, 0.05);
    // A fourth moment of the largest values, decided by a few of them: LSTM at seeds 11, 12, 13 gave 6.84, 4.23,
    // 5.09 (dense) and 6.81, 4.32, 4.79 (candidates); the seed's shared part moves it far more than the
    // generation does, the per-rank noise alone up to 6%.
    within("kurtosis of the selected values", s.median.raw_selected_kurtosis, d.median.raw_selected_kurtosis, 0.10);
    within("threshold change", s.median.raw_threshold_drift, d.median.raw_threshold_drift, 0.10);
    within("m / k under reuse, median", s.raw_reuse_median_ratio, d.raw_reuse_median_ratio, 0.05);
    within("m / k under reuse, maximum", s.raw_reuse_max_ratio, d.raw_reuse_max_ratio, 0.10);
  }
}
