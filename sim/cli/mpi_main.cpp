// sparsim-mpi: a config's algorithm on real MPI processes, one rank each, with the simulator's gradient sources,
// selection, algorithm files and verification (docs/mpi.md). Process 0 writes results.csv and ranks.csv, in
// the simulator's columns, and the manifest.
#include "sim/network/mpi/mpi_run.hpp"
#include "sim/output/results.hpp"
#include "sim/run/config.hpp"
#include "sim/run/driver.hpp"

#include <mpi.h>

#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <set>
#include <string>

namespace {

constexpr const char* kUsage = R"(sparsim-mpi: run a config's allreduce on real MPI processes, one rank each

usage:
  mpirun -np P sparsim-mpi run CONFIG.json [--out DIR] [--quiet] [--sleep-compute] [--poll-backoff S]
                                   [--relative-to D]
                                   P must equal the config's ranks; results go to DIR (default
                                   results/<config name>-mpi), written by rank 0; --sleep-compute spends the
                                   compute model's charges (training step, selection, reductions) as busy
                                   waits, which are otherwise not spent; --poll-backoff S sleeps between the
                                   polls of a wait that find nothing, from 1 ns doubling up to S seconds
                                   (default 0: yield the core instead; under SMPI the sleep is simulated);
                                   --relative-to D resolves the config's relative paths against D

Exit status: 0 success, 1 the run failed (every process stops), 2 bad arguments or a config this backend
cannot run. docs/mpi.md lists what runs here.
)";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Arguments {
  std::string config;
  std::string out;
  std::string relative_to;
  bool quiet = false;
  sparsim::MpiTransportOptions transport;
};

// The bound of --poll-backoff in seconds: 0 (yield instead of sleeping), or from 1 ns (nanosleep's unit: a shorter
// sleep would be none, and under SMPI a wait would then never advance the clock) to 1 s.
double parse_poll_backoff(const std::string& text)
{
  std::size_t used = 0;
  double seconds = -1;
  try {
    seconds = std::stod(text, &used);
  } catch (const std::logic_error&) {
    used = 0;
  }
  if (used != text.size() || !(seconds == 0 || (seconds >= 1e-9 && seconds <= 1)))
    throw UsageError(fmt::format("--poll-backoff \"{}\": expected 0 or seconds between 1e-9 and 1 (e.g. 1e-8)", text));
  return seconds;
}

Arguments parse_arguments(int argc, char** argv)
{
  if (argc < 2 || std::string(argv[1]) != "run")
    throw UsageError(argc < 2 ? "no command given" : fmt::format("unknown command \"{}\"", argv[1]));
  Arguments args;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        throw UsageError(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--out")
      args.out = value();
    else if (arg == "--relative-to")
      args.relative_to = value();
    else if (arg == "--quiet")
      args.quiet = true;
    else if (arg == "--sleep-compute")
      args.transport.sleep_compute = true;
    else if (arg == "--poll-backoff")
      args.transport.poll_backoff = parse_poll_backoff(value());
    else if (!arg.starts_with("--") && args.config.empty())
      args.config = arg;
    else
      throw UsageError(fmt::format("unknown argument \"{}\"", arg));
  }
  if (args.config.empty())
    throw UsageError("no config given");
  return args;
}

// The algorithms whose payloads cross processes so far: their messages decode from their bytes alone
// (sim/data/wire_codec.hpp, decode_payload).
const std::set<std::string> kRunnableAlgorithms = {"dense_ring",
                                                   "dense_rabenseifner",
                                                   "dense_recursive_doubling",
                                                   "dense_hierarchical",
                                                   "topka",
                                                   "gtopk",
                                                   "oktopk",
                                                   "gaussiank",
                                                   "sparcml_ssar_recursive_double",
                                                   "spardl"};

