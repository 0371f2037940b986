// SparDL against references written here: a sequential SparDL over all ranks' dense accs, transcribed from the
// paper's description (Spar-Reduce-Scatter by recursive halving, the across-teams exchange of the top-h with
// the public code's rule for h, Spar-All-Gather), its own top-k by sorting; the dense sum when nothing can be
// dropped (k = n); the conservation sum_r acc_r = U + sum_r residual_r; the closed form's bytes, messages and
// time per phase on inputs for which it holds; h's path on a hand-made input; the config rules. Several P,
// including non-powers of two, and team counts d from 1 to P.
#include "config_errors.hpp"
#include "sparse_harness.hpp"

#include "sim/run/config.hpp"
#include "sim/run/memory.hpp"

#include <algorithm>
#include <cmath>
#include <gtest/gtest.h>
#include <map>
#include <numeric>
#include <ostream>
#include <random>

using namespace sparsim;
using namespace sparsim::testing;

namespace {

using Dense = std::vector<float>;
using Gradients = std::vector<std::vector<Dense>>; // [iteration][rank]

constexpr double kAlpha = 2 * kStarLatency; // a route crosses two links
constexpr double kPairBytes = 8;            // a 4-byte index and a 4-byte value

// The top-k of acc over [begin, end) by magnitude, by sorting (no ties in these tests' data), sorted by index;
// the entries are zeroed in acc.
std::vector<std::pair<Index, float>> take_top_by_sorting(Dense& acc, std::uint64_t begin, std::uint64_t end,
                                                         std::uint64_t k)
{
  std::vector<Index> order(end - begin);
  std::iota(order.begin(), order.end(), static_cast<Index>(begin));
  std::sort(order.begin(), order.end(), [&](Index a, Index b) { return std::fabs(acc[a]) > std::fabs(acc[b]); });
  order.resize(std::min<std::size_t>(order.size(), k));
  std::sort(order.begin(), order.end());
  std::vector<std::pair<Index, float>> top;
  for (Index i : order) {
    top.emplace_back(i, acc[i]);
    acc[i] = 0.0f;
  }
  return top;
}

// SparDL over all P ranks at once, one call per iteration: accs[r] is rank r's acc (residual + gradient) and
// is left as its residual; returns U sorted by index.
class ReferenceSparDL {
public:
  ReferenceSparDL(int P, int d, std::uint64_t n, std::uint64_t k)
      : P_(P)
      , d_(d)
      , Q_(P / d)
      , n_(n)
      , kb_(k / (P / d))
      , C_((n + Q_ - 1) / Q_)
      , h_(Q_, static_cast<std::int64_t>(kb_) / d)
      , step_(Q_)
      , inertia_(Q_, false)
  {
    for (int q = 0; q < Q_; ++q)
      step_[q] = (static_cast<std::int64_t>(kb_) - h_[q]) / 100;
  }

