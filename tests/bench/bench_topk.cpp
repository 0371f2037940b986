// Benchmark of the top-k kernels (sim/data/topk.hpp) against one streaming read pass over the same array.
//
// Memory bandwidth on a shared VM drifts by tens of percent between runs, so absolute times are not comparable; every
// benchmark therefore times a read pass (sum of |x|) right before each call of the kernel (and at least 10 in all),
// and reports
//   x_read_pass = mean kernel time / mean read pass time   (same run, same array, same cache state)
// next to the kernel time itself (manual time: the read passes are not in "Time"). select_topk_reference
// (std::nth_element) is measured the same way, so speedups are ratios of x_read_pass.
//
// Cases: n = 2^20, 2^24, 2^26; densities 0.1%, 1%, 2% (k = density n; select_above and count_above use the threshold
// that selects k entries); Gaussian and heavy-tailed (Student-t, 2 degrees of freedom) entries. Kernels: count_above,
// select_above (best loop, portable loop, into one reused output), kth_largest_magnitude, select_topk (new output,
// reused output) and select_topk_reference.
// Run: see docs/benchmarks.md (repetitions, random interleaving, medians).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "sim/data/topk.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

constexpr std::size_t kMaxLog2N = 26;

enum class Dist { gaussian, student_t };

// The input of each distribution, generated once at the largest size; smaller cases use a prefix.
std::span<const float> input(Dist dist, std::size_t n)
{
  auto generate = [](Dist d) {
    std::vector<float> x(std::size_t{1} << kMaxLog2N);
    std::mt19937_64 rng(d == Dist::gaussian ? 1 : 2);
    std::normal_distribution<float> gaussian;
    std::student_t_distribution<float> student_t(2.0f);
    for (float& v : x)
      v = d == Dist::gaussian ? gaussian(rng) : student_t(rng);
    return x;
  };
  static const std::vector<float> gaussian = generate(Dist::gaussian);
  static const std::vector<float> student_t = generate(Dist::student_t);
  return std::span<const float>(dist == Dist::gaussian ? gaussian : student_t).first(n);
}

// The floor every kernel is compared with: one streaming pass reading x (the sum of |x|), as fast as we can make it:
// AVX-512 when the CPU has it, several independent partial sums (bound by memory bandwidth, not by the latency of
// float additions; no -ffast-math needed), and the same software prefetch as the kernels (worth ~10% on a VM core).
constexpr std::size_t kPrefetchAhead = 2048; // entries, as in sim/data/topk.cpp

