// The sparsim command line: run, validate, topology, algorithms, stats.
#include "algorithms/registry.hpp"
#include "sim/cli/sweep.hpp"
#include "sim/network/models/network_model.hpp"
#include "sim/output/results.hpp"
#include "sim/output/trace.hpp"
#include "sim/run/config.hpp"
#include "sim/run/driver.hpp"
#include "sim/run/gradient_stats.hpp"
#include "sim/run/memory.hpp"
#include "sim/run/wall_estimate.hpp"
#include "topologies/network_graph.hpp"

#include <atomic>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fstream>
#include <iostream>
#include <malloc.h>
#include <thread>
#include <unistd.h>

namespace {

constexpr const char* kUsage = R"(sparsim: simulate sparse and dense allreduces on SimGrid platforms

usage:
  sparsim run CONFIG.json [--out DIR] [--quiet] [--threads N] [--time-limit T]
                           [--trace FILE.json [--trace-iteration I]]
                                                  run an experiment; results go to DIR
                                                  (default results/<config name>); --relative-to D
                                                  resolves the config's relative paths against D;
                                                  N host threads prepare sparse ranks' gradients and
                                                  selections (default: all cores; same results);
                                                  past the wall-clock limit T ("90s", "2h") the run
                                                  stops before its next iteration and writes the
                                                  iterations done, marked partial in the manifest
                                                  --trace writes iteration I's timeline (default: the
                                                  last) in Chrome trace format for Perfetto
  sparsim sweep SWEEP.json [--out DIR] [--jobs N] [--threads M] [--resume] [--only PATH=VALUE]...
                                                  run every point of a sweep (default DIR
                                                  results/<sweep name>, N the machine's cores,
                                                  M selection threads per point, default cores / N);
                                                  --resume skips complete points; DIR/summary.csv
                                                  gathers them; Ctrl-C stops cleanly (resume later);
                                                  --only runs the points whose config has VALUE at
                                                  PATH (repeat: any value of one path, all paths),
                                                  e.g. --only ranks=128 --only gradients.model=vgg16;
                                                  the other points' folders are left as they are
  sparsim sweep SWEEP.json --out DIR --emit-slurm [--chunk N] [--resume] [--only PATH=VALUE]...
                                                  write DIR/sweep.sbatch (a Slurm job array, N points
                                                  per task, default 1) and DIR/gather.sbatch; runs nothing
  sparsim sweep SWEEP.json --out DIR --gather     rebuild DIR/summary.csv from the complete points
  sparsim validate CONFIG.json                    check a config, its memory and its routes; runs nothing
  sparsim topology CONFIG.json [--dot FILE]       describe the platform; --dot writes Graphviz DOT
                                                  (FILE "-" for standard output)
  sparsim algorithms                              list the registered algorithms
  sparsim stats CONFIG.json [--iterations N] [--warmup N] [--json FILE [--per-iteration]] [--threads N]
                                                  statistics of the config's gradients under top-k with error
                                                  feedback (docs/gradients.md); defaults 20 and 50; --json
                                                  also writes them, with per-layer shares, to FILE, and with
                                                  --per-iteration each measured iteration's figures; N host
                                                  threads for the mean-field residual (default: all cores;
                                                  the figures do not depend on N)
  sparsim COMMAND --help                          that command's usage
  sparsim --help                                  this text

Exit status: 0 success, 1 the run failed, 2 bad arguments or a bad config, 3 a run stopped by its
--time-limit (partial results written), 130 a run stopped by Ctrl-C/SIGINT (before its next iteration;
partial results written; a second Ctrl-C quits at once, writing nothing) or a sweep stopped by Ctrl-C/SIGINT
or SIGTERM.
Config fields are documented in docs/config.md.
)";

