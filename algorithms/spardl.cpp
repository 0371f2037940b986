// SparDL (Zhao et al., "SparDL: Distributed Deep Learning Training with Efficient Sparse Communication", arXiv
// 2304.00737v2; public code ZJU-DAILY/SparDL, allreducer.py): a sparse allreduce that selects within the
// collective, so that what a step drops is never lost. Every rank hands over its dense acc (residual + gradient)
// and leaves it as its new residual. The P ranks form d teams of Q = P/d consecutive ranks (parameter "teams", a
// divisor of P; 1 by default, as the public code fixes it); team member q is rank t Q + q of team t. The gradient
// is cut into Q blocks of C = ceil(n/Q) entries (the last ones shorter), each with its share k_b = floor(k/Q) of
// k.
//
// Phases (R = ceil(log2 Q), D = ceil(log2 d), e = index + value bytes; costs on a contention-free network):
// 1. spar_reduce_scatter: a reduce-scatter of the blocks within each team by recursive halving, any Q. Round i
//    has gap g_i = 2^(R-1-i) and s_i blocks (s_0 = Q - 2^(R-1), then s_i = g_i): member q sends member q + g_i
//    the blocks q + g_i + j (j < s_i, mod Q) in one message and receives from member q - g_i the blocks q + j,
//    which it adds into its acc. A block leaves as the top-k_b of the sender's acc over it (its own values plus
//    the partial sums it received), and those entries are zeroed in acc: what the step drops stays in the
//    dropping rank's residual (global residual collection). Member q ends holding block q summed over its team.
//                                                                 R alpha + (Q-1) k_b e beta
// 2. across_teams (d > 1 only): member q keeps the top-h of block q and allgathers it (Bruck) among the d
//    members q of all teams, which sum the d parts; a sum of more than k_b entries keeps its top-k_b, and each
//    of the d members takes 1/d of what is dropped back into its residual. h adapts from one iteration to the
//    next as in the public code: it starts at floor(k_b/d) with a step of floor((k_b - h)/100), moves by the
//    step, doubles the step every second iteration while the sum stays on one side of k_b, halves and turns it
//    when the sum crosses, and never falls below floor(k_b/d).  D alpha + (d-1) h e beta
// 3. spar_all_gather: Bruck's allgather of the Q final blocks within each team; U is the blocks in order.
//                                                                 R alpha + (Q-1) b e beta
//    (b = the final block's size: k_b with d = 1; up to k_b, d h when the teams' top-h are disjoint, with d > 1).
// With d = 1 every block message holds exactly min(k_b, block length) pairs whatever the data (a top-k_b always
// has k_b entries, zeros included, as torch.topk's), k_b when no block is shorter: 2 R alpha + 2 (P-1) k_b e beta,
// about 2k e beta (the paper's 4k(P-1)/P words counts an index and a value as two words). Teams shorten the latency to
// 2R + D rounds of the smaller Q and add phase 2's bytes.
//
// The block selections are the local top-k moved into the collective: each is charged as phase "selection"
// under compute.selection, as the driver's exact top-k is (one read of the block, the pairs written; a rank
// selects each of the Q blocks once: 4n + 8 Q k_b bytes with d = 1; with teams its own block's top-h replaces
// the top-k_b, 4n + 8 ((Q-1) k_b + h)). Received
// pairs added into acc (16 bytes a pair: a pair read, a float read and written) and the sums across teams are
// reductions, under compute.reduction. The driver's own selection phase costs nothing for SparDL.
//
// LIMITATIONS (against the paper and the public code):
// - the public code sends the blocks of a round one after another (Q-1 steps of three messages each: indices,
//   values, size) and selects each block just before sending it; here a round is one message with its s_i blocks
//   (the paper's rounds: the same bytes, R instead of 3(Q-1) messages), selected before the round (the same
//   values: a round never receives a block it sends). Its allgathers likewise send a block at a time (indices
//   and values apart, the sizes known): here one message per Bruck step;
// - the public code's final residual differs outside U: for an index its block's result does not hold, it
//   restores the rank's own acc (the partial sums received there are discarded, what the rank sent is kept); here
//   the global residual collection holds everywhere. Both keep sum_r acc_r = U + sum_r residual_r;
// - the public code's blocks are its layers laid in registration order into Q groups of ceil(n/Q) entries; here
//   they are cut from sparsim's flattened gradient (the model table's order), so the blocks hold other layers;
// - the public code fixes d = 1 (Group_num = 1), so its teams path never runs; teams here follow that path
//   (the share h and its rule) with the top-h selection its commented-out lines make;
// - h moves by steps of floor((k_b - h_0)/100), as in the public code: with k_b - h_0 < 100 the step is 0 and h
//   stays at floor(k_b/d) for good; with k_b < d it is 0 and U is empty (k too small for the teams);
// - k_b = floor(k/Q) where the public code takes floor(C density): equal up to rounding.
#include "algorithms/algorithm.hpp"
#include "algorithms/collectives.hpp"
#include "algorithms/registry.hpp"
#include "algorithms/steps.hpp"
#include "sim/base/json_reader.hpp"
#include "sim/data/sparse_ops.hpp"
#include "sim/data/topk.hpp"

