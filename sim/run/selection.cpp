#include "sim/run/selection.hpp"

#include "sim/data/topk.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace sparsim {

ThresholdRules threshold_rules(const std::string& preset)
{
  // Windows and factors of the reference implementation (algorithms.md, step 2).
  if (preset == "lstm")
    return {.preset = "lstm", .low = 3.0 / 4, .high = 5.0 / 4, .factor = 1.012};
  if (preset == "bert")
    return {.preset = "bert", .low = 4.0 / 5, .high = 5.0 / 4, .factor = 1.025};
  return {.preset = "vgg",
          .low = 2.0 / 3,
          .high = 5.0 / 4,
          .factor = 1.012,
          .raise_above = 4.0 / 3,
          .raise_factor = 1.03,
          .raise_max = 5};
}

nlohmann::json SelectionConfig::to_json() const
{
  return {{"policy", name_of(policy, kSelectionPolicyNames)},
          {"reevaluate_every", reevaluate_every},
          {"rules", rules.preset},
          {"warmup_iterations", warmup_iterations},
          {"residual", name_of(residual, kResidualKindNames)}};
}

SelectionConfig parse_selection(JsonReader selection, SelectionPolicy default_policy, bool candidates)
{
  SelectionConfig config;
  config.policy = selection.get_enum("policy", kSelectionPolicyNames, default_policy);
  config.reevaluate_every = static_cast<int>(selection.get_int("reevaluate_every", 32, 1, 1'000'000));
  config.warmup_iterations = static_cast<int>(selection.get_int("warmup_iterations", 0, 0, 1'000'000));
  config.rules = threshold_rules(selection.get_enum("rules", {"vgg", "lstm", "bert"}, "vgg"));
  config.residual =
      selection.get_enum("residual", kResidualKindNames, candidates ? ResidualKind::none : ResidualKind::dense);
  if (candidates && config.residual == ResidualKind::dense)
    selection.fail("residual", "dense",
                   "\"none\" with gradients.generation \"candidates\" (the scale mode keeps no dense residual; "
                   "docs/gradients.md)");
  selection.finish();
  return config;
}

Seconds ComputeModel::staging_copy_time(std::uint64_t n) const
{
  return staging == StagingCharge::pcie ? 4.0 * static_cast<double>(n) / pcie_bandwidth : 0.0;
}

nlohmann::json ComputeModel::to_json() const
{
  return {{"training", name_of(training, kTrainingChargeNames)},
          {"forward_backward_s", forward_backward},
          {"selection", name_of(selection, kSelectionChargeNames)},
          {"memory_bandwidth_Bps", memory_bandwidth},
          {"measured_scale", measured_scale},
          {"staging", name_of(staging, kStagingChargeNames)},
          {"pcie_bandwidth_Bps", pcie_bandwidth},
          {"reduction", name_of(reduction, kReductionChargeNames)},
          {"reduction_bandwidth_Bps", reduction_bandwidth},
          {"deterministic", selection != SelectionCharge::measured}};
}

ComputeModel parse_compute(JsonReader compute)
{
  ComputeModel model;
  model.training = compute.get_enum("training", kTrainingChargeNames, TrainingCharge::none);
  if (model.training == TrainingCharge::fixed) {
    model.forward_backward = compute.get_duration("forward_backward");
    if (model.forward_backward <= 0)
      compute.fail("forward_backward", model.forward_backward, "a positive duration");
  } else if (compute.has("forward_backward")) {
    compute.fail("forward_backward", compute.raw("forward_backward"),
                 "no forward_backward unless compute.training is \"fixed\" (\"model\" takes it from the model table)");
  }
  model.selection = compute.get_enum("selection", kSelectionChargeNames, SelectionCharge::memory_bandwidth);
  model.memory_bandwidth = compute.get_bandwidth("memory_bandwidth", "732GBps");
  model.measured_scale = compute.get_number("measured_scale", 1.0, 0.0, 1e6, true);
  model.staging = compute.get_enum("staging", kStagingChargeNames, StagingCharge::none);
  model.pcie_bandwidth = compute.get_bandwidth("pcie_bandwidth", "12GBps");
  model.reduction = compute.get_enum("reduction", kReductionChargeNames, ReductionCharge::free);
  model.reduction_bandwidth =
      compute.has("reduction_bandwidth") ? compute.get_bandwidth("reduction_bandwidth") : model.memory_bandwidth;
  if (model.reduction == ReductionCharge::free && compute.has("reduction_bandwidth"))
    compute.fail("reduction_bandwidth", compute.raw("reduction_bandwidth"),
                 "no reduction_bandwidth unless compute.reduction is \"memory_bandwidth\"");
  compute.finish();
  return model;
}