// The lines of kUsage that describe `command` ("sparsim run ..." and its continuation lines), or "" for a
// command the text does not name.
std::string command_usage(const std::string& command)
{
  const std::string text = kUsage;
  const std::string head = "  sparsim " + command + " ";
  std::string blocks;
  bool in_block = false;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    const std::string line = text.substr(at, end - at);
    at = end + 1;
    if (line.rfind("  sparsim ", 0) == 0)
      in_block = line.rfind(head, 0) == 0 || line == head.substr(0, head.size() - 1);
    else if (line.rfind("   ", 0) != 0)
      in_block = false;
    if (in_block)
      blocks += line + "\n";
  }
  return blocks;
}

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Arguments {
  std::string command;
  std::string config;
  std::string out;
  std::string dot;
  std::string relative_to;
  int jobs = 0;  // sweep: 0 = the machine's cores
  int chunk = 0; // sweep --emit-slurm: 0 = not given (1)
  bool resume = false;
  std::vector<std::string> only; // sweep: --only PATH=VALUE filters
  bool emit_slurm = false;
  bool gather = false;
  bool quiet = false;
  int threads = 0;            // run: 0 = all cores
  double time_limit = 0;      // run: wall-clock seconds, 0 = none
  std::string trace;          // run: the trace file, empty for none
  int trace_iteration = -1;   // run: -1 = the last iteration
  int iterations = 20;        // stats
  int warmup = 50;            // stats
  std::string json;           // stats: the JSON file, empty for none
  bool per_iteration = false; // stats: the JSON file also has each measured iteration's figures
  bool help = false;          // COMMAND --help
};

// The value of a whole-number flag, at least `minimum`.
int whole_number(const std::string& flag, const std::string& text, int minimum)
{
  int count = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), count);
  if (error != std::errc() || end != text.data() + text.size() || count < minimum)
    throw UsageError(fmt::format("{} takes a whole number >= {}, not \"{}\"", flag, minimum, text));
  return count;
}

Arguments parse_arguments(int argc, char** argv)
{
  Arguments args;
  if (argc < 2)
    throw UsageError("no command given");
  args.command = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--help" || arg == "-h") && !command_usage(args.command).empty()) {
      args.help = true;
      return args;
    }
    auto value = [&](const char* flag) {
      if (i + 1 >= argc)
        throw UsageError(fmt::format("{} needs a value", flag));
      return std::string(argv[++i]);
    };
    if (arg == "--out" && (args.command == "run" || args.command == "sweep"))
      args.out = value("--out");
    else if (arg == "--relative-to" && args.command == "run")
      args.relative_to = value("--relative-to");
    else if ((arg == "--jobs" || arg == "--chunk") && args.command == "sweep")
      (arg == "--jobs" ? args.jobs : args.chunk) = whole_number(arg, value(arg.c_str()), 1);
    else if (arg == "--resume" && args.command == "sweep")
      args.resume = true;
    else if (arg == "--only" && args.command == "sweep")
      args.only.push_back(value("--only"));
    else if (arg == "--emit-slurm" && args.command == "sweep")
      args.emit_slurm = true;
    else if (arg == "--gather" && args.command == "sweep")
      args.gather = true;
    else if (arg == "--quiet" && args.command == "run")
      args.quiet = true;
    else if (arg == "--time-limit" && args.command == "run") {
      const std::string text = value("--time-limit");
      const auto limit = sparsim::parse_duration(text);
      if (!limit || *limit <= 0)
        throw UsageError(fmt::format(
            "--time-limit takes a positive duration such as \"90s\", \"30min\" or \"2h\", not \"{}\"", text));
      args.time_limit = *limit;
    } else if (arg == "--threads" && (args.command == "run" || args.command == "sweep" || args.command == "stats"))
      args.threads = whole_number(arg, value("--threads"), 1);
    else if (arg == "--trace" && args.command == "run")
      args.trace = value("--trace");
    else if (arg == "--trace-iteration" && args.command == "run")
      args.trace_iteration = whole_number(arg, value("--trace-iteration"), 0);
    else if (arg == "--dot" && args.command == "topology")
      args.dot = value("--dot");
    else if (arg == "--iterations" && args.command == "stats")
      args.iterations = whole_number(arg, value(arg.c_str()), 1);
    else if (arg == "--warmup" && args.command == "stats")
      args.warmup = whole_number(arg, value(arg.c_str()), 0);
    else if (arg == "--json" && args.command == "stats")
      args.json = value("--json");
    else if (arg == "--per-iteration" && args.command == "stats")
      args.per_iteration = true;
    else if (!arg.empty() && arg[0] != '-' && args.config.empty())
      args.config = arg;
    else
      throw UsageError(fmt::format("unexpected argument \"{}\" for \"{}\"", arg, args.command));
  }
  const bool needs_config =
      args.command == "run" || args.command == "validate" || args.command == "topology" || args.command == "stats";
  if (needs_config && args.config.empty())
    throw UsageError(fmt::format("\"{}\" needs a CONFIG.json", args.command));
  if (args.per_iteration && args.json.empty())
    throw UsageError("--per-iteration goes with --json FILE");
  if (args.trace_iteration >= 0 && args.trace.empty())
    throw UsageError("--trace-iteration goes with --trace FILE.json");
  if (args.command == "sweep") {
    if (args.config.empty())
      throw UsageError("\"sweep\" needs a SWEEP.json");
    if (args.emit_slurm && args.gather)
      throw UsageError("--emit-slurm and --gather are two separate steps: give one of them");
    if ((args.emit_slurm || args.gather) && args.out.empty())
      throw UsageError("--emit-slurm and --gather need --out DIR");
    if (args.chunk > 0 && !args.emit_slurm)
      throw UsageError("--chunk goes with --emit-slurm");
    if (args.jobs > 0 && (args.emit_slurm || args.gather))
      throw UsageError("--jobs is for local sweeps, not with --emit-slurm or --gather");
    if (args.threads > 0 && (args.emit_slurm || args.gather))
      throw UsageError("--threads is for local sweeps (Slurm tasks use their CPUs per task), not with --emit-slurm "
                       "or --gather");
    if (args.resume && args.gather)
      throw UsageError("--gather reads the complete points as they are; --resume does not apply");
    if (!args.only.empty() && args.gather)
      throw UsageError("--gather gathers every complete point; --only does not apply");
  }
  return args;
}