float read_pass_portable(std::span<const float> x)
{
  std::array<float, 16> partial{};
  std::size_t i = 0;
  for (; i + partial.size() <= x.size(); i += partial.size()) {
    __builtin_prefetch(x.data() + std::min(i + kPrefetchAhead, x.size() - 1));
    for (std::size_t j = 0; j < partial.size(); ++j)
      partial[j] += std::fabs(x[i + j]);
  }
  for (; i < x.size(); ++i)
    partial[0] += std::fabs(x[i]);
  float sum = 0;
  for (float p : partial)
    sum += p;
  return sum;
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) float read_pass_avx512(std::span<const float> x)
{
  __m512 sum[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  std::size_t i = 0;
  for (; i + 64 <= x.size(); i += 64)
    for (std::size_t j = 0; j < 4; ++j) {
      __builtin_prefetch(x.data() + std::min(i + 16 * j + kPrefetchAhead, x.size() - 1));
      sum[j] = _mm512_add_ps(sum[j], _mm512_abs_ps(_mm512_loadu_ps(x.data() + i + 16 * j)));
    }
  float lanes[16];
  _mm512_storeu_ps(lanes, _mm512_add_ps(_mm512_add_ps(sum[0], sum[1]), _mm512_add_ps(sum[2], sum[3])));
  float total = read_pass_portable(x.subspan(i));
  for (float lane : lanes)
    total += lane;
  return total;
}
#endif

float read_pass(std::span<const float> x)
{
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f"))
    return read_pass_avx512(x);
#endif
  return read_pass_portable(x);
}

double seconds_since(std::chrono::steady_clock::time_point start)
{
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Times kernel() as the benchmark's manual time, and a read pass of x before each call for the x_read_pass ratio
// (at least kMinReadPasses of them: slow kernels run few iterations).
template <class Kernel> void run(benchmark::State& state, std::span<const float> x, Kernel kernel)
{
  constexpr int kMinReadPasses = 10;
  double kernel_seconds = 0;
  double read_seconds = 0;
  int read_passes = 0;
  auto time_read_pass = [&] {
    const auto start = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(read_pass(x));
    read_seconds += seconds_since(start);
    ++read_passes;
  };
  for (auto _ : state) {
    time_read_pass();
    const auto start = std::chrono::steady_clock::now();
    auto result = kernel();
    benchmark::DoNotOptimize(result);
    const double elapsed = seconds_since(start);
    state.SetIterationTime(elapsed);
    kernel_seconds += elapsed;
  }
  while (read_passes < kMinReadPasses)
    time_read_pass();
  const double read_pass_seconds = read_seconds / read_passes;
  state.counters["x_read_pass"] = kernel_seconds / static_cast<double>(state.iterations()) / read_pass_seconds;
  state.counters["read_GBps"] = static_cast<double>(x.size_bytes()) / read_pass_seconds / 1e9;
}

void register_case(Dist dist, std::size_t log2_n, double density)
{
  const std::size_t n = std::size_t{1} << log2_n;
  const std::size_t k = static_cast<std::size_t>(density * static_cast<double>(n));
  const std::string suffix = std::string(dist == Dist::gaussian ? "/gaussian" : "/student_t") + "/n:2^" +
                             std::to_string(log2_n) + "/density:" + std::to_string(density * 100).substr(0, 3) + "%";
  // The threshold that selects k entries with select_above (entries strictly above the (k+1)-th largest magnitude).
  auto threshold = [dist, n, k] { return sparsim::kth_largest_magnitude(input(dist, n), k + 1); };
  using Case = std::function<void(benchmark::State&)>;
  const std::vector<std::pair<std::string, Case>> kernels = {
      {"count_above",
       [=](benchmark::State& s) {
         const float t = threshold();
         run(s, input(dist, n), [&] { return sparsim::count_above(input(dist, n), t); });
       }},
      {"select_above",
       [=](benchmark::State& s) {
         const float t = threshold();
         run(s, input(dist, n), [&] { return sparsim::select_above(input(dist, n), t); });
       }},
      {"select_above_portable",
       [=](benchmark::State& s) {
         const float t = threshold();
         run(s, input(dist, n),
             [&] { return sparsim::select_above(input(dist, n), t, sparsim::CompactionIsa::portable); });
       }},
      {"select_above_reused", // one output for all iterations: no fresh pages to fault in
       [=](benchmark::State& s) {
         const float t = threshold();
         sparsim::SparseVector out;
         run(s, input(dist, n), [&] {
           sparsim::select_above(input(dist, n), t, out);
           return out.size();
         });
       }},
      {"kth_largest_magnitude",
       [=](benchmark::State& s) {
         run(s, input(dist, n), [&] { return sparsim::kth_largest_magnitude(input(dist, n), k); });
       }},
      {"select_topk",
       [=](benchmark::State& s) { run(s, input(dist, n), [&] { return sparsim::select_topk(input(dist, n), k); }); }},
      {"select_topk_reused",
       [=](benchmark::State& s) {
         sparsim::SparseVector out;
         run(s, input(dist, n), [&] {
           sparsim::select_topk(input(dist, n), k, out);
           return out.size();
         });
       }},
      {"select_topk_reference",
       [=](benchmark::State& s) {
         run(s, input(dist, n), [&] { return sparsim::select_topk_reference(input(dist, n), k); });
       }},
  };
  for (const auto& [name, body] : kernels)
    benchmark::RegisterBenchmark((name + suffix).c_str(), body)->UseManualTime()->Unit(benchmark::kMillisecond);
}

} // namespace

int main(int argc, char** argv)
{
  for (std::size_t log2_n : {20, 24, 26})
    for (Dist dist : {Dist::gaussian, Dist::student_t})
      for (double density : {0.001, 0.01, 0.02})
        register_case(dist, log2_n, density);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv))
    return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
