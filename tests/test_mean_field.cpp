// The mean-field residual (sim/gradients/mean_field.hpp) against independent oracles: the normal quantile against
// erfc; the noise's partial moments and conditional draws against Monte Carlo of the mixture itself; the O(k)
// candidates against brute force (every rank draws every entry's R and X and thresholds); one filter step against
// Monte Carlo; the carried store's cap; config errors; and a reduced validation grid, whole Ok-Topk and TopkA runs
// with the mean-field residual against the dense residual (the oracle) and against no residual.
#include "sim/base/json_reader.hpp"
#include "sim/gradients/mean_field.hpp"
#include "sim/gradients/random_streams.hpp"
#include "sim/gradients/source.hpp"
#include "sim/run/gradient_stats.hpp"
#include "sparsim_cli.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>
#include <vector>

using namespace sparsim;
using namespace sparsim::testing;

namespace {

constexpr double kTau = 0.25; // the calibrated source's default noise_tail

// X = Z exp(tau B - tau^2): the mixture the table is built from.
double draw_mixture(std::mt19937_64& rng)
{
  std::normal_distribution<double> normal;
  return normal(rng) * std::exp(kTau * normal(rng) - kTau * kTau);
}

// The truncated normal's draw by rejection from its parent (the oracle's own way).
double draw_truncated(std::mt19937_64& rng, double b, double s, double t)
{
  std::normal_distribution<double> normal(b, s);
  for (;;)
    if (const double r = normal(rng); std::fabs(r) <= t)
      return r;
}

FreshGradientModel model_of(const std::vector<float>& mean, const std::vector<float>& noise,
                            const NoiseMagnitude& magnitude)
{
  FreshGradientModel fresh;
  fresh.iteration = 5;
  fresh.mean = mean;
  fresh.noise = noise;
  fresh.magnitude = &magnitude;
  fresh.presence = [](Index) { return 1.0; };
  fresh.present = [](RankId, Index) { return true; };
  fresh.streams = 77;
  return fresh;
}

} // namespace

TEST(MeanField, NormalQuantileInvertsErfc)
{
  for (double p : {1e-300, 1e-40, 1e-10, 1e-3, 0.02, 0.3, 0.5, 0.77, 0.999, 1 - 1e-12}) {
    const double x = normal_quantile(p);
    const double back = x < 0 ? std::erfc(-x / std::numbers::sqrt2) / 2 : 1 - std::erfc(x / std::numbers::sqrt2) / 2;
    EXPECT_NEAR(back / p, 1.0, 1e-9) << p;
  }
}

TEST(MeanField, NoisePartialMomentsMatchMonteCarloOfTheMixture)
{
  const NoiseMagnitude magnitude(kTau);
  std::mt19937_64 rng(3);
  constexpr int kDraws = 2'000'000;
  std::vector<double> x(kDraws);
  for (double& v : x)
    v = draw_mixture(rng);
  EXPECT_NEAR(magnitude.second_moment(), 1.0, 2e-3);
  for (double a : {-1.5, -0.2, 0.0, 0.7, 2.0, 3.5}) {
    double p = 0, first = 0, second = 0;
    for (double v : x)
      if (v > a) {
        p += 1;
        first += v;
        second += v * v;
      }
    p /= kDraws;
    first /= kDraws;
    second /= kDraws;
    const NoiseMagnitude::Partial partial = magnitude.above(a);
    const double error = 5 / std::sqrt(kDraws); // five standard errors of a unit-variance mean, roughly
    EXPECT_NEAR(partial.probability, p, error) << a;
    EXPECT_NEAR(partial.first, first, 2 * error) << a;
    EXPECT_NEAR(partial.second, second, 4 * error) << a;
    // Draws beyond a: all above it, with the conditional mean E[X; X > a] / P(X > a).
    double sum = 0;
    constexpr int kConditional = 200'000;
    std::uniform_real_distribution<double> uniform;
    for (int d = 0; d < kConditional; ++d) {
      const double draw = magnitude.draw_above(a, uniform(rng), uniform(rng));
      ASSERT_GT(draw, a - 1e-9);
      sum += draw;
    }
    EXPECT_NEAR(sum / kConditional, partial.first / partial.probability, 0.02) << a;
  }
}

