#include "sim/gradients/candidate_sampler.hpp"

#include "sim/gradients/random_streams.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace sparsim {
namespace {

// The proposal's threshold is computed with this much slack below the floor, so that float rounding of
// mean + noise X can never lift an entry outside the proposal above the floor.
constexpr double kFloorSlack = 1e-6;

double bucket_y(int bucket) { return static_cast<double>(bucket) / CandidatePlan::kBucketsPerUnit; }

// Sorts (index << 32 | value bits) keys by index: least significant digit radix sort on the index's 16-bit
// halves (one pass when every index is below 2^16).
void sort_by_index(std::vector<std::uint64_t>& keys)
{
  std::vector<std::uint64_t> scratch(keys.size());
  const std::uint64_t largest = keys.empty() ? 0 : (*std::max_element(keys.begin(), keys.end()) >> 32);
  for (int shift = 32; shift < 64 && (largest >> (shift - 32)) != 0; shift += 16) {
    std::vector<std::size_t> offsets(65537, 0);
    for (std::uint64_t key : keys)
      ++offsets[((key >> shift) & 0xFFFF) + 1];
    for (std::size_t d = 1; d < offsets.size(); ++d)
      offsets[d] += offsets[d - 1];
    for (std::uint64_t key : keys)
      scratch[offsets[(key >> shift) & 0xFFFF]++] = key;
    keys.swap(scratch);
  }
}

} // namespace

CandidatePlan::CandidatePlan(std::span<const float> mean, std::span<const float> noise, double floor,
                             const NoiseMagnitude& magnitude)
    : floor_(floor)
    , magnitude_(magnitude)
{
  if (mean.size() != noise.size())
    throw std::invalid_argument("CandidatePlan: mean and noise differ in size");
  if (!(floor >= 0))
    throw std::invalid_argument("CandidatePlan: the floor must be >= 0");
  // Bucket edges in |X|: edge[j] = L^-1(j h); entry i goes to the last j with edge[j] <= a_i.
  std::vector<double> edges(kBuckets + 1);
  for (int j = 0; j <= kBuckets; ++j)
    edges[j] = magnitude.magnitude(bucket_y(j));
  const double proposal_floor = floor * (1 - kFloorSlack);
  constexpr std::uint16_t kLeftOut = 0xFFFF;
  std::vector<std::uint16_t> bucket_of(mean.size());
  std::vector<std::size_t> counts(kBuckets + 1, 0);
  for (std::size_t i = 0; i < mean.size(); ++i) {
    const double centre = std::fabs(static_cast<double>(mean[i]));
    const double spread = noise[i];
    std::uint16_t bucket = kLeftOut;
    if (spread > 0) {
      const double a = (proposal_floor - centre) / spread;
      if (a <= 0)
        bucket = 0;
      else if (a < edges[kBuckets])
        bucket = static_cast<std::uint16_t>(std::upper_bound(edges.begin(), edges.end(), a) - edges.begin() - 1);
    } else if (centre > proposal_floor) {
      bucket = 0; // no noise: a candidate in every rank (visited with probability 1)
    }
    bucket_of[i] = bucket;
    if (bucket != kLeftOut)
      ++counts[bucket + 1];
  }
  bucket_begin_.assign(kBuckets + 1, 0);
  for (int j = 1; j <= kBuckets; ++j)
    bucket_begin_[j] = bucket_begin_[j - 1] + counts[j];
  entries_.resize(bucket_begin_[kBuckets]);
  std::vector<std::size_t> next(bucket_begin_.begin(), bucket_begin_.end() - 1);
  for (std::size_t i = 0; i < mean.size(); ++i)
    if (bucket_of[i] != kLeftOut)
      entries_[next[bucket_of[i]]++] = static_cast<Index>(i);
}

double CandidatePlan::expected_visits() const
{
  double visits = 0;
  for (int j = 0; j < kBuckets; ++j)
    visits += static_cast<double>(bucket_begin_[j + 1] - bucket_begin_[j]) * std::exp(-bucket_y(j));
  return visits;
}

