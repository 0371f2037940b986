// Top-k selection kernels (see sim/topk.hpp for the contract and the edge cases).
//
// Everything compares magnitudes through their "key": the bit pattern of |x| as an unsigned integer. For non-NaN
// floats the key order is the magnitude order (0 for +-0.0 up to kInfKey for +-inf); NaNs have keys above kInfKey.
//
// select_above streams x once in chunks of kChunk entries. Each chunk is compacted into a small scratch buffer that
// stays in L1 (AVX-512: compress 16 indices and values per step and store them whole; portable: test a group of 16
// and write the group's hits branch-free), and the scratch is then appended to the result.
//
// select_topk and kth_largest_magnitude share find_topk:
// 1. Range: from a stratified sample of x, the key range [lo, hi] that holds the k-th largest key with overwhelming
//    probability (small inputs: the exact k-th largest key, lo = hi).
// 2. Candidates: one compaction pass collects every entry with key >= lo, in index order. If there are fewer than k
//    (the sample was wrong), the range is recomputed exactly and the pass repeated.
// 3. Exact select: the entries with key > hi are certainly in the top k; std::nth_element among the candidate keys
//    in [lo, hi] (a small fraction of the candidates) gives the exact k-th largest key and how many ties to keep.
// select_topk then keeps, in one pass over the candidates, the keys above the k-th and the first ties.
#include "sim/topk.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SPARSIM_HAVE_AVX512_KERNEL 1
#else
#define SPARSIM_HAVE_AVX512_KERNEL 0
#endif

namespace sparsim {
namespace {

using Key = std::uint32_t;
constexpr Key kInfKey = 0x7f800000;  // key of +-inf; larger keys are NaNs

Key magnitude_key(float v)
{
  return std::bit_cast<Key>(v) & 0x7fffffffu;
}

void check_size(std::span<const float> x)
{
  if (x.size() > std::numeric_limits<Index>::max())
    throw std::length_error("top-k kernels: input has more entries than sparsim::Index can address");
}

// ---- Compaction: (i, x[i]) for |x[i]| > threshold ----

constexpr std::size_t kLanes = 16;    // floats per AVX-512 vector; also the portable group size
constexpr std::size_t kChunk = 2048;  // entries per chunk; the scratch (2 x 8 KiB) stays in L1

// A chunk kernel compacts x[0, n) (n <= kChunk) into idx/val (room for n + kLanes entries) and returns the count.
using ChunkKernel = std::size_t (*)(const float* x, std::size_t n, Index base, float threshold, Index* idx,
                                    float* val);

std::size_t compact_chunk_portable(const float* x, std::size_t n, Index base, float threshold, Index* idx, float* val)
{
  std::size_t m = 0;
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    // Test the whole group first (the compiler vectorizes this); at top-k densities most groups have no hit.
    int any_hit = 0;
    for (std::size_t j = 0; j < kLanes; ++j)
      any_hit |= std::fabs(x[i + j]) > threshold;
    if (!any_hit)
      continue;
    // Write every entry of the group at the end of the output and advance only over hits: no branch per entry.
    for (std::size_t j = 0; j < kLanes; ++j) {
      idx[m] = base + static_cast<Index>(i + j);
      val[m] = x[i + j];
      m += std::fabs(x[i + j]) > threshold;
    }
  }
  for (; i < n; ++i) {
    idx[m] = base + static_cast<Index>(i);
    val[m] = x[i];
    m += std::fabs(x[i]) > threshold;
  }
  return m;
}

#if SPARSIM_HAVE_AVX512_KERNEL
__attribute__((target("avx512f,popcnt"))) std::size_t compact_chunk_avx512(const float* x, std::size_t n, Index base,
                                                                             float threshold, Index* idx, float* val)
{
  const __m512 t = _mm512_set1_ps(threshold);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  std::size_t m = 0;
  for (std::size_t i = 0; i < n; i += kLanes) {
    // The last step of the chunk may be partial: masked-off lanes are neither loaded nor selected.
    const __mmask16 valid = n - i >= kLanes ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(valid, x + i);
    // _CMP_GT_OQ is false for NaN, so NaN entries are never selected.
    const __mmask16 hit = _mm512_mask_cmp_ps_mask(valid, _mm512_abs_ps(v), t, _CMP_GT_OQ);
    const __m512i index = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(base + i)), lane);
    // Compress in registers and store all 16 lanes; the lanes past the hits are overwritten by the next step.
    _mm512_storeu_si512(idx + m, _mm512_maskz_compress_epi32(hit, index));
    _mm512_storeu_ps(val + m, _mm512_maskz_compress_ps(hit, v));
    m += static_cast<std::size_t>(_mm_popcnt_u32(hit));
  }
  return m;
}
#endif

