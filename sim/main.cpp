// The sparsim command line: run, validate, topology, algorithms, stats.
#include "algorithms/registry.hpp"
#include "sim/config.hpp"
#include "sim/calibrated_source.hpp"
#include "sim/driver.hpp"
#include "sim/gradient_stats.hpp"
#include "sim/memory.hpp"
#include "sim/results.hpp"
#include "sim/sweep.hpp"
#include "topologies/network_graph.hpp"

#include <simgrid/s4u/Engine.hpp>

#include <charconv>
#include <cstdio>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <thread>
#include <unistd.h>

namespace {

constexpr const char* kUsage = R"(sparsim: simulate sparse and dense allreduces on SimGrid platforms

usage:
  sparsim run CONFIG.json [--out DIR] [--quiet] [--threads N]
                                                  run an experiment; results go to DIR
                                                  (default results/<config name>); --relative-to D
                                                  resolves the config's relative paths against D;
                                                  N host threads prepare sparse ranks' gradients and
                                                  selections (default: all cores; same results)
  sparsim sweep SWEEP.json [--out DIR] [--jobs N] [--resume]
                                                  run every point of a sweep (default DIR
                                                  results/<sweep name>, N 1); --resume skips
                                                  complete points; DIR/summary.csv gathers them
  sparsim validate CONFIG.json                    check a config and build its platform; runs nothing
  sparsim topology CONFIG.json [--dot FILE]       describe the platform; --dot writes Graphviz DOT
                                                  (FILE "-" for standard output)
  sparsim algorithms                              list the registered algorithms
  sparsim stats CONFIG.json [--iterations N] [--warmup N]
                                                  statistics of the config's gradients under top-k with error
                                                  feedback (docs/gradients.md); defaults 20 and 50
  sparsim --help                                  this text

Exit status: 0 success, 1 the run failed, 2 bad arguments or a bad config.
Config fields are documented in docs/config.md.
)";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Arguments {
  std::string command;
  std::string config;
  std::string out;
  std::string dot;
  std::string relative_to;
  int jobs = 1;
  bool resume = false;
  bool quiet = false;
  int threads = 0;      // run: 0 = all cores
  int iterations = 20;  // stats
  int warmup = 50;      // stats
};

Arguments parse_arguments(int argc, char** argv)
{
  Arguments args;
  if (argc < 2)
    throw UsageError("no command given");
  args.command = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* flag) {
      if (i + 1 >= argc)
        throw UsageError(fmt::format("{} needs a value", flag));
      return std::string(argv[++i]);
    };
    if (arg == "--out" && (args.command == "run" || args.command == "sweep"))
      args.out = value("--out");
    else if (arg == "--relative-to" && args.command == "run")
      args.relative_to = value("--relative-to");
    else if (arg == "--jobs" && args.command == "sweep") {
      const std::string jobs = value("--jobs");
      if (jobs.empty() || jobs.find_first_not_of("0123456789") != std::string::npos || std::stoi(jobs) < 1)
        throw UsageError(fmt::format("--jobs takes a whole number >= 1, not \"{}\"", jobs));
      args.jobs = std::stoi(jobs);
    } else if (arg == "--resume" && args.command == "sweep")
      args.resume = true;
    else if (arg == "--quiet" && args.command == "run")
      args.quiet = true;
    else if (arg == "--threads" && args.command == "run") {
      const std::string text = value("--threads");
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), args.threads);
      if (error != std::errc() || end != text.data() + text.size() || args.threads < 1)
        throw UsageError(fmt::format("--threads takes a whole number >= 1, not \"{}\"", text));
    }
    else if (arg == "--dot" && args.command == "topology")
      args.dot = value("--dot");
    else if ((arg == "--iterations" || arg == "--warmup") && args.command == "stats") {
      const std::string text = value(arg.c_str());
      int& count = arg == "--iterations" ? args.iterations : args.warmup;
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), count);
      if (error != std::errc() || end != text.data() + text.size() || count < (arg == "--iterations" ? 1 : 0))
        throw UsageError(fmt::format("{} needs a whole number (at least 1 for --iterations), got \"{}\"", arg, text));
    }
    else if (!arg.empty() && arg[0] != '-' && args.config.empty())
      args.config = arg;
    else
      throw UsageError(fmt::format("unexpected argument \"{}\" for \"{}\"", arg, args.command));
  }
  const bool needs_config = args.command == "run" || args.command == "validate" || args.command == "topology" ||
                            args.command == "stats";
  if (needs_config && args.config.empty())
    throw UsageError(fmt::format("\"{}\" needs a CONFIG.json", args.command));
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