TEST(MeanField, CandidatesMatchBruteForceOfTheModel)
{
  // Entries of three kinds (residual far below the floor, straddling it, no residual) with varied mean and noise;
  // every rank's candidates against brute force: each rank draws every entry's R from the mixture and X from the
  // noise and keeps |m + R + noise X| > floor. Compared: candidates per rank and their mean |value|, per kind.
  const NoiseMagnitude magnitude(kTau);
  constexpr int kEntries = 3000;
  constexpr double kTruncation = 1.0, kFloor = 0.9;
  std::vector<float> mean(kEntries), noise(kEntries);
  constexpr int kRanks = 400;
  MeanFieldResidual residual(kEntries, kRanks, 0);
  std::mt19937_64 setup(11);
  std::uniform_real_distribution<double> uniform;
  std::vector<MeanFieldResidual::EntryState> states(kEntries);
  for (int i = 0; i < kEntries; ++i) {
    mean[i] = static_cast<float>((uniform(setup) - 0.5) * 0.6);
    noise[i] = static_cast<float>(0.02 + 0.3 * uniform(setup));
    const int kind = i % 3;
    states[i] = kind == 0   ? MeanFieldResidual::EntryState{0.9, 0.0, 0.2}
                : kind == 1 ? MeanFieldResidual::EntryState{0.7, 0.4 * (uniform(setup) - 0.5), 0.8}
                            : MeanFieldResidual::EntryState{0.0, 0.0, 0.0};
    residual.set_state(static_cast<Index>(i), states[i], kTruncation);
  }
  const FreshGradientModel fresh = model_of(mean, noise, magnitude);
  double model_count[3] = {}, model_value[3] = {};
  for (RankId r = 0; r < kRanks; ++r) {
    std::vector<SparseVector> drawn;
    const RankId rank[] = {r};
    residual.candidates(fresh, rank, kFloor, drawn);
    ASSERT_TRUE(std::is_sorted(drawn[0].indices.begin(), drawn[0].indices.end()));
    for (std::size_t e = 0; e < drawn[0].size(); ++e) {
      ASSERT_GT(std::fabs(drawn[0].values[e]), static_cast<float>(kFloor));
      model_count[drawn[0].indices[e] % 3] += 1;
      model_value[drawn[0].indices[e] % 3] += std::fabs(drawn[0].values[e]);
    }
  }
  double brute_count[3] = {}, brute_value[3] = {};
  std::mt19937_64 rng(5);
  for (int r = 0; r < kRanks; ++r)
    for (int i = 0; i < kEntries; ++i) {
      const auto& s = states[i];
      const double value = uniform(rng) < s.nonzero ? draw_truncated(rng, s.centre, s.spread, kTruncation) : 0.0;
      const double acc = mean[i] + value + noise[i] * draw_mixture(rng);
      if (std::fabs(acc) > kFloor) {
        brute_count[i % 3] += 1;
        brute_value[i % 3] += std::fabs(acc);
      }
    }
  for (int kind = 0; kind < 3; ++kind) {
    ASSERT_GT(brute_count[kind], 500) << kind;
    // Counts are sums of independent Bernoullis: within 5 standard deviations (plus the table's 1e-4).
    EXPECT_NEAR(model_count[kind], brute_count[kind], 5 * std::sqrt(2 * brute_count[kind]) + 1e-3 * brute_count[kind])
        << "kind " << kind;
    EXPECT_NEAR(model_value[kind] / model_count[kind], brute_value[kind] / brute_count[kind], 0.01) << "kind " << kind;
  }
}

