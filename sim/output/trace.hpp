// The timeline of one iteration in Chrome's trace event format (sparsim run --trace FILE.json), which
// Perfetto (ui.perfetto.dev) and chrome://tracing open.
//
// One process (pid 0, named after the run) with one thread per rank (tid = rank, named "rank N"). Per
// rank, complete events ("ph": "X"): the iteration ("iteration I"), one per segment of time spent in a
// phase (named after the phase; a phase entered twice gives two segments) and one per wait on a message
// ("send" or "receive", args peer, bytes, tag, phase), a wait that found its message already there
// included with duration 0. Waits nest in their phase's segment, segments in the iteration. Timestamps
// ("ts", "dur") are microseconds of simulated time since the simulation started.
#pragma once

#include "sim/run/run_output.hpp"

#include <string>
#include <vector>

namespace sparsim {

// The trace as JSON text: {"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}.
std::string chrome_trace_json(const RunTrace& trace, const std::string& run_name);

} // namespace sparsim