std::string joined_command_line(int argc, char** argv)
{
  std::string line;
  for (int i = 0; i < argc; ++i) {
    if (i > 0)
      line += ' ';
    line += argv[i];
  }
  return line;
}

// The network model validate and the long-run warning set beside the config's own.
const sparsim::NetworkModel& compared_model(const sparsim::ExperimentConfig& config)
{
  return sparsim::network_model(sparsim::network_model(config.network.model).compared_with);
}

// Ctrl-C during `sparsim run`: the first stops the run before its next iteration, and the iterations it completed
// are written (exit status 130); the handler is then reset (SA_RESETHAND), so a second Ctrl-C ends the process
// at once. The handler only sets a lock-free flag and writes a fixed message.
std::atomic<bool> run_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free);
extern "C" void interrupt_run(int)
{
  run_interrupted.store(true);
  constexpr char kMessage[] = "\nsparsim: interrupted: stopping before the next iteration to write the iterations "
                              "completed (Ctrl-C again to quit at once, writing nothing)\n";
  [[maybe_unused]] const ssize_t written = write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
}

int command_run(const Arguments& args, const std::string& command_line)
{
  // Selections and messages are vectors of a few MiB allocated and freed all the time: keep them in the
  // heap instead of mapping fresh zeroed pages for each (system time 5x lower at scale, docs/scale.md).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  const sparsim::ExperimentConfig config =
      args.relative_to.empty() ? sparsim::load_config(args.config)
                               : sparsim::load_config(args.config, nullptr, std::filesystem::path(args.relative_to));
  sparsim::check_memory(config);
  const std::filesystem::path out =
      args.out.empty() ? std::filesystem::path("results") / config.name : std::filesystem::path(args.out);
  const int threads = args.threads > 0 ? args.threads : sparsim::machine_cores();
  const auto install_interrupt_handler = [] {
    struct sigaction on_interrupt {};
    on_interrupt.sa_handler = interrupt_run;
    on_interrupt.sa_flags = SA_RESETHAND;
    sigemptyset(&on_interrupt.sa_mask);
    sigaction(SIGINT, &on_interrupt, nullptr);
  };
  install_interrupt_handler();
  if (!args.quiet) {
    fmt::print(stderr, "sparsim: running {} ({} on {} ranks, {} iteration(s))\n", args.config, config.algorithm->name(),
               config.ranks, config.iterations);
    const std::string warning =
        sparsim::long_run_warning(config, sparsim::estimate_wall_time(config, threads),
                                  sparsim::estimate_wall_time(config, threads, compared_model(config)));
    if (!warning.empty())
      fmt::print(stderr, "sparsim: warning: {}\n", warning);
  }
  // This run replaces the results of an earlier run in its folder: they go before it starts (the manifest
  // first), so a run killed half-way leaves no result files rather than another run's.
  for (const char* file : {"manifest.json", "results.csv", "ranks.csv", "links.csv"})
    std::filesystem::remove(out / file);
  sparsim::RunOptions options;
  options.show_progress = !args.quiet;
  options.threads = threads;
  options.wall_limit = args.time_limit;
  options.interrupted = &run_interrupted;
  options.install_interrupt_handler = install_interrupt_handler;
  if (!args.trace.empty()) {
    options.trace_iteration = args.trace_iteration >= 0 ? args.trace_iteration : config.iterations - 1;
    if (options.trace_iteration >= config.iterations)
      throw UsageError(fmt::format("--trace-iteration {} is past the run's last iteration ({} of iterations 0..{})",
                                   options.trace_iteration, config.iterations - 1, config.iterations - 1));
  }
  const int trace_iteration = options.trace_iteration;
  const sparsim::RunOutput output = sparsim::run_experiment(config, options);
  sparsim::write_results(out, config, output, sparsim::collect_provenance(command_line));
  if (!args.trace.empty())
    sparsim::write_file_atomically(args.trace, sparsim::chrome_trace_json(output.trace, config.name));
  if (!args.quiet) {
    fmt::print("{}  results    {}\n", sparsim::summarize_run(config, output), out.string());
    if (!args.trace.empty())
      fmt::print("  trace      {} (iteration {})\n", args.trace, trace_iteration);
  }
  if (output.interrupted)
    return 130;
  return output.completed_iterations < config.iterations ? 3 : 0;
}

