// Small building blocks several algorithms share: allgathers of per-rank payloads, the dense ring's
// reduce-scatter and allgather over a group of ranks, and an allreduce of a few integers. Each is written as its steps;
// the caller wraps it in a phase. (Reductions charged by construction and the exchange in waves: algorithms/steps.hpp;
// folding onto a power of two: algorithms/power_of_two.hpp.)
#pragma once

#include "algorithms/power_of_two.hpp"
#include "algorithms/steps.hpp"
#include "sim/comm/communicator.hpp"
#include "sim/data/dense.hpp"
#include "sim/data/wire.hpp"

#include <array>
#include <functional>
#include <memory>
#include <vector>

namespace sparsim {

// What an allgather among G members leaves its P ranks holding, for the memory estimate
// (SparseAllreduce::held_memory): a pointer per gathered part (16 bytes) on every rank, P G in all; Bruck's
// steps keep up to as many again in their bundles in flight (measured with massif at P = 1024: 26 P^2 bytes at
// TopkA's peak, 16 P^2 with the ring).
constexpr double kRingAllgatherBytesPerPart = 16;
constexpr double kBruckAllgatherBytesPerPart = 32;

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

// Some of the ranks, members base + stride * i for i < size (SparDL's teams, and the ranks of one place across
// them); every rank is one group of all.
struct RankGroup {
  RankId base = 0;
  int stride = 1;
  int size = 1;
  static RankGroup all(const Communicator& comm) { return {0, 1, comm.size()}; }
  RankId member(int i) const { return base + stride * i; }
  int index_of(RankId rank) const { return (rank - base) / stride; }
};

// The bytes of a member's part, which every member knows before an allgather: a fixed size (same_bytes_as), or
// sizes gathered first. Where bytes move (a real MPI run) the receiver cuts a bundle's parts apart with them.
using PartBytes = std::function<Bytes(int member)>;
template <class T> PartBytes same_bytes_as(const Communicator& comm, const T& example)
{
  const Bytes bytes = wire_bytes(example, comm.wire());
  return [bytes](int) { return bytes; };
}

// One step of an exchange of Bundles: sends `bundle` to `dest` and receives one from `source` under `tag`, both in
// flight at once (as Communicator::sendrecv). The receiver knows the incoming layout when `part_bytes` is given: the
// parts of owners first, first + 1, ... (`count` of them, mod `owners_mod`), part_bytes(owner) bytes each. Where
// layouts are needed (Communicator::bundle_layouts_needed) they cut the parts apart, or are checked against the
// simulated Bundle; elsewhere, or without `part_bytes`, the Bundle is taken as it arrived.
template <class T>
std::shared_ptr<const Bundle<T>> sendrecv_bundle(Communicator& comm, RankId dest,
                                                 std::shared_ptr<const Bundle<T>> bundle, RankId source, Tag tag,
                                                 int first, int count, int owners_mod, const PartBytes& part_bytes)
{
  std::array<Request, 2> both;
  both[1] = comm.isend(dest, tag, std::move(bundle));
  both[0] = comm.irecv(source, tag);
  comm.wait_all(both);
  if (!part_bytes || !comm.bundle_layouts_needed())
    return comm.take<Bundle<T>>(both[0]);
  std::vector<RankId> owners;
  std::vector<Bytes> sizes;
  for (int i = 0; i < count; ++i) {
    owners.push_back((first + i) % owners_mod);
    sizes.push_back(part_bytes(owners.back()));
  }
  return comm.take_bundle<T>(both[0], std::move(owners), sizes);
}

// Bruck's allgather (recursive doubling for any group size G) among the members of `group`: in step j member m
// sends the parts of members m .. m+c-1 (c = min(2^j, G - 2^j), mod G) to member m - 2^j and receives those of
// m + 2^j .. from member m + 2^j. ceil(log2 G) steps; each member receives every other part once. The parts
// are indexed by member. Without `part_bytes` the receiver does not know the parts' sizes: the simulation's
// Bundle carries them, and where bytes move the algorithm cannot run yet. With them, the receiver states each
// step's layout where it is needed (Communicator::bundle_layouts_needed).
template <class T>
Gathered<T> bruck_allgather(Communicator& comm, std::shared_ptr<const T> mine, Tag tag_base, const RankGroup& group,
                            const PartBytes& part_bytes = {})
{
  const int G = group.size;
  const int m = group.index_of(comm.rank());
  Gathered<T> gathered(G);
  gathered[m] = std::move(mine);
  for (int distance = 1, step = 0; distance < G; distance *= 2, ++step) {
    const int count = std::min(distance, G - distance);
    auto bundle = std::make_shared<Bundle<T>>();
    for (int i = 0; i < count; ++i) {
      const int owner = (m + i) % G;
      bundle->owners.push_back(owner);
      bundle->parts.push_back(gathered[owner]);
    }
    // In come the parts of members m + distance .. m + distance + count - 1.
    const auto incoming =
        sendrecv_bundle<T>(comm, group.member((m - distance + G) % G), std::move(bundle),
                           group.member((m + distance) % G), tag_base + step, (m + distance) % G, count, G, part_bytes);
    for (std::size_t i = 0; i < incoming->owners.size(); ++i)
      gathered[incoming->owners[i]] = incoming->parts[i];
  }
  return gathered;
}

// Bruck's allgather among all ranks: the parts indexed by rank.
template <class T>
Gathered<T> bruck_allgather(Communicator& comm, std::shared_ptr<const T> mine, Tag tag_base,
                            const PartBytes& part_bytes = {})
{
  return bruck_allgather(comm, std::move(mine), tag_base, RankGroup::all(comm), part_bytes);
}

// A slice [begin, end) of a dense vector, cut into `parts` near-equal blocks (block b taken mod parts).
struct DenseRange {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  DenseRange part(int parts, int b) const
  {
    b = ((b % parts) + parts) % parts;
    return {begin + block_begin(end - begin, parts, b), begin + block_begin(end - begin, parts, b + 1)};
  }
};

// Ring reduce-scatter of `range` among the members of `group`: in step s member m sends its partial sum of part
// (m - s) to member m + 1 and adds part (m - s - 1) arriving from member m - 1; member m ends with the group's
// sum of part (m + 1) mod M. M-1 steps; tags tag_base .. tag_base + M - 2.
inline void dense_ring_reduce_scatter(Communicator& comm, DenseVector& data, DenseRange range, const RankGroup& group,
                                      Tag tag_base)
{
  const int M = group.size;
  const int m = group.index_of(comm.rank());
  for (int step = 0; step < M - 1; ++step) {
    const DenseRange send = range.part(M, m - step);
    const DenseRange recv = range.part(M, m - step - 1);
    auto incoming = comm.sendrecv(group.member((m + 1) % M), extract_block(data, send.begin, send.end),
                                  group.member((m - 1 + M) % M), tag_base + step);
    add_received(comm, data, recv.begin, *incoming);
  }
}

// Ring allgather of `range` among the members of `group`, member m holding part (m + 1) mod M: in step s it
// passes part (m + 1 - s) on and overwrites part (m - s) with what arrives; afterwards every member holds every
// part. M-1 steps; tags tag_base .. tag_base + M - 2.
inline void dense_ring_allgather(Communicator& comm, DenseVector& data, DenseRange range, const RankGroup& group,
                                 Tag tag_base)
{
  const int M = group.size;
  const int m = group.index_of(comm.rank());
  for (int step = 0; step < M - 1; ++step) {
    const DenseRange send = range.part(M, m + 1 - step);
    const DenseRange recv = range.part(M, m - step);
    auto incoming = comm.sendrecv(group.member((m + 1) % M), extract_block(data, send.begin, send.end),
                                  group.member((m - 1 + M) % M), tag_base + step);
    overwrite_block(data, recv.begin, *incoming);
  }
}

// How allreduce_sum exchanges the vector among the power of two of ranks left after the fold.
enum class IntegerAllreduce {
  // log2(p2) rounds exchanging the whole vector: log2(p2) messages and vectors sent per rank.
  recursive_doubling,
  // Rabenseifner's algorithm (as dense_rabenseifner.cpp for floats): a reduce-scatter by recursive halving (round
  // i, distance p2 / 2^(i+1): the partners swap the halves of their current range, each keeps one half and adds
  // the partner's copy of it), then an allgather by recursive doubling that retraces the halvings. 2 log2(p2)
  // messages and at most 2 (p2 - 1) / p2 of the vector sent per rank: the cheaper one for long vectors.
  rabenseifner
};

// Elementwise sum over ranks of integers (other P fold their extra ranks first, algorithms/power_of_two.hpp).
// The sums are 64-bit and exact, the same for either way; so are the integers on the wire (8 bytes each:
// Sums64). Tags: tag_base to fold, tag_base + 1 to unfold, tag_base + 2 + i in step i. These integer additions
// are not charged under compute.reduction, which charges the collectives' vector work (sums, merges,
// re-selections).
inline std::vector<std::int64_t> allreduce_sum(Communicator& comm, std::vector<std::int64_t> mine, Tag tag_base,
                                               IntegerAllreduce how = IntegerAllreduce::recursive_doubling)
{
  struct Range {
    std::size_t from, to;
  };
  auto add_into = [&](const Sums64& other, Range range) {
    for (std::size_t i = range.from; i < range.to; ++i)
      mine[i] += other.values.at(i - range.from);
  };
  auto share = [&](Range range) {
    return std::make_shared<const Sums64>(Sums64{{mine.begin() + range.from, mine.begin() + range.to}});
  };
  const Range whole{0, mine.size()};
  const PowerOfTwoFold fold(comm.size());
  // The even rank of each of the first rem pairs hands its vector to the odd one and waits for the result.
  fold.fold(
      comm, tag_base, [&] { return share(whole); },
      [&](const Sums64& other) {
        add_into(other, whole);
        return Bytes{0}; // not charged (above)
      });
  const int vr = fold.virtual_rank(comm.rank());
  if (vr >= 0 && how == IntegerAllreduce::recursive_doubling)
    fold.rounds(vr, [&](RankId partner, int round, int) {
      add_into(*comm.sendrecv(partner, share(whole), partner, tag_base + 2 + round), whole);
    });
  if (vr >= 0 && how == IntegerAllreduce::rabenseifner) {
    std::vector<Range> before_halving; // the range held before each halving, for the allgather to retrace
    Range held = whole;
    Tag step = tag_base + 2;
    for (int distance = fold.p2() / 2; distance >= 1; distance /= 2) {
      const auto partner = static_cast<RankId>(fold.real_rank(vr ^ distance));
      const std::size_t middle = held.from + (held.to - held.from) / 2;
      const bool keeps_lower = (vr & distance) == 0;
      const Range kept = keeps_lower ? Range{held.from, middle} : Range{middle, held.to};
      const Range given = keeps_lower ? Range{middle, held.to} : Range{held.from, middle};
      add_into(*comm.sendrecv(partner, share(given), partner, step++), kept);
      before_halving.push_back(held);
      held = kept;
    }
    for (int distance = 1; distance < fold.p2(); distance *= 2) {
      const auto partner = static_cast<RankId>(fold.real_rank(vr ^ distance));
      const Range before = before_halving.back();
      before_halving.pop_back();
      const bool kept_lower = (vr & distance) == 0;
      const std::size_t partners_from = kept_lower ? held.to : before.from;
      const auto received = comm.sendrecv(partner, share(held), partner, step++);
      std::copy(received->values.begin(), received->values.end(), mine.begin() + partners_from);
      held = before;
    }
  }
  fold.unfold(
      comm, tag_base + 1, [&] { return share(whole); },
      [&](const std::shared_ptr<const Sums64>& sum) { mine = sum->values; });
  return mine;
}

} // namespace sparsim
