// Verification of a run's results, outside the simulation: dense results against the direct sum of all
// ranks' gradients, sparse results against the sum of the local selections.
#pragma once

#include "algorithms/algorithm.hpp"
#include "sim/comm/process_group.hpp"
#include "sim/run/config.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <memory>
#include <span>
#include <stdexcept>
#include <vector>

namespace sparsim {

// Summing P floats in any order errs by at most (P-1) u sum|x| (u = 2^-24); the checks allow twice that.
inline double rounding_tolerance(int ranks, double abs_sum) { return ranks * 0x1.0p-23 * abs_sum + 1e-30; }

// Dense results against the direct sum of all ranks' gradients, computed once per iteration. With one rank per
// process (`processes`), each process adds its own rank's gradient and the sums are summed over the processes.
class DenseVerifier {
public:
  explicit DenseVerifier(const ExperimentConfig& config, ProcessGroup* processes = nullptr)
      : config_(config)
      , processes_(processes)
  {
  }

  // Returns max |result - reference| / tolerance over the vector (<= 1 passes).
  double check(int iteration, const DenseVector& result)
  {
    if (iteration != iteration_) {
      build_reference(iteration);
      iteration_ = iteration;
    }
    double worst = 0;
    for (std::size_t i = 0; i < result.values.size(); ++i)
      worst = std::max(worst, std::fabs(result.values[i] - sum_[i]) / rounding_tolerance(config_.ranks, abs_sum_[i]));
    return worst;
  }

private:
  void build_reference(int iteration)
  {
    const std::size_t n = config_.workload.n;
    sum_.assign(n, 0.0);
    abs_sum_.assign(n, 0.0);
    std::vector<float> gradient(n);
    const RankId first = processes_ ? processes_->rank() : 0;
    const RankId end = processes_ ? first + 1 : config_.ranks;
    for (RankId r = first; r < end; ++r) {
      config_.gradients->generate(r, iteration, gradient);
      for (std::size_t i = 0; i < n; ++i) {
        sum_[i] += gradient[i];
        abs_sum_[i] += std::fabs(gradient[i]);
      }
    }
    if (processes_) {
      processes_->sum(sum_);
      processes_->sum(abs_sum_);
    }
  }

  const ExperimentConfig& config_;
  ProcessGroup* processes_;
  int iteration_ = -1;
  std::vector<double> sum_;
  std::vector<double> abs_sum_;
};

// Sparse results against the local selections: every rank holds the same U, and U's values are the sums
// of the local selections (on the union of their indices for union-sum algorithms). The sums are kept for
// U's indices only, in index order; a selected index finds its place through a bit per index of [0, n) and a
// running count per 64-bit word (about n/5 bytes, in cache where the n doubles of a dense sum are not).
//
// A collective that selects within itself (SparDL) has no local selections to check U against; it keeps what it
// drops in the accs it was handed, so the check is conservation instead: sum_r acc_r before the collective equals
// U + sum_r residual_r after it, at every index.
class SparseVerifier {
public:
  SparseVerifier(int ranks, std::uint64_t n, SparseAllreduce::ResultSemantics semantics, bool within_collective = false)
      : ranks_(ranks)
      , n_(n)
      , semantics_(semantics)
      , within_collective_(within_collective)
  {
  }

  // Within-collective selection: before the collective, acc_of(r) is rank r's acc for every rank.
  template <class AccOf> void record_accs(const AccOf& acc_of)
  {
    acc_sum_.assign(n_, 0.0);
    acc_abs_sum_.assign(n_, 0.0);
    left_sum_.assign(n_, 0.0);
    for (RankId r = 0; r < ranks_; ++r) {
      const std::span<const float> acc = acc_of(r);
      for (std::size_t i = 0; i < n_; ++i) {
        acc_sum_[i] += acc[i];
        acc_abs_sum_[i] += std::fabs(acc[i]);
      }
    }
  }

  // Each rank reports once per iteration (with its residual after a within-collective selection); the last one
  // checks. Returns the error ratio (<= 1 passes).
  double report(const SparseVector& selection, const std::shared_ptr<const SparseVector>& result,
                std::span<const float> residual = {})
  {
    if (within_collective_)
      for (std::size_t i = 0; i < residual.size(); ++i)
        left_sum_[i] += residual[i];
    if (reported_ == 0) {
      first_result_ = result;
      if (semantics_ != SparseAllreduce::ResultSemantics::reselected)
        index_result(*result);
    } else if (result != first_result_ && !(*result == *first_result_)) { // one shared U is trivially the same
      throw std::runtime_error("verification failed: ranks ended the iteration with different results");
    }
    if (semantics_ != SparseAllreduce::ResultSemantics::reselected)
      add_selection(selection);
    if (++reported_ < ranks_)
      return 0;
    reported_ = 0;
    return check();
  }

private:
  // Sums of the selections at one index of U; `selected`: some rank selected it.
  struct IndexSums {
    double sum = 0;
    double abs_sum = 0;
    bool selected = false;
  };