// A count for people: "624", "134.9 k", "67.3 M".
std::string count_text(double count)
{
  if (count < 1e4)
    return fmt::format("{:.0f}", count);
  return count < 1e7 ? fmt::format("{:.1f} k", count / 1e3) : fmt::format("{:.1f} M", count / 1e6);
}

int command_validate(const Arguments& args)
{
  const sparsim::ExperimentConfig config = sparsim::load_config(args.config);
  sparsim::check_memory(config);
  const auto routes = sparsim::summarize_routes(*config.topology, config.rank_nodes());
  const auto memory = sparsim::estimate_memory(config);
  const sparsim::NetworkModel& model = sparsim::network_model(config.network.model);
  const std::string network = fmt::format(
      "{} ({}){}", model.name, model.summary,
      model.runtimes.size() > 1 ? ", ranks as " + sparsim::runtime_description(config.network.runtime) : "");
  const int threads = sparsim::machine_cores();
  const sparsim::WallEstimate wall = sparsim::estimate_wall_time(config, threads);
  fmt::print("{}: valid\n  {} on {} ranks, n = {}, {} iteration(s)\n  platform {}\n  network  {}\n  routes latency "
             "{} .. {}, bottleneck bandwidth {} .. {}\n  memory   about {} ({})\n",
             args.config, config.algorithm->name(), config.ranks, config.workload.n, config.iterations,
             config.topology->describe(), network, sparsim::format_duration(routes.latency_min),
             sparsim::format_duration(routes.latency_max), sparsim::format_bandwidth(routes.bandwidth_min),
             sparsim::format_bandwidth(routes.bandwidth_max), sparsim::format_bytes(memory.bytes), memory.breakdown);
  fmt::print("  messages {} in all, {} per iteration{}\n", count_text(wall.messages),
             count_text(wall.messages_per_iteration),
             wall.messages_upper_bound ? " (at most: the count depends on the data)" : "");
  const std::string parts = config.is_sparse() ? fmt::format(" on {} thread(s): selection stage {}, simulation {}",
                                                             threads, sparsim::format_wall_time(wall.selection_stage),
                                                             sparsim::format_wall_time(wall.network))
                                               : "";
  const sparsim::WallEstimate other = sparsim::estimate_wall_time(config, threads, compared_model(config));
  fmt::print("  wall     about {}{} (rough, within about 3x: host costs measured on a 2-core machine, "
             "docs/benchmarks.md); under {} about {}\n",
             sparsim::format_wall_time(wall.total()), parts, fmt::format("network.model \"{}\"", model.compared_with),
             sparsim::format_wall_time(other.total()));
  if (const std::string warning = sparsim::long_run_warning(config, wall, other); !warning.empty())
    fmt::print("  warning  {}\n", warning);
  return 0;
}

