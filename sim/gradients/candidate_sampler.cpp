#include "sim/gradients/candidate_sampler.hpp"

#include "sim/base/page_faults.hpp"
#include "sim/base/parallel.hpp"
#include "sim/gradients/random_streams.hpp"
#include "sim/gradients/source.hpp"

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

double edge_y(int edge) { return static_cast<double>(edge) / CandidatePlan::kEdgesPerUnit; }

// Sorts the first `count` (index << 32 | value bits) keys by index: least significant digit radix sort on the
// index, in as few passes of at most 12 bits as its largest value needs (a 4096-entry count table stays in cache).
// The sorted keys end up in the first `count` of keys (which may trade buffers with scratch).
void sort_by_index(std::vector<std::uint64_t>& keys, std::size_t count, std::vector<std::uint64_t>& scratch)
{
  if (count == 0)
    return;
  const auto largest = static_cast<std::uint32_t>(*std::max_element(keys.begin(), keys.begin() + count) >> 32);
  const int bits = std::bit_width(largest);
  const int passes = (bits + 11) / 12;
  if (passes == 0)
    return;
  const int digit = (bits + passes - 1) / passes;
  const std::uint64_t mask = (1ull << digit) - 1;
  if (scratch.size() < count)
    scratch.resize(std::max(count, keys.size()));
  std::vector<std::size_t> offsets(static_cast<std::size_t>(mask) + 2);
  for (int pass = 0; pass < passes; ++pass) {
    const int shift = 32 + pass * digit;
    std::fill(offsets.begin(), offsets.end(), 0);
    for (std::size_t e = 0; e < count; ++e)
      ++offsets[((keys[e] >> shift) & mask) + 1];
    for (std::size_t d = 1; d < offsets.size(); ++d)
      offsets[d] += offsets[d - 1];
    for (std::size_t e = 0; e < count; ++e)
      scratch[offsets[(keys[e] >> shift) & mask]++] = keys[e];
    keys.swap(scratch);
  }
}

} // namespace

