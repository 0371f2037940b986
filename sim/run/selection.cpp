#include "sim/run/selection.hpp"

#include "sim/run/devices.hpp"

#include "sim/base/page_faults.hpp"
#include "sim/data/topk.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace sparsim {

ThresholdRules threshold_rules(const std::string& preset)
{
  // Windows and factors of the reference implementation (algorithms.md, step 2); Gaussiank's correction from the
  // same model's GaussianCompressor.compress (the loops that run; VGG's file keeps an older one commented out).
  if (preset == "lstm")
    return {.preset = "lstm",
            .low = 3.0 / 4,
            .high = 5.0 / 4,
            .factor = 1.012,
            .gaussian = {.lower_trigger = {3, 4},
                         .lower_target = {3, 4},
                         .lower_divisor = 1.012,
                         .lower_rounds = 50,
                         .upper_limit = {}}};
  if (preset == "bert")
    return {.preset = "bert",
            .low = 4.0 / 5,
            .high = 5.0 / 4,
            .factor = 1.025,
            .gaussian = {.lower_trigger = {3, 4},
                         .lower_target = {5, 6},
                         .lower_divisor = 1.012,
                         .lower_rounds = 20,
                         .upper_limit = {}}};
  return {.preset = "vgg",
          .low = 2.0 / 3,
          .high = 5.0 / 4,
          .factor = 1.012,
          .raise_above = 4.0 / 3,
          .raise_factor = 1.03,
          .raise_max = 5,
          .gaussian = {.lower_trigger = {3, 4},
                       .lower_target = {3, 4},
                       .lower_divisor = 1.02,
                       .lower_rounds = 20,
                       .upper_limit = {5, 4},
                       .upper_factor = 1.02,
                       .upper_rounds = 20}};
}

double normal_two_sided_quantile(double p)
{
  if (!(p > 0 && p <= 1))
    throw std::invalid_argument("normal_two_sided_quantile: p must be in (0, 1]");
  // P(|Z| > z) = erfc(z / sqrt 2) decreases in z; bisect on [0, 40] to double precision.
  double low = 0, high = 40;
  for (int step = 0; step < 200 && high - low > 1e-15 * high; ++step) {
    const double mid = (low + high) / 2;
    (std::erfc(mid / std::sqrt(2.0)) > p ? low : high) = mid;
  }
  return (low + high) / 2;
}

double gaussian_fit_threshold(std::span<const float> acc, std::uint64_t k)
{
  const std::size_t n = acc.size();
  if (k == 0 || n == 0 || k > n)
    return std::numeric_limits<double>::infinity(); // selects nothing
  double sum = 0;
  for (float v : acc)
    sum += v;
  const double mean = sum / static_cast<double>(n);
  double squares = 0;
  for (float v : acc)
    squares += (v - mean) * (v - mean);
  const double sigma = n > 1 ? std::sqrt(squares / static_cast<double>(n - 1)) : 0.0;
  return mean + normal_two_sided_quantile(static_cast<double>(k) / static_cast<double>(n)) * sigma;
}

nlohmann::json SelectionConfig::to_json() const
{
  nlohmann::json json = {{"policy", name_of(policy, kSelectionPolicyNames)},
                         {"reevaluate_every", reevaluate_every},
                         {"rules", rules.preset},
                         {"warmup_iterations", warmup_iterations},
                         {"residual", name_of(residual, kResidualKindNames)},
                         {"top_k", name_of(top_k, kTopKRuleNames)},
                         {"reevaluation_residual", name_of(reevaluation_residual, kReevaluationResidualNames)}};
  if (residual == ResidualKind::mean_field)
    json["carried_cap"] = carried_cap;
  return json;
}