SparseVector CandidatePlan::sample(std::span<const float> mean, std::span<const float> noise, std::uint64_t stream,
                                   const std::function<bool(Index)>& present) const
{
  std::vector<std::uint64_t> kept;
  kept.reserve(static_cast<std::size_t>(expected_visits() * 0.75) + 16);
  const float floor = static_cast<float>(floor_);
  for (int j = 0; j < kBuckets; ++j) {
    const std::size_t size = bucket_begin_[j + 1] - bucket_begin_[j];
    if (size == 0)
      continue;
    const Index* entries = entries_.data() + bucket_begin_[j];
    const double y = bucket_y(j);
    const bool every_entry = j == 0; // visit probability exp(0) = 1
    const double log_stay = every_entry ? 0 : std::log1p(-std::exp(-y));
    const std::uint64_t base = finalise(stream ^ (static_cast<std::uint64_t>(j) * 0xD1B54A32D192ED03ull));
    std::uint64_t counter = 0;
    for (std::size_t position = 0;; ++position) {
      if (!every_entry) {
        // Entries skipped before the next visit: geometric with success probability exp(-y).
        const double skip = std::floor(std::log(uniform_open_closed(stream_bits(base, counter++))) / log_stay);
        if (skip >= static_cast<double>(size - position))
          break;
        position += static_cast<std::size_t>(skip);
      }
      if (position >= size)
        break;
      const Index i = entries[position];
      // |X| beyond this bucket's edge: Y = y + Exp(1); the lowest bit gives the sign.
      const std::uint64_t bits = stream_bits(base, counter++);
      const double magnitude = magnitude_.magnitude(y - std::log(uniform_open_closed(bits)));
      const float x = static_cast<float>((bits & 1) ? -magnitude : magnitude);
      const float g = mean[i] + noise[i] * x;
      if (std::fabs(g) > floor && present(i))
        kept.push_back(static_cast<std::uint64_t>(i) << 32 | std::bit_cast<std::uint32_t>(g));
    }
  }
  sort_by_index(kept);
  SparseVector out;
  out.indices.resize(kept.size());
  out.values.resize(kept.size());
  for (std::size_t e = 0; e < kept.size(); ++e) {
    out.indices[e] = static_cast<Index>(kept[e] >> 32);
    out.values[e] = std::bit_cast<float>(static_cast<std::uint32_t>(kept[e]));
  }
  return out;
}

CandidateCounter::CandidateCounter(std::span<const float> mean, std::span<const float> noise,
                                   const std::function<double(Index)>& weight, const NoiseMagnitude& magnitude)
    : magnitude_(magnitude)
{
  // Cells of 1/32 octave in noise_i and 1/32 in |mean_i| / noise_i (ratios from 8 on count as no noise).
  constexpr double kNoiseBins = 32, kRatioBins = 32, kRatioCap = 8;
  constexpr int kRatioCells = static_cast<int>(kRatioCap * kRatioBins);
  double smallest_log = std::numeric_limits<double>::infinity(), largest_log = -smallest_log;
  for (std::size_t i = 0; i < noise.size(); ++i)
    if (noise[i] > 0) {
      const double l = std::log2(static_cast<double>(noise[i]));
      smallest_log = std::min(smallest_log, l);
      largest_log = std::max(largest_log, l);
    }
  const int first_bin = std::isfinite(smallest_log) ? static_cast<int>(std::floor(smallest_log * kNoiseBins)) : 0;
  const int noise_cells = std::isfinite(smallest_log)
                              ? static_cast<int>(std::floor(largest_log * kNoiseBins)) - first_bin + 1
                              : 0;
  std::vector<double> histogram(static_cast<std::size_t>(noise_cells) * kRatioCells, 0.0);
  const double reach = magnitude.magnitude(NoiseMagnitude::kMaxY);
  for (std::size_t i = 0; i < mean.size(); ++i) {
    const double w = weight(static_cast<Index>(i));
    if (w <= 0)
      continue;
    const double centre = std::fabs(static_cast<double>(mean[i]));
    const double spread = noise[i];
    largest_ = std::max(largest_, centre + spread * reach);
    if (spread <= 0 || centre / spread >= kRatioCap) {
      fixed_.emplace_back(centre, w);
      continue;
    }
    const int noise_cell = static_cast<int>(std::floor(std::log2(spread) * kNoiseBins)) - first_bin;
    const int ratio_cell = static_cast<int>(centre / spread * kRatioBins);
    histogram[static_cast<std::size_t>(noise_cell) * kRatioCells + ratio_cell] += w;
  }
  for (int a = 0; a < noise_cells; ++a)
    for (int b = 0; b < kRatioCells; ++b)
      if (const double w = histogram[static_cast<std::size_t>(a) * kRatioCells + b]; w > 0)
        cells_.push_back({std::exp2((first_bin + a + 0.5) / kNoiseBins), (b + 0.5) / kRatioBins, w});
}

double CandidateCounter::expected(double floor) const
{
  const double reach = magnitude_.magnitude(NoiseMagnitude::kMaxY);
  double count = 0;
  for (const Cell& cell : cells_) {
    const double scaled = floor / cell.noise;
    if (scaled - cell.mean_ratio >= reach)
      continue;
    count += cell.weight * (magnitude_.upper_tail(scaled - cell.mean_ratio) +
                            magnitude_.upper_tail(scaled + cell.mean_ratio));
  }
  for (const auto& [centre, w] : fixed_)
    if (centre > floor)
      count += w;
  return count;
}

double CandidateCounter::floor_for(double count) const
{
  if (largest_ <= 0 || expected(0x1.0p-1000) < count)
    return 0; // not reachable above 0: every entry is a candidate
  // Bisection in log(floor) between a floor nothing exceeds and one almost everything does.
  double high = std::log(largest_), low = high - 100;
  while (expected(std::exp(low)) < count)
    low -= 100;
  for (int step = 0; step < 60 && high - low > 1e-7; ++step) {
    const double middle = (low + high) / 2;
    (expected(std::exp(middle)) >= count ? low : high) = middle;
  }
  return std::exp(low);
}

} // namespace sparsim