CandidatePlan::CandidatePlan(std::span<const float> mean, std::span<const float> noise, double floor,
                             const NoiseMagnitude& magnitude, int threads)
    : floor_(floor)
    , magnitude_(magnitude)
{
  if (mean.size() != noise.size())
    throw std::invalid_argument("CandidatePlan: mean and noise differ in size");
  if (!(floor >= 0))
    throw std::invalid_argument("CandidatePlan: the floor must be >= 0");
  // Edges in |X|: edge[j] = L^-1(j h). An entry's near side goes to the last j with edge[j] <= a_near, its far
  // side to the last j' <= j + kMaxGap with edge[j'] <= a_far.
  std::vector<double> edges(kEdges + 1);
  for (int j = 0; j <= kEdges; ++j)
    edges[j] = magnitude.magnitude(edge_y(j));
  // The last edge at or below a, at most kEdges - 1: a uniform grid over [0, edges[kEdges]) starts the search
  // at most an edge or two below.
  constexpr int kCells = 1 << 16;
  const double cells_per_unit = kCells / edges[kEdges];
  std::vector<int> start(kCells + 1);
  for (int c = 0, j = 0; c <= kCells; ++c) {
    while (j + 1 < kEdges && edges[j + 1] <= c / cells_per_unit)
      ++j;
    start[c] = j;
  }
  auto edge_below = [&](double a) {
    if (a <= 0)
      return 0;
    int j = start[static_cast<std::size_t>(std::min(a * cells_per_unit, static_cast<double>(kCells)))];
    while (j + 1 < kEdges && edges[j + 1] <= a)
      ++j;
    return j;
  };
  const double proposal_floor = floor * (1 - kFloorSlack);
  constexpr std::uint16_t kLeftOut = 0xFFFF;
  // Counting sort in fixed blocks of entries: each block's bucket counts, then every (block, bucket)'s place
  // (blocks in order within a bucket, so a bucket stays in ascending index), then the scatter.
  constexpr std::size_t kBlock = std::size_t{1} << 20;
  const std::size_t blocks = (mean.size() + kBlock - 1) / kBlock;
  // The plan's arrays are fresh every iteration, hundreds of megabytes at n = 2^24: their pages are faulted in at once.
  std::vector<std::uint16_t> bucket_of;
  reserve_faulted_in(bucket_of, mean.size());
  bucket_of.resize(mean.size());
  std::vector<std::size_t> places(blocks * kBuckets, 0); // [block][bucket]: counts, then first positions
  parallel_blocks(mean.size(), kBlock, threads, [&](std::size_t begin, std::size_t end) {
    std::size_t* counts = places.data() + begin / kBlock * kBuckets;
    for (std::size_t i = begin; i < end; ++i) {
      const double centre = std::fabs(static_cast<double>(mean[i]));
      const double spread = noise[i];
      std::uint16_t bucket = kLeftOut;
      if (spread > 0) {
        const double near = (proposal_floor - centre) / spread;
        if (near < edges[kEdges]) {
          // A mean above the floor keeps the far side above it too for small |X|: visit always (edges 0, 0).
          const int j = edge_below(near);
          const double far = (proposal_floor + centre) / spread;
          const int gap = near <= 0 ? 0 : std::min(edge_below(far), j + kMaxGap) - j;
          bucket = static_cast<std::uint16_t>(j * (kMaxGap + 1) + gap);
        }
      } else if (centre > proposal_floor) {
        bucket = 0; // no noise: a candidate in every rank (visited with probability 1)
      }
      bucket_of[i] = bucket;
      if (bucket != kLeftOut)
        ++counts[bucket];
    }
  });
  bucket_begin_.assign(kBuckets + 1, 0);
  std::size_t position = 0;
  for (int b = 0; b < kBuckets; ++b) {
    bucket_begin_[b] = position;
    for (std::size_t block = 0; block < blocks; ++block) {
      const std::size_t count = places[block * kBuckets + b];
      places[block * kBuckets + b] = position;
      position += count;
    }
  }
  bucket_begin_[kBuckets] = position;
  reserve_faulted_in(entries_, position);
  entries_.resize(position);
  parallel_blocks(mean.size(), kBlock, threads, [&](std::size_t begin, std::size_t end) {
    std::size_t* next = places.data() + begin / kBlock * kBuckets;
    for (std::size_t i = begin; i < end; ++i)
      if (bucket_of[i] != kLeftOut)
        entries_[next[bucket_of[i]]++] = {static_cast<Index>(i), mean[i], noise[i]};
  });
  for (int b = 0; b < kBuckets; ++b)
    if (bucket_begin_[b + 1] > bucket_begin_[b])
      used_buckets_.push_back(b);
}

double CandidatePlan::visit_probability(int bucket)
{
  const int j = bucket / (kMaxGap + 1), gap = bucket % (kMaxGap + 1);
  return (std::exp(-edge_y(j)) + std::exp(-edge_y(j + gap))) / 2;
}

double CandidatePlan::expected_visits() const
{
  double visits = 0;
  for (int b : used_buckets_)
    visits += static_cast<double>(bucket_begin_[b + 1] - bucket_begin_[b]) * visit_probability(b);
  return visits;
}

