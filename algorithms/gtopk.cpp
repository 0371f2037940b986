// gTopk: a sparse allreduce that keeps k elements at every step (Shi, Wang, Chu, Li, "A Distributed
// Synchronous SGD Algorithm with Global Top-k Sparsification for Low Bandwidth Networks", ICDCS 2019).
// Every rank contributes its exact local top-k. A reduction tree of ceil(log2 P) rounds follows: in round i
// the active ranks pair up at distance 2^i, the upper one of each pair sends its current (index, value) set
// to the lower one, which adds the common indices and re-selects the top-k by magnitude. Rank 0, the root,
// then broadcasts the final k pairs down the same tree. Values a rank selected that drop out at some merge
// are lost for this iteration and stay in that rank's residual (error feedback), so the result is neither
// the union sum nor the top-k of the union sum (tests/test_gtopk.cpp shows a case).
//
// Any P: the tree is a binomial tree rooted at rank 0. In round i a rank r with r mod 2^(i+1) = 0 receives
// from r + 2^i when that rank exists, and r mod 2^(i+1) = 2^i sends to r - 2^i; a rank with no partner in
// a round keeps its set. For P = 2^m this is exactly the reference code's pairing; for other P the tree is
// unbalanced but still has ceil(log2 P) rounds, so no fold steps are needed. The broadcast is the binomial
// broadcast of MPICH's short-message Bcast: the same tree walked from the root down.
//
// Cost on a contention-free network, every set holding k pairs of e bytes: the root receives one message
// per round and then sends one per broadcast step, all on the critical path:
//   2 ceil(log2 P) alpha + 2 ceil(log2 P) k e beta   (the paper's 2 log P alpha + 4k log P beta in words).
// The root is the busiest rank: ceil(log2 P) k e bytes sent and as many received; other ranks move fewer.
//
// Deterministic merge: a receiver adds the received set to its own as own[i] + received[i] (merge_sum) and
// re-selects with top_k_by_magnitude (ties in magnitude: smaller index first), so every run and every rank
// get bitwise the same result.
//
// The reference code sends float64 (index, value) pairs, 16 bytes per element; the paper counts int32 +
// fp32 (8 bytes). The wire format is the workload's (workload.index_bytes / value_bytes): 8 + 8 models the
// reference code.
#include "algorithms/algorithm.hpp"
#include "algorithms/registry.hpp"
#include "algorithms/steps.hpp"
#include "sim/data/sparse_ops.hpp"

namespace sparsim {
namespace {

constexpr Tag kReduceTag = 0;
constexpr Tag kBroadcastTag = 1;

// Number of tree rounds: ceil(log2 P), 0 for P = 1.
int tree_rounds(int ranks)
{
  int rounds = 0;
  while ((1 << rounds) < ranks)
    ++rounds;
  return rounds;
}

class GTopk final : public SparseAllreduce {
public:
  static constexpr std::string_view kName = "gtopk";
  std::string name() const override { return std::string(kName); }
  nlohmann::json params() const override { return nlohmann::json::object(); }
  ResidualRule residual_rule() const override { return ResidualRule::selected_in_result; }
  ResultSemantics result_semantics() const override { return ResultSemantics::reselected; }

  ClosedForm closed_form(const CostInputs& in) const override
  {
    const double rounds = tree_rounds(in.ranks);
    const double set_bytes = static_cast<double>(in.k) * (in.wire.index_bytes + in.wire.value_bytes);
    ClosedForm cf;
    cf.bytes_sent_per_rank = rounds * set_bytes; // the root: one message per broadcast step
    cf.bytes_recv_per_rank = rounds * set_bytes; // the root: one message per reduction round
    cf.time = 2 * rounds * in.alpha + 2 * rounds * set_bytes * in.seconds_per_byte;
    cf.messages = 2.0 * (in.ranks - 1); // every rank but the root sends once up the tree and receives once down
    cf.formula = "2 ceil(log2 P) alpha + 2 ceil(log2 P) k e beta";
    return cf;
  }

  // Nothing that grows with P: a rank holds its set and the one it merges (O(k), counted with the selections).
  std::vector<HeldMemory> held_memory(const CostInputs&) const override { return {}; }

  std::shared_ptr<const SparseVector> allreduce(Communicator& comm, const SparseInput& input, SparseRankState*,
                                                SparseReport& report) const override
  {
    const int P = comm.size();
    const int r = comm.rank();
    const std::size_t k = input.k;
    // Local top-k: the rank loop hands the exact top-k; a larger selection (a reused threshold) is cut to
    // its top-k, so that every set on the tree holds at most k pairs.
    auto current = input.local_selection;
    if (current->size() > k)
      reduce_charged(comm, [&] {
        current = std::make_shared<const SparseVector>(top_k_by_magnitude(*current, k));
        return pair_traffic(input.local_selection->size(), k);
      });

    // Reduction tree: receive from r + 2^i while r's low i+1 bits are zero, then send to the parent and stop.
    int distance = 1;
    {
      auto scope = comm.phase("tree_reduce");
      for (; distance < P; distance *= 2) {
        if (r % (2 * distance) != 0) {
          comm.send(r - distance, kReduceTag, current);
          break;
        }
        if (r + distance < P)
          reduce_charged(comm, [&] { // charged once the received set and the sum are released
            const auto received = comm.recv<SparseVector>(r + distance, kReduceTag);
            const SparseVector merged = merge_sum(*current, *received);
            const std::size_t inputs = current->size() + received->size();
            current = std::make_shared<const SparseVector>(top_k_by_magnitude(merged, k));
            // The merge reads both sets and writes the sum; the re-selection reads the sum and writes k.
            return pair_traffic(inputs + merged.size(), merged.size() + current->size());
          });
      }
    }

    // Broadcast down the same tree: a non-root rank receives from its parent r - 2^j (2^j = distance, the
    // lowest set bit of r), then every rank forwards to its children r + 2^m, farthest first.
    {
      auto scope = comm.phase("broadcast");
      if (r != 0)
        current = comm.recv<SparseVector>(r - distance, kBroadcastTag);
      for (distance /= 2; distance >= 1; distance /= 2)
        if (r + distance < P)
          comm.send(r + distance, kBroadcastTag, current);
    }
    report.global_selected = current->size();
    return current;
  }
};

} // namespace

SPARSIM_ALGORITHM_FILE(gtopk)
{
  return {algorithm_entry<GTopk>(GTopk::kName,
                                 "local top-k, reduction tree re-selecting top-k at each merge, broadcast",
                                 [](JsonReader&) { return std::make_unique<GTopk>(); })};
}

} // namespace sparsim