#include <cmath>
#include <fmt/format.h>

namespace sparsim {
namespace {

constexpr Tag kReduceScatterTag = 0;   // + round
constexpr Tag kAcrossTeamsTag = 1'000; // + step
constexpr Tag kAllGatherTag = 2'000;   // + step

int ceil_log2(int x)
{
  int rounds = 0;
  while ((1 << rounds) < x)
    ++rounds;
  return rounds;
}

// The Q blocks of [0, n): block b is [begin(b), end(b)), C = ceil(n/Q) entries or fewer at the end.
struct Blocks {
  std::uint64_t n = 0;
  std::uint64_t length = 0; // C
  Blocks(std::uint64_t n_, int Q)
      : n(n_)
      , length((n_ + Q - 1) / Q)
  {
  }
  std::uint64_t begin(int b) const { return std::min(n, b * length); }
  std::uint64_t end(int b) const { return std::min(n, (b + 1) * length); }
};

// One round of the recursive halving among Q members: the distance to the partner and the blocks sent.
struct HalvingRound {
  int gap = 0;
  int blocks = 0;
};
std::vector<HalvingRound> halving_rounds(int Q)
{
  const int R = ceil_log2(Q);
  std::vector<HalvingRound> rounds;
  for (int i = 0; i < R; ++i) {
    const int gap = 1 << (R - 1 - i);
    rounds.push_back({gap, i == 0 ? Q - gap : gap});
  }
  return rounds;
}

// What a rank keeps between iterations with teams: the size h of its share across teams and how h moves.
struct SparDLState final : SparseRankState {
  std::int64_t h = -1; // -1: not set yet (the first iteration sets it from k)
  std::int64_t step = 0;
  bool inertia = false;
};

// The top-`k` of acc over [begin, end) by magnitude (global indices), zeroed in acc, which keeps the rest.
// Charged under compute.selection as the driver's exact top-k is: one read of the block and the pairs written.
std::shared_ptr<const SparseVector> take_top(Communicator& comm, std::span<float> acc, std::uint64_t begin,
                                             std::uint64_t end, std::uint64_t k)
{
  return select_charged(comm, [&] {
    const std::span<float> block = acc.subspan(begin, end - begin);
    auto top = std::make_shared<SparseVector>(select_topk(block, k));
    for (Index& i : top->indices) {
      block[i] = 0.0f;
      i += static_cast<Index>(begin);
    }
    const Bytes traffic = 4 * block.size() + 8 * top->size();
    return Reduced{std::shared_ptr<const SparseVector>(std::move(top)), traffic};
  });
}

// acc[i] += scale * value for every pair of `part`, charged as 16 bytes a pair.
void add_into_acc(Communicator& comm, std::span<float> acc, const SparseVector& part, float scale = 1.0f)
{
  reduce_charged(comm, [&] {
    for (std::size_t e = 0; e < part.size(); ++e)
      acc[part.indices[e]] += part.values[e] * scale; // exact for scale 1
    return Bytes{16 * part.size()};
  });
}

// The entries of `all` whose index is not in `some` (a subset of them; both sorted by index).
SparseVector entries_not_in(const SparseVector& all, const SparseVector& some)
{
  SparseVector rest;
  rest.reserve(all.size() - some.size());
  std::size_t s = 0;
  for (std::size_t e = 0; e < all.size(); ++e) {
    if (s < some.size() && some.indices[s] == all.indices[e]) {
      ++s;
      continue;
    }
    rest.indices.push_back(all.indices[e]);
    rest.values.push_back(all.values[e]);
  }
  return rest;
}

// Phase 2's sum of the d shares of one block: kept (at most k_b entries) and dropped.
struct TeamsSum {
  SparseVector kept;
  SparseVector dropped;
  std::size_t summed = 0; // entries of the sum before the re-selection
};

class SparDL final : public SparseAllreduce {
public:
  explicit SparDL(int teams)
      : teams_(teams)
  {
  }

