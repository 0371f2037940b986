// The candidates generation (the calibrated source's scale mode, docs/gradients.md): a rank's gradient entries
// whose magnitude exceeds a floor, drawn in work proportional to their number instead of n.
//
// Entry i of rank r's gradient is g = mean_i + noise_i X_r,i with mean_i, noise_i shared by all ranks (the
// calibrated source's rank-independent part of the iteration) and X_r,i independent draws of the noise X
// (NoiseMagnitude: |X| = L^-1(Y), Y ~ Exp(1), a random sign). The entry is a candidate when |g| > floor, which
// needs X beyond a_near = (floor - |mean_i|) / noise_i on the mean's side (the near side) or beyond
// a_far = (floor + |mean_i|) / noise_i on the other. The plan (shared by all ranks, built once per iteration and
// floor) puts each entry in the bucket of two edges e_j = L^-1(j h) <= a_near and e_j' <= a_far (h = 1/8, the
// largest such j, j' at most j + kMaxGap). The proposal event {near side, |X| > e_j} or {far side, |X| > e_j'}
// contains the entry's event and has probability p = (exp(-j h) + exp(-j' h)) / 2. For a rank, every entry of
// a bucket is visited independently with probability p (geometric skips along the bucket's list); a visited
// entry draws a side (near with probability exp(-j h) / 2p) and |X| beyond that side's edge (Y = edge + Exp(1))
// and is kept when |g| > floor. That is rejection sampling from a proposal that contains the event: kept
// entries are exactly distributed as the dense gradient's entries above the floor (under the tabulated noise),
// independent across entries. Expected visits per kept entry: about 1.1 (the edges' spacing).
#pragma once

#include "sim/data/sparse.hpp"
#include "sim/gradients/noise_magnitude.hpp"

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace sparsim {

struct IndexRange {
  Index begin = 0;
  Index end = 0;
  bool contains(Index i) const { return i >= begin && i < end; }
};

class CandidatePlan {
public:
  static constexpr int kEdgesPerUnit = 8; // edges per unit of y = -log P(|X| > edge)
  static constexpr int kEdges = static_cast<int>(NoiseMagnitude::kMaxY) * kEdgesPerUnit;
  static constexpr int kMaxGap = 32; // far edge at most 4 units of y beyond the near one (a share below e^-4)
  static constexpr int kBuckets = kEdges * (kMaxGap + 1);

  // Buckets every entry of mean/noise for `floor` (>= 0; 0: every nonzero entry is a candidate); entries that can
  // exceed it only with probability below exp(-kMaxY) are left out.
  CandidatePlan(std::span<const float> mean, std::span<const float> noise, double floor,
                const NoiseMagnitude& magnitude, int threads = 1);

  double floor() const { return floor_; }
  // Expected visits per rank: the sum over buckets of size times visit probability.
  double expected_visits() const;

  // Ranks' candidates, sorted by index: out[s] gets (index, g) for |g| > floor drawn from streams[s], except
  // that an index inside one of `maybe_absent` ([begin, end) ranges: row-sparse embeddings) must also pass
  // `present(s, index)`. The draws are counter-based, so out[s] is a pure function of streams[s] and the plan;
  // the ranks walk each bucket one after the other while it is in cache.
  void sample(std::span<const std::uint64_t> streams, std::span<const IndexRange> maybe_absent,
              const std::function<bool(std::size_t, Index)>& present, std::vector<SparseVector>& out) const;

private:
  static double visit_probability(int bucket);

  double floor_;
  const NoiseMagnitude& magnitude_;
  // The entries grouped by bucket, ascending index within one, with their mean and noise beside them: a rank's
  // visits walk each bucket forward instead of reading the n-entry arrays at random.
  struct Entry {
    Index index;
    float mean;
    float noise;
  };
  std::vector<Entry> entries_;
  std::vector<std::size_t> bucket_begin_; // kBuckets + 1 offsets into entries_
  std::vector<int> used_buckets_;         // the buckets with entries
};

// Expected number of entries of one rank's gradient above `floor`: the sum over i of
// P(|mean_i + noise_i X| > floor) times `weight(i)` (a row's presence probability), computed from a
// histogram of the entries over (log noise_i, |mean_i| / noise_i) built once; evaluations are then cheap. The
// plan and the histogram are built over `threads` host threads in fixed blocks: the same for any count.
class CandidateCounter {
public:
  // Entries inside `weighted` count `weight(index)` times (a row's presence probability), the others once.
  CandidateCounter(std::span<const float> mean, std::span<const float> noise, std::span<const IndexRange> weighted,
                   const std::function<double(Index)>& weight, const NoiseMagnitude& magnitude, int threads = 1);
  double expected(double floor) const;
  // The largest floor at which the expected count reaches `count` (bisection on the histogram's estimate).
  double floor_for(double count) const;

private:
  struct Cell {
    double noise;      // representative noise_i of the cell
    double mean_ratio; // representative |mean_i| / noise_i
    double weight;     // entries in the cell (times their presence)
  };
  std::vector<Cell> cells_;
  std::vector<std::pair<double, double>> fixed_; // entries (almost) without noise: (|mean_i|, weight)
  double largest_ = 0;                           // largest |mean_i| + noise_i * L^-1(kMaxY): no entry exceeds it
  const NoiseMagnitude& magnitude_;
};

} // namespace sparsim