void CandidatePlan::sample(std::span<const std::uint64_t> streams, std::span<const IndexRange> maybe_absent,
                           const std::function<bool(std::size_t, Index)>& present, std::vector<SparseVector>& out) const
{
  static const ExponentialZiggurat exponential;
  // (index << 32 | value bits) slots per rank, kept between calls so that their pages are not faulted in again.
  // A walk stores every visited entry's key in the next slot and counts only the kept ones (branch-free: whether a
  // visit is kept is a coin flip in some buckets).
  thread_local std::vector<std::vector<std::uint64_t>> kept;
  thread_local std::vector<std::uint64_t> scratch;
  const std::size_t ranks = streams.size();
  if (kept.size() < ranks)
    kept.resize(ranks);
  const float floor = static_cast<float>(floor_);
  struct Walk {
    std::uint64_t base = 0;
    std::uint64_t counter = 0;
    std::size_t position = 0;
    std::size_t kept = 0;
  };
  std::vector<Walk> walks(ranks);
  constexpr std::size_t kChunk = 2048; // entries: 24 KiB
  constexpr std::size_t kEntriesPerLine = 64 / sizeof(Entry);
  for (int b : used_buckets_) {
    const std::size_t size = bucket_begin_[b + 1] - bucket_begin_[b];
    const Entry* entries = entries_.data() + bucket_begin_[b];
    const int j = b / (kMaxGap + 1), gap = b % (kMaxGap + 1);
    const double side_y[2] = {edge_y(j + gap), edge_y(j)}; // [near]: the far side's edge, then the near side's
    // The proposal: near side beyond edge j, far side beyond edge j + gap, each with the sign's probability 1/2.
    const double visit = visit_probability(b);
    const bool every_entry = visit >= 1;
    // Geometric skips between visits: floor(E / rate) for E ~ Exp(1), rate = -log(1 - visit).
    const double mean_gap = every_entry ? 0 : -1 / std::log1p(-visit);
    // P(near side | visit) as a 32-bit threshold (exact to 2^-32).
    const auto near_threshold = static_cast<std::uint64_t>(std::exp(-side_y[1]) / (2 * visit) * 0x1.0p32);
    // Each rank's walk: the next position it visits and its stream. The bucket is walked in chunks, every rank
    // through a chunk before the next one, so that a chunk is read from memory once for all of them.
    auto next_visit = [&](std::size_t from, std::uint64_t base, std::uint64_t& counter) {
      if (every_entry)
        return from;
      const double skip = std::floor(exponential.draw(base, counter) * mean_gap);
      return skip >= static_cast<double>(size - from) ? size : from + static_cast<std::size_t>(skip);
    };
    for (std::size_t s = 0; s < ranks; ++s) {
      walks[s].base = mix_coordinates(streams[s], static_cast<std::uint64_t>(b), 0, 0);
      walks[s].counter = 0;
      walks[s].position = next_visit(0, walks[s].base, walks[s].counter);
    }
    // Chunks whose lines most ranks' visits touch anyway are fetched ahead in one sweep.
    const bool fetch_ahead = static_cast<double>(ranks) * visit * kEntriesPerLine >= 0.5;
    for (std::size_t chunk_end = std::min(size, kChunk);; chunk_end = std::min(size, chunk_end + kChunk)) {
      if (fetch_ahead)
        for (std::size_t e = chunk_end - std::min(chunk_end, kChunk); e < chunk_end; e += kEntriesPerLine)
          __builtin_prefetch(entries + e);
      for (std::size_t s = 0; s < ranks; ++s) {
        // The walk's state in locals: the stores of kept values cannot alias them.
        const std::uint64_t base = walks[s].base;
        std::uint64_t counter = walks[s].counter;
        std::size_t position = walks[s].position;
        std::size_t count = walks[s].kept;
        // Room for a slot at every position left in the chunk.
        if (position < chunk_end && kept[s].size() < count + (chunk_end - position))
          kept[s].resize(std::max(2 * kept[s].size(), count + (chunk_end - position)));
        std::uint64_t* const slots = kept[s].data();
        for (; position < chunk_end; position = next_visit(position + 1, base, counter)) {
          const Entry& entry = entries[position];
          // Which side (the high 32 bits), then |X| beyond that side's edge: Y = edge y + Exp(1) (the low 32).
          const std::uint64_t bits = stream_bits(base, counter++);
          const bool near = (bits >> 32) < near_threshold;
          const double magnitude =
              magnitude_.magnitude(side_y[near] + exponential.draw32(static_cast<std::uint32_t>(bits), base, counter));
          // The near side has the mean's sign. The side is a coin flip for a branch predictor: the sign is set
          // by its bit (the same float as rounding -magnitude).
          const bool positive = (entry.mean >= 0) == near;
          const float x = std::bit_cast<float>(std::bit_cast<std::uint32_t>(static_cast<float>(magnitude)) ^
                                               (static_cast<std::uint32_t>(!positive) << 31));
          const float g = entry.mean + entry.noise * x;
          bool keep = std::fabs(g) > floor;
          if (keep && !maybe_absent.empty() && std::any_of(maybe_absent.begin(), maybe_absent.end(), [&](IndexRange r) {
                return r.contains(entry.index);
              }))
            keep = present(s, entry.index);
          slots[count] = static_cast<std::uint64_t>(entry.index) << 32 | std::bit_cast<std::uint32_t>(g);
          count += keep;
        }
        walks[s].counter = counter;
        walks[s].position = position;
        walks[s].kept = count;
      }
      if (chunk_end == size)
        break;
    }
  }
  out.resize(ranks);
  for (std::size_t s = 0; s < ranks; ++s) {
    sort_by_index(kept[s], walks[s].kept, scratch);
    out[s].indices.resize(walks[s].kept);
    out[s].values.resize(walks[s].kept);
    for (std::size_t e = 0; e < walks[s].kept; ++e) {
      out[s].indices[e] = static_cast<Index>(kept[s][e] >> 32);
      out[s].values[e] = std::bit_cast<float>(static_cast<std::uint32_t>(kept[s][e]));
    }
  }
}