int command_topology(const Arguments& args)
{
  const sparsim::ExperimentConfig config = sparsim::load_config(args.config);
  const sparsim::NetworkGraph graph = config.topology->graph();
  if (args.dot == "-") {
    graph.write_dot(std::cout);
    return 0;
  }
  fmt::print("{}\n  {} vertices, {} links in the graph view\n", config.topology->describe(), graph.vertex_count(),
             graph.edge_count());
  if (!args.dot.empty()) {
    std::ofstream out(args.dot);
    graph.write_dot(out);
    if (!out)
      throw std::runtime_error("cannot write " + args.dot);
    fmt::print("  DOT written to {}\n", args.dot);
  }
  return 0;
}

int command_stats(const Arguments& args)
{
  const sparsim::ExperimentConfig config = sparsim::load_config(args.config);
  sparsim::GradientStatsOptions options;
  options.ranks = config.ranks;
  options.n = config.workload.n;
  options.k = config.workload.k;
  options.iterations = args.iterations;
  options.warmup = args.warmup;
  options.reuse = config.selection;
  options.reuse.policy = sparsim::SelectionPolicy::threshold_reuse;
  options.mean_field = config.selection.residual == sparsim::ResidualKind::mean_field;
  options.layers = config.gradients->layer_ranges();
  options.threads = args.threads > 0 ? args.threads : sparsim::machine_cores();
  const sparsim::GradientStats stats = sparsim::measure_gradient_stats(*config.gradients, options);
  fmt::print("{}: {} gradients\n{}", args.config, config.gradients->name(), sparsim::format_gradient_stats(stats));
  if (!args.json.empty()) { // complete under a temporary name, then renamed: never a half-written file
    const std::string temporary = args.json + ".partial";
    {
      std::ofstream out(temporary);
      out << stats.to_json(args.per_iteration).dump(1) << '\n';
      if (!out.flush())
        throw std::runtime_error("cannot write " + args.json);
    }
    std::filesystem::rename(temporary, args.json);
  }
  return 0;
}

