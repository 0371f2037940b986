// Ranks as the project's own fibers (network.runtime "fibers"): the link-level model's rank runtime without
// SimGrid. Every rank's body runs on its own stack; a rank that waits switches directly to the next rank due
// to run (Boost.Context's fcontext, a few nanoseconds), and the link-level transport decides, through the
// RankParking interface, which ranks run when. One host thread runs every fiber.
//
// Order: the ranks start in rank order; a rank unparked runs after the ranks unparked before it, in the order
// unpark listed them (the transport lists the ranks due at one instant in rank order), once the rank that
// unparked them parks or returns.
//
// Stacks: all from one mapping, `stack_bytes` each, made present only where a rank's stack reaches. A stack
// has no guard page (one per rank would split the mapping into 2 P areas and reach vm.max_map_count near
// 32k ranks); the lowest bytes of each stack hold a canary, checked whenever its rank switches out: an
// overwritten canary ends the run with an error that names the rank and network.fiber_stack.
//
// Failures: the first exception a rank throws ends the run: every rank that has started and not returned is
// resumed once more and unwinds from the wait it was in (its destructors run), then the exception is rethrown
// by run(). A run in which ranks wait forever (a deadlock) ends the same way, without an exception.
#pragma once

#include "sim/base/units.hpp"
#include "sim/network/link_level/parking.hpp"

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <vector>

namespace sparsim {

class FiberRanks : public RankParking {
public:
  // `ranks` fibers of `stack_bytes` each (rounded up to whole pages).
  FiberRanks(int ranks, std::size_t stack_bytes);
  ~FiberRanks() override;
  FiberRanks(const FiberRanks&) = delete;
  FiberRanks& operator=(const FiberRanks&) = delete;

  // Runs body(rank) on every rank's fiber until no rank can run. Returns how many bodies returned: fewer
  // than the ranks when some waited forever. Rethrows the first exception a body threw. Call once.
  int run(const std::function<void(RankId)>& body);

  // Called by the running rank: switches to the next rank due (or back to run() when none is).
  void park(RankId rank) override;
  void unpark(const std::vector<RankId>& ranks) override;

  // How deep the ranks' stacks reached: the bytes from a stack's top to the lowest page of it that is present
  // (mincore; a page is present once something wrote to it), at most a page more than the deepest frame, and
  // the rank that reached deepest. Page-exact, for choosing network.fiber_stack (docs/benchmarks.md).
  struct StackReach {
    std::size_t bytes = 0;
    RankId rank = -1;
  };
  StackReach deepest_stack_reach() const;
  std::size_t stack_bytes() const { return stack_bytes_; }

private:
  enum class State : std::uint8_t {
    runnable, // in the run queue (every rank starts there)
    running,
    parked, // switched out in park(), waiting for unpark
    finished
  };
  static constexpr int kScheduler = -1; // the context of run(): the thread's own stack
  struct Unwind {};                     // thrown by park() into a rank that must stop (not an std::exception)

  friend struct FiberEntry; // the entry function of a fiber (fiber_ranks.cpp)
  // A rank's fiber, from its first switch to its end: the body, then a switch away that never returns.
  [[noreturn]] void run_body(RankId rank);
  // Leaves the calling context `from` (a rank, or kScheduler) for `to`; returns when something switches back.
  void switch_to(int from, int to);
  // Where a switch lands: records the context it came from (the fcontext that resumes it) and tells the
  // sanitizer which stack is now in use.
  void landed(void* from_context, int self);
  // The rank to run next: the run queue's front, or kScheduler when it is empty.
  int next_due();
  // Whether `rank`'s stack canary is intact (false: the rank overflowed its stack).
  bool canary_intact(RankId rank) const;
  // Resumes every rank that has started and not returned so that it unwinds from its wait.
  void unwind_waiting_ranks();
  std::byte* stack_bottom(RankId rank) const;
  std::size_t stack_size(RankId rank) const; // from its bottom to its top, at least stack_bytes_

  int ranks_;
  std::size_t stack_bytes_;
  std::size_t stride_ = 0;      // the stacks' spacing
  std::byte* stacks_ = nullptr; // one mapping: rank r's stack begins at stacks_ + r stride_
  std::size_t mapping_bytes_ = 0;
  std::vector<void*> contexts_;   // [rank + 1]: what resumes it (index 0: the scheduler)
  std::vector<State> states_;     // [rank]
  std::vector<char> started_;     // [rank]: its fiber has run (it has frames to unwind until it finishes)
  std::vector<char> woken_early_; // [rank]: unparked while not parked: its next park returns at once
  std::vector<RankId> queue_;     // the ranks due to run, in order: a ring of capacity `ranks_`
  std::size_t queue_head_ = 0;
  std::size_t queue_size_ = 0;
  int switching_from_ = kScheduler; // the context the switch in progress leaves
  int entering_ = kScheduler;       // the context it enters
  const std::function<void(RankId)>* body_ = nullptr;
  bool unwinding_ = false;
  int finished_ = 0;
  std::exception_ptr failure_;
  RankId failed_rank_ = -1;
  bool stack_overflowed_ = false; // failed_rank_ overwrote its canary: no rank is resumed again
  // Address sanitizer: the fake stacks of contexts switched out, and the scheduler's stack bounds.
  std::vector<void*> fake_stacks_; // [rank + 1]
  const void* scheduler_stack_bottom_ = nullptr;
  std::size_t scheduler_stack_size_ = 0;
};

} // namespace sparsim
