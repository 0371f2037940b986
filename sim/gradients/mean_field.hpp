// The mean-field residual (selection.residual "mean_field", docs/gradients.md): error feedback for the candidates
// generation, in O(k) work per rank instead of n floats per rank.
//
// With error feedback a rank selects from acc_r = residual_r + g_r. The residual of entry i is modelled by one
// distribution shared by all ranks (the per-rank identity of residual values does not drive the traffic; only
// their distribution does):
//
//   R_i = 0 with probability 1 - Z_i, else N(b_i, s_i^2) truncated to [-T, T]
//
// T is the truncation: the ranks' median selection threshold of the last iteration (whatever exceeded it was
// sent). Once per iteration the distribution moves on by an assumed-density filter: acc = R + g (g the fresh
// gradient, with its row presence), conditioned on |acc| <= T' (the new truncation), and a truncated normal fitted to
// the moments of that (Z' the probability of staying below, b' and s' by Newton steps on the truncated moments).
// 12 bytes per entry for all ranks together.
//
// Entries a rank selected but the algorithm did not consume (Ok-Topk and gTopk keep what U left out) stay in that
// rank's residual at full value: a per-rank carried store holds them exactly, up to a cap (the smallest evicted),
// and an entry leaves the store for the shared distribution when the rank does not select it again.
//
// Candidates: a rank's entries with |acc| > floor are drawn by rejection sampling, exactly under the model. Per
// entry the proposal splits R's range into pieces around the points where R alone reaches +-floor (edges at
// multiples of the noise's amplitude, so that within a piece the chance to exceed the floor changes little); a
// piece proposes {R in piece, X beyond the edge its most favourable R needs}. The entry's total proposal Q_i is
// rounded up to a level 2^-l/8, entries are grouped by level, and a rank visits each entry of a level with that
// probability (geometric skips), then thins by Q_i / level, chooses a piece, draws R in it and X beyond its edge,
// and keeps the entry when |m + R + noise X| > floor.
#pragma once

#include "sim/base/units.hpp"
#include "sim/data/sparse.hpp"
#include "sim/gradients/candidate_sampler.hpp"
#include "sim/gradients/noise_magnitude.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

namespace sparsim {

// One iteration's fresh gradient as the candidates generation sees it: g_r,i = mean_i + noise_i X_r,i for a
// symmetric noise X (`magnitude`), except inside `row_sparse` where a row absent from rank r's batch has g = 0.
struct FreshGradientModel {
  std::shared_ptr<const void> owner; // keeps the arrays alive
  int iteration = 0;
  std::span<const float> mean, noise;
  const NoiseMagnitude* magnitude = nullptr;
  std::vector<IndexRange> row_sparse;
  std::function<double(Index)> presence;      // P(row present), inside row_sparse
  std::function<bool(RankId, Index)> present; // the row's presence for a rank in this iteration
  std::uint64_t streams = 0;                  // seed of the per-rank draws of the residual model
  bool maybe_absent(Index i) const;
};

class MeanFieldResidual {
public:
  // `carried_cap`: entries a rank's carried store holds at most.
  MeanFieldResidual(std::uint64_t n, int ranks, std::size_t carried_cap);

  // Builds the proposal of (iteration, floor) now, on `threads` host threads (else the first candidates() call
  // builds it); the result does not depend on the thread count.
  void prepare(const FreshGradientModel& fresh, double floor, int threads);
  // Ranks' candidates for the model's iteration: the entries with |residual + gradient| > floor, sorted by index.
  // A pure function of (state, fresh, rank, floor): the same whichever ranks are drawn together.
  void candidates(const FreshGradientModel& fresh, std::span<const RankId> ranks, double floor,
                  std::vector<SparseVector>& out) const;
  // The same with at least needed[s] candidates for ranks[s]: a rank that got fewer draws again from half the
  // floor, down to every nonzero entry.
  void candidates_at_least(const FreshGradientModel& fresh, std::span<const RankId> ranks, double floor,
                           std::span<const std::uint64_t> needed, std::vector<SparseVector>& out) const;
  // E[sum_i acc_i] and E[sum_i acc_i^2] over the n entries of a rank's acc = residual + gradient under the shared
  // distribution (carried stores not included): what a normal fit of acc (Gaussiank) sees.
  struct AccSums {
    double sum = 0, squares = 0;
  };
  AccSums acc_sums(const FreshGradientModel& fresh, int threads) const;
  // After every rank selected from this iteration's acc: the shared distribution moves on to the residual left
  // by truncating acc at `truncation`.
  void update(const FreshGradientModel& fresh, double truncation, int threads);
  // The rank's entries that stay in its residual at full value (selected, not consumed), with their acc values,
  // sorted by index; the store keeps the `carried_cap` largest in magnitude.
  void carry(RankId rank, SparseVector kept);