CandidateCounter::CandidateCounter(std::span<const float> mean, std::span<const float> noise,
                                   std::span<const IndexRange> weighted, const std::function<double(Index)>& weight,
                                   const NoiseMagnitude& magnitude, int threads)
    : magnitude_(magnitude)
{
  // Cells of 1/32 octave in noise_i and 1/32 in |mean_i| / noise_i (ratios from 8 on count as no noise).
  constexpr double kNoiseBins = 32, kRatioBins = 32, kRatioCap = 8;
  constexpr int kRatioCells = static_cast<int>(kRatioCap * kRatioBins);
  // At most 16 fixed blocks, each with its own histogram, merged in block order (the same sums for any
  // thread count).
  const std::size_t block = std::max<std::size_t>(std::size_t{1} << 20, (mean.size() + 15) / 16);
  const std::size_t blocks = (mean.size() + block - 1) / block;
  std::vector<double> smallest(blocks, INFINITY), largest(blocks, -INFINITY);
  parallel_blocks(noise.size(), block, threads, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i)
      if (noise[i] > 0) {
        const double l = std::log2(static_cast<double>(noise[i]));
        smallest[begin / block] = std::min(smallest[begin / block], l);
        largest[begin / block] = std::max(largest[begin / block], l);
      }
  });
  const double smallest_log = blocks ? *std::min_element(smallest.begin(), smallest.end()) : INFINITY;
  const double largest_log = blocks ? *std::max_element(largest.begin(), largest.end()) : -INFINITY;
  const int first_bin = std::isfinite(smallest_log) ? static_cast<int>(std::floor(smallest_log * kNoiseBins)) : 0;
  const int noise_cells =
      std::isfinite(smallest_log) ? static_cast<int>(std::floor(largest_log * kNoiseBins)) - first_bin + 1 : 0;
  const std::size_t cells = static_cast<std::size_t>(noise_cells) * kRatioCells;
  const double reach = magnitude.magnitude(NoiseMagnitude::kMaxY);
  struct Part {
    std::vector<double> histogram;
    std::vector<std::pair<double, double>> fixed;
    double largest = 0;
  };
  std::vector<Part> parts(blocks);
  parallel_blocks(mean.size(), block, threads, [&](std::size_t begin, std::size_t end) {
    Part& part = parts[begin / block];
    part.histogram.assign(cells, 0.0);
    for (std::size_t i = begin; i < end; ++i) {
      const auto index = static_cast<Index>(i);
      const double w = std::any_of(weighted.begin(), weighted.end(), [&](IndexRange r) { return r.contains(index); })
                           ? weight(index)
                           : 1.0;
      if (w <= 0)
        continue;
      const double centre = std::fabs(static_cast<double>(mean[i]));
      const double spread = noise[i];
      part.largest = std::max(part.largest, centre + spread * reach);
      if (spread <= 0 || centre / spread >= kRatioCap) {
        part.fixed.emplace_back(centre, w);
        continue;
      }
      const int noise_cell = static_cast<int>(std::floor(std::log2(spread) * kNoiseBins)) - first_bin;
      const int ratio_cell = static_cast<int>(centre / spread * kRatioBins);
      part.histogram[static_cast<std::size_t>(noise_cell) * kRatioCells + ratio_cell] += w;
    }
  });
  std::vector<double> histogram(cells, 0.0);
  for (const Part& part : parts) {
    for (std::size_t c = 0; c < cells; ++c)
      histogram[c] += part.histogram[c];
    fixed_.insert(fixed_.end(), part.fixed.begin(), part.fixed.end());
    largest_ = std::max(largest_, part.largest);
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
    count += cell.weight *
             (magnitude_.upper_tail(scaled - cell.mean_ratio) + magnitude_.upper_tail(scaled + cell.mean_ratio));
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
