// The selection stage of a sparse iteration (sim/run/rank_loop.hpp): every rank's acc and local selection,
// prepared over host threads at zero simulated cost, then charged per rank by the compute model.
#pragma once

#include "algorithms/algorithm.hpp"
#include "sim/comm/communicator.hpp"
#include "sim/gradients/mean_field.hpp"
#include "sim/run/config.hpp"
#include "sim/run/selection.hpp"

#include <atomic>
#include <memory>
#include <span>
#include <stdexcept>
#include <vector>

namespace sparsim {

// Error feedback after a sparse allreduce: zeroes in `acc` (which becomes the residual) the entries of
// `selection` that were consumed: all of them, or only those that are in `result` (both sorted by index).
void consume_selection(std::vector<float>& acc, const SparseVector& selection, const SparseVector& result,
                       SparseAllreduce::ResidualRule rule);

// The local side of a sparse iteration for every rank: acc = residual + gradient (or the gradient alone
// without a residual) and the local selection. It depends on nothing but the rank's own state, so it runs
// for all ranks at once, spread over host threads, while the simulation waits at zero simulated cost; the
// results do not depend on the number of threads.
//
// With the candidates generation (gradients.generation "candidates") a rank's acc is its candidates: the
// entries above one floor shared by all ranks in the iteration, the lowest threshold any rank reuses, or, when
// some rank selects its exact top-k, lower still if needed for 1.02 k candidates (candidate_floor_for_top_k).
// With selection.residual "mean_field" the candidates are those of acc = residual + gradient under the mean-field
// residual, which moves on once all ranks have selected (its truncation: the ranks' median threshold).
class SelectionStage {
public:
  // `only_rank` >= 0: this process runs that rank alone (a real MPI run) and prepares only its selection (not
  // with the candidates generation, whose floor all ranks share).
  explicit SelectionStage(const ExperimentConfig& config, RankId only_rank = -1)
      : config_(config)
      , first_rank_(only_rank >= 0 ? only_rank : 0)
      , end_rank_(only_rank >= 0 ? only_rank + 1 : config.ranks)
      , keep_residual_(config.selection.residual == ResidualKind::dense)
      , candidates_(config.gradients->generates_candidates())
      , gaussian_(candidates_ && config.selection.policy == SelectionPolicy::gaussian)
      , within_collective_(config.selects_within_collective())
      , residuals_(keep_residual_ || within_collective_ ? config.ranks : 0)
      , selectors_(config.ranks, LocalSelector(config.selection))
      , prepared_(config.ranks)
  {
    if (only_rank >= 0 && candidates_)
      throw std::logic_error("the candidates generation prepares all ranks together; it cannot run one rank alone");
    if (config.selection.residual == ResidualKind::mean_field)
      mean_field_ = std::make_unique<MeanFieldResidual>(
          config.workload.n, config.ranks,
          static_cast<std::size_t>(config.selection.carried_cap * static_cast<double>(config.workload.k)));
  }

  // Prepares every rank's selection (or only_rank's) for `iteration` with up to `threads` host threads.
  void prepare(int iteration, int threads);
  // Host seconds the last prepare() spent on what ranks share (the candidates generation's floor and plan).
  Seconds shared_seconds() const { return shared_seconds_; }
  // The mean-field residual (selection.residual "mean_field"), else nullptr.
  const MeanFieldResidual* mean_field() const { return mean_field_.get(); }
  // Ranks prepared so far by the running prepare() (the run's progress display reads it from another thread).
  int ranks_prepared() const { return ranks_prepared_.load(std::memory_order_relaxed); }

  // The rank's prepared selection, charged in simulated time by the compute model (phase "selection"). Empty,
  // at no cost, for a collective that selects within itself.
  SparseVector take_and_charge(Communicator& comm);
  // For a collective that selects within itself (SparDL): the rank's acc, which the collective leaves as the
  // residual (with selection.residual "none" the next iteration overwrites it). Empty for the others.
  std::span<float> acc_for_collective(RankId rank)
  {
    return within_collective_ ? std::span<float>(residuals_[rank]) : std::span<float>();
  }

  // Error feedback after the collective: the residual keeps acc minus what the algorithm consumed (at a
  // re-evaluation iteration, what selection.reevaluation_residual says) and minus what the selection dropped.
  void consume(RankId rank, const SparseVector& selection, const std::shared_ptr<const SparseVector>& result,
               SparseAllreduce::ResidualRule rule, bool reevaluation);

private:
  struct Prepared {
    SparseVector selection;
    SelectionTraffic traffic;
    Seconds host_seconds = 0; // the host time the selection took (compute "measured")
  };

  static constexpr int kBatch = 8;             // ranks whose candidates are drawn together
  std::vector<double> last_thresholds() const; // of the ranks' last selections
  double model_gaussian_fit() const;           // policy "gaussian" from candidates: the fit of acc under the model

  // The rank's acc and selection: from its candidates when given, else from its dense gradient.
  // `buffer`: the preparing thread's output buffer for the kernels.
  void prepare_rank(RankId rank, int iteration, std::vector<float>& gradient, const SparseVector* candidates,
                    SparseVector& buffer);
  // The ranks' candidates: of the gradient, or of acc under the mean-field residual; at least needed[s] for
  // ranks[s] (drawn again from half the floor when short).
  void draw_candidates(std::span<const RankId> ranks, int iteration, std::span<const std::uint64_t> needed,
                       std::vector<SparseVector>& out) const;

  const ExperimentConfig& config_;
  RankId first_rank_, end_rank_; // the ranks prepared here: [first, end)
  bool keep_residual_;
  bool candidates_;
  bool gaussian_;          // policy "gaussian" from candidates (with the mean-field residual)
  bool within_collective_; // the collective selects from the acc (residuals_ holds it, residual or not)
  double floor_ = 0;       // this iteration's candidate floor
  Seconds shared_seconds_ = 0;
  std::vector<std::vector<float>> residuals_; // [rank], allocated at the first sparse iteration
  std::vector<LocalSelector> selectors_;      // [rank]: the reused thresholds
  std::unique_ptr<MeanFieldResidual> mean_field_;
  FreshGradientModel fresh_; // the iteration's fresh gradient, for the mean-field residual
  double gaussian_fit_ = 0;  // policy "gaussian" from candidates: this iteration's fit
  std::atomic<int> ranks_prepared_ = 0;
  std::vector<Prepared> prepared_; // [rank]: this iteration's selections
  // reevaluation_residual "reference_searchsorted": U's indices by magnitude, sorted once for the ranks that
  // share U (the actors call consume one at a time).
  std::shared_ptr<const SparseVector> magnitude_order_of_;
  std::vector<Index> magnitude_order_;
};

} // namespace sparsim