ChunkKernel chunk_kernel(CompactionIsa isa)
{
#if SPARSIM_HAVE_AVX512_KERNEL
  if (isa == CompactionIsa::avx512)
    return compact_chunk_avx512;
#endif
  if (isa != CompactionIsa::portable)
    throw std::invalid_argument("select_above: AVX-512 kernel requested on a build without it");
  return compact_chunk_portable;
}

// Append (i, x[i]) for every |x[i]| > threshold to out, in index order.
void append_above(std::span<const float> x, float threshold, CompactionIsa isa, SparseVector& out)
{
  const ChunkKernel kernel = chunk_kernel(isa);
  Index idx[kChunk + kLanes];
  float val[kChunk + kLanes];
  for (std::size_t begin = 0; begin < x.size(); begin += kChunk) {
    const std::size_t n = std::min(kChunk, x.size() - begin);
    const std::size_t m = kernel(x.data() + begin, n, static_cast<Index>(begin), threshold, idx, val);
    out.indices.insert(out.indices.end(), idx, idx + m);
    out.values.insert(out.values.end(), val, val + m);
  }
}

// ---- Range of the k-th largest key ----

constexpr std::size_t kExactBelow = std::size_t{1} << 14;  // below this n, compute the exact range directly
constexpr std::size_t kEntriesPerSample = 256;              // sample size n / 256 ...
constexpr std::size_t kMaxSamples = std::size_t{1} << 16;   // ... up to 2^16
constexpr double kMarginSigmas = 5;                         // binomial standard deviations of margin on each side

// The k-th largest key is expected in [lo, hi]: entries with key > hi are certainly in the top k, entries with
// key < lo certainly out. lo = 0 admits every non-NaN entry; hi = kInfKey makes no entry certain.
struct KeyRange {
  Key lo = 0;
  Key hi = kInfKey;
};

// The key of descending rank `rank` (1-based, <= keys.size()) among keys; reorders keys.
Key key_of_rank(std::vector<Key>& keys, std::size_t rank)
{
  std::nth_element(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(rank - 1), keys.end(), std::greater<>());
  return keys[rank - 1];
}

// The exact range lo = hi = key of the min(k, m)-th largest of the m non-NaN entries (k >= 1; the default range
// when m = 0).
KeyRange exact_range(std::span<const float> x, std::size_t k)
{
  std::vector<Key> keys;
  keys.reserve(x.size());
  for (float v : x)
    if (magnitude_key(v) <= kInfKey)
      keys.push_back(magnitude_key(v));
  if (keys.empty())
    return {};
  const Key key = key_of_rank(keys, std::min(k, keys.size()));
  return {key, key};
}

// The range from the sample (k >= 1). Among the s sampled positions, the number of keys >= the k-th largest key of x
// is binomial with mean r = k s / n; the keys of sample ranks r + margin and r - margin bound the k-th largest key.
KeyRange sampled_range(std::span<const float> x, std::size_t k, const std::vector<std::size_t>& positions)
{
  std::vector<Key> keys;
  keys.reserve(positions.size());
  for (std::size_t p : positions)
    if (magnitude_key(x[p]) <= kInfKey)
      keys.push_back(magnitude_key(x[p]));
  const double mean = static_cast<double>(k) * static_cast<double>(positions.size()) / static_cast<double>(x.size());
  // The constant term keeps the margin wide when the mean is a handful of samples or fewer.
  const double margin = kMarginSigmas * std::sqrt(mean) + kMarginSigmas;
  KeyRange range;
  const double rank_lo = std::ceil(mean + margin);
  if (rank_lo < static_cast<double>(keys.size()))
    range.lo = key_of_rank(keys, static_cast<std::size_t>(rank_lo));
  const double rank_hi = std::floor(mean - margin);
  if (rank_hi >= 1)
    range.hi = key_of_rank(keys, static_cast<std::size_t>(rank_hi));
  return range;
}

// ---- Exact top-k among the candidates ----

// The top k of x are the candidates with key > kth_key plus the first `ties` candidates with key == kth_key.
struct TopkCandidates {
  SparseVector candidates;  // every non-NaN entry with key >= the range's lo, in index order
  Key kth_key = kInfKey;    // the k-th largest key (meaningless when candidates is empty)
  std::size_t ties = 0;
};