int command_sweep(const Arguments& args)
{
  const sparsim::Sweep sweep = sparsim::load_sweep(args.config);
  sparsim::SweepOptions options;
  options.out = args.out.empty() ? std::filesystem::path("results") / sweep.name : std::filesystem::path(args.out);
  options.jobs = args.jobs > 0 ? args.jobs : sparsim::machine_cores();
  options.threads = args.threads;
  options.resume = args.resume;
  options.executable = std::filesystem::canonical("/proc/self/exe").string();
  for (const std::string& text : args.only) {
    try {
      options.only.push_back(sparsim::parse_point_filter(text));
    } catch (const std::invalid_argument& e) {
      throw UsageError(fmt::format("--only {}: {}", text, e.what()));
    }
  }
  const std::size_t selected = sparsim::selected_points(sweep, options.only).size();
  if (selected == 0)
    throw UsageError(fmt::format("--only {} selects none of the sweep's {} points (the paths and values are "
                                 "compared with each point's config as written, e.g. ranks=128)",
                                 fmt::join(args.only, " --only "), sweep.points.size()));

  if (args.gather) {
    const std::size_t complete = sparsim::write_summary(sweep, options.out);
    fmt::print("{}: {} of {} points complete; summary in {}\n", sweep.name, complete, sweep.points.size(),
               (options.out / "summary.csv").string());
    for (std::size_t i = 0; i < sweep.points.size(); ++i)
      if (!std::filesystem::exists(sparsim::point_dir(options.out, i) / "manifest.json"))
        fmt::print("  incomplete: point {:04d} ({}), see {}\n", i, sweep.points[i].label,
                   (sparsim::point_dir(options.out, i) / "run.log").string());
    return complete == sweep.points.size() ? 0 : 1;
  }

  if (args.emit_slurm) {
    const int chunk = args.chunk > 0 ? args.chunk : 1;
    const std::size_t count = sparsim::emit_slurm(sweep, options, chunk);
    if (count == 0) {
      fmt::print("{}: every point is complete already; rebuild the summary with\n  {} sweep {} --out {} --gather\n",
                 sweep.name, options.executable, sweep.file.string(), options.out.string());
      return 0;
    }
    const std::string out = std::filesystem::canonical(options.out).string();
    fmt::print("{}: {} points in {} array task(s) of up to {}; configs in {}/points/NNNN/config.json\n"
               "submit the array, then the gather step after it:\n"
               "  sbatch {}/sweep.sbatch\n"
               "  sbatch --dependency=afterany:ARRAY_JOB_ID {}/gather.sbatch\n"
               "or both at once:\n"
               "  jobid=$(sbatch --parsable {}/sweep.sbatch | cut -d';' -f1) && "
               "sbatch --dependency=afterany:$jobid {}/gather.sbatch\n",
               sweep.name, count, (count + chunk - 1) / chunk, chunk, out, out, out, out, out);
    return 0;
  }

  const sparsim::SweepOutcome outcome = sparsim::run_sweep(sweep, options);
  if (outcome.interrupted) {
    fmt::print("{}: interrupted; summary of the complete points in {}; continue with --resume\n", sweep.name,
               (options.out / "summary.csv").string());
    return 130;
  }
  fmt::print("{}: {} points{}, {} failed; summary in {}\n", sweep.name, selected,
             options.only.empty() ? "" : fmt::format(" selected by --only (of {})", sweep.points.size()),
             outcome.failed, (options.out / "summary.csv").string());
  return outcome.failed == 0 ? 0 : 1;
}

int command_algorithms()
{
  for (const auto& entry : sparsim::algorithm_registry())
    fmt::print("{:<28} {:<7} {}\n", entry.name, entry.kind, entry.summary);
  return 0;
}

} // namespace

int main(int argc, char** argv)
{
  try {
    const Arguments args = parse_arguments(argc, argv);
    if (args.command == "--help" || args.command == "-h" || args.command == "help") {
      fmt::print("{}", kUsage);
      return 0;
    }
    if (args.help) {
      fmt::print("usage:\n{}\nConfig fields are documented in docs/config.md.\n", command_usage(args.command));
      return 0;
    }
    if (args.command == "run")
      return command_run(args, joined_command_line(argc, argv));
    if (args.command == "validate")
      return command_validate(args);
    if (args.command == "topology")
      return command_topology(args);
    if (args.command == "sweep")
      return command_sweep(args);
    if (args.command == "algorithms")
      return command_algorithms();
    if (args.command == "stats")
      return command_stats(args);
    throw UsageError(fmt::format("unknown command \"{}\"", args.command));
  } catch (const UsageError& e) {
    fmt::print(stderr, "sparsim: {}\n\n{}", e.what(), kUsage);
    return 2;
  } catch (const sparsim::ConfigError& e) {
    fmt::print(stderr, "sparsim: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "sparsim: error: {}\n", e.what());
    return 1;
  }
}
