// Dense ring allreduce: a ring reduce-scatter followed by a ring allgather (Patarasuk and Yuan, 2009;
// the shape NCCL and MPI libraries use for large messages).
//
// The vector is cut into P near-equal blocks. In reduce-scatter step s, rank r sends block (r - s) mod P to
// its right neighbour and adds the block (r - s - 1) mod P arriving from its left; after P-1 steps rank r
// holds the full sum of block (r + 1) mod P. The allgather then passes the reduced blocks around the ring
// in P-1 more steps. Cost: 2(P-1) alpha + 2 (n/P)(P-1) w beta with w bytes per value.
#include "algorithms/algorithm.hpp"
#include "algorithms/collectives.hpp"
#include "algorithms/registry.hpp"

#include <fmt/format.h>

namespace sparsim {
namespace {

class DenseRing final : public DenseAllreduce {
public:
  static constexpr std::string_view kName = "dense_ring";
  std::string name() const override { return std::string(kName); }
  nlohmann::json params() const override { return nlohmann::json::object(); }

  ClosedForm closed_form(const CostInputs& in) const override
  {
    const double P = in.ranks;
    const double block_bytes = static_cast<double>(in.n) / P * in.wire.value_bytes;
    ClosedForm cf;
    cf.time = 2 * (P - 1) * (in.alpha + block_bytes * in.seconds_per_byte);
    cf.bytes_sent_per_rank = 2 * (P - 1) * block_bytes;
    cf.bytes_recv_per_rank = cf.bytes_sent_per_rank;
    cf.messages = 2 * P * (P - 1);
    cf.formula = "2(P-1)(alpha + (n/P) w beta)";
    return cf;
  }

  void allreduce(Communicator& comm, DenseVector& data) const override
  {
    const int P = comm.size();
    if (P == 1)
      return;
    const RankGroup ring = RankGroup::all(comm);
    const DenseRange whole{0, data.length};

    // Phase 1, reduce-scatter: pass partial sums to the right, add what arrives from the left.
    {
      auto scope = comm.phase("reduce_scatter");
      dense_ring_reduce_scatter(comm, data, whole, ring, 0);
    }
    // Phase 2, allgather: pass the reduced blocks around the ring, overwriting the stale copies.
    {
      auto scope = comm.phase("allgather");
      dense_ring_allgather(comm, data, whole, ring, static_cast<Tag>(P));
    }
  }
};

} // namespace

SPARSIM_ALGORITHM_FILE(dense_ring)
{
  return {algorithm_entry<DenseRing>(DenseRing::kName, "ring reduce-scatter then ring allgather, P-1 steps each",
                                     [](JsonReader&) { return std::make_unique<DenseRing>(); })};
}

} // namespace sparsim
