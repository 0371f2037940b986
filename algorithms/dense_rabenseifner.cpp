// Rabenseifner's allreduce: a reduce-scatter by recursive halving, then an allgather by recursive doubling
// (R. Rabenseifner, "Optimization of Collective Reduction Operations", ICCS 2004; what vendor MPIs use for
// large messages). With p2 = P a power of two: 2 log2 P alpha + 2 n (P-1)/P w beta. Other P are folded
// first (algorithms/power_of_two.hpp).
//
// The vector is cut into p2 near-equal blocks. A rank's live range starts as all blocks; in the halving
// step at distance d it keeps the half of its range on its side of bit d, sends the other half to the
// partner (virtual rank xor d) and adds the partner's copy of the half it keeps. After log2 p2 steps virtual
// rank v holds the full sum of block v; the doubling steps then swap ranges in the reverse order.
#include "algorithms/algorithm.hpp"
#include "algorithms/power_of_two.hpp"
#include "algorithms/registry.hpp"

namespace sparsim {
namespace {

constexpr Tag kFoldTag = 1000;
constexpr Tag kUnfoldTag = 1001;
constexpr Tag kAllgatherTags = 500;

class DenseRabenseifner final : public DenseAllreduce {
public:
  static constexpr std::string_view kName = "dense_rabenseifner";
  std::string name() const override { return std::string(kName); }
  nlohmann::json params() const override { return nlohmann::json::object(); }

  ClosedForm closed_form(const CostInputs& in) const override
  {
    const PowerOfTwoFold fold(in.ranks);
    const double vector_bytes = static_cast<double>(in.n) * in.wire.value_bytes;
    const double p2 = fold.p2();
    const double scatter_bytes = vector_bytes * (p2 - 1) / p2; // per phase, summed over halving steps
    ClosedForm cf;
    cf.time = 2 * fold.log2_p2() * in.alpha + 2 * scatter_bytes * in.seconds_per_byte;
    cf.bytes_sent_per_rank = 2 * scatter_bytes;
    if (fold.rem() > 0) {
      cf.time += 2 * (in.alpha + vector_bytes * in.seconds_per_byte);
      cf.bytes_sent_per_rank += vector_bytes;
    }
    cf.bytes_recv_per_rank = cf.bytes_sent_per_rank;
    cf.messages = 2.0 * fold.p2() * fold.log2_p2() + 2 * fold.rem();
    cf.formula = "2 log2(p2) alpha + 2 n (p2-1)/p2 w beta, + 2(alpha + n w beta) to fold when P is not a power "
                 "of two";
    return cf;
  }

  void allreduce(Communicator& comm, DenseVector& data) const override
  {
    const PowerOfTwoFold fold(comm.size());
    fold.fold_dense(comm, data, kFoldTag);
    const int vr = fold.virtual_rank(comm.rank());
    if (vr >= 0) {
      const int p2 = fold.p2();
      auto at = [&](int b) { return block_begin(data.length, p2, b); };
      int lo = 0;
      int hi = p2; // live range of blocks [lo, hi)

      // Phase 1, reduce-scatter by recursive halving: keep half, send half, add the partner's half.
      {
        auto scope = comm.phase("reduce_scatter");
        for (int distance = p2 / 2, step = 0; distance >= 1; distance /= 2, ++step) {
          const RankId partner = fold.real_rank(vr ^ distance);
          const bool keep_lower = (vr & distance) == 0;
          const int mid = lo + distance;
          const int send_lo = keep_lower ? mid : lo;
          const int send_hi = keep_lower ? hi : mid;
          lo = keep_lower ? lo : mid;
          hi = keep_lower ? mid : hi;
          auto incoming = comm.sendrecv(partner, extract_block(data, at(send_lo), at(send_hi)), partner, step);
          add_received(comm, data, at(lo), *incoming);
        }
      }
      // Phase 2, allgather by recursive doubling: swap reduced ranges, doubling them each step.
      {
        auto scope = comm.phase("allgather");
        for (int distance = 1, step = 0; distance < p2; distance *= 2, ++step) {
          const RankId partner = fold.real_rank(vr ^ distance);
          const bool partner_above = (vr & distance) == 0;
          auto incoming = comm.sendrecv(partner, extract_block(data, at(lo), at(hi)), partner, kAllgatherTags + step);
          if (partner_above) {
            overwrite_block(data, at(hi), *incoming);
            hi += distance;
          } else {
            lo -= distance;
            overwrite_block(data, at(lo), *incoming);
          }
        }
      }
    }
    fold.unfold_dense(comm, data, kUnfoldTag);
  }
};

} // namespace

SPARSIM_ALGORITHM_FILE(dense_rabenseifner)
{
  return {algorithm_entry<DenseRabenseifner>(DenseRabenseifner::kName,
                                             "recursive-halving reduce-scatter then recursive-doubling allgather",
                                             [](JsonReader&) { return std::make_unique<DenseRabenseifner>(); })};
}

} // namespace sparsim