  bool in_result(Index i) const { return (in_result_[i / 64] >> (i % 64)) & 1; }
  // The place of U's index i among U's indices in increasing order: how many of them are below i.
  std::size_t place(Index i) const
  {
    const std::uint64_t below_in_word = in_result_[i / 64] & ((std::uint64_t{1} << (i % 64)) - 1);
    return below_word_[i / 64] + static_cast<std::size_t>(std::popcount(below_in_word));
  }

  void index_result(const SparseVector& result)
  {
    const std::size_t words = (n_ + 63) / 64;
    in_result_.assign(words, 0);
    malformed_result_ = false;
    for (const Index i : result.indices) {
      if (i >= n_ || in_result(i)) {
        malformed_result_ = true; // an index outside [0, n), or twice
        return;
      }
      in_result_[i / 64] |= std::uint64_t{1} << (i % 64);
    }
    below_word_.resize(words);
    std::uint32_t below = 0;
    for (std::size_t w = 0; w < words; ++w) {
      below_word_[w] = below;
      below += static_cast<std::uint32_t>(std::popcount(in_result_[w]));
    }
    // U in index order: entry_of_place_[p] is the entry of U at place p (left empty when U is ordered).
    entry_of_place_.clear();
    if (!std::is_sorted(result.indices.begin(), result.indices.end())) {
      entry_of_place_.resize(result.size());
      for (std::size_t e = 0; e < result.size(); ++e)
        entry_of_place_[place(result.indices[e])] = e;
    }
    sums_.assign(result.size(), IndexSums{});
    outside_result_ = false;
  }

  void add_selection(const SparseVector& selection)
  {
    if (malformed_result_)
      return;
    for (std::size_t e = 0; e < selection.size(); ++e) {
      const Index i = selection.indices[e];
      if (i >= n_ || !in_result(i)) {
        outside_result_ = true;
        continue;
      }
      IndexSums& sums = sums_[place(i)];
      sums.sum += selection.values[e];
      sums.abs_sum += std::fabs(selection.values[e]);
      sums.selected = true;
    }
  }

  double check()
  {
    if (within_collective_)
      return conservation_error();
    if (semantics_ == SparseAllreduce::ResultSemantics::reselected)
      return 0;
    if (malformed_result_)
      return 1e300; // U holds an index twice, or one outside the vector
    double worst = 0;
    const SparseVector& result = *first_result_;
    for (std::size_t p = 0; p < sums_.size(); ++p) {
      const IndexSums& sums = sums_[p];
      if (!sums.selected)
        return 1e300; // U holds an index nobody selected
      const float value = result.values[entry_of_place_.empty() ? p : entry_of_place_[p]];
      worst = std::max(worst, std::fabs(value - sums.sum) / rounding_tolerance(ranks_, sums.abs_sum));
    }
    if (semantics_ == SparseAllreduce::ResultSemantics::union_sum && outside_result_)
      return 1e300; // a selected index is missing from U
    return worst;
  }

  // max |sum_r acc_r - (U + sum_r residual_r)| / tolerance over the indices (U added into the residuals' sum,
  // which the next iteration's record_accs resets); U must hold each index once.
  double conservation_error()
  {
    for (std::size_t e = 0; e < first_result_->size(); ++e) {
      const Index i = first_result_->indices[e];
      if (i >= n_ || (e > 0 && i <= first_result_->indices[e - 1]))
        return 1e300; // an index outside the vector, or out of order (twice)
      left_sum_[i] += first_result_->values[e];
    }
    double worst = 0;
    for (std::size_t i = 0; i < n_; ++i)
      worst = std::max(worst, std::fabs(left_sum_[i] - acc_sum_[i]) / rounding_tolerance(ranks_, acc_abs_sum_[i]));
    return worst;
  }

  int ranks_;
  std::uint64_t n_;
  SparseAllreduce::ResultSemantics semantics_;
  bool within_collective_;
  std::vector<double> acc_sum_, acc_abs_sum_; // within-collective: sum_r acc_r and sum_r |acc_r| before it
  std::vector<double> left_sum_;              // within-collective: sum_r residual_r after it (then + U)
  int reported_ = 0;
  std::shared_ptr<const SparseVector> first_result_;
  std::vector<std::uint64_t> in_result_;  // bit i: U holds index i
  std::vector<std::uint32_t> below_word_; // [word]: U's indices below the word's first index
  std::vector<std::size_t> entry_of_place_;
  bool malformed_result_ = false;
  std::vector<IndexSums> sums_; // [place]
  bool outside_result_ = false; // some rank selected an index U does not hold
};

} // namespace sparsim
