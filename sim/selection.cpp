#include "sim/selection.hpp"

#include "sim/topk.hpp"

namespace sparsim {

ThresholdRules threshold_rules(const std::string& preset)
{
  // Windows and factors of the reference implementation (algorithms.md, step 2).
  if (preset == "lstm")
    return {"lstm", 3.0 / 4, 5.0 / 4, 1.012, 0, 1, 0};
  if (preset == "bert")
    return {"bert", 4.0 / 5, 5.0 / 4, 1.025, 0, 1, 0};
  return {"vgg", 2.0 / 3, 5.0 / 4, 1.012, 4.0 / 3, 1.03, 5};
}

nlohmann::json SelectionConfig::to_json() const
{
  return {{"policy", policy}, {"reevaluate_every", reevaluate_every}, {"rules", rules.preset}};
}

SelectionConfig parse_selection(JsonReader selection, const std::string& default_policy)
{
  SelectionConfig config;
  config.policy = selection.get_enum("policy", {"exact", "threshold_reuse"}, default_policy);
  config.reevaluate_every = static_cast<int>(selection.get_int("reevaluate_every", 32, 1, 1'000'000));
  config.rules = threshold_rules(selection.get_enum("rules", {"vgg", "lstm", "bert"}, "vgg"));
  selection.finish();
  return config;
}

SparseVector LocalSelector::select(std::span<const float> acc, std::uint64_t k, int iteration)
{
  const bool exact = config_.policy == "exact" || !have_threshold_ || iteration % config_.reevaluate_every == 0;
  if (exact) {
    threshold_ = k > 0 ? kth_largest_magnitude(acc, k) : 0.0;
    have_threshold_ = k > 0;
    used_threshold_ = threshold_;
    return select_topk(acc, k);
  }

  // Threshold reuse: optionally raise the threshold while far too many entries pass it.
  const ThresholdRules& rules = config_.rules;
  for (int raised = 0; raised < rules.raise_max; ++raised) {
    if (static_cast<double>(count_above(acc, static_cast<float>(threshold_))) <= rules.raise_above * k)
      break;
    threshold_ *= rules.raise_factor;
  }
  used_threshold_ = threshold_;
  SparseVector selection = select_above(acc, static_cast<float>(threshold_));
  // Correct the threshold for the next iteration when the count left the window around k.
  const double m = static_cast<double>(selection.size());
  if (m < rules.low * k)
    threshold_ /= rules.factor;
  else if (m > rules.high * k)
    threshold_ *= rules.factor;
  return selection;
}

}  // namespace sparsim
