// SparCML's SSAR_Recursive_double ("sparcml_ssar_recursive_double"; Renggli, Ashkboos, Aghagolzadeh, Alistarh and
// Hoefler, "SparCML: High-Performance Sparse Communication for Machine Learning", SC 2019): a sparse allreduce by
// recursive doubling. Every rank starts from its exact local top-k; in round i it exchanges its whole current sparse
// vector with the rank at distance 2^i and both keep the sum. The vector fills in: with disjoint selections
// it holds min(2^(i+1) k, n) elements after round i. The result is the union sum of all selections
// (no re-selection), so every rank removes all it selected from its residual.
//
// Bitwise identical results: both partners of a round hold the same two vectors and sum them in the same
// order, the lower virtual rank's vector first (merge_sum(lower, upper)), so they compute the same bits and,
// by induction, every rank ends with the same vector. (Each index is a sum of two floats per round, and IEEE
// addition is commutative, so the fixed order makes the reduction tree explicit rather than being needed.)
// The simulator uses that: after round i the 2^(i+1) virtual ranks of a group hold the same vector, and
// every one of them sums the same two payloads in round i+1, so the sum is computed once per group and
// shared (Communicator::computed_once_by); each rank is still charged for its merge (compute.reduction).
//
// Any P: as the paper's MPI setting and algorithms/power_of_two.hpp do for dense vectors, with p2 the largest
// power of two <= P and rem = P - p2, rank 2i (i < rem) first hands its selection to rank 2i+1, which sums
// merge_sum(S_2i, S_2i+1) ("fold"); the p2 remaining ranks run the rounds; afterwards rank 2i+1 hands the
// result back ("unfold"). That costs one message of k elements and one of |U| elements more.
#include "algorithms/algorithm.hpp"
#include "algorithms/power_of_two.hpp"
#include "algorithms/registry.hpp"
#include "algorithms/steps.hpp"
#include "sim/data/sparse_ops.hpp"

#include <algorithm>

namespace sparsim {
namespace {

constexpr Tag kFoldTag = 1000;
constexpr Tag kUnfoldTag = 1001;

class SparcmlRecursiveDouble final : public SparseAllreduce {
public:
  static constexpr std::string_view kName = "sparcml_ssar_recursive_double";
  std::string name() const override { return std::string(kName); }
  nlohmann::json params() const override { return nlohmann::json::object(); }
  ResidualRule residual_rule() const override { return ResidualRule::all_selected; }
  ResultSemantics result_semantics() const override { return ResultSemantics::union_sum; }

  // Worst-case fill-in: the selections are assumed disjoint, so a vector standing for m real ranks holds
  // min(m k, n) elements. Under that assumption the figures are exact on a contention-free network: the
  // group of virtual rank 0 (which holds the folded ranks first) is the largest in every round, so its
  // chain of exchanges is the critical path.
  ClosedForm closed_form(const CostInputs& in) const override
  {
    const PowerOfTwoFold fold(in.ranks);
    const double e = in.wire.index_bytes + in.wire.value_bytes;
    // Elements of a vector standing for `members` real ranks.
    auto filled = [&](int members) {
      return std::min(static_cast<double>(members) * static_cast<double>(in.k), static_cast<double>(in.n));
    };
    // Real ranks behind the virtual ranks [first, first + count).
    auto members = [&](int first, int count) {
      const int doubled = std::clamp(fold.rem() - first, 0, count); // virtual ranks holding a folded pair
      return count + doubled;
    };

    ClosedForm cf;
    std::vector<double> sent(in.ranks, 0);
    std::vector<double> received(in.ranks, 0);
    for (int r = 0; r < 2 * fold.rem(); r += 2) {
      sent[r] += filled(1) * e + filled(in.ranks) * e; // fold out, unfold back in
      received[r] += filled(in.ranks) * e;
      sent[r + 1] += filled(in.ranks) * e;
      received[r + 1] += filled(1) * e;
    }
    if (fold.rem() > 0)
      cf.time += 2 * in.alpha + (filled(1) + filled(in.ranks)) * e * in.seconds_per_byte;
    for (int distance = 1; distance < fold.p2(); distance *= 2) {
      for (int vr = 0; vr < fold.p2(); ++vr) {
        const int own_group = vr / distance * distance;
        const int partner_group = (vr ^ distance) / distance * distance;
        sent[fold.real_rank(vr)] += filled(members(own_group, distance)) * e;
        received[fold.real_rank(vr)] += filled(members(partner_group, distance)) * e;
      }
      cf.time += in.alpha + filled(members(0, distance)) * e * in.seconds_per_byte;
    }
    cf.messages = static_cast<double>(fold.p2()) * fold.log2_p2() + 2 * fold.rem();
    cf.bytes_sent_per_rank = *std::max_element(sent.begin(), sent.end());
    cf.bytes_recv_per_rank = *std::max_element(received.begin(), received.end());
    cf.formula = "sum over log2(p2) rounds i of (alpha + min(2^i k, n) e beta), disjoint selections (worst-case "
                 "fill-in); when P is not a power of two, 2 alpha + (k + min(Pk, n)) e beta to fold and unfold "
                 "and rounds carry the folded pairs";
    return cf;
  }

