// Steps several collectives share, written once: reductions of received data that charge their cost by
// construction, and the rotated exchange schedule posted in waves. Folding any P onto a power of two is in
// algorithms/power_of_two.hpp, allgathers and the integer allreduce in algorithms/collectives.hpp.
#pragma once

#include "sim/comm/communicator.hpp"
#include "sim/data/dense.hpp"
#include "sim/data/sparse_ops.hpp"

#include <algorithm>
#include <iterator>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

namespace sparsim {

template <class T> using Gathered = std::vector<std::shared_ptr<const T>>; // indexed by owner rank

// ---- Receive and reduce, charged by construction ----------------------------------------------------------
//
// Local work on received data (a sum, a merge, a re-selection) costs simulated time under compute.reduction
// (Communicator::charge_reduction: the bytes it reads and writes over the reduction bandwidth). Algorithms do
// such work through reduce_charged, whose work function must say what it cost: it returns the traffic
// (Bytes), or a Reduced{result, traffic}. The step runs the work, then charges the traffic, then returns the
// result, so the work cannot be done without its charge. The work's own temporaries (a received set, an
// intermediate sum) are released before the charged time passes. Algorithms call charge_reduction (and
// charge_selection) only through these steps.
template <class R> struct Reduced {
  R result;
  Bytes traffic = 0;
};
template <class R> Reduced(R, Bytes) -> Reduced<R>;

template <class T> inline constexpr bool is_reduced_v = false;
template <class R> inline constexpr bool is_reduced_v<Reduced<R>> = true;

template <class Work> auto reduce_charged(Communicator& comm, Work&& work)
{
  using Out = std::invoke_result_t<Work&>;
  static_assert(std::is_same_v<Out, Bytes> || is_reduced_v<Out>,
                "the work returns its memory traffic: Bytes, or Reduced{result, traffic}");
  if constexpr (std::is_same_v<Out, Bytes>) {
    comm.charge_reduction(work());
  } else {
    Out out = work();
    comm.charge_reduction(out.traffic);
    return std::move(out.result);
  }
}

// A selection inside the collective (SparDL's block top-k from the acc) is charged as the driver's local
// selection is (compute.selection, Communicator::charge_selection), by the same construction: the work returns
// Reduced{result, traffic}.
template <class Work> auto select_charged(Communicator& comm, Work&& work)
{
  auto out = work();
  static_assert(is_reduced_v<decltype(out)>, "the work returns Reduced{result, traffic}");
  comm.charge_selection(out.traffic);
  return std::move(out.result);
}

// Dense: data[begin + i] += block[i], charged as two fp32 read and one written per entry.
inline void add_received(Communicator& comm, DenseVector& data, std::uint64_t begin, const DenseBlock& block)
{
  reduce_charged(comm, [&] {
    accumulate_block(data, begin, block);
    return accumulate_traffic(block);
  });
}

// Sparse: the sum of `parts` (one per rank, e.g. the slices of a region that its owner received) in rank order
// (sum_in_order: bitwise the same on every rank holding the same parts), charged as every pair read and the
// sum written.
inline SparseVector sum_received_in_order(Communicator& comm, std::span<const SparseSlice> parts)
{
  return reduce_charged(comm, [&] {
    std::vector<SparseView> views;
    views.reserve(parts.size());
    std::uint64_t pairs = 0;
    for (const auto& part : parts) {
      views.push_back(part.view());
      pairs += part.size();
    }
    SparseVector sum = sum_in_order(views);
    const Bytes traffic = pair_traffic(pairs, sum.size());
    return Reduced{std::move(sum), traffic};
  });
}

// Sparse: the union sum, in rank order, of the selections every rank has gathered alike (an allgather's result):
// computed once for all ranks (Communicator::computed_once) and charged to each as every pair read and the sum
// written.
inline std::shared_ptr<const SparseVector> union_sum_of_gathered(Communicator& comm,
                                                                 const Gathered<SparseVector>& gathered)
{
  return reduce_charged(comm, [&] {
    auto sum = comm.computed_once(gathered, [&] {
      std::vector<const SparseVector*> parts;
      for (const auto& part : gathered)
        parts.push_back(part.get());
      return std::make_shared<const SparseVector>(sum_in_order(parts));
    });
    const Bytes traffic = pair_traffic(total_pairs(gathered), sum->size());
    return Reduced{std::move(sum), traffic};
  });
}

// ---- The rotated exchange in waves ------------------------------------------------------------------------

// One step of an exchange among all ranks: this rank sends to `dest` and receives from `source`.
struct ExchangeStep {
  RankId dest;
  RankId source;
};

// The rotated schedule: in step s (1..P-1) rank r sends to (r + s) mod P and receives from (r - s) mod P, so
// every step is a permutation (no rank receives two messages in one step).
inline ExchangeStep rotated_step(RankId r, int ranks, int step)
{
  return {(r + step) % ranks, (r - step + ranks) % ranks};
}

// Steps 1..P-1 of an exchange, posted in waves of `wave` steps (MPICH's alltoall throttle; posting all P-1 at
// once is also slow to simulate: SimGrid's cost per event grows with the flows in flight). For each wave:
// post(step, sends, receives) posts each step's messages, in step order (`step` is schedule(s), an
// ExchangeStep), appending its requests; then the wave's sends and receives are waited together (the rank runs
// again when the last of them has arrived: the time at which waiting on the sends, then on each step's receives
// in step order, would end), and received(step, receives) takes what each step's receives brought, in step
// order; then the next wave. Within a wave the messages share each rank's links whatever their order.
template <class Schedule, class Post, class Received>
void exchange_in_waves(Communicator& comm, int wave, Schedule&& schedule, Post&& post, Received&& received)
{
  const int P = comm.size();
  std::vector<Request> requests; // the wave's sends, then its receives step by step
  std::vector<Request> receives;
  std::vector<std::pair<ExchangeStep, std::size_t>> steps; // each step and the end of its receives in `receives`
  for (int first = 1; first < P; first += wave) {
    const int last = std::min(P, first + wave);
    requests.clear();
    receives.clear();
    steps.clear();
    for (int s = first; s < last; ++s) {
      const ExchangeStep step = schedule(s);
      post(step, requests, receives);
      steps.emplace_back(step, receives.size());
    }
    const std::size_t sends = requests.size();
    std::move(receives.begin(), receives.end(), std::back_inserter(requests));
    comm.wait_all(requests);
    std::size_t begin = sends;
    for (const auto& [step, end] : steps) {
      received(step, std::span(requests).subspan(begin, sends + end - begin));
      begin = sends + end;
    }
  }
}

// The alltoall of one count per destination (slice j's size to rank j) that codes exchanging variable-size
// slices send first, posted in the same steps and waves as the slices that follow; returns the counts the
// sources announced, [source rank] (0 for this rank).
template <class Schedule>
std::vector<std::uint32_t> exchange_counts(Communicator& comm, int wave, Schedule&& schedule,
                                           const RegionSlices& slices, Tag tag)
{
  const int P = comm.size();
  std::vector<std::uint32_t> announced(P, 0); // a slice holds at most n < 2^32 entries
  exchange_in_waves(
      comm, wave, schedule,
      [&](const ExchangeStep& step, std::vector<Request>& sends, std::vector<Request>& receives) {
        const auto count = static_cast<std::int64_t>(slices.size(step.dest));
        sends.push_back(comm.isend(step.dest, tag, std::make_shared<const Count>(Count{count})));
        receives.push_back(comm.irecv(step.source, tag));
      },
      [&](const ExchangeStep& step, std::span<Request> receives) {
        announced[step.source] = static_cast<std::uint32_t>(comm.take<Count>(receives[0])->value);
      });
  return announced;
}

} // namespace sparsim