TEST(MeanField, ThePieceCacheChangesNoCandidate)
{
  // A plan keeps the pieces of entries that the ranks together visit often: with 4 ranks only the entries every
  // rank visits (level 0), with 400 also those visited by 1% of the ranks. The same state and fresh gradient (rows of
  // the first third possibly absent from a rank's batch) must give every rank the same candidates, bit for bit.
  const NoiseMagnitude magnitude(kTau);
  constexpr int kEntries = 3000;
  constexpr double kTruncation = 1.0, kFloor = 0.9;
  std::vector<float> mean(kEntries), noise(kEntries);
  MeanFieldResidual few_ranks(kEntries, 4, 0), many_ranks(kEntries, 400, 0);
  std::mt19937_64 setup(3);
  std::uniform_real_distribution<double> uniform;
  for (int i = 0; i < kEntries; ++i) {
    mean[i] = static_cast<float>((uniform(setup) - 0.5) * 0.6);
    noise[i] = static_cast<float>(0.02 + 0.3 * uniform(setup));
    const MeanFieldResidual::EntryState state{0.2 + 0.7 * uniform(setup), 0.4 * (uniform(setup) - 0.5),
                                              0.1 + 0.7 * uniform(setup)};
    few_ranks.set_state(static_cast<Index>(i), state, kTruncation);
    many_ranks.set_state(static_cast<Index>(i), state, kTruncation);
  }
  FreshGradientModel fresh = model_of(mean, noise, magnitude);
  fresh.row_sparse = {IndexRange{0, kEntries / 3}};
  fresh.presence = [](Index) { return 0.6; };
  fresh.present = [](RankId rank, Index i) { return (static_cast<Index>(rank) + i) % 5 < 3; };
  few_ranks.prepare(fresh, kFloor, 1);
  many_ranks.prepare(fresh, kFloor, 2);
  EXPECT_GT(many_ranks.largest_piece_cache(), 4 * few_ranks.largest_piece_cache());
  std::size_t candidates = 0;
  for (RankId r = 0; r < 4; ++r) {
    const RankId rank[] = {r};
    std::vector<SparseVector> uncached, cached;
    few_ranks.candidates(fresh, rank, kFloor, uncached);
    many_ranks.candidates(fresh, rank, kFloor, cached);
    EXPECT_EQ(uncached[0].indices, cached[0].indices) << "rank " << r;
    EXPECT_EQ(uncached[0].values, cached[0].values) << "rank " << r;
    candidates += cached[0].size();
  }
  EXPECT_GT(candidates, 4u * 100);
}

TEST(MeanField, FilterStepMatchesMonteCarlo)
{
  // One entry: the state after one update against Monte Carlo of acc = R + g conditioned on |acc| <= T': the
  // probability of staying and the mean and variance of what stays (the fitted truncated normal's, by quadrature).
  const NoiseMagnitude magnitude(kTau);
  struct Case {
    MeanFieldResidual::EntryState state;
    double m, s, truncation;
  };
  for (const Case& c : {Case{{0.8, 0.1, 0.5}, 0.05, 0.2, 1.0}, Case{{0.5, 0.6, 0.3}, 0.2, 0.1, 1.1},
                        Case{{0.0, 0.0, 0.0}, -0.3, 0.4, 0.9}, Case{{0.9, -0.2, 2.0}, 0.0, 0.05, 1.0}}) {
    std::vector<float> mean{static_cast<float>(c.m)}, noise{static_cast<float>(c.s)};
    MeanFieldResidual residual(1, 1, 0);
    residual.set_state(0, c.state, 1.0);
    residual.update(model_of(mean, noise, magnitude), c.truncation, 1);
    const MeanFieldResidual::EntryState next = residual.state(0);
    std::mt19937_64 rng(9);
    std::uniform_real_distribution<double> uniform;
    constexpr int kDraws = 1'000'000;
    double stay = 0, sum = 0, squares = 0;
    for (int d = 0; d < kDraws; ++d) {
      const double r = uniform(rng) < c.state.nonzero ? draw_truncated(rng, c.state.centre, c.state.spread, 1.0) : 0.0;
      const double acc = r + c.m + c.s * draw_mixture(rng);
      if (std::fabs(acc) <= c.truncation) {
        stay += 1;
        sum += acc;
        squares += acc * acc;
      }
    }
    const double mc_mean = sum / stay, mc_variance = squares / stay - mc_mean * mc_mean;
    stay /= kDraws;
    // The fitted law's moments by the midpoint rule.
    double w = 0, m1 = 0, m2 = 0;
    constexpr int kSteps = 20000;
    for (int j = 0; j < kSteps; ++j) {
      const double x = -c.truncation + (j + 0.5) * 2 * c.truncation / kSteps;
      const double z = (x - next.centre) / next.spread;
      const double density = std::exp(-z * z / 2);
      w += density;
      m1 += density * x;
      m2 += density * x * x;
    }
    const double fit_mean = m1 / w, fit_variance = m2 / w - fit_mean * fit_mean;
    EXPECT_NEAR(next.nonzero, stay, 0.003);
    EXPECT_NEAR(fit_mean, mc_mean, 0.01 * c.truncation);
    EXPECT_NEAR(fit_variance / mc_variance, 1.0, 0.03);
  }
}

