// Running power-of-two algorithms on any P, the way MPICH does: with p2 the largest power of two <= P and
// rem = P - p2, the first 2*rem ranks pair up as (2i, 2i+1). Before the algorithm the even rank of each pair
// hands its whole vector to the odd one ("fold") and sits out; the odd ranks and all ranks >= 2*rem take
// part as virtual ranks 0..p2-1; afterwards the odd rank hands the result back ("unfold").
// Each fold and unfold costs one message of the whole vector: 2 (alpha + n w beta) more when rem > 0.
#pragma once

#include "sim/comm/communicator.hpp"
#include "sim/data/dense.hpp"

namespace sparsim {

class PowerOfTwoFold {
public:
  explicit PowerOfTwoFold(int ranks) : p2_(1)
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
  // Virtual rank of a real rank, or -1 for ranks that sit out.
  int virtual_rank(int r) const { return r < 2 * rem_ ? (r % 2 == 1 ? r / 2 : -1) : r - rem_; }
  int real_rank(int vr) const { return vr < rem_ ? 2 * vr + 1 : vr + rem_; }

  // Fold: even ranks below 2*rem send their vector to their odd neighbour, which adds it.
  void fold(Communicator& comm, DenseVector& data, Tag tag) const
  {
    const int r = comm.rank();
    if (r >= 2 * rem_)
      return;
    auto scope = comm.phase("fold");
    if (r % 2 == 0)
      comm.send(r + 1, tag, extract_block(data, 0, data.length));
    else
      accumulate_block(data, 0, *comm.recv<DenseBlock>(r - 1, tag));
  }
  // Unfold: the odd ranks hand the final vector back to their even neighbour.
  void unfold(Communicator& comm, DenseVector& data, Tag tag) const
  {
    const int r = comm.rank();
    if (r >= 2 * rem_)
      return;
    auto scope = comm.phase("unfold");
    if (r % 2 == 1)
      comm.send(r - 1, tag, extract_block(data, 0, data.length));
    else
      overwrite_block(data, 0, *comm.recv<DenseBlock>(r + 1, tag));
  }

private:
  int p2_;
  int rem_ = 0;
};

}  // namespace sparsim