std::optional<double> LocalSelector::reuse_threshold(int iteration) const
{
  if (config_.policy == SelectionPolicy::exact || !have_threshold_ || iteration % config_.reevaluate_every == 0)
    return std::nullopt;
  return threshold_;
}

SparseVector LocalSelector::select(std::span<const float> acc, std::uint64_t k, int iteration,
                                   SelectionTraffic& traffic, SparseVector* buffer)
{
  return select_from(acc, nullptr, acc.size(), k, iteration, traffic, buffer);
}

SparseVector LocalSelector::select_candidates(const SparseVector& candidates, std::uint64_t n, std::uint64_t k,
                                              int iteration, SelectionTraffic& traffic, SparseVector* buffer)
{
  return select_from(candidates.values, &candidates.indices, n, k, iteration, traffic, buffer);
}

SparseVector LocalSelector::select_from(std::span<const float> acc, const std::vector<Index>* indices, std::uint64_t n,
                                        std::uint64_t k, int iteration, SelectionTraffic& traffic, SparseVector* buffer)
{
  // The kernel's output: into the buffer when there is one (then copied at its size), else a fresh vector.
  // Candidates: positions in `acc` become indices of the n-entry vector (both ascending).
  SparseVector fresh;
  SparseVector& out = buffer ? *buffer : fresh;
  auto finish = [&] {
    SparseVector selection;
    if (buffer) {
      selection.indices.assign(out.indices.begin(), out.indices.end());
      selection.values.assign(out.values.begin(), out.values.end());
    } else {
      selection = std::move(out);
    }
    if (indices)
      for (Index& position : selection.indices)
        position = (*indices)[position];
    return selection;
  };
  const std::uint64_t pass = 4 * n;
  const bool exact = !reuse_threshold(iteration).has_value();
  if (exact) {
    // The exact top-k; its smallest magnitude is the k-th largest, the threshold reused afterwards.
    select_topk(acc, k, out);
    SparseVector selection = finish();
    threshold_ = 0.0;
    if (!selection.empty()) {
      threshold_ = std::fabs(selection.values[0]);
      for (float v : selection.values)
        threshold_ = std::min(threshold_, static_cast<double>(std::fabs(v)));
    }
    have_threshold_ = !selection.empty();
    used_threshold_ = threshold_;
    traffic.bytes_read += pass;
    traffic.bytes_written += 8 * selection.size();
    return selection;
  }

  // Threshold reuse: optionally raise the threshold while far too many entries pass it.
  const ThresholdRules& rules = config_.rules;
  for (int raised = 0; raised < rules.raise_max; ++raised) {
    traffic.bytes_read += pass;
    if (static_cast<double>(count_above(acc, static_cast<float>(threshold_))) <= rules.raise_above * k)
      break;
    threshold_ *= rules.raise_factor;
  }
  used_threshold_ = threshold_;
  select_above(acc, static_cast<float>(threshold_), out);
  SparseVector selection = finish();
  traffic.bytes_read += pass;
  traffic.bytes_written += 8 * selection.size();
  // Correct the threshold for the next iteration when the count left the window around k.
  const double m = static_cast<double>(selection.size());
  if (m < rules.low * k)
    threshold_ /= rules.factor;
  else if (m > rules.high * k)
    threshold_ *= rules.factor;
  return selection;
}

double candidate_floor(const GradientSource& source, std::span<const LocalSelector> selectors, int iteration,
                       std::uint64_t k, bool top_k_anyway, int threads)
{
  double floor = std::numeric_limits<double>::infinity();
  bool exact_top_k = top_k_anyway;
  for (const LocalSelector& selector : selectors) {
    if (const auto threshold = selector.reuse_threshold(iteration))
      floor = std::min(floor, *threshold);
    else
      exact_top_k = true;
  }
  if (exact_top_k)
    floor = std::min(floor, candidate_floor_for_top_k(source, iteration, k, threads));
  return floor;
}

} // namespace sparsim