TEST(MeanField, CarriedStoreKeepsTheLargestUpToItsCap)
{
  MeanFieldResidual residual(100, 2, 2);
  residual.carry(1, SparseVector{{3, 7, 9, 20}, {0.5f, -2.0f, 0.1f, 1.0f}});
  EXPECT_EQ(residual.carried_entries(), 2u);
  EXPECT_EQ(residual.carried_evicted(), 2u);
}

namespace {

nlohmann::json validation_config(const std::string& algorithm, const std::string& residual, int seed)
{
  return {
      {"name", algorithm + "_" + residual},
      {"seed", seed},
      {"ranks", 8},
      {"iterations", 48},
      {"topology", {{"type", "star"}, {"nodes", 8}, {"bandwidth", "10GBps"}, {"latency", "1us"}}},
      {"algorithm", {{"name", algorithm}}},
      {"workload", {{"n", 1 << 16}, {"density", 0.01}}},
      {"gradients",
       {{"source", "calibrated"}, {"model", "vgg16"}, {"generation", residual == "dense" ? "dense" : "candidates"}}},
      {"selection", {{"residual", residual}, {"reevaluate_every", 8}}},
      {"network", {{"model", "LinkLevel"}}},
      {"simulation", {{"verify", false}}}};
}

struct RunFigures {
  double reuse_m = 0;      // median over iterations 8-47 of sum_r m_r / (P k) (Ok-Topk: its threshold-reuse ones)
  double result = 0;       // median over iterations 8-47 of |U| / k
  double busiest_recv = 0; // median bytes received by the busiest rank
};

RunFigures figures(const std::filesystem::path& dir)
{
  std::vector<double> m, result, recv;
  for (auto& row : read_csv(dir / "results.csv"))
    if (row["phase"] == "total" && std::stoi(row["iteration"]) >= 8 && row["reevaluation"] != "1") {
      const double k = std::stod(row["k"]);
      m.push_back(std::stod(row["local_selected_sum"]) / (8 * k));
      result.push_back(std::stod(row["result_nnz"]) / k);
      recv.push_back(std::stod(row["bytes_recv_max"]));
    }
  auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  return {median(m), median(result), median(recv)};
}

RunFigures run_figures(const std::string& algorithm, const std::string& residual, int seed)
{
  const CliResult run =
      run_config(validation_config(algorithm, residual, seed), algorithm + "-" + residual + "-" + std::to_string(seed));
  EXPECT_EQ(run.exit_code, 0) << run.output;
  return figures(run.dir);
}

} // namespace