  std::vector<std::pair<Index, float>> iteration(std::vector<Dense>& accs)
  {
    std::vector<std::vector<std::pair<Index, float>>> final_blocks(Q_); // by block, the same in every team
    // Spar-Reduce-Scatter in every team: the rounds of recursive halving, every member's sends taken from its
    // acc before anything it receives in the round is added.
    int R = 0;
    while ((1 << R) < Q_)
      ++R;
    for (int t = 0; t < d_; ++t) {
      auto acc = [&](int q) -> Dense& { return accs[t * Q_ + q]; };
      for (int i = 0; i < R; ++i) {
        const int gap = 1 << (R - 1 - i);
        const int count = i == 0 ? Q_ - gap : gap;
        std::vector<std::vector<std::vector<std::pair<Index, float>>>> sent(Q_); // [member][part]
        for (int q = 0; q < Q_; ++q)
          for (int j = 0; j < count; ++j) {
            const int b = (q + gap + j) % Q_;
            sent[q].push_back(take_top_by_sorting(acc(q), begin(b), end(b), kb_));
          }
        for (int q = 0; q < Q_; ++q)
          for (const auto& part : sent[(q - gap + Q_) % Q_])
            for (auto [index, value] : part)
              acc(q)[index] += value;
      }
      if (d_ == 1)
        for (int q = 0; q < Q_; ++q)
          final_blocks[q] = take_top_by_sorting(acc(q), begin(q), end(q), kb_);
    }
    // Across teams: block q's d holders each give their top-h; the sum keeps its top-k_b, the rest goes back
    // to the d holders, 1/d each.
    if (d_ > 1)
      for (int q = 0; q < Q_; ++q) {
        std::map<Index, float> sum;
        for (int t = 0; t < d_; ++t)
          for (auto [index, value] : take_top_by_sorting(accs[t * Q_ + q], begin(q), end(q), h_[q]))
            sum[index] += value;
        const bool above = sum.size() > kb_;
        std::vector<std::pair<Index, float>> by_magnitude(sum.begin(), sum.end());
        std::sort(by_magnitude.begin(), by_magnitude.end(),
                  [](auto a, auto b) { return std::fabs(a.second) > std::fabs(b.second); });
        for (std::size_t e = kb_; e < by_magnitude.size(); ++e) { // what was dropped
          ++dropped_across_teams_;
          sum.erase(by_magnitude[e].first);
          for (int t = 0; t < d_; ++t)
            accs[t * Q_ + q][by_magnitude[e].first] += by_magnitude[e].second * (1.0f / static_cast<float>(d_));
        }
        adapt(q, above);
        final_blocks[q].assign(sum.begin(), sum.end());
      }
    std::vector<std::pair<Index, float>> u;
    for (const auto& block : final_blocks)
      u.insert(u.end(), block.begin(), block.end());
    return u;
  }

  std::uint64_t dropped_across_teams() const { return dropped_across_teams_; }

private:
  std::uint64_t begin(int b) const { return std::min<std::uint64_t>(n_, b * C_); }
  std::uint64_t end(int b) const { return std::min<std::uint64_t>(n_, (b + 1) * C_); }

  // allreducer.py: if (sum size > k) xor (h_step > 0): double the step every second time; else
  // h_step = int(-0.5 h_step) if |h_step| > 1 else -h_step. Then h = max(h + h_step, int(k / Group_num)).
  void adapt(int q, bool above)
  {
    if (above ^ (step_[q] > 0)) {
      if (inertia_[q]) {
        step_[q] *= 2;
        inertia_[q] = false;
      } else {
        inertia_[q] = true;
      }
    } else {
      step_[q] = std::abs(step_[q]) > 1 ? static_cast<std::int64_t>(std::trunc(-0.5 * static_cast<double>(step_[q])))
                                        : -step_[q];
      inertia_[q] = false;
    }
    h_[q] = std::max<std::int64_t>(h_[q] + step_[q], static_cast<std::int64_t>(kb_) / d_);
  }

  int P_, d_, Q_;
  std::uint64_t n_, kb_, C_;
  std::vector<std::int64_t> h_, step_;
  std::vector<bool> inertia_;
  std::uint64_t dropped_across_teams_ = 0;
};

Gradients normal_gradients(int iterations, int P, std::uint64_t n, unsigned seed)
{
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Gradients g(iterations, std::vector<Dense>(P, Dense(n)));
  for (auto& iteration : g)
    for (auto& rank : iteration)
      for (float& v : rank)
        v = normal(rng);
  return g;
}

std::unique_ptr<SparseAllreduce> spardl(int teams)
{
  return make_sparse_algorithm({{"name", "spardl"}, {"teams", teams}});
}

std::vector<std::pair<Index, float>> pairs_of(const SparseVector& v)
{
  std::vector<std::pair<Index, float>> out;
  for (std::size_t e = 0; e < v.size(); ++e)
    out.emplace_back(v.indices[e], v.values[e]);
  return out;
}

// "" if equal, else where two lists of pairs first differ.
std::string first_difference(const std::vector<std::pair<Index, float>>& got,
                             const std::vector<std::pair<Index, float>>& want)
{
  for (std::size_t e = 0; e < std::min(got.size(), want.size()); ++e)
    if (got[e] != want[e])
      return fmt::format("entry {}: ({}, {}) where the reference has ({}, {})", e, got[e].first, got[e].second,
                         want[e].first, want[e].second);
  if (got.size() != want.size())
    return fmt::format("{} entries where the reference has {}", got.size(), want.size());
  return "";
}

struct Shape {
  int P;
  int teams;
};
void PrintTo(const Shape& s, std::ostream* out) { *out << "P = " << s.P << ", d = " << s.teams; }
std::string shape_name(const ::testing::TestParamInfo<Shape>& info)
{
  return "P" + std::to_string(info.param.P) + "_d" + std::to_string(info.param.teams);
}

class SparDLShapes : public ::testing::TestWithParam<Shape> {};

} // namespace

