#include "sim/comm/accounting.hpp"

namespace sparsim {

PhaseId PhaseNames::intern(std::string_view name)
{
  for (PhaseId id = 0; id < names_.size(); ++id)
    if (names_[id] == name)
      return id;
  names_.emplace_back(name);
  return static_cast<PhaseId>(names_.size() - 1);
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