TopkCandidates find_topk(std::span<const float> x, std::size_t k)
{
  TopkCandidates result;
  if (k == 0 || x.empty())
    return result;
  const CompactionIsa isa = best_compaction_isa();

  // Phase 1: the key range of the k-th largest magnitude.
  const std::vector<std::size_t> positions = detail::sample_positions(x.size());
  KeyRange range = positions.empty() ? exact_range(x, k) : sampled_range(x, k, positions);

  // Phase 2: candidates key >= lo, i.e. |x| > the float just below lo (-1 selects every non-NaN entry).
  auto collect = [&] {
    const float below_lo = range.lo == 0 ? -1.0f : std::bit_cast<float>(range.lo - 1);
    result.candidates.clear();
    append_above(x, below_lo, isa, result.candidates);
  };
  collect();
  if (result.candidates.size() < k && range.lo > 0) {
    // The sample put lo above the k-th largest key: fall back to the exact range (rare for any input).
    range = exact_range(x, k);
    collect();
  }
  SparseVector& c = result.candidates;
  // Fewer candidates than k only when lo = 0, i.e. the candidates are all non-NaN entries.
  const std::size_t k_eff = std::min(k, c.size());
  if (k_eff == 0)
    return result;

  // Phase 3: count the candidates certainly in (key > hi) and gather the keys of the others. If the sample put hi
  // below the k-th largest key, there are k_eff or more "certain" ones: select among all candidates instead.
  std::size_t certain = 0;
  for (float v : c.values)
    certain += magnitude_key(v) > range.hi;
  if (certain >= k_eff) {
    range.hi = kInfKey;
    certain = 0;
  }
  std::vector<Key> band;
  band.reserve(c.size() - certain);
  for (float v : c.values)
    if (magnitude_key(v) <= range.hi)
      band.push_back(magnitude_key(v));
  result.kth_key = key_of_rank(band, k_eff - certain);

  // Ties: k_eff minus the number of keys strictly above the k-th (band[0, rank) holds the band's keys >= the k-th).
  std::size_t above = certain;
  for (std::size_t i = 0; i + 1 < k_eff - certain; ++i)
    above += band[i] > result.kth_key;
  result.ties = k_eff - above;
  return result;
}

}  // namespace

namespace detail {

std::vector<std::size_t> sample_positions(std::size_t n)
{
  std::vector<std::size_t> positions;
  if (n < kExactBelow)
    return positions;
  const std::size_t s = std::min(kMaxSamples, n / kEntriesPerSample);
  positions.reserve(s);
  for (std::size_t j = 0; j < s; ++j) {
    // Stratum j is [j n / s, (j + 1) n / s); splitmix64 of j picks the position inside it.
    const std::size_t begin = j * n / s;
    const std::size_t end = (j + 1) * n / s;
    std::uint64_t z = j + 0x9e3779b97f4a7c15u;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    z ^= z >> 31;
    positions.push_back(begin + static_cast<std::size_t>(z % (end - begin)));
  }
  return positions;
}

}  // namespace detail

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
  append_above(x, threshold, isa, out);
  return out;
}

SparseVector select_above(std::span<const float> x, float threshold)
{
  return select_above(x, threshold, best_compaction_isa());
}

std::size_t count_above(std::span<const float> x, float threshold)
{
  check_size(x);
  std::size_t count = 0;
  for (float v : x)
    count += std::fabs(v) > threshold;
  return count;
}

SparseVector select_topk(std::span<const float> x, std::size_t k)
{
  check_size(x);
  TopkCandidates found = find_topk(x, k);
  // Keep, in index order, the candidates above the k-th largest key and the first `ties` equal to it.
  SparseVector& c = found.candidates;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < c.size(); ++i) {
    const Key key = magnitude_key(c.values[i]);
    bool keep = key > found.kth_key;
    if (key == found.kth_key && found.ties > 0) {
      keep = true;
      --found.ties;
    }
    if (keep) {
      c.indices[kept] = c.indices[i];
      c.values[kept] = c.values[i];
      ++kept;
    }
  }
  c.indices.resize(kept);
  c.values.resize(kept);
  return std::move(c);
}

float kth_largest_magnitude(std::span<const float> x, std::size_t k)
{
  check_size(x);
  const TopkCandidates found = find_topk(x, k);
  if (found.candidates.empty())
    return std::numeric_limits<float>::infinity();
  return std::bit_cast<float>(found.kth_key);
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

}  // namespace sparsim