TEST(MeanFieldRuns, OktopkReuseIterationsMatchTheDenseResidual)
{
  // P = 8, n = 2^16, VGG-16, 1%, re-evaluation every 8: the reuse iterations' selected count, |U| and the busiest
  // rank's bytes within 10% of the dense residual's; "none" misses m/k by more than half (the reason for the model).
  const RunFigures dense = run_figures("oktopk", "dense", 1);
  const RunFigures model = run_figures("oktopk", "mean_field", 1);
  const RunFigures none = run_figures("oktopk", "none", 1);
  EXPECT_NEAR(model.reuse_m / dense.reuse_m, 1.0, 0.10);
  EXPECT_NEAR(model.result / dense.result, 1.0, 0.10);
  EXPECT_NEAR(model.busiest_recv / dense.busiest_recv, 1.0, 0.10);
  EXPECT_LT(none.reuse_m / dense.reuse_m, 0.6);
}

TEST(MeanFieldRuns, TopkaUnionMatchesTheDenseResidual)
{
  // TopkA's union |U| / k (exact top-k every iteration, everything selected consumed) within 10% of the oracle's.
  const RunFigures dense = run_figures("topka", "dense", 2);
  const RunFigures model = run_figures("topka", "mean_field", 2);
  EXPECT_NEAR(model.result / dense.result, 1.0, 0.10);
}

TEST(MeanFieldRuns, GaussiankMatchesTheDenseResidual)
{
  // Gaussiank from candidates: its normal fit from the model's acc; the selected count and |U| (the union its
  // allgatherv delivers) within 10% of the oracle's. Without a residual it is refused (no fit of acc).
  const RunFigures dense = run_figures("gaussiank", "dense", 1);
  const RunFigures model = run_figures("gaussiank", "mean_field", 1);
  EXPECT_NEAR(model.reuse_m / dense.reuse_m, 1.0, 0.10);
  EXPECT_NEAR(model.result / dense.result, 1.0, 0.10);
  const CliResult none = run_config(validation_config("gaussiank", "none", 1), "gaussiank-none");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.output.find("selection.policy"), std::string::npos) << none.output;
}

TEST(MeanFieldRuns, SameResultsForAnyThreadCount)
{
  nlohmann::json config = validation_config("gtopk", "mean_field", 3);
  config["iterations"] = 6;
  const CliResult one = run_config(config, "mf-threads-1", "--threads 1");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const CliResult two = run_config(config, "mf-threads-2", "--threads 2");
  ASSERT_EQ(two.exit_code, 0) << two.output;
  for (const char* file : {"results.csv", "ranks.csv"})
    EXPECT_EQ(read_text(one.dir / file), read_text(two.dir / file)) << file;
  // The manifest reports the model's memory: 12 bytes per entry, and carried stores within their cap (2 k).
  const auto manifest = nlohmann::json::parse(read_text(one.dir / "manifest.json"));
  const auto& memory = manifest.at("mean_field");
  EXPECT_EQ(memory.at("state_bytes").get<std::uint64_t>(), 12u << 16);
  EXPECT_EQ(memory.at("carried_cap_entries_per_rank").get<std::uint64_t>(), 2u * 655u);
  EXPECT_GT(memory.at("carried_largest_store").get<std::uint64_t>(), 0u); // gTopk leaves selections outside U
}

TEST(MeanFieldRuns, RefusedWhereItCannotWork)
{
  nlohmann::json dense = validation_config("oktopk", "mean_field", 1);
  dense["gradients"]["generation"] = "dense";
  const CliResult a = run_config(dense, "mf-dense");
  EXPECT_EQ(a.exit_code, 2);
  EXPECT_NE(a.output.find("selection.residual"), std::string::npos) << a.output;
  nlohmann::json searchsorted = validation_config("oktopk", "mean_field", 1);
  searchsorted["selection"]["reevaluation_residual"] = "reference_searchsorted";
  const CliResult b = run_config(searchsorted, "mf-searchsorted");
  EXPECT_EQ(b.exit_code, 2);
  EXPECT_NE(b.output.find("selection.reevaluation_residual"), std::string::npos) << b.output;
}