SelectionConfig parse_selection(JsonReader selection, SelectionPolicy default_policy, bool candidates)
{
  SelectionConfig config;
  config.policy = selection.get_enum("policy", kSelectionPolicyNames, default_policy);
  config.reevaluate_every = static_cast<int>(selection.get_int("reevaluate_every", 32, 1, 1'000'000));
  config.warmup_iterations = static_cast<int>(selection.get_int("warmup_iterations", 0, 0, 1'000'000));
  config.rules = threshold_rules(selection.get_enum("rules", {"vgg", "lstm", "bert"}, "vgg"));
  // Error feedback by default: the exact residual, or in the scale mode its mean-field model.
  config.residual =
      selection.get_enum("residual", kResidualKindNames, candidates ? ResidualKind::mean_field : ResidualKind::dense);
  if (candidates && config.residual == ResidualKind::dense)
    selection.fail("residual", "dense",
                   "\"mean_field\" (the default) or \"none\" with gradients.generation \"candidates\" (the scale "
                   "mode keeps no dense residual; docs/gradients.md)");
  if (!candidates && config.residual == ResidualKind::mean_field)
    selection.fail("residual", "mean_field",
                   "\"dense\" or \"none\": the mean-field residual models error feedback for gradients.generation "
                   "\"candidates\" of the calibrated source (docs/gradients.md)");
  if (candidates && config.policy == SelectionPolicy::gaussian && config.residual != ResidualKind::mean_field)
    selection.fail("policy", "gaussian",
                   "\"exact\" or \"threshold_reuse\" with gradients.generation \"candidates\" and residual \"none\" "
                   "(a normal fit needs the whole accumulated gradient: selection.residual \"mean_field\" models it; "
                   "docs/gradients.md)");
  if (config.residual == ResidualKind::mean_field)
    config.carried_cap = selection.get_number("carried_cap", config.carried_cap, 0.0, 1e6);
  config.top_k = selection.get_enum("top_k", kTopKRuleNames, TopKRule::exact);
  config.reevaluation_residual =
      selection.get_enum("reevaluation_residual", kReevaluationResidualNames, ReevaluationResidual::selected_in_result);
  if (config.residual == ResidualKind::mean_field &&
      config.reevaluation_residual == ReevaluationResidual::reference_searchsorted)
    selection.fail("reevaluation_residual", "reference_searchsorted",
                   "\"selected_in_result\" with residual \"mean_field\", the default with gradients.generation "
                   "\"candidates\" (the reference's searchsorted lookups need every rank's dense residual; "
                   "selection.residual \"none\" keeps them, without error feedback)");
  selection.finish();
  return config;
}

Seconds resolve_training_step(const ComputeModel& compute, const TrainingStep& step)
{
  if (step.device.empty()) {
    if (compute.device_given)
      throw ConfigError("compute.device", "\"" + compute.device + "\"",
                        "no compute.device with this model table: its training step names no device preset to move "
                        "it from (\"device_preset\" in its \"compute\" object), so it is charged as it is");
    return step.forward_backward;
  }
  if (step.device == compute.device && compute.precision == "fp32")
    return step.forward_backward;
  const DevicePreset& from = device_preset(step.device);
  const DevicePreset& to = device_preset(compute.device);
  const Seconds compute_bound = step.forward_backward - step.memory_bound;
  return compute_bound * (device_flops(from, "fp32") / device_flops(to, compute.precision)) +
         step.memory_bound * (from.memory_bandwidth / to.memory_bandwidth);
}

Seconds ComputeModel::staging_copy_time(std::uint64_t n) const
{
  return staging == StagingCharge::pcie ? 4.0 * static_cast<double>(n) / pcie_bandwidth : 0.0;
}

