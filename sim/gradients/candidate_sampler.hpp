// The candidates generation (the calibrated source's scale mode, docs/gradients.md): a rank's gradient entries
// whose magnitude exceeds a floor, drawn in work proportional to their number instead of n.
//
// Entry i of rank r's gradient is g = mean_i + noise_i X_r,i with mean_i, noise_i shared by all ranks (the
// calibrated source's rank-independent part of the iteration) and X_r,i independent draws of the noise X
// (NoiseMagnitude: |X| = L^-1(Y), Y ~ Exp(1), a random sign). The entry is a candidate when |g| > floor, which
// needs |X| > a_i = (floor - |mean_i|) / noise_i. The plan (shared by all ranks, built once per iteration and
// floor) puts each entry in the bucket j with L^-1(j h) <= a_i < L^-1((j + 1) h), h = 1/8. For a rank, every
// entry of bucket j is visited independently with probability exp(-j h) (geometric skips along the bucket's
// list); a visited entry draws X conditioned on |X| > L^-1(j h) (Y = j h + Exp(1)) and is kept when |g| > floor.
// That is rejection sampling from a proposal that contains the event: kept entries are exactly distributed as
// the dense gradient's entries above the floor (under the tabulated noise), independent across entries.
// Expected visits per kept entry: about 1.6-2 (the bucket width and the far side of a nonzero mean).
#pragma once

#include "sim/data/sparse.hpp"
#include "sim/gradients/noise_magnitude.hpp"

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace sparsim {

class CandidatePlan {
public:
  static constexpr int kBucketsPerUnit = 8; // buckets per unit of y = -log P(visit)
  static constexpr int kBuckets = static_cast<int>(NoiseMagnitude::kMaxY) * kBucketsPerUnit;

  // Buckets every entry of mean/noise for `floor` (>= 0; 0: every nonzero entry is a candidate); entries that can exceed it only with probability
  // below exp(-kMaxY) are left out.
  CandidatePlan(std::span<const float> mean, std::span<const float> noise, double floor,
                const NoiseMagnitude& magnitude);

  double floor() const { return floor_; }
  std::size_t planned_entries() const { return entries_.size(); }
  // Expected visits per rank: the sum over buckets of size times visit probability.
  double expected_visits() const;

  // One rank's candidates, sorted by index: (index, g) for |g| > floor and `present(index)` (a row-sparse
  // embedding's absent rows are not candidates). `stream` seeds the rank's draws (counter-based, so the result
  // is a pure function of the stream and the plan).
  SparseVector sample(std::span<const float> mean, std::span<const float> noise, std::uint64_t stream,
                      const std::function<bool(Index)>& present) const;

private:
  double floor_;
  const NoiseMagnitude& magnitude_;
  std::vector<Index> entries_;              // entry indices grouped by bucket, ascending within one
  std::vector<std::size_t> bucket_begin_;   // kBuckets + 1 offsets into entries_
};

// Expected number of entries of one rank's gradient above `floor`: the sum over i of
// P(|mean_i + noise_i X| > floor) times `weight(i)` (a row's presence probability), computed from a
// histogram of the entries over (log noise_i, |mean_i| / noise_i) built once; evaluations are then cheap.
class CandidateCounter {
public:
  CandidateCounter(std::span<const float> mean, std::span<const float> noise,
                   const std::function<double(Index)>& weight, const NoiseMagnitude& magnitude);
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
  double largest_ = 0;     // largest |mean_i| + noise_i * L^-1(kMaxY): no entry exceeds it
  const NoiseMagnitude& magnitude_;
};

} // namespace sparsim
