#include "sim/run/progress.hpp"

#include <cstdio>
#include <fmt/format.h>
#include <unistd.h>

namespace sparsim {
namespace {

// An iteration shorter than this shows no status.
constexpr auto kQuietIteration = std::chrono::seconds(3);
constexpr auto kTerminalRefresh = std::chrono::seconds(1);
constexpr auto kLogRefresh = std::chrono::seconds(30);

} // namespace

RunProgress::RunProgress(bool enabled, int iterations, double messages_per_iteration, const World& world,
                         const SelectionStage* stage)
    : enabled_(enabled)
    , terminal_(isatty(fileno(stderr)) != 0)
    , iterations_(iterations)
    , messages_per_iteration_(messages_per_iteration)
    , world_(world)
    , stage_(stage)
{
  if (enabled_)
    watcher_ = std::thread([this] { watch(); });
}

RunProgress::~RunProgress()
{
  if (!watcher_.joinable())
    return;
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  watcher_.join();
}

void RunProgress::iteration_finished(int iteration, Seconds simulated_now)
{
  const std::lock_guard lock(mutex_);
  const auto now = Clock::now();
  iteration_ = iteration + 1;
  iteration_start_ = now;
  messages_at_start_ = world_.messages_posted();
  if (!enabled_ || (now - last_iteration_line_ < std::chrono::seconds(2) && iteration + 1 != iterations_))
    return;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double remaining = elapsed / (iteration + 1) * (iterations_ - iteration - 1);
  // With one rank per process (a real MPI run) the transport's clock is measured time.
  fmt::print(stderr, "{}  iteration {}/{} done: {} {:.6g} s, wall {:.1f} s{}\n", status_shown_ ? "\r\033[K" : "",
             iteration + 1, iterations_, world_.one_rank_per_process() ? "measured" : "simulated", simulated_now,
             elapsed, iteration + 1 < iterations_ ? ", about " + format_wall_time(remaining) + " left" : "");
  status_shown_ = false;
  last_iteration_line_ = now;
}

std::string RunProgress::status(double in_iteration) const
{
  std::string where;
  const int prepared = stage_ ? stage_->ranks_prepared() : 0;
  const std::uint64_t posted = world_.messages_posted() - messages_at_start_;
  if (stage_ && posted == 0 && prepared < world_.size())
    where = fmt::format("selection stage, {}/{} ranks prepared", prepared, world_.size());
  else if (messages_per_iteration_ > 0)
    where = fmt::format("collective, {:.0f}% of about {:.3g} messages posted",
                        std::min(100.0, 100.0 * static_cast<double>(posted) / messages_per_iteration_),
                        messages_per_iteration_);
  else
    where = fmt::format("collective, {} messages posted", posted);
  return fmt::format("  iteration {}/{}: {}; {} in this iteration", iteration_ + 1, iterations_, where,
                     format_wall_time(in_iteration));
}

void RunProgress::watch()
{
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, kTerminalRefresh, [this] { return stopping_; });
    if (stopping_ || iteration_ >= iterations_)
      break;
    const auto now = Clock::now();
    if (now - iteration_start_ < kQuietIteration || (!terminal_ && now - last_status_ < kLogRefresh))
      continue;
    const std::string line = status(std::chrono::duration<double>(now - iteration_start_).count());
    if (terminal_)
      fmt::print(stderr, "\r\033[K{}", line);
    else
      fmt::print(stderr, "{}\n", line);
    std::fflush(stderr);
    status_shown_ = terminal_;
    last_status_ = now;
  }
  if (status_shown_)
    fmt::print(stderr, "\r\033[K");
}

} // namespace sparsim