  double truncation() const { return truncation_; }
  std::size_t carried_entries() const; // over all ranks
  std::uint64_t carried_evicted() const { return evicted_; }
  std::size_t largest_carried() const { return largest_; } // the largest store offered to carry(), before the cap
  std::size_t carried_cap() const { return cap_; }
  // The largest piece cache a plan held (bytes): the pieces of the entries most ranks visit, kept so that a
  // visit does not recompute them.
  std::uint64_t largest_piece_cache() const;
  // Bytes per entry of the shared state, and per carried entry.
  static constexpr std::uint64_t kStateBytesPerEntry = 12;
  static constexpr std::uint64_t kCarriedBytesPerEntry = 8;
  // A plan keeps the pieces of the entries the ranks together visit kCacheVisits times or more (expected), the
  // most visited first, in at most piece_cache_bound(n) bytes.
  static constexpr double kCacheVisits = 4;
  static constexpr std::uint64_t kPieceCacheBytesPerEntry = 512;
  static constexpr std::uint64_t kPieceCacheBytesMost = std::uint64_t{512} << 20;
  static std::uint64_t piece_cache_bound(std::uint64_t n)
  {
    return std::min(kPieceCacheBytesMost, kPieceCacheBytesPerEntry * n);
  }
  // acc outgrows the fresh gradient: an exact top-k's candidates floor is kept at least at this share of the
  // ranks' lowest last threshold (the fresh gradient's floor would draw several times the candidates needed).
  static constexpr double kTopKFloorShare = 0.75;
  // From the ranks' last thresholds (NaN: none yet): that floor (0 before any threshold), and the truncation of
  // the next update (their upper median).
  static double top_k_floor_at_least(std::span<const double> thresholds);
  static double truncation_of(std::vector<double> thresholds);

  // The shared distribution of entry i (tests and statistics).
  struct EntryState {
    double nonzero = 0, centre = 0, spread = 0;
  };
  EntryState state(Index i) const { return {nonzero_[i], centre_[i], spread_[i]}; }
  void set_state(Index i, EntryState s, double truncation); // tests

private:
  // One iteration's proposal for one floor, shared by the ranks (defined in mean_field.cpp).
  struct Plan;
  std::shared_ptr<const Plan> plan(const FreshGradientModel& fresh, double floor, int threads) const;
  std::shared_ptr<const Plan> build_plan(const FreshGradientModel& fresh, double floor, int threads) const;
  void sample(const Plan& plan, const FreshGradientModel& fresh, RankId rank, SparseVector& out) const;
  void allocate_state(); // the shared distribution, all zero (Z = 0), on first use
  void store(Index i, EntryState s);

  std::uint64_t n_;
  std::size_t cap_;
  double truncation_ = 0;
  std::vector<float> nonzero_, centre_, spread_; // Z_i, b_i, s_i (empty until the first update)
  std::vector<SparseVector> carried_;            // [rank]
  std::uint64_t evicted_ = 0;
  std::size_t largest_ = 0;
  mutable std::mutex plan_mutex_;
  mutable std::vector<std::shared_ptr<const Plan>> plans_;
  mutable std::uint64_t largest_piece_cache_ = 0; // under plan_mutex_
};

// The standard normal quantile Phi^-1(p), p in (0, 1), to about 1e-15 relative.
double normal_quantile(double p);

} // namespace sparsim
