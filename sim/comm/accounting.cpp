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
  auto& per_phase = stats_[rank];
  if (per_phase.size() <= phase)
    per_phase.resize(phase + 1);
  return per_phase[phase];
}

std::vector<PhaseStats> TrafficStats::take(RankId rank, std::size_t phases)
{
  std::vector<PhaseStats> taken = std::move(stats_[rank]);
  stats_[rank].clear();
  taken.resize(phases);
  return taken;
}

} // namespace sparsim
