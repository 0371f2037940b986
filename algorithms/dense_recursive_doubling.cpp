// Dense recursive-doubling allreduce: in round i each rank exchanges its whole current vector with the rank
// at distance 2^i and adds it (Thakur, Rabenseifner and Gropp, "Optimization of Collective Communication
// Operations in MPICH", 2005). log2 P rounds of n elements: log P alpha + n log P w beta for P a power of
// two; other P are folded first (algorithms/power_of_two.hpp).
#include "algorithms/algorithm.hpp"
#include "algorithms/power_of_two.hpp"
#include "algorithms/registry.hpp"

#include <cmath>

namespace sparsim {
namespace {

constexpr Tag kFoldTag = 1000;
constexpr Tag kUnfoldTag = 1001;

class DenseRecursiveDoubling final : public DenseAllreduce {
public:
  static constexpr std::string_view kName = "dense_recursive_doubling";
  std::string name() const override { return std::string(kName); }
  nlohmann::json params() const override { return nlohmann::json::object(); }

  ClosedForm closed_form(const CostInputs& in) const override
  {
    const PowerOfTwoFold fold(in.ranks);
    const double vector_bytes = static_cast<double>(in.n) * in.wire.value_bytes;
    const double message = in.alpha + vector_bytes * in.seconds_per_byte;
    ClosedForm cf;
    const int rounds = fold.log2_p2() + (fold.rem() > 0 ? 2 : 0);
    cf.time = rounds * message;
    cf.bytes_sent_per_rank = (fold.log2_p2() + (fold.rem() > 0 ? 1 : 0)) * vector_bytes;
    cf.bytes_recv_per_rank = cf.bytes_sent_per_rank;
    cf.messages = static_cast<double>(fold.p2()) * fold.log2_p2() + 2 * fold.rem();
    cf.formula = "log2(p2)(alpha + n w beta), + 2(alpha + n w beta) to fold when P is not a power of two";
    return cf;
  }

  void allreduce(Communicator& comm, DenseVector& data) const override
  {
    const PowerOfTwoFold fold(comm.size());
    fold.fold_dense(comm, data, kFoldTag);
    const int vr = fold.virtual_rank(comm.rank());
    if (vr >= 0) {
      // Exchange the whole vector with the partner at distance 2^i and add it, log2 p2 times.
      auto scope = comm.phase("exchange");
      fold.rounds(vr, [&](RankId partner, int round, int) {
        auto incoming = comm.sendrecv(partner, extract_block(data, 0, data.length), partner, round);
        add_received(comm, data, 0, *incoming);
      });
    }
    fold.unfold_dense(comm, data, kUnfoldTag);
  }
};

} // namespace

SPARSIM_ALGORITHM_FILE(dense_recursive_doubling)
{
  return {
      algorithm_entry<DenseRecursiveDoubling>(DenseRecursiveDoubling::kName, "log P rounds exchanging the whole vector",
                                              [](JsonReader&) { return std::make_unique<DenseRecursiveDoubling>(); })};
}

} // namespace sparsim