TEST(MeanFieldStats, ErrorFeedbackFiguresMatchTheDenseResidual)
{
  // sparsim stats' error-feedback loops (exact top-k, and Ok-Topk's threshold reuse) with the mean-field residual
  // against the dense residual: VGG-16, P = 8, n = 2^16, 1%, 16 iterations of warm-up then 24 measured. The
  // selection kept from a rank's previous one is not compared: the shared distribution does not know which rank
  // selected an entry last (docs/gradients.md, limitations).
  const std::uint64_t n = 1 << 16;
  auto source = [&](const char* generation) {
    nlohmann::json spec = {{"source", "calibrated"}, {"model", "vgg16"}, {"generation", generation}};
    return parse_gradient_source(JsonReader(spec, "gradients"), GradientContext{1, n, 8, SPARSIM_SOURCE_DIR});
  };
  GradientStatsOptions options;
  options.ranks = 8;
  options.n = n;
  options.k = n / 100;
  options.warmup = 16;
  options.iterations = 24;
  options.reuse.reevaluate_every = 8;
  const GradientStats dense = measure_gradient_stats(*source("dense"), options);
  options.mean_field = true;
  const GradientStats model = measure_gradient_stats(*source("candidates"), options);
  auto within = [&](const char* what, double value, double oracle, double band) {
    EXPECT_NEAR(value / oracle, 1.0, band) << what << " " << value << " against " << oracle;
  };
  within("Jaccard", model.median.jaccard, dense.median.jaccard, 0.15);
  within("union / (P k)", model.median.union_ratio, dense.median.union_ratio, 0.07);
  within("busiest region / mean", model.median.region_imbalance, dense.median.region_imbalance, 0.05);
  within("threshold change", model.median.threshold_drift, dense.median.threshold_drift, 0.20);
  within("m / k under reuse, median", model.reuse_median_ratio, dense.reuse_median_ratio, 0.10);
  within("m / k under reuse, maximum", model.reuse_max_ratio, dense.reuse_max_ratio, 0.15);
  within("m / k under reuse, 90th percentile", model.reuse_p90_ratio, dense.reuse_p90_ratio, 0.15);
  within("m / k in the reuse iterations, median", model.reuse_only_median_ratio, dense.reuse_only_median_ratio, 0.10);
  // Both loops record every rank's count in every measured iteration, and re-evaluate at the same iterations.
  ASSERT_EQ(model.iterations.size(), dense.iterations.size());
  for (std::size_t i = 0; i < model.iterations.size(); ++i) {
    EXPECT_EQ(model.iterations[i].reuse_selected.size(), 8u);
    EXPECT_EQ(model.iterations[i].reevaluation, dense.iterations[i].reevaluation);
    EXPECT_EQ(model.iterations[i].reevaluation, model.iterations[i].iteration % 8 == 0);
  }
}

TEST(MeanFieldStats, SameFiguresForAnyThreadCount)
{
  // The mean-field loops' plan, update and the ranks' draws run over options.threads; every figure, and every
  // rank's count in every iteration, must be the same for one thread and for three.
  const std::uint64_t n = 1 << 14;
  nlohmann::json spec = {{"source", "calibrated"}, {"model", "lstm_an4"}, {"generation", "candidates"}};
  const auto source =
      parse_gradient_source(JsonReader(spec, "gradients"), GradientContext{2, n, 7, SPARSIM_SOURCE_DIR});
  GradientStatsOptions options;
  options.ranks = 7;
  options.n = n;
  options.k = n / 50;
  options.warmup = 3;
  options.iterations = 6;
  options.reuse.reevaluate_every = 4;
  options.mean_field = true;
  const nlohmann::json one = measure_gradient_stats(*source, options).to_json(true);
  options.threads = 3;
  const nlohmann::json three = measure_gradient_stats(*source, options).to_json(true);
  EXPECT_EQ(one.dump(), three.dump());
  EXPECT_FALSE(one["iterations"].empty());
}
