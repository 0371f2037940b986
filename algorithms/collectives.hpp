// Small building blocks several algorithms share: allgathers of per-rank payloads and an allreduce of a
// few integers. Each is written as its steps; the caller wraps it in a phase. (Reductions charged by
// construction and the exchange in waves: algorithms/steps.hpp; folding onto a power of two:
// algorithms/power_of_two.hpp.)
#pragma once

#include "algorithms/power_of_two.hpp"
#include "algorithms/steps.hpp"
#include "sim/comm/communicator.hpp"
#include "sim/data/wire.hpp"

#include <memory>
#include <vector>

namespace sparsim {

// Ring allgather: in step s rank r passes on the part of rank (r - s) mod P to the right and receives the
// part of (r - s - 1) mod P from the left. P-1 steps; every part crosses every link once.
template <class T> Gathered<T> ring_allgather(Communicator& comm, std::shared_ptr<const T> mine, Tag tag_base)
{
  const int P = comm.size();
  const int r = comm.rank();
  Gathered<T> gathered(P);
  gathered[r] = std::move(mine);
  for (int step = 0; step < P - 1; ++step) {
    const int send_owner = ((r - step) % P + P) % P;
    const int recv_owner = ((r - step - 1) % P + P) % P;
    gathered[recv_owner] = comm.sendrecv((r + 1) % P, gathered[send_owner], (r - 1 + P) % P, tag_base + step);
  }
  return gathered;
}

// Bruck's allgather (recursive doubling for any P): in step j rank r sends the parts of ranks r .. r+c-1
// (c = min(2^j, P - 2^j), mod P) to rank r - 2^j and receives those of r + 2^j .. from rank r + 2^j.
// ceil(log2 P) steps; each rank receives every other part once.
template <class T> Gathered<T> bruck_allgather(Communicator& comm, std::shared_ptr<const T> mine, Tag tag_base)
{
  const int P = comm.size();
  const int r = comm.rank();
  Gathered<T> gathered(P);
  gathered[r] = std::move(mine);
  for (int distance = 1, step = 0; distance < P; distance *= 2, ++step) {
    auto bundle = std::make_shared<Bundle<T>>();
    for (int i = 0; i < std::min(distance, P - distance); ++i) {
      const int owner = (r + i) % P;
      bundle->owners.push_back(owner);
      bundle->parts.push_back(gathered[owner]);
    }
    auto incoming = comm.sendrecv((r - distance + P) % P, std::shared_ptr<const Bundle<T>>(std::move(bundle)),
                                  (r + distance) % P, tag_base + step);
    for (std::size_t i = 0; i < incoming->owners.size(); ++i)
      gathered[incoming->owners[i]] = incoming->parts[i];
  }
  return gathered;
}

// Elementwise sum over ranks of a few integers by recursive doubling (log2 P rounds exchanging the whole
// vector; other P fold their extra ranks first, algorithms/power_of_two.hpp). The sums are 64-bit, and so are
// the integers on the wire (8 bytes each: Sums64). Tags: tag_base to fold, tag_base + 1 to unfold,
// tag_base + 2 + i in round i. These integer additions are not charged under compute.reduction, which charges
// the collectives' vector work (sums, merges, re-selections).
inline std::vector<std::int64_t> allreduce_sum(Communicator& comm, std::vector<std::int64_t> mine, Tag tag_base)
{
  const PowerOfTwoFold fold(comm.size());
  auto add = [&](const Sums64& other) {
    for (std::size_t i = 0; i < mine.size(); ++i)
      mine[i] += other.values.at(i);
    return Bytes{0}; // not charged (above)
  };
  auto share = [&] { return std::make_shared<const Sums64>(Sums64{mine}); };
  // The even rank of each of the first rem pairs hands its vector to the odd one and waits for the result.
  fold.fold(comm, tag_base, share, add);
  const int vr = fold.virtual_rank(comm.rank());
  if (vr >= 0)
    fold.rounds(vr, [&](RankId partner, int round, int) {
      add(*comm.sendrecv(partner, share(), partner, tag_base + 2 + round));
    });
  fold.unfold(comm, tag_base + 1, share, [&](const std::shared_ptr<const Sums64>& sum) { mine = sum->values; });
  return mine;
}

} // namespace sparsim