  static constexpr std::string_view kName = "spardl";
  std::string name() const override { return std::string(kName); }
  nlohmann::json params() const override { return {{"teams", teams_}}; }
  ResidualRule residual_rule() const override { return ResidualRule::kept_by_algorithm; }
  ResultSemantics result_semantics() const override { return ResultSemantics::reselected; }
  LocalSelection default_local_selection() const override { return LocalSelection::within_collective; }
  std::unique_ptr<SparseRankState> make_rank_state(RankId, int, std::uint64_t) const override
  {
    return std::make_unique<SparDLState>();
  }

  void check_ranks(const RankLayout& layout) const override
  {
    const int ranks = layout.ranks;
    if (ranks % teams_ != 0)
      throw ConfigError("algorithm.teams", std::to_string(teams_),
                        fmt::format("a divisor of ranks ({}): teams of equal size", ranks));
  }

  // With d = 1 exact for any data when no block is shorter than k_b; with d > 1 also only for teams whose
  // top-h are disjoint, h = floor(k_b/d) (the first iteration's).
  ClosedForm closed_form(const CostInputs& in) const override
  {
    const int d = teams_;
    const int Q = in.ranks / d;
    const double R = ceil_log2(Q);
    const double D = ceil_log2(d);
    const double kb = static_cast<double>(in.k / Q);
    const double h = std::floor(kb / d);
    const double final_block = d == 1 ? kb : d * h;
    const double e = in.wire.index_bytes + in.wire.value_bytes;
    ClosedForm cf;
    cf.bytes_sent_per_rank = ((Q - 1) * kb + (d - 1) * h + (Q - 1) * final_block) * e;
    cf.bytes_recv_per_rank = cf.bytes_sent_per_rank;
    cf.time = (2 * R + D) * in.alpha + cf.bytes_recv_per_rank * in.seconds_per_byte;
    cf.messages = in.ranks * (2 * R + D);
    cf.formula = d == 1 ? "2 ceil(log2 P) alpha + 2 (P-1) floor(k/P) e beta"
                        : "(2 ceil(log2 Q) + ceil(log2 d)) alpha + ((Q-1) k_b + (d-1) h + (Q-1) d h) e beta";
    return cf;
  }

  // The team's allgather of its final blocks (every rank a pointer per block of its team, Q = P/d of them);
  // the reduce-scatter's bundles hold O(P) pointers.
  std::vector<HeldMemory> held_memory(const CostInputs& in) const override
  {
    const double P = in.ranks;
    return {{"gathered blocks and Bruck's bundles (32 P Q bytes)", kBruckAllgatherBytesPerPart * P * (P / teams_)}};
  }

