// What `sparsim run` shows on standard error while it runs: a line per finished iteration (at most one every
// 2 s, and always the last), and, once an iteration has run for a few seconds, where it stands: the ranks the
// selection stage has prepared, then the share of the iteration's messages posted (against the closed form's
// count, ClosedForm::messages). On a terminal that status is one line updated in place every second;
// otherwise it is a plain line every 30 s.
#pragma once

#include "sim/base/units.hpp"
#include "sim/comm/world.hpp"
#include "sim/run/selection_stage.hpp"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace sparsim {

class RunProgress {
public:
  // `stage` is null for dense runs; `messages_per_iteration` 0 when unknown. Disabled: prints nothing.
  RunProgress(bool enabled, int iterations, double messages_per_iteration, const World& world,
              const SelectionStage* stage);
  ~RunProgress();
  RunProgress(const RunProgress&) = delete;
  RunProgress& operator=(const RunProgress&) = delete;

  // Rank 0 has finished `iteration` at simulated time `simulated_now`; the next one starts.
  void iteration_finished(int iteration, Seconds simulated_now);

private:
  using Clock = std::chrono::steady_clock;
  void watch();
  std::string status(double in_iteration) const;

  const bool enabled_;
  const bool terminal_;
  const int iterations_;
  const double messages_per_iteration_;
  const World& world_;
  const SelectionStage* stage_;
  const Clock::time_point start_ = Clock::now();

  mutable std::mutex mutex_; // guards everything below and standard error
  std::condition_variable wake_;
  bool stopping_ = false;
  int iteration_ = 0;                          // the running iteration
  Clock::time_point iteration_start_ = start_; // its wall-clock start
  std::uint64_t messages_at_start_ = 0;        // messages posted before it
  Clock::time_point last_iteration_line_ = start_;
  Clock::time_point last_status_ = start_;
  bool status_shown_ = false; // a status line is on the terminal (to be cleared)
  std::thread watcher_;
};

} // namespace sparsim