int command_run(const Arguments& args, const std::string& command_line)
{
  const sparsim::ExperimentConfig config =
      args.relative_to.empty() ? sparsim::load_config(args.config)
                               : sparsim::load_config(args.config, nullptr, std::filesystem::path(args.relative_to));
  sparsim::check_memory(config);
  const std::filesystem::path out = args.out.empty() ? std::filesystem::path("results") / config.name : std::filesystem::path(args.out);
  if (!args.quiet)
    fmt::print(stderr, "sparsim: running {} ({} on {} ranks, {} iteration(s))\n", args.config,
               config.algorithm->name(), config.ranks, config.iterations);
  const int threads = args.threads > 0 ? args.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const sparsim::RunOutput output = sparsim::run_experiment(config, !args.quiet, threads);
  sparsim::write_results(out, config, output, sparsim::collect_provenance(command_line));
  if (!args.quiet)
    fmt::print("{}  results    {}\n", sparsim::summarize_run(config, output), out.string());
  return 0;
}

int command_validate(const Arguments& args)
{
  const sparsim::ExperimentConfig config = sparsim::load_config(args.config);
  sparsim::check_memory(config);
  sparsim::start_engine(config.network);
  const auto routes = sparsim::summarize_routes(sparsim::build_rank_hosts(config));
  const auto memory = sparsim::estimate_memory(config);
  fmt::print("{}: valid\n  {} on {} ranks, n = {}, {} iteration(s)\n  platform {}\n  routes latency {} .. {}, "
             "bottleneck bandwidth {} .. {}\n  memory   about {} ({})\n",
             args.config, config.algorithm->name(), config.ranks, config.workload.n, config.iterations,
             config.topology->describe(), sparsim::format_duration(routes.latency_min),
             sparsim::format_duration(routes.latency_max), sparsim::format_bandwidth(routes.bandwidth_min),
             sparsim::format_bandwidth(routes.bandwidth_max), sparsim::format_bytes(memory.bytes), memory.breakdown);
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
  options.reuse.policy = "threshold_reuse";
  if (const auto* calibrated = dynamic_cast<const sparsim::CalibratedSource*>(config.gradients.get()))
    for (const auto& layer : calibrated->layers())
      if (layer.output && layer.size > 0) {
        options.output_begin = options.output_end == 0 ? layer.begin : std::min(options.output_begin, layer.begin);
        options.output_end = std::max(options.output_end, layer.begin + layer.size);
      }
  fmt::print("{}: {} gradients\n{}", args.config, config.gradients->name(),
             sparsim::format_gradient_stats(sparsim::measure_gradient_stats(*config.gradients, options)));
  return 0;
}

int command_sweep(const Arguments& args)
{
  const sparsim::Sweep sweep = sparsim::load_sweep(args.config);
  sparsim::SweepOptions options;
  options.out = args.out.empty() ? std::filesystem::path("results") / sweep.name : std::filesystem::path(args.out);
  options.jobs = args.jobs;
  options.resume = args.resume;
  options.executable = std::filesystem::canonical("/proc/self/exe").string();
  const int failures = sparsim::run_sweep(sweep, options);
  fmt::print("{}: {} points, {} failed; summary in {}\n", sweep.name, sweep.points.size(), failures,
             (options.out / "summary.csv").string());
  return failures == 0 ? 0 : 1;
}

int command_algorithms()
{
  for (const auto& entry : sparsim::algorithm_registry())
    fmt::print("{:<28} {:<7} {}\n", entry.name, entry.kind, entry.summary);
  return 0;
}

}  // namespace

int main(int argc, char** argv)
{
  try {
    const Arguments args = parse_arguments(argc, argv);
    if (args.command == "--help" || args.command == "-h" || args.command == "help") {
      fmt::print("{}", kUsage);
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