  std::shared_ptr<const SparseVector> allreduce(Communicator& comm, const SparseInput& input, SparseRankState* state,
                                                SparseReport& report) const override
  {
    const int d = teams_;
    const int Q = comm.size() / d;
    const RankGroup team{comm.rank() / Q * Q, 1, Q};
    const int q = team.index_of(comm.rank());
    const Blocks blocks(input.n, Q);
    const std::uint64_t kb = input.k / Q;
    const std::span<float> acc = input.acc;
    // The bytes of block b's top-k_b: min(k_b, its length) entries whatever the data.
    const PartBytes top_bytes = [&](int b) {
      return sparse_wire_bytes(std::min(kb, blocks.end(b) - blocks.begin(b)), comm.wire());
    };

    // Phase 1: the team's reduce-scatter, each block re-sparsified by its sender.
    std::shared_ptr<const SparseVector> final_block;
    {
      auto scope = comm.phase("spar_reduce_scatter");
      const auto rounds = halving_rounds(Q);
      for (std::size_t i = 0; i < rounds.size(); ++i) {
        const auto [gap, count] = rounds[i];
        auto bundle = std::make_shared<Bundle<SparseVector>>();
        for (int j = 0; j < count; ++j) {
          const int b = (q + gap + j) % Q;
          bundle->owners.push_back(b);
          bundle->parts.push_back(take_top(comm, acc, blocks.begin(b), blocks.end(b), kb));
        }
        // In come blocks q .. q + count - 1, each its sender's top-k_b.
        const auto incoming = sendrecv_bundle<SparseVector>(
            comm, team.member((q + gap) % Q), std::move(bundle), team.member((q - gap + Q) % Q),
            kReduceScatterTag + static_cast<Tag>(i), q, count, Q, top_bytes);
        for (const auto& part : incoming->parts)
          add_into_acc(comm, acc, *part);
      }
      if (d == 1) // block q is final: its top-k_b
        final_block = take_top(comm, acc, blocks.begin(q), blocks.end(q), kb);
    }

    // Phase 2 (teams): the d members holding block q share their top-h and sum them.
    if (d > 1) {
      auto scope = comm.phase("across_teams");
      auto& share = static_cast<SparDLState&>(*state);
      if (share.h < 0) {
        share.h = static_cast<std::int64_t>(kb) / d;
        share.step = (static_cast<std::int64_t>(kb) - share.h) / 100;
      }
      const auto mine = take_top(comm, acc, blocks.begin(q), blocks.end(q), static_cast<std::uint64_t>(share.h));
      // Every part is a top-h of block q (the d members keep the same h).
      const auto parts = bruck_allgather(comm, mine, kAcrossTeamsTag, RankGroup{q, Q, d}, same_bytes_as(comm, *mine));
      const auto sum = reduce_charged(comm, [&] {
        auto result = comm.computed_once_by(parts, d, [&] {
          auto out = std::make_shared<TeamsSum>();
          std::vector<SparseView> views;
          for (const auto& part : parts)
            views.emplace_back(*part);
          SparseVector summed = sum_in_order(views);
          out->summed = summed.size();
          if (summed.size() > kb) {
            out->kept = top_k_by_magnitude(summed, kb);
            out->dropped = entries_not_in(summed, out->kept);
          } else {
            out->kept = std::move(summed);
          }
          return std::shared_ptr<const TeamsSum>(std::move(out));
        });
        const Bytes traffic = pair_traffic(total_pairs(parts), result->summed) +
                              (result->summed > kb ? pair_traffic(result->summed, result->summed) : 0);
        return Reduced{std::move(result), traffic};
      });
      add_into_acc(comm, acc, sum->dropped, 1.0f / static_cast<float>(d));
      adapt_share(share, sum->summed > kb, kb);
      final_block = std::shared_ptr<const SparseVector>(sum, &sum->kept);
    }

    // Phase 3: the team gathers the Q final blocks; U is their concatenation (computed once: every team gathers
    // the same blocks, shared across teams by phase 2).
    auto scope = comm.phase("spar_all_gather");
    // With d = 1 every final block is its top-k_b; with teams its size is the sum's, which no receiver knows.
    const auto gathered = bruck_allgather(comm, final_block, kAllGatherTag, team, d == 1 ? top_bytes : PartBytes());
    auto result = reduce_charged(comm, [&] {
      auto concatenated = comm.computed_once_by(gathered, comm.size(), [&] {
        auto out = std::make_shared<SparseVector>();
        out->reserve(total_pairs(gathered));
        for (const auto& part : gathered) {
          out->indices.insert(out->indices.end(), part->indices.begin(), part->indices.end());
          out->values.insert(out->values.end(), part->values.begin(), part->values.end());
        }
        return std::shared_ptr<const SparseVector>(std::move(out));
      });
      const Bytes traffic = pair_traffic(concatenated->size(), concatenated->size());
      return Reduced{std::move(concatenated), traffic};
    });
    report.global_selected = result->size();
    return result;
  }

private:
  // The public code's rule for h after an iteration whose sum of shares held more than k_b entries (`above`)
  // or not: keep moving while the sum stays on the side the step moves away from (doubling the step every
  // second time), else turn and halve the step.
  void adapt_share(SparDLState& share, bool above, std::uint64_t kb) const
  {
    if (above != (share.step > 0)) {
      if (share.inertia)
        share.step *= 2;
      share.inertia = !share.inertia;
    } else {
      share.step = std::abs(share.step) > 1 ? -share.step / 2 : -share.step; // Python's int(-0.5 step)
      share.inertia = false;
    }
    share.h = std::max(share.h + share.step, static_cast<std::int64_t>(kb) / teams_);
  }

  int teams_;
};

} // namespace

SPARSIM_ALGORITHM_FILE(spardl)
{
  return {algorithm_entry<SparDL>(
      SparDL::kName,
      "reduce-scatter re-sparsifying each block, residuals kept where dropped, allgather within teams (teams)",
      [](JsonReader& params) { return std::make_unique<SparDL>(static_cast<int>(params.get_int("teams", 1, 1))); })};
}

} // namespace sparsim
