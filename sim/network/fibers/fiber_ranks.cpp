#include "sim/network/fibers/fiber_ranks.hpp"

#include "sim/base/json_reader.hpp"

#include <boost/context/detail/fcontext.hpp>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define SPARSIM_ANNOTATE_FIBERS 1 // the address sanitizer must be told which stack each switch enters
#endif

namespace sparsim {
namespace {

namespace fcontext = boost::context::detail;

constexpr std::size_t kCacheLine = 64;
constexpr int kColours = 64;                               // stack tops at 64 different offsets within a page
constexpr std::size_t kCanaryWords = 32;                   // four cache lines at the bottom of every stack
constexpr std::uint64_t kCanaryWord = 0x53504152'53494d21; // "SPARSIM!"

std::size_t page_bytes() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }

std::size_t round_up(std::size_t bytes, std::size_t unit) { return (bytes + unit - 1) / unit * unit; }

} // namespace

// A fiber starts here on its first switch: `transfer` carries the context it came from and the runtime.
struct FiberEntry {
  static void enter(fcontext::transfer_t transfer)
  {
    auto& ranks = *static_cast<FiberRanks*>(transfer.data);
    const RankId rank = ranks.entering_;
    ranks.landed(transfer.fctx, rank);
    ranks.run_body(rank);
  }
};

FiberRanks::FiberRanks(int ranks, std::size_t stack_bytes)
    : ranks_(ranks)
    , stack_bytes_(round_up(std::max(stack_bytes, page_bytes()), page_bytes()))
    , contexts_(static_cast<std::size_t>(ranks) + 1, nullptr)
    , states_(static_cast<std::size_t>(ranks), State::runnable)
    , started_(static_cast<std::size_t>(ranks), 0)
    , woken_early_(static_cast<std::size_t>(ranks), 0)
    , queue_(static_cast<std::size_t>(ranks))
    , fake_stacks_(static_cast<std::size_t>(ranks) + 1, nullptr)
{
  // One guard page below the lowest stack (rank 0's overflow faults there); the others have canaries.
  const std::size_t guard = page_bytes();
  // Each stack also gets a page of slack: stacks one stride apart, each starting a different number of cache
  // lines below its stride's end, so that the ranks' hottest frames do not all fall into the same cache sets.
  stride_ = stack_bytes_ + page_bytes();
  mapping_bytes_ = guard + stride_ * static_cast<std::size_t>(ranks);
  void* mapping =
      mmap(nullptr, mapping_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapping == MAP_FAILED)
    throw std::runtime_error(
        fmt::format("could not reserve {} fiber stacks of {} bytes ({})", ranks, stack_bytes_, std::strerror(errno)));
  mprotect(mapping, guard, PROT_NONE);
  stacks_ = static_cast<std::byte*>(mapping) + guard;
  for (RankId rank = 0; rank < ranks; ++rank) {
    std::byte* bottom = stack_bottom(rank);
    for (std::size_t word = 0; word < kCanaryWords; ++word)
      std::memcpy(bottom + word * sizeof(kCanaryWord), &kCanaryWord, sizeof(kCanaryWord));
    contexts_[static_cast<std::size_t>(rank) + 1] =
        fcontext::make_fcontext(bottom + stack_size(rank), stack_size(rank), &FiberEntry::enter);
  }
}

FiberRanks::~FiberRanks()
{
  if (stacks_)
    munmap(stacks_ - page_bytes(), mapping_bytes_);
}

int FiberRanks::run(const std::function<void(RankId)>& body)
{
  body_ = &body;
  for (RankId rank = 0; rank < ranks_; ++rank)
    queue_[rank] = rank;
  queue_size_ = static_cast<std::size_t>(ranks_);
  switch_to(kScheduler, next_due()); // returns when no rank is due
  if (stack_overflowed_)
    throw ConfigError("network.fiber_stack", fmt::format("\"{}\"", format_bytes(static_cast<double>(stack_bytes_))),
                      fmt::format("a larger stack: rank {} overflowed its fiber stack", failed_rank_));
  unwind_waiting_ranks();
  if (failure_)
    rethrow_rank_failure(failure_, failed_rank_);
  return finished_;
}

void FiberRanks::park(RankId rank)
{
  if (unwinding_)
    return; // a destructor that waits while its rank unwinds: nothing will come
  if (woken_early_[rank]) {
    woken_early_[rank] = 0;
    return;
  }
  states_[rank] = State::parked;
  switch_to(rank, next_due());
  if (unwinding_)
    throw Unwind{};
}

void FiberRanks::unpark(const std::vector<RankId>& ranks)
{
  for (RankId rank : ranks) {
    if (states_[rank] != State::parked) {
      woken_early_[rank] = 1;
      continue;
    }
    states_[rank] = State::runnable;
    queue_[(queue_head_ + queue_size_) % queue_.size()] = rank;
    ++queue_size_;
  }
}

