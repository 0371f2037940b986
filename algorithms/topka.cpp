// TopkA: every rank selects its exact local top-k and the selections are allgathered; the result is the
// sum of all P*k pairs on the union of their indices (no re-selection, so U has up to min(Pk, n) nonzeros).
// Every rank receives 2k(P-1) words. Source: the TopkA baseline of Li and Hoefler, PPoPP 2022 (after
// Renggli et al.'s allgather-based sparse allreduce).
//
// Parameter "allgather": "ring" (P-1 steps, each forwarding the selection received in the step before:
// (P-1) alpha) or "recursive_doubling" (ceil(log2 P) steps, each sending everything gathered so far;
// done with Bruck's algorithm so that any P works; log P alpha). Both move k(P-1) elements per rank.
#include "algorithms/algorithm.hpp"
#include "sim/sparse_ops.hpp"

#include <cmath>

namespace sparsim {
namespace {

class TopkA final : public SparseAllreduce {
public:
  explicit TopkA(std::string allgather) : allgather_(std::move(allgather)) {}

  std::string name() const override { return "topka"; }
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
    cf.formula = allgather_ == "ring" ? "(P-1) alpha + k(P-1) e beta" : "ceil(log2 P) alpha + k(P-1) e beta";
    return cf;
  }

  SparseVector allreduce(Communicator& comm, const SparseInput& input, SparseRankState*,
                         SparseReport&) const override
  {
    const int P = comm.size();
    const int r = comm.rank();
    // gathered[q] = rank q's selection once it has arrived.
    std::vector<std::shared_ptr<const SparseVector>> gathered(P);
    gathered[r] = std::make_shared<const SparseVector>(*input.local_selection);
    {
      auto scope = comm.phase("allgather");
      if (allgather_ == "ring")
        ring_allgather(comm, gathered);
      else
        bruck_allgather(comm, gathered);
    }
    // Union sum, in rank order on every rank.
    std::vector<const SparseVector*> parts;
    for (const auto& part : gathered)
      parts.push_back(part.get());
    return sum_in_order(parts);
  }

private:
  // Step s: pass on the selection of rank (r - s) mod P to the right, receive (r - s - 1) mod P from the left.
  static void ring_allgather(Communicator& comm, std::vector<std::shared_ptr<const SparseVector>>& gathered)
  {
    const int P = comm.size();
    const int r = comm.rank();
    for (int step = 0; step < P - 1; ++step) {
      const int send_owner = ((r - step) % P + P) % P;
      const int recv_owner = ((r - step - 1) % P + P) % P;
      gathered[recv_owner] = comm.sendrecv((r + 1) % P, gathered[send_owner], (r - 1 + P) % P, step);
    }
  }

  // Bruck: in step j rank r sends the selections of ranks r, r+1, ..., r+c-1 (c = min(2^j, P - 2^j), all
  // mod P) to rank r - 2^j and receives those of r + 2^j, ... from rank r + 2^j.
  static void bruck_allgather(Communicator& comm, std::vector<std::shared_ptr<const SparseVector>>& gathered)
  {
    const int P = comm.size();
    const int r = comm.rank();
    for (int distance = 1, step = 0; distance < P; distance *= 2, ++step) {
      const int count = std::min(distance, P - distance);
      auto bundle = std::make_shared<SparseBundle>();
      for (int i = 0; i < count; ++i) {
        const int owner = (r + i) % P;
        bundle->owners.push_back(owner);
        bundle->parts.push_back(gathered[owner]);
      }
      auto incoming = comm.sendrecv((r - distance + P) % P, std::shared_ptr<const SparseBundle>(bundle),
                                    (r + distance) % P, step);
      for (std::size_t i = 0; i < incoming->owners.size(); ++i)
        gathered[incoming->owners[i]] = incoming->parts[i];
    }
  }

  std::string allgather_;
};

}  // namespace

std::unique_ptr<Algorithm> make_topka(JsonReader& params)
{
  return std::make_unique<TopkA>(params.get_enum("allgather", {"ring", "recursive_doubling"}, "ring"));
}

}  // namespace sparsim
