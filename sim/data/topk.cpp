// Top-k selection kernels (see sim/data/topk.hpp for the contract and the edge cases).
//
// Magnitudes are compared through their "key": the bit pattern of |x| as an unsigned integer. For non-NaN floats the
// key order is the magnitude order (0 for +-0.0 up to kInfKey for +-inf); NaNs have keys above kInfKey.
//
// select_above streams x once, in chunks of kChunk entries, with software prefetch (one core of a VM does not reach
// the memory bandwidth without it). Each chunk is compacted into a scratch buffer that stays in L1 (AVX-512: compress
// 16 indices and values per step and store them whole; portable: count a group's hits vectorized and write only
// groups with hits, branch-free), then appended to the result, which is reserved from a small sample's estimate.
//
// select_topk and kth_largest_magnitude share find_topk:
// 1. Range: from a stratified random sample of x, the key range [lo, hi] that holds the k-th largest key with
//    overwhelming probability (small inputs: all keys).
// 2. Candidates: one compaction pass (as in select_above) collects every entry with key >= lo, in index order. If
//    there are fewer than k (the sample was wrong), the range becomes the radix bucket that holds the k-th largest
//    key, from a histogram of all keys, and the pass is repeated.
// 3. Exact select: the candidates with key > hi are certainly in the top k; a radix select among the keys of the
//    others (the band, a fraction of the candidates) gives the exact k-th largest key and how many ties to keep.
// select_topk then keeps, in one pass over the candidates, the keys above the k-th and the first ties.
#include "sim/data/topk.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <stdexcept>

// The AVX-512 kernel is compiled on x86 unless SPARSIM_DISABLE_AVX512 is defined (to measure and test the portable
// loop everywhere, e.g. -DCMAKE_CXX_FLAGS=-DSPARSIM_DISABLE_AVX512).
#if (defined(__x86_64__) || defined(__i386__)) && !defined(SPARSIM_DISABLE_AVX512)
#include <immintrin.h>
#define SPARSIM_HAVE_AVX512_KERNEL 1
#else
#define SPARSIM_HAVE_AVX512_KERNEL 0
#endif

