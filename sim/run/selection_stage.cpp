#include "sim/run/selection_stage.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <span>
#include <thread>

namespace sparsim {

void SelectionStage::prepare(int iteration, int threads)
{
  if (!config_.gradients->concurrent_generate())
    threads = 1;
  threads = std::max(1, std::min(threads, end_rank_ - first_rank_));
  std::vector<std::exception_ptr> failures(threads);
  ranks_prepared_ = 0;
  const auto shared_start = std::chrono::steady_clock::now();
  if (candidates_) {
    if (mean_field_ && !config_.gradients->fresh_model(iteration, threads, fresh_))
      throw std::logic_error("selection.residual \"mean_field\" needs a source with a fresh-gradient model");
    if (gaussian_) {
      // Gaussiank (only with the mean-field residual): the normal fit of the whole acc from the model, and the
      // floor below the fit after its largest downward correction.
      gaussian_fit_ = model_gaussian_fit();
      const GaussianCorrection& correction = config_.selection.rules.gaussian;
      floor_ = std::max(0.0, gaussian_fit_) / std::pow(correction.lower_divisor, correction.lower_rounds);
    } else {
      // With the mean-field residual, acc outgrows the fresh gradient: an exact top-k's floor is also kept near
      // the ranks' last thresholds (a rank short of k candidates draws again from half the floor).
      const double top_k_floor_at_least =
          mean_field_ ? MeanFieldResidual::top_k_floor_at_least(last_thresholds()) : 0.0;
      floor_ = candidate_floor(*config_.gradients, selectors_, iteration, config_.workload.k, false, threads,
                               top_k_floor_at_least);
    }
    if (mean_field_) {
      mean_field_->prepare(fresh_, floor_, threads);
    } else {
      config_.gradients->prepare_candidates(iteration, floor_, threads);
    }
  }
  shared_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - shared_start).count();
  // Thread t prepares the batches t, t + threads, ... of kBatch consecutive ranks (a batch shares the
  // candidates generation's memory traffic; the dense generation takes one rank at a time).
  const int batch = candidates_ ? kBatch : 1;
  auto work = [&](int first) {
    try {
      std::vector<float> gradient(candidates_ ? 0 : config_.workload.n); // dense generation only
      std::vector<SparseVector> candidates;
      SparseVector buffer; // the kernels' output, its pages reused from rank to rank
      std::vector<RankId> ranks;
      std::vector<std::uint64_t> needed;
      for (RankId begin = first_rank_ + first * batch; begin < end_rank_; begin += threads * batch) {
        ranks.clear();
        needed.clear();
        for (RankId rank = begin; rank < std::min(end_rank_, begin + batch); ++rank) {
          ranks.push_back(rank);
          // Enough candidates for an exact top-k; a reused threshold is at least the floor.
          needed.push_back(gaussian_ || selectors_[rank].reuse_threshold(iteration) ? 0 : config_.workload.k);
        }
        if (candidates_)
          draw_candidates(ranks, iteration, needed, candidates);
        for (std::size_t slot = 0; slot < ranks.size(); ++slot) {
          prepare_rank(ranks[slot], iteration, gradient, candidates_ ? &candidates[slot] : nullptr, buffer);
          ranks_prepared_.fetch_add(1, std::memory_order_relaxed);
        }
      }
    } catch (...) {
      failures[first] = std::current_exception();
    }
  };
  std::vector<std::thread> helpers;
  for (int t = 1; t < threads; ++t)
    helpers.emplace_back(work, t);
  work(0);
  for (auto& helper : helpers)
    helper.join();
  for (auto& failure : failures)
    if (failure)
      std::rethrow_exception(failure);
  // The mean-field residual moves on: what stayed below the ranks' median threshold.
  if (mean_field_) {
    mean_field_->update(fresh_, MeanFieldResidual::truncation_of(last_thresholds()), threads);
  }
}

double SelectionStage::model_gaussian_fit() const
{
  // mean + z sigma over the n entries (sigma with the n - 1 divisor, as gaussian_fit_threshold), from the expected
  // sums under the mean-field residual.
  const MeanFieldResidual::AccSums sums = mean_field_->acc_sums(fresh_, 1);
  const auto n = static_cast<double>(config_.workload.n), k = static_cast<double>(config_.workload.k);
  const double mean = sums.sum / n;
  const double variance = n > 1 ? std::max(0.0, (sums.squares - n * mean * mean) / (n - 1)) : 0.0;
  return mean + normal_two_sided_quantile(k / n) * std::sqrt(variance);
}

std::vector<double> SelectionStage::last_thresholds() const
{
  std::vector<double> thresholds;
  for (const LocalSelector& selector : selectors_)
    thresholds.push_back(selector.threshold());
  return thresholds;
}

void SelectionStage::draw_candidates(std::span<const RankId> ranks, int iteration,
                                     std::span<const std::uint64_t> needed, std::vector<SparseVector>& out) const
{
  if (!mean_field_) {
    candidates_for_top_k(*config_.gradients, ranks, iteration, floor_, needed, out);
    return;
  }
  mean_field_->candidates_at_least(fresh_, ranks, floor_, needed, out);
}