  // One sum per group of ranks and round (shared by the group): the groups of a round hold P k pairs at most
  // between them, and a round's sums live until the next round's are taken. Nothing grows with P^2.
  std::vector<HeldMemory> held_memory(const CostInputs& in) const override
  {
    const double pairs = 2.0 * in.ranks * static_cast<double>(in.k);
    return {{"group sums (2 P k pairs)", pairs * (in.wire.index_bytes + in.wire.value_bytes)}};
  }

  std::shared_ptr<const SparseVector> allreduce(Communicator& comm, const SparseInput& input, SparseRankState*,
                                                SparseReport&) const override
  {
    const PowerOfTwoFold fold(comm.size());
    const RankId r = comm.rank();
    auto current = input.local_selection;

    // Fold: the even rank of each of the first rem pairs hands its selection to its odd neighbour, which sums
    // merge_sum(S_2i, S_2i+1).
    if (fold.in_pair(r)) {
      auto scope = comm.phase("fold");
      fold.fold(
          comm, kFoldTag, [&] { return current; },
          [&](const SparseVector& received) {
            const std::size_t inputs = received.size() + current->size();
            current = std::make_shared<const SparseVector>(merge_sum(received, *current));
            return pair_traffic(inputs, current->size());
          });
    }

    // Recursive doubling: in round i swap the whole sparse vector with the virtual rank at distance 2^i and
    // sum, the lower virtual rank's vector first.
    const int vr = fold.virtual_rank(r);
    if (vr >= 0) {
      auto scope = comm.phase("exchange");
      fold.rounds(vr, [&](RankId partner, int round, int distance) {
        auto incoming = comm.sendrecv(partner, current, partner, round);
        const bool lower = (vr & distance) == 0;
        const std::vector<std::shared_ptr<const SparseVector>> halves =
            lower ? std::vector{current, incoming} : std::vector{incoming, current};
        // The 2 * distance virtual ranks of this round's group all sum these two payloads.
        current = reduce_charged(comm, [&] {
          auto sum = comm.computed_once_by(halves, 2 * distance, [&] {
            return std::make_shared<const SparseVector>(merge_sum(*halves[0], *halves[1]));
          });
          const Bytes traffic = pair_traffic(halves[0]->size() + halves[1]->size(), sum->size());
          return Reduced{std::move(sum), traffic};
        });
      });
    }

    // Unfold: the odd rank hands the result back to its even neighbour.
    if (fold.in_pair(r)) {
      auto scope = comm.phase("unfold");
      fold.unfold(
          comm, kUnfoldTag, [&] { return current; },
          [&](std::shared_ptr<const SparseVector> result) { current = std::move(result); });
    }
    return current;
  }
};

} // namespace

SPARSIM_ALGORITHM_FILE(sparcml_ssar_recursive_double)
{
  return {algorithm_entry<SparcmlRecursiveDouble>(
      SparcmlRecursiveDouble::kName,
      "SparCML: log P rounds swapping and summing the whole sparse vector (fill-in), union sum",
      [](JsonReader&) { return std::make_unique<SparcmlRecursiveDouble>(); })};
}

} // namespace sparsim