namespace sparsim {
namespace {

using Key = std::uint32_t;
constexpr Key kInfKey = 0x7f800000; // key of +-inf; larger keys are NaNs

Key magnitude_key(float v) { return std::bit_cast<Key>(v) & 0x7fffffffu; }

void check_size(std::span<const float> x)
{
  if (x.size() > std::numeric_limits<Index>::max())
    throw std::length_error("top-k kernels: input has more entries than sparsim::Index can address");
}

// ---- Sampling ----

constexpr double kMarginSigmas = 5; // binomial standard deviations of margin around sampled estimates

// s positions in [0, n), s <= n: one per stratum of n / s entries (the last n mod s entries are never sampled), at an
// offset given by splitmix64 of the stratum number, scaled to the stratum by a multiply-shift (no slow modulo).
std::vector<std::size_t> stratified_positions(std::size_t n, std::size_t s)
{
  const std::uint64_t stride = n / s;
  std::vector<std::size_t> positions;
  positions.reserve(s);
  for (std::uint64_t j = 0; j < s; ++j) {
    std::uint64_t z = j + 0x9e3779b97f4a7c15u;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    z ^= z >> 31;
    positions.push_back(static_cast<std::size_t>(j * stride + (((z >> 32) * stride) >> 32)));
  }
  return positions;
}

// x at the given positions. They are random DRAM accesses (and TLB misses): keep kSamplesInFlight of them in flight.
std::vector<float> gather(std::span<const float> x, const std::vector<std::size_t>& positions)
{
  constexpr std::size_t kSamplesInFlight = 16;
  std::vector<float> values(positions.size());
  for (std::size_t j = 0; j < positions.size(); ++j) {
    if (j + kSamplesInFlight < positions.size())
      __builtin_prefetch(x.data() + positions[j + kSamplesInFlight]);
    values[j] = x[positions[j]];
  }
  return values;
}

// ---- Compaction: (i, x[i]) for |x[i]| > threshold ----

constexpr std::size_t kLanes = 16;           // floats per AVX-512 vector and per 64-byte cache line
constexpr std::size_t kChunk = 2048;         // entries per chunk; the scratch (2 x 8 KiB) stays in L1
constexpr std::size_t kPrefetchAhead = 2048; // entries (8 KiB) ahead of the current one

// Ask for the cache line kPrefetchAhead entries past x[i] (clamped to the end of x); a hint, never a fault.
// Entries of group[0, kLanes) with |x| > threshold: a branch-free count the compiler vectorizes.
int hits_in_group(const float* group, float threshold)
{
  int hits = 0;
#pragma GCC unroll 1 // keep the loop for the vectorizer (unrolled first, GCC 12 leaves it scalar)
  for (std::size_t j = 0; j < kLanes; ++j)
    hits += std::fabs(group[j]) > threshold;
  return hits;
}

void prefetch_ahead(std::span<const float> x, std::size_t i)
{
  __builtin_prefetch(x.data() + std::min(i + kPrefetchAhead, x.size() - 1));
}

// A chunk kernel compacts x[begin, end) (end - begin <= kChunk) into idx/val (room for kChunk + kLanes entries) and
// returns the count.
using ChunkKernel = std::size_t (*)(std::span<const float> x, std::size_t begin, std::size_t end, float threshold,
                                    Index* idx, float* val);

std::size_t compact_chunk_portable(std::span<const float> x, std::size_t begin, std::size_t end, float threshold,
                                   Index* idx, float* val)
{
  std::size_t m = 0;
  std::size_t i = begin;
  for (; i + kLanes <= end; i += kLanes) {
    prefetch_ahead(x, i);
    // Count the group's hits first (vectorized); at top-k densities most groups have none.
    const float* group = x.data() + i;
    const int hits = hits_in_group(group, threshold);
    if (hits == 0)
      continue;
    // Write every entry of the group at the end of the output and advance only over hits: no branch per entry.
    for (std::size_t j = i; j < i + kLanes; ++j) {
      idx[m] = static_cast<Index>(j);
      val[m] = x[j];
      m += std::fabs(x[j]) > threshold;
    }
  }
  for (; i < end; ++i) {
    idx[m] = static_cast<Index>(i);
    val[m] = x[i];
    m += std::fabs(x[i]) > threshold;
  }
  return m;
}

#if SPARSIM_HAVE_AVX512_KERNEL
// Append the entries of v (indices in `index`) selected by `hit` at idx/val + m; returns the new m. Compresses in
// registers and stores all 16 lanes, without a branch: the lanes past the hits are overwritten by the next step.
// (Branching on "any hit" mispredicts too often at 1-2% density.)
__attribute__((target("avx512f,popcnt"))) inline std::size_t compress_store(__m512 v, __m512i index, __mmask16 hit,
                                                                            Index* idx, float* val, std::size_t m)
{
  _mm512_storeu_si512(idx + m, _mm512_maskz_compress_epi32(hit, index));
  _mm512_storeu_ps(val + m, _mm512_maskz_compress_ps(hit, v));
  return m + static_cast<std::size_t>(_mm_popcnt_u32(hit));
}

__attribute__((target("avx512f,popcnt"))) std::size_t compact_chunk_avx512(std::span<const float> x, std::size_t begin,
                                                                           std::size_t end, float threshold, Index* idx,
                                                                           float* val)
{
  const __m512 t = _mm512_set1_ps(threshold);
  const __m512i step = _mm512_set1_epi32(kLanes);
  __m512i index = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(begin)),
                                   _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  std::size_t m = 0;
  std::size_t i = begin;
  for (; i + kLanes <= end; i += kLanes) {
    prefetch_ahead(x, i);
    const __m512 v = _mm512_loadu_ps(x.data() + i);
    // _CMP_GT_OQ is false for NaN, so NaN entries are never selected.
    m = compress_store(v, index, _mm512_cmp_ps_mask(_mm512_abs_ps(v), t, _CMP_GT_OQ), idx, val, m);
    index = _mm512_add_epi32(index, step);
  }
  if (i < end) {
    // The partial last step: masked-off lanes are neither loaded nor selected.
    const __mmask16 valid = static_cast<__mmask16>((1u << (end - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(valid, x.data() + i);
    m = compress_store(v, index, _mm512_mask_cmp_ps_mask(valid, _mm512_abs_ps(v), t, _CMP_GT_OQ), idx, val, m);
  }
  return m;
}
#endif

ChunkKernel chunk_kernel(CompactionIsa isa)
{
  if (isa == CompactionIsa::portable)
    return compact_chunk_portable;
#if SPARSIM_HAVE_AVX512_KERNEL
  if (best_compaction_isa() == CompactionIsa::avx512)
    return compact_chunk_avx512;
#endif
  throw std::invalid_argument("select_above: AVX-512 kernel requested on a CPU or build without AVX-512F");
}

// Append (i, x[i]) for every |x[i]| > threshold to out, in index order.
void append_above(std::span<const float> x, float threshold, CompactionIsa isa, SparseVector& out)
{
  const ChunkKernel kernel = chunk_kernel(isa);
  Index idx[kChunk + kLanes];
  float val[kChunk + kLanes];
  for (std::size_t begin = 0; begin < x.size(); begin += kChunk) {
    const std::size_t m = kernel(x, begin, std::min(begin + kChunk, x.size()), threshold, idx, val);
    out.indices.insert(out.indices.end(), idx, idx + m);
    out.values.insert(out.values.end(), val, val + m);
  }
}

// A generous estimate of count_above(x, threshold) from a sample, to reserve the output of select_above: growing
// it instead (reallocate, copy, fault in new pages) cost 10-50% of a read pass at 1-2% density. Over-reserving is
// cheap, pages that are never written are never faulted in.
std::size_t estimated_count_above(std::span<const float> x, float threshold)
{
  constexpr std::size_t kSamples = 4096;
  if (x.size() < 16 * kSamples)
    return 0; // small outputs grow cheaply
  std::size_t hits = 0;
  for (float v : gather(x, stratified_positions(x.size(), kSamples)))
    hits += std::fabs(v) > threshold;
  const double mean = static_cast<double>(hits);
  const double upper = mean + kMarginSigmas * std::sqrt(mean) + kMarginSigmas;
  return std::min(x.size(), static_cast<std::size_t>(upper * static_cast<double>(x.size() / kSamples)));
}

// ---- Exact selection among keys ----

// The key of descending rank `rank` (1-based, <= keys.size()) among keys; reorders keys so that the rank - 1 largest
// come first. For small arrays: std::nth_element mispredicts about every other comparison on large ones.
Key key_of_rank(std::span<Key> keys, std::size_t rank)
{
  std::nth_element(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(rank - 1), keys.end(), std::greater<>());
  return keys[rank - 1];
}

constexpr int kRadixBits = 12;             // 4096 buckets: the histogram (16 KiB) stays in L1
constexpr std::size_t kRadixFinish = 1024; // key_of_rank finishes below this many keys

struct RankedKey {
  Key key = 0;
  std::size_t larger = 0; // how many keys are strictly larger
};

// The key of descending rank `rank` (1-based, <= keys.size()) among keys, which all lie in [lo, hi]; shrinks keys.
// MSD radix select: a histogram of the top kRadixBits bits of key - lo finds the bucket that holds the rank-th largest
// key; keep the keys of that bucket and repeat on its narrower range (at most 3 rounds for 31-bit keys).
RankedKey select_rank(std::vector<Key>& keys, std::size_t rank, Key lo, Key hi)
{
  RankedKey result;
  std::vector<std::uint32_t> histogram(std::size_t{1} << kRadixBits);
  while (keys.size() > kRadixFinish && lo < hi) {
    const int shift = std::max(0, static_cast<int>(std::bit_width(hi - lo)) - kRadixBits);
    std::fill(histogram.begin(), histogram.end(), 0);
    for (Key key : keys)
      ++histogram[(key - lo) >> shift];
    // From the top bucket down to the one holding the rank-th largest key; rank becomes the rank inside it.
    std::size_t bucket = (hi - lo) >> shift;
    for (; histogram[bucket] < rank; --bucket) {
      rank -= histogram[bucket];
      result.larger += histogram[bucket];
    }
    // Keep the keys of that bucket, in place and branch-free (write every key, advance only over the bucket's).
    std::size_t kept = 0;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const Key key = keys[i];
      keys[kept] = key;
      kept += ((key - lo) >> shift) == bucket;
    }
    keys.resize(kept);
    lo += static_cast<Key>(bucket << shift);
    hi = std::min(hi, lo + ((Key{1} << shift) - 1));
  }
  if (lo == hi) { // the remaining keys are all equal
    result.key = lo;
    return result;
  }
  result.key = key_of_rank(keys, rank);
  result.larger += static_cast<std::size_t>(std::count_if(
      keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(rank - 1), [&](Key key) { return key > result.key; }));
  return result;
}

// ---- Range of the k-th largest key ----

constexpr std::size_t kSampleFrom = std::size_t{1} << 14; // smaller inputs take every entry as a candidate
constexpr std::size_t kEntriesPerSample = 256;            // sample size n / 256 ...
constexpr std::size_t kMaxSamples = std::size_t{1} << 15; // ... up to 2^15

// The k-th largest key is expected in [lo, hi]: entries with key > hi are certainly in the top k, entries with
// key < lo certainly out. lo = 0 admits every non-NaN entry; hi = kInfKey makes no entry certain.
struct KeyRange {
  Key lo = 0;
  Key hi = kInfKey;
  std::size_t expected_candidates = 0; // a generous estimate of the number of entries with key >= lo
};

// A range that certainly holds the min(k, m)-th largest of the m non-NaN keys (k >= 1; the default range when m = 0):
// the radix bucket that holds it, from a histogram of the top kRadixBits bits of every key. Costs a pass over x with a
// scattered increment per entry, about 3 read passes: the fallback for when the sample was wrong.
KeyRange histogram_range(std::span<const float> x, std::size_t k)
{
  constexpr int kShift = 31 - kRadixBits; // keys have 31 bits
  std::vector<std::uint32_t> histogram(std::size_t{1} << kRadixBits);
  for (float v : x)
    if (magnitude_key(v) <= kInfKey)
      ++histogram[magnitude_key(v) >> kShift];
  const std::size_t rank = std::min(k, std::accumulate(histogram.begin(), histogram.end(), std::size_t{0}));
  if (rank == 0)
    return {};
  // From the top bucket down to the one holding the rank-th largest key.
  std::size_t above = 0;
  std::size_t bucket = histogram.size() - 1;
  for (; above + histogram[bucket] < rank; --bucket)
    above += histogram[bucket];
  const Key lo = static_cast<Key>(bucket << kShift);
  return {lo, std::min(kInfKey, lo + ((Key{1} << kShift) - 1)), above + histogram[bucket]};
}

// The range from the sample (k >= 1). Among the s sampled positions, the number of keys >= the k-th largest key of x
// is binomial with mean r = k s / n; the keys of sample ranks r + margin and r - margin bound the k-th largest key.
KeyRange sampled_range(std::span<const float> x, std::size_t k, const std::vector<std::size_t>& positions)
{
  std::vector<Key> keys;
  keys.reserve(positions.size());
  for (float v : gather(x, positions))
    if (magnitude_key(v) <= kInfKey)
      keys.push_back(magnitude_key(v));
  const double per_sample = static_cast<double>(x.size()) / static_cast<double>(positions.size());
  const double mean = static_cast<double>(k) / per_sample;
  // The constant term keeps the margin wide when the mean is a handful of samples or fewer.
  const double margin = kMarginSigmas * std::sqrt(mean) + kMarginSigmas;
  KeyRange range;
  range.expected_candidates = x.size();
  const double rank_lo = std::ceil(mean + margin);
  if (rank_lo >= static_cast<double>(keys.size()))
    return range; // k is close to n: every non-NaN entry is a candidate, none is certain
  range.lo = key_of_rank(keys, static_cast<std::size_t>(rank_lo));
  range.expected_candidates = static_cast<std::size_t>((mean + 2 * margin) * per_sample);
  // The rank_lo - 1 largest keys now come first; rank_hi < rank_lo is among them.
  const double rank_hi = std::floor(mean - margin);
  if (rank_hi >= 1)
    range.hi =
        key_of_rank(std::span(keys).first(static_cast<std::size_t>(rank_lo) - 1), static_cast<std::size_t>(rank_hi));
  return range;
}

// ---- Top k ----

// Where the top k end: they are the candidates with key > kth_key plus the first `ties` candidates with
// key == kth_key.
struct TopkBoundary {
  Key kth_key = kInfKey; // the k-th largest key (meaningless when there are no candidates)
  std::size_t ties = 0;
};

// Fills c with the candidates, every non-NaN entry with key >= the range's lo, in index order (none when k = 0), and
// returns where the top k end among them.
TopkBoundary find_topk(std::span<const float> x, std::size_t k, SparseVector& c)
{
  TopkBoundary result;
  c.clear();
  if (k == 0 || x.empty())
    return result;
  const CompactionIsa isa = best_compaction_isa();

  // Phase 1: the key range of the k-th largest magnitude; small inputs take every non-NaN entry as a candidate.
  const std::vector<std::size_t> positions = detail::sample_positions(x.size());
  KeyRange range = positions.empty() ? KeyRange{0, kInfKey, x.size()} : sampled_range(x, k, positions);

  // Phase 2: candidates key >= lo, i.e. |x| > the float just below lo (-1 selects every non-NaN entry).
  auto collect = [&] {
    const float below_lo = range.lo == 0 ? -1.0f : std::bit_cast<float>(range.lo - 1);
    c.clear();
    c.reserve(std::min(range.expected_candidates, x.size()));
    append_above(x, below_lo, isa, c);
  };
  collect();
  if (c.size() < k && range.lo > 0) {
    // The sample put lo above the k-th largest key (rare for any input): fall back to a range that is certainly right.
    range = histogram_range(x, k);
    collect();
  }
  // Fewer candidates than k only when lo = 0, i.e. the candidates are all non-NaN entries.
  const std::size_t k_eff = std::min(k, c.size());
  if (k_eff == 0)
    return result;

  // Phase 3: the candidates with key > hi are certainly in; the others form the band. If the sample put hi below the
  // k-th largest key, there are k_eff or more certain ones: make the band all candidates instead.
  std::size_t certain = 0;
  for (float v : c.values)
    certain += magnitude_key(v) > range.hi;
  if (certain >= k_eff) {
    range.hi = kInfKey;
    certain = 0;
  }
  // Gather the band's keys branch-free (write every key, advance only over band members) and select in it. The
  // band is the thread's scratch, kept between calls: fresh pages cost more than the selection (a VM's page faults).
  thread_local std::vector<Key> band;
  band.resize(c.size() - certain + 1);
  std::size_t members = 0;
  for (float v : c.values) {
    band[members] = magnitude_key(v);
    members += magnitude_key(v) <= range.hi;
  }
  band.pop_back();
  const RankedKey kth = select_rank(band, k_eff - certain, range.lo, range.hi);
  result.kth_key = kth.key;
  result.ties = k_eff - certain - kth.larger;
  return result;
}

} // namespace

namespace detail {

std::vector<std::size_t> sample_positions(std::size_t n)
{
  if (n < kSampleFrom)
    return {};
  return stratified_positions(n, std::min(kMaxSamples, n / kEntriesPerSample));
}

} // namespace detail

CompactionIsa best_compaction_isa()
{
#if SPARSIM_HAVE_AVX512_KERNEL
  if (__builtin_cpu_supports("avx512f"))
    return CompactionIsa::avx512;
#endif
  return CompactionIsa::portable;
}

SparseVector select_above(std::span<const float> x, float threshold, CompactionIsa isa)
{
  check_size(x);
  SparseVector out;
  out.reserve(estimated_count_above(x, threshold));
  append_above(x, threshold, isa, out);
  return out;
}

SparseVector select_above(std::span<const float> x, float threshold)
{
  return select_above(x, threshold, best_compaction_isa());
}

void select_above(std::span<const float> x, float threshold, SparseVector& out)
{
  check_size(x);
  out.clear();
  out.reserve(estimated_count_above(x, threshold));
  append_above(x, threshold, best_compaction_isa(), out);
}

std::size_t count_above(std::span<const float> x, float threshold)
{
  check_size(x);
  // Groups of kLanes entries as in the portable compaction: a vectorized count per group, a prefetch per cache line.
  std::size_t count = 0;
  std::size_t i = 0;
  for (; i + kLanes <= x.size(); i += kLanes) {
    prefetch_ahead(x, i);
    const float* group = x.data() + i;
    const int hits = hits_in_group(group, threshold);
    count += static_cast<std::size_t>(hits);
  }
  for (; i < x.size(); ++i)
    count += std::fabs(x[i]) > threshold;
  return count;
}

void select_topk(std::span<const float> x, std::size_t k, SparseVector& out)
{
  check_size(x);
  TopkBoundary boundary = find_topk(x, k, out);
  // Keep, in index order, the candidates above the k-th largest key and the first `ties` equal to it. Branch-free
  // (copy every candidate, advance only over kept ones) because ~10% of the candidates go at unpredictable places.
  std::size_t kept = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const Key key = magnitude_key(out.values[i]);
    const bool tie = key == boundary.kth_key && boundary.ties > 0;
    boundary.ties -= tie;
    out.indices[kept] = out.indices[i];
    out.values[kept] = out.values[i];
    kept += (key > boundary.kth_key) | tie; // "|", not "||": no branch
  }
  out.indices.resize(kept);
  out.values.resize(kept);
}

SparseVector select_topk(std::span<const float> x, std::size_t k)
{
  SparseVector out;
  select_topk(x, k, out);
  return out;
}

float kth_largest_magnitude(std::span<const float> x, std::size_t k)
{
  check_size(x);
  SparseVector candidates;
  const TopkBoundary boundary = find_topk(x, k, candidates);
  if (candidates.empty())
    return std::numeric_limits<float>::infinity();
  return std::bit_cast<float>(boundary.kth_key);
}

SparseVector select_topk_reference(std::span<const float> x, std::size_t k)
{
  check_size(x);
  SparseVector out;
  // The k-th largest magnitude among the non-NaN entries.
  std::vector<float> magnitudes;
  magnitudes.reserve(x.size());
  for (float v : x)
    if (!std::isnan(v))
      magnitudes.push_back(std::fabs(v));
  const std::size_t k_eff = std::min(k, magnitudes.size());
  if (k_eff == 0)
    return out;
  std::nth_element(magnitudes.begin(), magnitudes.begin() + static_cast<std::ptrdiff_t>(k_eff - 1), magnitudes.end(),
                   std::greater<>());
  const float kth = magnitudes[k_eff - 1];
  // The entries above it, and the first of those equal to it until there are k_eff.
  std::size_t ties = k_eff - static_cast<std::size_t>(std::count_if(magnitudes.begin(), magnitudes.end(),
                                                                    [kth](float m) { return m > kth; }));
  out.reserve(k_eff);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float m = std::fabs(x[i]);
    if (m > kth || (m == kth && ties > 0)) {
      ties -= m == kth;
      out.indices.push_back(static_cast<Index>(i));
      out.values.push_back(x[i]);
    }
  }
  return out;
}

} // namespace sparsim