nlohmann::json ComputeModel::to_json() const
{
  return {{"device", device},
          {"precision", precision},
          {"training", name_of(training, kTrainingChargeNames)},
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
  model.device_given = compute.has("device");
  model.device = compute.get_enum("device", device_preset_names(), device_preset_names().front());
  model.precision = compute.get_enum("precision", {"fp32", "mixed"}, "fp32");
  const DevicePreset& device = device_preset(model.device);
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
  model.memory_bandwidth =
      compute.has("memory_bandwidth") ? compute.get_bandwidth("memory_bandwidth") : device.memory_bandwidth;
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
  if (config_.policy != SelectionPolicy::threshold_reuse || !have_threshold_ ||
      iteration % config_.reevaluate_every == 0)
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

SparseVector LocalSelector::select_candidates_gaussian(const SparseVector& candidates, std::uint64_t n, std::uint64_t k,
                                                       double fit, SelectionTraffic& traffic, SparseVector* buffer)
{
  return select_from(candidates.values, &candidates.indices, n, k, 0, traffic, buffer, fit);
}

void LocalSelector::keep_strictly_above_threshold(SparseVector& selection)
{
  std::size_t kept = 0;
  for (std::size_t e = 0; e < selection.size(); ++e) {
    if (static_cast<double>(std::fabs(selection.values[e])) > threshold_) {
      selection.indices[kept] = selection.indices[e];
      selection.values[kept] = selection.values[e];
      ++kept;
    } else if (config_.top_k == TopKRule::strictly_above_kth_dropping_it) {
      dropped_.push_back(selection.indices[e]);
    }
  }
  selection.indices.resize(kept);
  selection.values.resize(kept);
}

SparseVector LocalSelector::select_from(std::span<const float> acc, const std::vector<Index>* indices, std::uint64_t n,
                                        std::uint64_t k, int iteration, SelectionTraffic& traffic, SparseVector* buffer,
                                        std::optional<double> gaussian_fit)
{
  // The kernel's output. An exact top-k from candidates keeps nearly all of them: a fresh vector with room for all,
  // its pages faulted in at once, becomes the selection (no copy; the candidates beyond the top k stay unused
  // capacity, about 2%). Otherwise the thread's buffer when there is one (its pages reused from rank to rank),
  // copied at the selection's size; else a fresh vector. Candidates: positions in `acc` become indices of the
  // n-entry vector (both ascending).
  const bool exact = config_.policy != SelectionPolicy::gaussian && !reuse_threshold(iteration).has_value();
  SparseVector fresh;
  if (indices && exact) {
    reserve_faulted_in(fresh.indices, acc.size());
    reserve_faulted_in(fresh.values, acc.size());
  }
  const bool copy_out = buffer && !(indices && exact);
  SparseVector& out = copy_out ? *buffer : fresh;
  auto finish = [&] {
    SparseVector selection;
    if (copy_out) {
      // The selection lives through the iteration beside the other ranks': its pages are fresh, faulted in at once.
      reserve_faulted_in(selection.indices, out.size());
      reserve_faulted_in(selection.values, out.size());
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
  dropped_.clear();
  if (config_.policy == SelectionPolicy::gaussian) {
    if (indices && !gaussian_fit)
      throw std::logic_error("selection policy \"gaussian\" from candidates needs the fit of the whole acc");
    // The fitted and corrected threshold; the selection is the last count's pass, writing its pairs. The fit
    // reads acc twice (the mean, then the standard deviation), from candidates as from the dense acc.
    traffic.bytes_read += 2 * pass;
    used_threshold_ =
        corrected_gaussian_threshold(acc, gaussian_fit ? *gaussian_fit : gaussian_fit_threshold(acc, k), n, k, traffic);
    select_above(acc, static_cast<float>(used_threshold_), out);
    SparseVector selection = finish();
    traffic.bytes_written += 8 * selection.size();
    return selection;
  }
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
    if (config_.top_k != TopKRule::exact)
      keep_strictly_above_threshold(selection);
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

double LocalSelector::corrected_gaussian_threshold(std::span<const float> acc, double fit, std::uint64_t n,
                                                   std::uint64_t k, SelectionTraffic& traffic) const
{
  const std::uint64_t pass = 4 * n;
  const GaussianCorrection& correction = config_.rules.gaussian;
  double threshold = fit;
  auto count = [&] {
    traffic.bytes_read += pass;
    return count_above(acc, static_cast<float>(threshold));
  };
  std::uint64_t m = count();
  if (m < correction.lower_trigger.of(k)) {
    for (int round = 0; round < correction.lower_rounds && m < correction.lower_target.of(k); ++round) {
      threshold /= correction.lower_divisor;
      m = count();
    }
  } else if (correction.upper_limit.numerator > 0 && m > correction.upper_limit.of(k)) {
    for (int round = 0; round < correction.upper_rounds && m > correction.upper_limit.of(k); ++round) {
      threshold *= correction.upper_factor;
      m = count();
    }
  }
  return threshold;
}

double candidate_floor(const GradientSource& source, std::span<const LocalSelector> selectors, int iteration,
                       std::uint64_t k, bool top_k_anyway, int threads, double top_k_floor_at_least)
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
    floor = std::min(floor, std::max(top_k_floor_at_least, candidate_floor_for_top_k(source, iteration, k, threads)));
  return floor;
}

std::vector<Index> found_by_searchsorted(std::span<const Index> selection, std::span<const Index> order)
{
  std::vector<Index> found;
  const std::size_t length = order.size();
  if (selection.empty() || length == 0)
    return found;
  // numpy's binary search (npysort/binsearch.cpp, side "left"): when a key is larger than the one before, the
  // search keeps the lower bound it ended with; otherwise it starts again from 0, one past the upper bound.
  std::size_t low = 0, high = length;
  Index last = selection[0];
  for (const Index key : selection) {
    if (last < key) {
      high = length;
    } else {
      low = 0;
      high = high < length ? high + 1 : length;
    }
    last = key;
    while (low < high) {
      const std::size_t middle = low + ((high - low) >> 1);
      if (order[middle] < key)
        low = middle + 1;
      else
        high = middle;
    }
    // intersect1d_searchsorted: an index past the end looks at position 0.
    if (order[low == length ? 0 : low] == key)
      found.push_back(key);
  }
  return found;
}

std::vector<Index> indices_by_magnitude(const SparseVector& result)
{
  std::vector<std::size_t> positions(result.size());
  for (std::size_t e = 0; e < positions.size(); ++e)
    positions[e] = e;
  std::stable_sort(positions.begin(), positions.end(), [&](std::size_t a, std::size_t b) {
    return std::fabs(result.values[a]) > std::fabs(result.values[b]);
  });
  std::vector<Index> order;
  order.reserve(positions.size());
  for (std::size_t e : positions)
    order.push_back(result.indices[e]);
  return order;
}

} // namespace sparsim
