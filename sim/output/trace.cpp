#include "sim/output/trace.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace sparsim {
namespace {

// JSON string literal of `text`, quotes and escapes included.
std::string quoted(const std::string& text) { return nlohmann::json(text).dump(); }

// Simulated seconds as trace microseconds.
double microseconds(Seconds t) { return t * 1e6; }

} // namespace

std::string chrome_trace_json(const RunTrace& trace, const std::string& run_name)
{
  std::vector<std::string> phases;
  for (const auto& name : trace.phase_names)
    phases.push_back(quoted(name));

  std::string json = "{\"traceEvents\": [\n";
  json += fmt::format(R"({{"ph": "M", "pid": 0, "name": "process_name", "args": {{"name": {}}}}})",
                      quoted("sparsim " + run_name));
  for (std::size_t rank = 0; rank < trace.ranks.size(); ++rank) {
    json += fmt::format(
        ",\n"
        R"({{"ph": "M", "pid": 0, "tid": {0}, "name": "thread_name", "args": {{"name": "rank {0}"}}}})"
        ",\n"
        R"({{"ph": "M", "pid": 0, "tid": {0}, "name": "thread_sort_index", "args": {{"sort_index": {0}}}}})",
        rank);

    // Outer slices first: by start, then the longer one, then iteration before phase before wait.
    std::vector<TraceSlice> slices = trace.ranks[rank];
    std::stable_sort(slices.begin(), slices.end(), [](const TraceSlice& a, const TraceSlice& b) {
      if (a.begin != b.begin)
        return a.begin < b.begin;
      if (a.end != b.end)
        return a.end > b.end;
      return a.kind < b.kind;
    });
    for (const TraceSlice& slice : slices) {
      // The end is converted on its own so that a slice ending with its parent ends at the same microsecond.
      const double ts = microseconds(slice.begin);
      const double dur = microseconds(slice.end) - ts;
      const std::string where = fmt::format(R"("pid": 0, "tid": {}, "ts": {}, "dur": {})", rank, ts, dur);
      switch (slice.kind) {
      case TraceSlice::Kind::iteration:
        json += fmt::format(
            ",\n"
            R"({{"ph": "X", "name": "iteration {0}", "cat": "iteration", {1}, "args": {{"iteration": {0}}}}})",
            trace.iteration, where);
        break;
      case TraceSlice::Kind::phase:
        json += fmt::format(",\n"
                            R"({{"ph": "X", "name": {0}, "cat": "phase", {1}, "args": {{"phase": {0}}}}})",
                            phases[slice.phase], where);
        break;
      case TraceSlice::Kind::send_wait:
      case TraceSlice::Kind::receive_wait:
        json += fmt::format(
            ",\n"
            R"({{"ph": "X", "name": "{}", "cat": "wait", {}, "args": {{"peer": {}, "bytes": {}, "tag": {}, "phase": {}}}}})",
            slice.kind == TraceSlice::Kind::send_wait ? "send" : "receive", where, slice.peer, slice.bytes, slice.tag,
            phases[slice.phase]);
        break;
      }
    }
  }
  json += fmt::format("\n],\n\"displayTimeUnit\": \"ns\",\n"
                      R"("otherData": {{"run": {}, "iteration": {}, "time_unit": "microseconds of simulated time"}})"
                      "\n}}\n",
                      quoted(run_name), trace.iteration);
  return json;
}

} // namespace sparsim
