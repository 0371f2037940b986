// Verification of a run's results, outside the simulation: dense results against the direct sum of all
// ranks' gradients, sparse results against the sum of the local selections.
#pragma once

#include "algorithms/algorithm.hpp"
#include "sim/run/config.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <vector>

namespace sparsim {

// Summing P floats in any order errs by at most (P-1) u sum|x| (u = 2^-24); the checks allow twice that.
inline double rounding_tolerance(int ranks, double abs_sum) { return ranks * 0x1.0p-23 * abs_sum + 1e-30; }

// Dense results against the direct sum of all ranks' gradients, computed once per iteration.
class DenseVerifier {
public:
  explicit DenseVerifier(const ExperimentConfig& config)
      : config_(config)
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
    for (RankId r = 0; r < config_.ranks; ++r) {
      config_.gradients->generate(r, iteration, gradient);
      for (std::size_t i = 0; i < n; ++i) {
        sum_[i] += gradient[i];
        abs_sum_[i] += std::fabs(gradient[i]);
      }
    }
  }

  const ExperimentConfig& config_;
  int iteration_ = -1;
  std::vector<double> sum_;
  std::vector<double> abs_sum_;
};

// Sparse results against the local selections: every rank holds the same U, and U's values are the sums
// of the local selections (on the union of their indices for union-sum algorithms).
class SparseVerifier {
public:
  SparseVerifier(int ranks, std::uint64_t n, SparseAllreduce::ResultSemantics semantics)
      : ranks_(ranks)
      , n_(n)
      , semantics_(semantics)
  {
  }

  // Each rank reports once per iteration; the last one checks. Returns the error ratio (<= 1 passes).
  double report(const SparseVector& selection, const std::shared_ptr<const SparseVector>& result)
  {
    if (reported_ == 0) {
      sums_.assign(n_, IndexSums{});
      selected_.assign(n_, false);
      first_result_ = result;
    } else if (result != first_result_ && !(*result == *first_result_)) { // one shared U is trivially the same
      throw std::runtime_error("verification failed: ranks ended the iteration with different results");
    }
    for (std::size_t e = 0; e < selection.size(); ++e) {
      IndexSums& sums = sums_[selection.indices[e]];
      sums.sum += selection.values[e];
      sums.abs_sum += std::fabs(selection.values[e]);
      selected_[selection.indices[e]] = true;
    }
    if (++reported_ < ranks_)
      return 0;
    reported_ = 0;
    return check();
  }

private:
  double check() const
  {
    if (semantics_ == SparseAllreduce::ResultSemantics::reselected)
      return 0;
    double worst = 0;
    const SparseVector& result = *first_result_;
    for (std::size_t e = 0; e < result.size(); ++e) {
      const Index i = result.indices[e];
      if (!selected_[i])
        return 1e300; // U holds an index nobody selected
      worst =
          std::max(worst, std::fabs(result.values[e] - sums_[i].sum) / rounding_tolerance(ranks_, sums_[i].abs_sum));
    }
    if (semantics_ == SparseAllreduce::ResultSemantics::union_sum &&
        static_cast<std::size_t>(std::count(selected_.begin(), selected_.end(), true)) != result.size())
      return 1e300; // a selected index is missing from U
    return worst;
  }

  int ranks_;
  std::uint64_t n_;
  SparseAllreduce::ResultSemantics semantics_;
  int reported_ = 0;
  std::shared_ptr<const SparseVector> first_result_;
  // The sum and the sum of magnitudes side by side: the selections scatter over n, one cache line per entry.
  struct IndexSums {
    double sum = 0;
    double abs_sum = 0;
  };
  std::vector<IndexSums> sums_;
  std::vector<bool> selected_;
};

} // namespace sparsim
