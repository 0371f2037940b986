#include "sim/comm/accounting.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace sparsim {

PhaseId PhaseNames::intern(std::string_view name, const PhaseEntry& entry)
{
  for (PhaseId id = 0; id < names_.size(); ++id)
    if (names_[id] == name) {
      first_entries_[id] = std::min(first_entries_[id], entry);
      return id;
    }
  names_.emplace_back(name);
  first_entries_.push_back(entry);
  return static_cast<PhaseId>(names_.size() - 1);
}

PhaseId PhaseNames::id_of(std::string_view name) const
{
  const auto found = std::find(names_.begin(), names_.end(), name);
  if (found == names_.end()) {
    std::string message = "no phase named ";
    message.append(name);
    throw std::out_of_range(message);
  }
  return static_cast<PhaseId>(found - names_.begin());
}

std::vector<PhaseId> PhaseNames::output_order() const
{
  std::vector<PhaseId> order(names_.size());
  std::iota(order.begin(), order.end(), PhaseId{0});
  std::sort(order.begin() + 1, order.end(),
            [&](PhaseId a, PhaseId b) { return first_entries_[a] < first_entries_[b]; });
  return order;
}

PhaseStats& TrafficStats::of(RankId rank, PhaseId phase)
{
  if (stats_.size() <= phase)
    stats_.resize(phase + 1, std::vector<PhaseStats>(ranks_)); // earlier phases' counters stay where they are
  return stats_[phase][rank];
}

std::vector<PhaseStats> TrafficStats::take(RankId rank, std::size_t phases)
{
  std::vector<PhaseStats> taken(phases);
  for (std::size_t phase = 0; phase < stats_.size(); ++phase) {
    if (phase < phases)
      taken[phase] = stats_[phase][rank];
    stats_[phase][rank] = PhaseStats{};
  }
  return taken;
}

} // namespace sparsim
