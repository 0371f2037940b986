// TopkA: every rank selects its exact local top-k and the selections are allgathered; the result is the
// sum of all P*k pairs on the union of their indices (no re-selection, so U has up to min(Pk, n) nonzeros).
// Every rank receives 2k(P-1) words. Source: the TopkA baseline of Li and Hoefler, PPoPP 2022 (after
// Renggli et al.'s allgather-based sparse allreduce).
//
// Parameter "allgather": "ring" (P-1 steps, each forwarding the selection received in the step before:
// (P-1) alpha) or "recursive_doubling" (ceil(log2 P) steps, each sending everything gathered so far;
// done with Bruck's algorithm so that any P works; log P alpha). Both move k(P-1) elements per rank
// (algorithms/collectives.hpp).
#include "algorithms/algorithm.hpp"
#include "algorithms/collectives.hpp"
#include "algorithms/registry.hpp"
#include "algorithms/steps.hpp"
#include "sim/data/sparse_ops.hpp"

#include <cmath>

namespace sparsim {
namespace {

class TopkA final : public SparseAllreduce {
public:
  explicit TopkA(std::string allgather)
      : allgather_(std::move(allgather))
  {
  }

  static constexpr std::string_view kName = "topka";
  std::string name() const override { return std::string(kName); }
  nlohmann::json params() const override { return {{"allgather", allgather_}}; }
  ResidualRule residual_rule() const override { return ResidualRule::all_selected; }
  ResultSemantics result_semantics() const override { return ResultSemantics::union_sum; }

  ClosedForm closed_form(const CostInputs& in) const override
  {
    const double P = in.ranks;
    const double element = in.wire.index_bytes + in.wire.value_bytes;
    const double steps = allgather_ == "ring" ? P - 1 : std::ceil(std::log2(P));
    ClosedForm cf;
    cf.bytes_sent_per_rank = in.k * (P - 1) * element;
    cf.bytes_recv_per_rank = cf.bytes_sent_per_rank;
    cf.time = steps * in.alpha + cf.bytes_recv_per_rank * in.seconds_per_byte;
    cf.messages = P * steps;
    cf.formula = allgather_ == "ring" ? "(P-1) alpha + k(P-1) e beta" : "ceil(log2 P) alpha + k(P-1) e beta";
    return cf;
  }

  // A pointer per gathered selection on every rank, and with Bruck's allgather its bundles in flight.
  std::vector<HeldMemory> held_memory(const CostInputs& in) const override
  {
    const double parts = static_cast<double>(in.ranks) * in.ranks; // every rank gathers every rank's selection
    if (allgather_ == "ring")
      return {{"gathered parts (16 P^2 bytes)", kRingAllgatherBytesPerPart * parts}};
    return {{"gathered parts and Bruck's bundles (32 P^2 bytes)", kBruckAllgatherBytesPerPart * parts}};
  }

  std::shared_ptr<const SparseVector> allreduce(Communicator& comm, const SparseInput& input, SparseRankState*,
                                                SparseReport&) const override
  {
    const auto& mine = input.local_selection;
    Gathered<SparseVector> gathered;
    {
      auto scope = comm.phase("allgather");
      // Bruck's bundles hold several ranks' selections: their sizes are known when each holds exactly k.
      gathered = allgather_ == "ring"
                     ? ring_allgather(comm, mine, 0)
                     : bruck_allgather(comm, mine, 0, input.exactly_k ? same_bytes_as(comm, *mine) : PartBytes());
    }
    // Union sum in rank order: every rank holds the same parts, so it is computed once for all.
    return union_sum_of_gathered(comm, gathered);
  }

private:
  std::string allgather_;
};

} // namespace

SPARSIM_ALGORITHM_FILE(topka)
{
  return {algorithm_entry<TopkA>(
      TopkA::kName, "exact local top-k, allgather of the selections, union sum", [](JsonReader& params) {
        return std::make_unique<TopkA>(params.get_enum("allgather", {"ring", "recursive_doubling"}, "ring"));
      })};
}

} // namespace sparsim
