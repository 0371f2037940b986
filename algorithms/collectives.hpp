// Small building blocks several algorithms share: allgathers of per-rank payloads and an allreduce of a
// few integers. Each is written as its steps; the caller wraps it in a phase.
#pragma once

#include "sim/comm/communicator.hpp"
#include "sim/data/wire.hpp"

#include <memory>
#include <vector>

namespace sparsim {

template <class T> using Gathered = std::vector<std::shared_ptr<const T>>;  // indexed by owner rank

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
// vector; other P fold their extra ranks first, as algorithms/power_of_two.hpp does for dense vectors).
inline std::vector<std::int64_t> allreduce_sum(Communicator& comm, std::vector<std::int64_t> mine, Tag tag_base)
{
  const int P = comm.size();
  const int r = comm.rank();
  int p2 = 1;
  while (p2 * 2 <= P)
    p2 *= 2;
  const int rem = P - p2;
  auto add = [&](const Counts& other) {
    for (std::size_t i = 0; i < mine.size(); ++i)
      mine[i] += other.values.at(i);
  };
  auto share = [&] { return std::make_shared<const Counts>(Counts{mine}); };
  // Fold: the even rank of each of the first rem pairs hands its vector to the odd one and waits.
  if (r < 2 * rem && r % 2 == 0) {
    comm.send(r + 1, tag_base, share());
    return comm.recv<Counts>(r + 1, tag_base + 1)->values;
  }
  if (r < 2 * rem)
    add(*comm.recv<Counts>(r - 1, tag_base));
  const int vr = r < 2 * rem ? r / 2 : r - rem;
  auto real = [&](int v) { return v < rem ? 2 * v + 1 : v + rem; };
  for (int distance = 1, round = 2; distance < p2; distance *= 2, ++round) {
    const RankId partner = real(vr ^ distance);
    add(*comm.sendrecv(partner, share(), partner, tag_base + round));
  }
  if (r < 2 * rem)
    comm.send(r - 1, tag_base + 1, share());
  return mine;
}

}  // namespace sparsim
