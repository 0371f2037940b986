// Gaussiank: every rank selects the entries of its accumulated gradient above a threshold fitted to a normal
// distribution (selection policy "gaussian", sim/run/selection.hpp: mean + z sigma, z the two-sided quantile at
// the density, then the reference's correction loop), so each rank contributes a different number m_r of pairs,
// near k. The selections are allgathered as the reference implementation does it (Shigangli/Ok-Topk,
// VGG/allreducer.py, branch 'gaussiank'): an allgather of the P sizes (one int32 each), then an allgatherv of the
// indices and one of the values. The result is the union sum of all pairs (no re-selection); a rank's residual
// keeps acc minus everything it selected. Source: Shi et al., "Understanding Top-k Sparsification in Distributed
// Deep Learning" (arXiv 1911.08772), the Gaussiank baseline of Li and Hoefler, PPoPP 2022.
//
// Parameter "allgather": the shape of the two allgatherv, "ring" (P-1 steps, as MPI libraries run allgatherv of
// large messages) or "recursive_doubling" (Bruck's, ceil(log2 P) steps). The sizes go by Bruck's algorithm (a
// small allgather). Both shapes move every other rank's pairs once to each rank.
//
// LIMITATIONS (against the reference code):
// - the fit's mean and standard deviation are summed in double (torch sums fp32 on the device): a threshold
//   differing in the last bits can move an entry at the boundary;
// - the quantile is taken at k/n, k = floor(density n), not at the density itself (a relative difference below
//   1/k);
// - the two allgatherv are ring or Bruck allgathers of the parts; an MPI library picks its own algorithm (same
//   bytes, other latency terms);
// - the selection is charged as streaming passes over acc (two for the fit, one per count), not as the GPU
//   kernels the reference ran (abs, compare, nonzero).
#include "algorithms/algorithm.hpp"
#include "algorithms/collectives.hpp"
#include "algorithms/registry.hpp"
#include "algorithms/steps.hpp"
#include "sim/data/wire_codec.hpp"

#include <cmath>

namespace sparsim {
namespace {

constexpr Tag kSizesTag = 0;
constexpr Tag kIndicesTag = 1'000'000; // + step
constexpr Tag kValuesTag = 2'000'000;  // + step

class Gaussiank final : public SparseAllreduce {
public:
  explicit Gaussiank(std::string allgather)
      : allgather_(std::move(allgather))
  {
  }

  static constexpr std::string_view kName = "gaussiank";
  std::string name() const override { return std::string(kName); }
  nlohmann::json params() const override { return {{"allgather", allgather_}}; }
  ResidualRule residual_rule() const override { return ResidualRule::all_selected; }
  ResultSemantics result_semantics() const override { return ResultSemantics::union_sum; }
  LocalSelection default_local_selection() const override { return LocalSelection::gaussian_fit; }

  // On balanced input (every rank selects exactly k; on real gradients m_r varies around k, and each rank
  // receives the sum over the others of m_r pairs):
  //   sizes    ceil(log2 P) alpha + 4 (P-1) beta
  //   indices  s alpha + k (P-1) i beta          (s = P-1 for the ring, ceil(log2 P) for Bruck's)
  //   values   s alpha + k (P-1) v beta
  ClosedForm closed_form(const CostInputs& in) const override
  {
    const double P = in.ranks;
    const double log_steps = std::ceil(std::log2(P));
    const double steps = allgather_ == "ring" ? P - 1 : log_steps;
    ClosedForm cf;
    cf.bytes_sent_per_rank = 4 * (P - 1) + in.k * (P - 1) * (in.wire.index_bytes + in.wire.value_bytes);
    cf.bytes_recv_per_rank = cf.bytes_sent_per_rank;
    cf.time = (log_steps + 2 * steps) * in.alpha + cf.bytes_recv_per_rank * in.seconds_per_byte;
    cf.messages = P * (log_steps + 2 * steps);
    cf.formula = allgather_ == "ring" ? "(ceil(log2 P) + 2(P-1)) alpha + (4 + k e)(P-1) beta"
                                      : "3 ceil(log2 P) alpha + (4 + k e)(P-1) beta";
    return cf;
  }

  // After its values arrive every rank holds four pointers per rank: its size, indices, values and the rejoined
  // selection (16 bytes each, 64 P^2 in all, measured with massif at P = 1024); Bruck's bundles in flight add up
  // to 16 P^2 more.
  std::vector<HeldMemory> held_memory(const CostInputs& in) const override
  {
    const double parts = static_cast<double>(in.ranks) * in.ranks;
    if (allgather_ == "ring")
      return {
          {"sizes, indices, values and selections gathered (64 P^2 bytes)", 4 * kRingAllgatherBytesPerPart * parts}};
    return {{"sizes, indices, values and selections gathered, Bruck's bundles (80 P^2 bytes)",
             (3 * kRingAllgatherBytesPerPart + kBruckAllgatherBytesPerPart) * parts}};
  }

  std::shared_ptr<const SparseVector> allreduce(Communicator& comm, const SparseInput& input, SparseRankState*,
                                                SparseReport&) const override
  {
    const auto& mine = input.local_selection;
    // Phase 1: every rank learns every selection's size (the allgatherv's receive counts).
    Gathered<Count> sizes;
    {
      auto scope = comm.phase("sizes");
      const Count size{static_cast<std::int64_t>(mine->size())};
      sizes = bruck_allgather(comm, std::make_shared<const Count>(size), kSizesTag, same_bytes_as(comm, size));
    }
    auto array_bytes = [&](int element_bytes) {
      return [&sizes, element_bytes](int q) { return static_cast<Bytes>(sizes[q]->value) * element_bytes; };
    };
    // Phase 2: the indices of every selection.
    Gathered<IndicesOf<SparseVector>> indices;
    {
      auto scope = comm.phase("allgather_indices");
      indices = allgather(comm, std::make_shared<const IndicesOf<SparseVector>>(IndicesOf<SparseVector>{mine}),
                          kIndicesTag, array_bytes(comm.wire().index_bytes));
    }
    // Phase 3: their values; each rank's indices and values make its selection again (in a simulation both
    // arrays are the one shared vector).
    Gathered<SparseVector> gathered(comm.size());
    {
      auto scope = comm.phase("allgather_values");
      const auto values = allgather(comm, std::make_shared<const ValuesOf<SparseVector>>(ValuesOf<SparseVector>{mine}),
                                    kValuesTag, array_bytes(comm.wire().value_bytes));
      for (std::size_t owner = 0; owner < values.size(); ++owner)
        gathered[owner] = rejoined(*indices[owner], *values[owner]);
    }
    // Phase 4: the union sum in rank order (the same parts on every rank: computed once for all).
    return union_sum_of_gathered(comm, gathered);
  }

private:
  template <class T>
  Gathered<T> allgather(Communicator& comm, std::shared_ptr<const T> mine, Tag tag_base,
                        const PartBytes& part_bytes) const
  {
    return allgather_ == "ring" ? ring_allgather(comm, std::move(mine), tag_base)
                                : bruck_allgather(comm, std::move(mine), tag_base, part_bytes);
  }

  std::string allgather_;
};

} // namespace

SPARSIM_ALGORITHM_FILE(gaussiank)
{
  return {algorithm_entry<Gaussiank>(
      Gaussiank::kName, "threshold from a normal fit of acc, allgatherv of the selections, union sum",
      [](JsonReader& params) {
        return std::make_unique<Gaussiank>(params.get_enum("allgather", {"ring", "recursive_doubling"}, "ring"));
      })};
}

} // namespace sparsim