// Random gradients, eight iterations, n = 4000 (with Q = 3, 6, 13, 17 the last block is shorter), k = 800: every
// rank's U and residual equal the reference's exactly (the same float operations in the same order), and
// sum_r acc_r = U + sum_r residual_r. With d > 1, h grows (its step is (k_b - h)/100 >= 1
// here) until the sums of the shares exceed k_b and drop entries, which the test requires to happen.
TEST_P(SparDLShapes, MatchesTheReferenceAndConservesTheGradient)
{
  const auto [P, d] = GetParam();
  const std::uint64_t n = 4000, k = 800;
  const int iterations = 8;
  const Gradients gradients = normal_gradients(iterations, P, n, 7u + static_cast<unsigned>(P * 31 + d));
  const auto algorithm = spardl(d);
  const WithinCollectiveRun sim = run_within_collective(*algorithm, gradients, k);

  ReferenceSparDL reference(P, d, n, k);
  std::vector<Dense> accs(P, Dense(n, 0.0f));
  std::vector<double> sent_so_far(n, 0.0), gradient_so_far(n, 0.0); // sum over iterations of U, of all gradients
  for (int it = 0; it < iterations; ++it) {
    SCOPED_TRACE("iteration " + std::to_string(it));
    for (int r = 0; r < P; ++r)
      for (std::uint64_t i = 0; i < n; ++i) {
        accs[r][i] += gradients[it][r][i];
        gradient_so_far[i] += gradients[it][r][i];
      }
    const auto u = reference.iteration(accs);
    for (int r = 0; r < P; ++r) {
      const RankOutcome& out = sim.run.iterations[it][r];
      ASSERT_EQ(first_difference(pairs_of(out.result), u), "") << "rank " << r << ": U differs from the reference's";
      ASSERT_EQ(sim.residuals[it][r], accs[r]) << "rank " << r << ": the residual differs from the reference's";
      EXPECT_EQ(out.report.global_selected, u.size());
    }
    // What went in is what came out plus what stays.
    for (auto [index, value] : u)
      sent_so_far[index] += value;
    for (std::uint64_t i = 0; i < n; ++i) {
      double kept = 0;
      for (int r = 0; r < P; ++r)
        kept += sim.residuals[it][r][i];
      ASSERT_NEAR(sent_so_far[i] + kept, gradient_so_far[i], 1e-4 * (1 + std::fabs(gradient_so_far[i])))
          << "index " << i;
    }
  }
  if (d > 1) {
    EXPECT_GT(reference.dropped_across_teams(), 0u) << "no sum of shares ever exceeded k_b";
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, SparDLShapes,
                         ::testing::Values(Shape{1, 1}, Shape{2, 1}, Shape{3, 1}, Shape{5, 1}, Shape{6, 1}, Shape{8, 1},
                                           Shape{13, 1}, Shape{17, 1}, Shape{2, 2}, Shape{6, 2}, Shape{6, 3},
                                           Shape{8, 2}, Shape{8, 4}, Shape{12, 3}, Shape{12, 4}, Shape{5, 5},
                                           Shape{10, 5}),
                         shape_name);

// With k = n and one team nothing is ever dropped: U is the dense sum (sorted by index, every index once), the
// residuals are zero. A check of the reduce-scatter's schedule that does not share the reference's: a block
// reduced twice or missed, or left on the wrong member, shows as a wrong sum. n = 40 P: blocks of k_b entries.
class SparDLDenseSum : public ::testing::TestWithParam<int> {};

TEST_P(SparDLDenseSum, IsTheDenseSumWhenKIsN)
{
  const int P = GetParam();
  const std::uint64_t n = 40 * static_cast<std::uint64_t>(P);
  const Gradients gradients = normal_gradients(1, P, n, 3);
  const WithinCollectiveRun sim = run_within_collective(*spardl(1), gradients, n);
  std::vector<double> sum(n, 0.0);
  for (int r = 0; r < P; ++r)
    for (std::uint64_t i = 0; i < n; ++i)
      sum[i] += gradients[0][r][i];
  for (int r = 0; r < P; ++r) {
    const SparseVector& u = sim.run.iterations[0][r].result;
    ASSERT_EQ(u.size(), n) << "rank " << r;
    for (std::uint64_t i = 0; i < n; ++i) {
      ASSERT_EQ(u.indices[i], i);
      EXPECT_NEAR(u.values[i], sum[i], 1e-5 * (1 + std::fabs(sum[i]))) << "index " << i;
    }
    EXPECT_EQ(sim.residuals[0][r], Dense(n, 0.0f)) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, SparDLDenseSum, ::testing::Values(1, 2, 3, 5, 6, 7, 8, 12, 13, 17, 24, 33));

// The closed form, per phase. With one team any data gives every block message exactly k_b pairs (P = 13: the
// first round sends 5 blocks, the others 4, 2 and 1). With teams, team t's gradients are large only at indices
// i = t mod d, so the teams' top-h are disjoint and their sum keeps all d h pairs.
namespace {

void expect_closed_form(int P, int d, const Gradients& gradients, std::uint64_t k)
{
  const std::uint64_t n = gradients[0][0].size();
  const auto algorithm = spardl(d);
  const WithinCollectiveRun sim = run_within_collective(*algorithm, gradients, k);
  const ClosedForm cf = algorithm->closed_form({P, n, k, WireFormat{}, kAlpha, 1.0 / kStarBandwidth, {}, {}});
  const int Q = P / d;
  const double kb = static_cast<double>(k / Q), h = std::floor(kb / d);
  const double block_pairs = d == 1 ? kb : d * h;
  double time = 0, messages = 0;
  for (int r = 0; r < P; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const auto phase = [&](const char* name) { return sim.run.phase(0, r, name); };
    EXPECT_EQ(phase("spar_reduce_scatter").bytes_sent, (Q - 1) * kb * kPairBytes);
    EXPECT_EQ(phase("spar_reduce_scatter").bytes_recv, (Q - 1) * kb * kPairBytes);
    EXPECT_EQ(phase("across_teams").bytes_sent, (d - 1) * h * kPairBytes);
    EXPECT_EQ(phase("spar_all_gather").bytes_sent, (Q - 1) * block_pairs * kPairBytes);
    EXPECT_EQ(phase("spar_all_gather").bytes_recv, (Q - 1) * block_pairs * kPairBytes);
    EXPECT_EQ(static_cast<double>(sim.run.iterations[0][r].total.bytes_sent), cf.bytes_sent_per_rank);
    EXPECT_EQ(sim.run.iterations[0][r].result.size(), Q * block_pairs);
    time = std::max(time, sim.run.iterations[0][r].time);
    messages += static_cast<double>(sim.run.iterations[0][r].total.msgs_sent);
  }
  EXPECT_EQ(messages, cf.messages);
  EXPECT_NEAR(time, cf.time, 1e-9 * cf.time) << cf.formula;
}

Gradients team_disjoint_gradients(int P, int d, std::uint64_t n)
{
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  Gradients g(1, std::vector<Dense>(P, Dense(n)));
  for (int r = 0; r < P; ++r) {
    const int team = r / (P / d);
    for (std::uint64_t i = 0; i < n; ++i)
      g[0][r][i] = static_cast<int>(i % d) == team ? 100.0f + uniform(rng) : 0.01f * uniform(rng);
  }
  return g;
}

} // namespace

TEST(SparDLClosedForm, OneTeamAnyData) { expect_closed_form(13, 1, normal_gradients(1, 13, 1300, 9), 130); }

TEST(SparDLClosedForm, TwoTeamsOfFour) { expect_closed_form(8, 2, team_disjoint_gradients(8, 2, 2400), 240); }

TEST(SparDLClosedForm, ThreeTeamsOfFour) { expect_closed_form(12, 3, team_disjoint_gradients(12, 3, 2400), 240); }

TEST(SparDLClosedForm, ThreeTeamsOfTwo) { expect_closed_form(6, 3, team_disjoint_gradients(6, 3, 2400), 240); }

// The block selections are charged as the driver's exact top-k (4 bytes per entry read, 8 per pair written) at
// the selection bandwidth: with one team a rank selects each of the Q blocks once, 4n + 8 Q k_b bytes.
TEST(SparDL, ChargesItsBlockSelectionsAsSelection)
{
  const int P = 6;
  const std::uint64_t n = 6000, k = 600;
  const double bandwidth = 1e9;
  const WithinCollectiveRun sim =
      run_within_collective(*spardl(1), normal_gradients(1, P, n, 4), k, WireFormat{}, 0, bandwidth);
  for (int r = 0; r < P; ++r)
    EXPECT_NEAR(sim.run.phase(0, r, "selection").time, (4.0 * n + 8.0 * P * (k / P)) / bandwidth, 1e-15)
        << "rank " << r;
}

// h on a hand-made input: P = 2 in two teams of one (Q = 1, k_b = k = 200), so h starts at 100 with a step of
// (200 - 100) / 100 = 1. The ranks' largest entries, each iteration far above what the residual holds, sit on
// the same indices ("overlap": the sum of the two top-h holds h entries) or on different ones ("disjoint": 2h).
// By the public code's rule:
//   it 0 overlap  100 <= 200, step > 0: keep going, inertia on             -> h 101
//   it 1 overlap  101 <= 200: inertia was on, step doubles to 2           -> h 103
//   it 2 overlap  103 <= 200: inertia on                                   -> h 105
//   it 3 disjoint 210 > 200: turn, step int(-0.5 * 2) = -1                 -> h 104 (10 entries dropped)
//   it 4 disjoint 208 > 200, step < 0: keep going, inertia on              -> h 103 (8 dropped)
//   it 5 overlap  103 <= 200, step < 0: turn, |step| = 1 so step = 1       -> h 104
TEST(SparDL, AdaptsItsShareAsThePublicCode)
{
  const std::uint64_t n = 4096, k = 200;
  const std::vector<bool> disjoint = {false, false, false, true, true, false};
  const std::vector<double> h = {100, 101, 103, 105, 104, 103};
  const std::vector<std::size_t> u_size = {100, 101, 103, 200, 200, 103};
  Gradients g(disjoint.size(), std::vector<Dense>(2, Dense(n)));
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> noise(-0.01f, 0.01f);
  for (std::size_t it = 0; it < disjoint.size(); ++it) {
    const float big = std::pow(10.0f, 3.0f + 3.0f * static_cast<float>(it)); // 1000 times the last one
    for (int r = 0; r < 2; ++r) {
      for (float& v : g[it][r])
        v = noise(rng);
      const std::uint64_t start = disjoint[it] && r == 1 ? 1000 : 0;
      for (std::uint64_t i = 0; i < 300; ++i)
        g[it][r][start + i] = big * (2.0f - static_cast<float>(i) / 1000.0f);
    }
  }
  const WithinCollectiveRun sim = run_within_collective(*spardl(2), g, k);
  for (std::size_t it = 0; it < disjoint.size(); ++it) {
    SCOPED_TRACE("iteration " + std::to_string(it));
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(sim.run.phase(static_cast<int>(it), r, "across_teams").bytes_sent, h[it] * kPairBytes);
      EXPECT_EQ(sim.run.iterations[it][r].result.size(), u_size[it]);
    }
  }
  // Iteration 3 dropped 10 of the 210: each rank's residual is its acc without its share, plus half of every
  // dropped sum (each held by one rank only, the shares being disjoint).
  std::vector<Dense> expected(2);
  std::map<Index, float> dropped;
  for (int r = 0; r < 2; ++r) {
    expected[r] = sim.residuals[2][r];
    for (std::uint64_t i = 0; i < n; ++i)
      expected[r][i] += g[3][r][i];
    for (auto [index, value] : take_top_by_sorting(expected[r], 0, n, 105))
      dropped[index] = value;
  }
  for (std::size_t e = 0; e < sim.run.iterations[3][0].result.size(); ++e)
    dropped.erase(sim.run.iterations[3][0].result.indices[e]);
  ASSERT_EQ(dropped.size(), 10u);
  for (int r = 0; r < 2; ++r) {
    for (auto [index, value] : dropped)
      expected[r][index] += value * 0.5f;
    EXPECT_EQ(sim.residuals[3][r], expected[r]) << "rank " << r;
  }
}

// The config rules: teams must divide P; the collective selects, so no other selection policy, no other top-k
// rule, no candidates generation (which has no dense acc), no measured selection time, and (as for every sparse
// algorithm) no n beyond 32-bit indices; the memory estimate counts
// the P dense accs even without a residual.
TEST(SparDLConfig, RefusesWhatItCannotRun)
{
  const nlohmann::json good = {
      {"ranks", 6},
      {"topology", {{"type", "star"}, {"nodes", 6}, {"bandwidth", "10Gbps"}, {"latency", "1us"}}},
      {"workload", {{"n", 4096}, {"density", 0.05}}},
      {"algorithm", {{"name", "spardl"}, {"teams", 3}}}};
  EXPECT_NO_THROW(parse_config(good, SPARSIM_SOURCE_DIR));
  auto refused_at = [](const nlohmann::json& config, const std::string& path, const std::string& value) {
    expect_config_error(config, SPARSIM_SOURCE_DIR, path, value);
  };
  auto with = [&](const char* key, nlohmann::json value) {
    nlohmann::json config = good;
    config[key] = std::move(value);
    return config;
  };
  refused_at(with("algorithm", {{"name", "spardl"}, {"teams", 4}}), "algorithm.teams", "4");
  refused_at(with("algorithm", {{"name", "spardl"}, {"teams", 0}}), "algorithm.teams", "0");
  refused_at(with("selection", {{"policy", "threshold_reuse"}}), "selection.policy", "threshold_reuse");
  refused_at(with("selection", {{"policy", "gaussian"}}), "selection.policy", "gaussian");
  refused_at(with("gradients", {{"source", "calibrated"}, {"model", "vgg16"}, {"generation", "candidates"}}),
             "gradients.generation", "candidates");
  refused_at(with("compute", {{"selection", "measured"}}), "compute.selection", "measured");
  refused_at(with("selection", {{"top_k", "strictly_above_kth"}}), "selection.top_k", "strictly_above_kth");
  refused_at(with("workload", {{"n", 5'000'000'000LL}, {"density", 0.01}}), "workload.n", "5000000000");

  nlohmann::json no_residual = with("selection", {{"residual", "none"}});
  const MemoryEstimate estimate = estimate_memory(parse_config(no_residual, SPARSIM_SOURCE_DIR));
  EXPECT_NE(estimate.breakdown.find("accs (P*n floats)"), std::string::npos) << estimate.breakdown;
  EXPECT_GE(estimate.bytes, 6.0 * 4096 * 4);
}
