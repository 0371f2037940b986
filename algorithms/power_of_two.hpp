// Running power-of-two algorithms on any P, the way MPICH does: with p2 the largest power of two <= P and
// rem = P - p2, the first 2*rem ranks pair up as (2i, 2i+1). Before the algorithm the even rank of each pair
// hands its whole vector to the odd one ("fold") and sits out; the odd ranks and all ranks >= 2*rem take
// part as virtual ranks 0..p2-1; afterwards the odd rank hands the result back ("unfold").
// Each fold and unfold costs one message of the whole vector: 2 (alpha + n w beta) more when rem > 0.
// Written once for any payload (fold, unfold, rounds); dense vectors (fold_dense, unfold_dense) here, sparse
// vectors in sparcml_ssar_recursive_double.cpp, integers in collectives.hpp (allreduce_sum).
#pragma once

#include "algorithms/steps.hpp"
#include "sim/comm/communicator.hpp"
#include "sim/data/dense.hpp"

#include <memory>
#include <type_traits>

namespace sparsim {

class PowerOfTwoFold {
public:
  explicit PowerOfTwoFold(int ranks)
      : p2_(1)
  {
    while (p2_ * 2 <= ranks)
      p2_ *= 2;
    rem_ = ranks - p2_;
  }
  int p2() const { return p2_; }
  int rem() const { return rem_; }
  int log2_p2() const
  {
    int l = 0;
    while ((1 << l) < p2_)
      ++l;
    return l;
  }
  // Whether rank r is in one of the first rem pairs, which fold and unfold.
  bool in_pair(int r) const { return r < 2 * rem_; }
  // Virtual rank of a real rank, or -1 for ranks that sit out.
  int virtual_rank(int r) const { return in_pair(r) ? (r % 2 == 1 ? r / 2 : -1) : r - rem_; }
  int real_rank(int vr) const { return vr < rem_ ? 2 * vr + 1 : vr + rem_; }

  // Fold, any payload: the even rank of each pair sends payload() (a std::shared_ptr<const T>) to its odd
  // neighbour; the odd rank reduces what it receives into its own data with reduce(const T&), which returns
  // the memory traffic of that work, charged by reduce_charged. Ranks outside the pairs do nothing.
  template <class Payload, class Reduce>
  void fold(Communicator& comm, Tag tag, Payload&& payload, Reduce&& reduce) const
  {
    using T = std::remove_const_t<typename std::invoke_result_t<Payload&>::element_type>;
    const int r = comm.rank();
    if (!in_pair(r))
      return;
    if (r % 2 == 0) {
      comm.send(r + 1, tag, payload());
    } else {
      const auto received = comm.recv<T>(r - 1, tag);
      reduce_charged(comm, [&] { return reduce(*received); });
    }
  }
  // Unfold, any payload: the odd rank of each pair sends payload() back to its even neighbour, which hands the
  // received std::shared_ptr<const T> to take(). Ranks outside the pairs do nothing.
  template <class Payload, class Take> void unfold(Communicator& comm, Tag tag, Payload&& payload, Take&& take) const
  {
    using T = std::remove_const_t<typename std::invoke_result_t<Payload&>::element_type>;
    const int r = comm.rank();
    if (!in_pair(r))
      return;
    if (r % 2 == 1)
      comm.send(r - 1, tag, payload());
    else
      take(comm.recv<T>(r + 1, tag));
  }
  // The recursive-doubling rounds of virtual rank vr (>= 0): round(partner, round, distance) for distance
  // 1, 2, 4 .. < p2, the partner being the real rank of virtual rank vr ^ distance.
  template <class Round> void rounds(int vr, Round&& round) const
  {
    for (int distance = 1, i = 0; distance < p2_; distance *= 2, ++i)
      round(static_cast<RankId>(real_rank(vr ^ distance)), i, distance);
  }

  // Dense vectors, in phases "fold" and "unfold" (only on the ranks of the pairs): the odd rank adds the
  // even rank's vector (charged like every dense addition: two fp32 read, one written per entry), and later
  // the even rank overwrites its vector with the result (free).
  void fold_dense(Communicator& comm, DenseVector& data, Tag tag) const
  {
    if (!in_pair(comm.rank()))
      return;
    auto scope = comm.phase("fold");
    fold(
        comm, tag, [&] { return extract_block(data, 0, data.length); },
        [&](const DenseBlock& block) {
          accumulate_block(data, 0, block);
          return accumulate_traffic(block);
        });
  }
  void unfold_dense(Communicator& comm, DenseVector& data, Tag tag) const
  {
    if (!in_pair(comm.rank()))
      return;
    auto scope = comm.phase("unfold");
    unfold(
        comm, tag, [&] { return extract_block(data, 0, data.length); },
        [&](const std::shared_ptr<const DenseBlock>& block) { overwrite_block(data, 0, *block); });
  }

private:
  int p2_;
  int rem_ = 0;
};

} // namespace sparsim