int FiberRanks::next_due()
{
  if (queue_size_ == 0)
    return kScheduler;
  const RankId rank = queue_[queue_head_];
  queue_head_ = (queue_head_ + 1) % queue_.size();
  --queue_size_;
  states_[rank] = State::running;
  return rank;
}

void FiberRanks::run_body(RankId rank)
{
  started_[rank] = 1;
  try {
    (*body_)(rank);
    ++finished_;
  } catch (const Unwind&) {
    // stopped by run(): a deadlock, or another rank failed
  } catch (...) {
    if (!failure_) {
      failure_ = std::current_exception();
      failed_rank_ = rank;
    }
    queue_size_ = 0; // no rank runs on after a failure: back to run(), which unwinds them
  }
  states_[rank] = State::finished;
  switch_to(rank, next_due());
  std::abort(); // unreachable: nothing resumes a finished fiber
}

void FiberRanks::switch_to(int from, int to)
{
  if (from != kScheduler && !unwinding_ && !stack_overflowed_ && !canary_intact(from)) {
    // Its stack ran into the rank below's: no rank may run again (run() reports it).
    stack_overflowed_ = true;
    failed_rank_ = from;
    states_[from] = State::finished;
    queue_size_ = 0;
    to = kScheduler;
  }
  switching_from_ = from;
  entering_ = to;
#ifdef SPARSIM_ANNOTATE_FIBERS
  const bool from_ends = from != kScheduler && states_[from] == State::finished;
  const void* bottom = to == kScheduler ? scheduler_stack_bottom_ : stack_bottom(to);
  const std::size_t size = to == kScheduler ? scheduler_stack_size_ : stack_size(to);
  __sanitizer_start_switch_fiber(from_ends ? nullptr : &fake_stacks_[static_cast<std::size_t>(from + 1)], bottom, size);
#endif
  const fcontext::transfer_t back = fcontext::jump_fcontext(contexts_[static_cast<std::size_t>(to + 1)], this);
  landed(back.fctx, from);
}

void FiberRanks::landed(void* from_context, int self)
{
#ifdef SPARSIM_ANNOTATE_FIBERS
  const void* left_bottom = nullptr;
  std::size_t left_size = 0;
  __sanitizer_finish_switch_fiber(fake_stacks_[static_cast<std::size_t>(self + 1)], &left_bottom, &left_size);
  if (switching_from_ == kScheduler) {
    scheduler_stack_bottom_ = left_bottom;
    scheduler_stack_size_ = left_size;
  }
#else
  (void)self;
#endif
  contexts_[static_cast<std::size_t>(switching_from_ + 1)] = from_context;
}

FiberRanks::StackReach FiberRanks::deepest_stack_reach() const
{
  // One residency byte per page of the mapping (its first page is the guard).
  const std::size_t page = page_bytes();
  std::vector<unsigned char> present(mapping_bytes_ / page);
  if (mincore(stacks_ - page, mapping_bytes_, present.data()) != 0)
    throw std::runtime_error(fmt::format("mincore on the fiber stacks failed: {}", std::strerror(errno)));
  StackReach deepest;
  const std::size_t pages_per_stride = stride_ / page;
  for (RankId rank = 0; rank < ranks_; ++rank) {
    // The stride's first page holds the canary (written when the stack was made); the stack grows down from
    // its top towards it.
    const std::size_t first = 1 + static_cast<std::size_t>(rank) * pages_per_stride;
    for (std::size_t p = 1; p < pages_per_stride; ++p)
      if (present[first + p] & 1) {
        const std::size_t reach = stack_size(rank) - p * page;
        if (reach > deepest.bytes)
          deepest = {reach, rank};
        break;
      }
  }
  return deepest;
}

std::byte* FiberRanks::stack_bottom(RankId rank) const { return stacks_ + static_cast<std::size_t>(rank) * stride_; }

std::size_t FiberRanks::stack_size(RankId rank) const
{
  return stride_ - static_cast<std::size_t>(rank % kColours) * kCacheLine;
}

bool FiberRanks::canary_intact(RankId rank) const
{
  const std::byte* bottom = stack_bottom(rank);
  for (std::size_t word = 0; word < kCanaryWords; ++word) {
    std::uint64_t value = 0;
    std::memcpy(&value, bottom + word * sizeof(value), sizeof(value));
    if (value != kCanaryWord)
      return false;
  }
  return true;
}

void FiberRanks::unwind_waiting_ranks()
{
  unwinding_ = true;
  queue_size_ = 0; // each rank unwinds alone and switches back here
  for (RankId rank = 0; rank < ranks_; ++rank)
    if (started_[rank] && states_[rank] != State::finished) {
      states_[rank] = State::running;
      switch_to(kScheduler, rank); // it throws Unwind from its park and switches back when it has finished
    }
  unwinding_ = false;
}

} // namespace sparsim