// Refuses, naming the JSON path, what this backend cannot run yet or cannot run the same as the simulation.
void check_runnable(const sparsim::ExperimentConfig& config, int processes)
{
  using sparsim::ConfigError;
  if (config.ranks != processes)
    throw ConfigError("ranks", std::to_string(config.ranks),
                      fmt::format("the number of MPI processes ({}): run mpirun -np {}", processes, config.ranks));
  const std::string algorithm(config.algorithm->name());
  if (!kRunnableAlgorithms.count(algorithm)) {
    std::string names;
    for (const auto& name : kRunnableAlgorithms) {
      if (!names.empty())
        names += ", ";
      names += name;
    }
    throw ConfigError("algorithm.name", "\"" + algorithm + "\"",
                      "one of the algorithms sparsim-mpi runs so far (" + names + "; docs/mpi.md)");
  }
  if (const nlohmann::json allgather = config.algorithm->params().value("allgather", nlohmann::json());
      algorithm == "topka" && allgather != "ring" && !config.selection.exact_top_k())
    throw ConfigError("algorithm.allgather", allgather.dump(),
                      "\"ring\" under sparsim-mpi unless selection.policy and selection.top_k are \"exact\" (the "
                      "recursive-doubling allgather's bundles decode only when every selection holds k entries)");
  if (const nlohmann::json teams = config.algorithm->params().value("teams", nlohmann::json());
      algorithm == "spardl" && teams != 1)
    throw ConfigError("algorithm.teams", teams.dump(),
                      "1 under sparsim-mpi (with teams a final block's size is its sum's, which its receivers do not "
                      "know: they cannot cut the allgather's bundles apart)");
  if (config.workload.data != sparsim::DataMode::real)
    throw ConfigError("workload.data", "\"phantom\"", "\"real\" under sparsim-mpi (a real run moves values)");
  if (!sparsim::encodable(config.workload.wire))
    throw ConfigError("workload", config.workload.wire.describe(),
                      "index_bytes and value_bytes 4 under sparsim-mpi (only int32 indices and fp32 values encode)");
  if (config.gradients->generates_candidates())
    throw ConfigError("gradients.generation", "\"candidates\"",
                      "\"dense\" under sparsim-mpi (the candidates generation prepares all ranks together)");
  if (config.gradients->closed_loop())
    throw ConfigError("gradients.source", "\"" + config.gradients->name() + "\"",
                      "an open-loop source under sparsim-mpi (a closed-loop source trains one model for all ranks)");
}

int run(const Arguments& args, const std::string& command_line, int rank, int processes)
{
  const sparsim::ExperimentConfig config =
      args.relative_to.empty() ? sparsim::load_config(args.config)
                               : sparsim::load_config(args.config, nullptr, std::filesystem::path(args.relative_to));
  check_runnable(config, processes);
  const std::filesystem::path out =
      args.out.empty() ? std::filesystem::path("results") / (config.name + "-mpi") : std::filesystem::path(args.out);
  if (rank == 0) {
    for (const char* file : {"manifest.json", "results.csv", "ranks.csv", "links.csv"})
      std::filesystem::remove(out / file);
    if (!args.quiet)
      fmt::print(stderr, "sparsim-mpi: running {} ({} on {} MPI processes, {} iteration(s))\n", args.config,
                 config.algorithm->name(), config.ranks, config.iterations);
  }
  sparsim::MpiRun network(config.ranks, args.transport);
  sparsim::RunOptions options;
  options.show_progress = rank == 0 && !args.quiet;
  options.network = &network;
  const sparsim::RunOutput output = sparsim::run_experiment(config, options);
  if (rank == 0) {
    sparsim::write_results(out, config, output, sparsim::collect_provenance(command_line));
    if (!args.quiet)
      fmt::print("{}  results    {}\n", sparsim::summarize_run(config, output), out.string());
  }
  return 0;
}

} // namespace

int main(int argc, char** argv)
{
  MPI_Init(&argc, &argv);
  int rank = 0, processes = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &processes);
  std::string command_line;
  for (int i = 0; i < argc; ++i) {
    if (i > 0)
      command_line += ' ';
    command_line += argv[i];
  }
  int status = 0;
  if (argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    if (rank == 0)
      fmt::print("{}", kUsage);
    MPI_Finalize();
    return 0;
  }
  // Bad arguments and configs are found the same way by every process before any message: all exit 2.
  try {
    status = run(parse_arguments(argc, argv), command_line, rank, processes);
  } catch (const UsageError& e) {
    if (rank == 0)
      fmt::print(stderr, "sparsim-mpi: {}\n\n{}", e.what(), kUsage);
    status = 2;
  } catch (const sparsim::ConfigError& e) {
    if (rank == 0)
      fmt::print(stderr, "sparsim-mpi: {}\n", e.what());
    status = 2;
  } catch (const std::exception& e) {
    // A failure during the run: its peers may wait on this rank forever, so every process stops.
    fmt::print(stderr, "sparsim-mpi: error on rank {}: {}\n", rank, e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return status;
}