SparseVector SelectionStage::take_and_charge(Communicator& comm)
{
  Prepared& prepared = prepared_[comm.rank()];
  const ComputeModel& model = config_.compute;
  Seconds cost = 0;
  if (model.selection == SelectionCharge::memory_bandwidth)
    cost = static_cast<double>(prepared.traffic.bytes_read + prepared.traffic.bytes_written) / model.memory_bandwidth;
  else if (model.selection == SelectionCharge::measured)
    cost = prepared.host_seconds * model.measured_scale;
  comm.spend("selection", cost);
  return std::move(prepared.selection);
}

void SelectionStage::prepare_rank(RankId rank, int iteration, std::vector<float>& gradient,
                                  const SparseVector* candidates, SparseVector& buffer)
{
  // acc = residual + gradient, or the gradient alone without a residual. A collective that selects within
  // itself keeps its acc in residuals_ either way (it leaves the residual there), so it gets the gradient
  // generated straight into it and no local selection.
  std::span<const float> acc;
  if (!candidates) {
    if (within_collective_ && !keep_residual_) {
      residuals_[rank].resize(config_.workload.n);
      config_.gradients->generate(rank, iteration, residuals_[rank]);
    } else {
      config_.gradients->generate(rank, iteration, gradient);
      acc = gradient;
    }
    if (keep_residual_) {
      std::vector<float>& residual = residuals_[rank];
      residual.resize(config_.workload.n, 0.0f);
      for (std::size_t i = 0; i < residual.size(); ++i)
        residual[i] += gradient[i];
      acc = residual;
    }
  }
  Prepared& prepared = prepared_[rank];
  if (within_collective_) {
    prepared = {};
    return;
  }
  prepared.traffic = {};
  LocalSelector& selector = selectors_[rank];
  const std::uint64_t k = config_.workload.k;
  const auto wall_start = std::chrono::steady_clock::now();
  // The kernels write into the thread's buffer; the selection, which lives through the iteration beside P - 1
  // others, is a copy of its size.
  if (candidates && gaussian_)
    prepared.selection = selector.select_candidates_gaussian(*candidates, config_.workload.n, k, gaussian_fit_,
                                                             prepared.traffic, &buffer);
  else if (candidates)
    prepared.selection =
        selector.select_candidates(*candidates, config_.workload.n, k, iteration, prepared.traffic, &buffer);
  else
    prepared.selection = selector.select(acc, k, iteration, prepared.traffic, &buffer);
  prepared.host_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
}

void SelectionStage::consume(RankId rank, const SparseVector& selection,
                             const std::shared_ptr<const SparseVector>& result, SparseAllreduce::ResidualRule rule,
                             bool reevaluation)
{
  if (mean_field_) {
    // Only what the algorithm did not consume stays, exactly, in the rank's carried store.
    SparseVector kept;
    if (rule == SparseAllreduce::ResidualRule::selected_in_result) {
      const std::vector<Index>& dropped = selectors_[rank].dropped();
      std::size_t in_result = 0;
      for (std::size_t e = 0; e < selection.size(); ++e) {
        const Index i = selection.indices[e];
        while (in_result < result->size() && result->indices[in_result] < i)
          ++in_result;
        if ((in_result < result->size() && result->indices[in_result] == i) ||
            std::binary_search(dropped.begin(), dropped.end(), i))
          continue;
        kept.indices.push_back(i);
        kept.values.push_back(selection.values[e]);
      }
    }
    mean_field_->carry(rank, std::move(kept));
    return;
  }
  if (!keep_residual_ || rule == SparseAllreduce::ResidualRule::kept_by_algorithm)
    return;
  std::vector<float>& residual = residuals_[rank];
  if (reevaluation && config_.selection.reevaluation_residual == ReevaluationResidual::reference_searchsorted) {
    if (magnitude_order_of_ != result) {
      magnitude_order_ = indices_by_magnitude(*result);
      magnitude_order_of_ = result;
    }
    for (Index i : found_by_searchsorted(selection.indices, magnitude_order_))
      residual[i] = 0.0f;
  } else {
    consume_selection(residual, selection, *result, rule);
  }
  for (Index i : selectors_[rank].dropped())
    residual[i] = 0.0f;
}

void consume_selection(std::vector<float>& acc, const SparseVector& selection, const SparseVector& result,
                       SparseAllreduce::ResidualRule rule)
{
  const bool keep_lost = rule == SparseAllreduce::ResidualRule::selected_in_result;
  std::size_t in_result = 0;
  for (std::size_t e = 0; e < selection.size(); ++e) {
    const Index i = selection.indices[e];
    if (keep_lost) {
      while (in_result < result.size() && result.indices[in_result] < i)
        ++in_result;
      if (in_result == result.size() || result.indices[in_result] != i)
        continue; // lost at the global selection: stays in the residual
    }
    acc[i] = 0.0f;
  }
}

} // namespace sparsim
