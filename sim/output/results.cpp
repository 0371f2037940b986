#include "sim/output/results.hpp"

#include "sim/base/data_files.hpp"
#include "sim/output/links.hpp"
#include "sim/run/memory.hpp"

#include <cstdio>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>
#include <unistd.h>
#include <vector>

namespace sparsim {
namespace {

std::string run_command(const std::string& command)
{
  std::string output;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    char buffer[256];
    while (fgets(buffer, sizeof buffer, pipe))
      output += buffer;
    if (pclose(pipe) != 0)
      return "";
  }
  while (!output.empty() && (output.back() == '\n' || output.back() == ' '))
    output.pop_back();
  return output;
}

std::string results_csv(const ExperimentConfig& config, const RunOutput& output)
{
  std::string csv = "algorithm,topology,ranks,n,iteration,phase,sim_time_s,msgs_sent_max,bytes_sent_max,"
                    "bytes_sent_mean,bytes_recv_max,bytes_recv_mean,model_time_s,model_bytes_per_rank,k,"
                    "local_selected_max,local_selected_sum,global_selected,result_nnz,reevaluation,"
                    "lower_bound_bytes\n";
  for (const auto& row : output.rows) {
    csv += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},", config.algorithm->name(), config.topology->type(),
                       config.ranks, config.workload.n, row.iteration, row.phase, row.sim_time, row.msgs_sent_max,
                       row.bytes_sent_max, row.bytes_sent_mean, row.bytes_recv_max, row.bytes_recv_mean);
    csv += row.has_model ? fmt::format("{},{},", row.model_time, row.model_bytes_per_rank) : ",,";
    csv += row.has_sparse
               ? fmt::format("{},{},{},{},{},{},{}\n", row.k, row.local_selected_max, row.local_selected_sum,
                             row.global_selected, row.result_nnz, row.reevaluation ? 1 : 0, row.lower_bound_bytes)
               : ",,,,,,\n";
  }
  return csv;
}

std::string ranks_csv(const RunOutput& output)
{
  std::string csv = "iteration,rank,phase,msgs_sent,bytes_sent,msgs_recv,bytes_recv,time_s\n";
  for (const auto& row : output.rank_rows)
    csv += fmt::format("{},{},{},{},{},{},{},{}\n", row.iteration, row.rank, row.phase, row.stats.msgs_sent,
                       row.stats.bytes_sent, row.stats.msgs_recv, row.stats.bytes_recv, row.stats.time);
  return csv;
}

} // namespace

Provenance collect_provenance(const std::string& command_line)
{
  Provenance p;
  if (running_installed()) {
    // `cmake --install` recorded the source tree's revision beside the data files.
    std::ifstream in(data_dir() / "revision");
    std::getline(in, p.git_revision);
  } else {
    const std::string git = fmt::format("git -C '{}' ", SPARSIM_SOURCE_DIR);
    p.git_revision = run_command(git + "rev-parse HEAD 2>/dev/null");
    if (!p.git_revision.empty() && !run_command(git + "status --porcelain --untracked-files=no 2>/dev/null").empty())
      p.git_revision += "-dirty";
  }
  if (p.git_revision.empty())
    p.git_revision = "unknown";
  p.command_line = command_line;
  return p;
}

std::string config_hash(const nlohmann::json& resolved)
{
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : resolved.dump()) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return fmt::format("{:016x}", hash);
}

// Writes `text` to a temporary file beside `path` (".tmp-PID" appended) and returns its name; renaming it to
// `path` then publishes the complete file in one step.
std::filesystem::path write_temporary(const std::filesystem::path& path, const std::string& text)
{
  const std::filesystem::path temporary = path.string() + fmt::format(".tmp-{}", getpid());
  std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
  out << text;
  out.flush();
  if (!out)
    throw std::runtime_error("cannot write " + temporary.string());
  return temporary;
}

void write_file_atomically(const std::filesystem::path& path, const std::string& text)
{
  std::filesystem::rename(write_temporary(path, text), path);
}

// links.csv by level, in the order levels first appear there: how many link directions carried bytes, their
// bytes in all, the busiest one's and the mean (the spread of load a routing choice changes).
nlohmann::json link_levels(const std::vector<LinkRow>& links)
{
  struct LevelLoad {
    std::string level;
    std::size_t links = 0;
    double bytes = 0, busiest = 0;
  };
  std::vector<LevelLoad> levels;
  std::map<std::string, std::size_t> index; // level name -> its place in `levels`
  for (const LinkRow& row : links) {
    auto [at, added] = index.try_emplace(row.level, levels.size());
    if (added)
      levels.push_back({row.level});
    LevelLoad& level = levels[at->second];
    ++level.links;
    level.bytes += static_cast<double>(row.bytes);
    level.busiest = std::max(level.busiest, static_cast<double>(row.bytes));
  }
  nlohmann::json out = nlohmann::json::array();
  for (const LevelLoad& level : levels)
    out.push_back({{"level", level.level},
                   {"links", level.links},
                   {"bytes", level.bytes},
                   {"busiest_link_bytes", level.busiest},
                   {"mean_link_bytes", level.bytes / static_cast<double>(level.links)}});
  return out;
}

void write_results(const std::filesystem::path& dir, const ExperimentConfig& config, const RunOutput& output,
                   const Provenance& provenance)
{
  const std::vector<std::string> names = {"results.csv", "ranks.csv", "links.csv", "manifest.json"};
  std::filesystem::create_directories(dir);
  // Temporary files of an earlier run killed while writing are garbage: remove them.
  std::vector<std::filesystem::path> leftovers;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    for (const auto& name : names)
      if (entry.path().filename().string().starts_with(name + ".tmp-"))
        leftovers.push_back(entry.path());
  for (const auto& leftover : leftovers)
    std::filesystem::remove(leftover);

  const nlohmann::json resolved = config.resolved();
  nlohmann::json manifest = {
      {"config", resolved},
      {"config_hash", config_hash(resolved)},
      {"git_revision", provenance.git_revision},
      {"seed", config.seed},
      {"command_line", provenance.command_line},
      {"wire_format", config.workload.wire.describe()},
      {"routes",
       {{"latency_min_s", output.routes.latency_min},
        {"latency_max_s", output.routes.latency_max},
        {"bandwidth_min_Bps", output.routes.bandwidth_min},
        {"bandwidth_max_Bps", output.routes.bandwidth_max},
        {"hops_max", output.routes.hops_max}}},
      {"closed_form",
       {{"formula", output.closed_form.formula},
        {"alpha_s", output.cost_inputs.alpha},
        {"beta_s_per_byte", output.cost_inputs.seconds_per_byte},
        {"time_s", output.closed_form.time},
        {"bytes_sent_per_rank", output.closed_form.bytes_sent_per_rank},
        {"bytes_recv_per_rank", output.closed_form.bytes_recv_per_rank}}},
      {"verification",
       {{"checked", output.verified},
        {"what", output.verification},
        {"max_error_over_tolerance", output.verify_max_error}}},
      {"iterations_completed", output.completed_iterations},
      {"partial", output.completed_iterations < config.iterations},
      {"stop_reason", output.stop_reason},
      {"simulated_messages", output.messages},
      {"wall_time_s", output.wall_time},
      {"iteration_wall_s", output.iteration_wall},
      {"iteration_selection_wall_s", output.selection_wall},
      {"iteration_selection_shared_wall_s", output.selection_shared_wall},
      {"peak_rss_bytes", output.peak_rss_bytes},
      {"memory_estimate_bytes", estimate_memory(config).bytes},
      {"training", config.gradients->training_log()},
      {"link_levels", link_levels(output.links)},
      {"files", {"results.csv", "ranks.csv", "links.csv"}},
  };
  if (output.real_run) { // no link is observed: no links.csv (the network fields say so)
    manifest.erase("link_levels");
    manifest["files"] = {"results.csv", "ranks.csv"};
  }

  if (config.topology->gpus_per_node() > 1) { // multi-GPU nodes: the routes and closed-form inputs by level
    for (const auto& [name, level, cost] :
         {std::tuple{"intra_node", output.routes.intra_node, output.cost_inputs.intra_node},
          std::tuple{"inter_node", output.routes.inter_node, output.cost_inputs.inter_node}}) {
      manifest["routes"][name] = {{"latency_max_s", level.latency_max}, {"bandwidth_min_Bps", level.bandwidth_min}};
      manifest["closed_form"][name] = {{"alpha_s", cost.alpha}, {"beta_s_per_byte", cost.seconds_per_byte}};
    }
  }
  manifest.update(output.network_fields); // what the network model records of its run
  if (output.mean_field)                  // selection.residual "mean_field": its memory beside the estimate's
    manifest["mean_field"] = {{"state_bytes", output.mean_field->state_bytes},
                              {"carried_cap_entries_per_rank", output.mean_field->carried_cap},
                              {"carried_largest_store", output.mean_field->carried_largest},
                              {"carried_evicted_entries", output.mean_field->carried_evicted},
                              {"piece_cache_bytes_largest", output.mean_field->piece_cache_largest}};
  // Every file is complete under its temporary name before any is published, so the folder holds a mix of
  // old and new files only for the renames. The manifest vouches for the others: the old one goes
  // first, the new one is published last.
  const std::vector<std::filesystem::path> temporaries = {
      write_temporary(dir / names[0], results_csv(config, output)),
      write_temporary(dir / names[1], ranks_csv(output)),
      output.real_run ? std::filesystem::path() : write_temporary(dir / names[2], links_csv(output.links)),
      write_temporary(dir / names[3], manifest.dump(2) + "\n"),
  };
  std::filesystem::remove(dir / "manifest.json");
  std::filesystem::remove(dir / "links.csv"); // an earlier run's, when this one writes none
  for (std::size_t i = 0; i < names.size(); ++i)
    if (!temporaries[i].empty())
      std::filesystem::rename(temporaries[i], dir / names[i]);
}

std::string summarize_run(const ExperimentConfig& config, const RunOutput& output)
{
  // The closed forms are communication only: the phases the compute model charges (the slowest rank's each,
  // as the notebooks count them) come off the iteration before the comparison.
  const std::set<std::string> local_work = {"compute", "selection", "staging", "reduction"};
  double time_sum = 0, local_sum = 0, sent_max = 0;
  int totals = 0;
  for (const auto& row : output.rows)
    if (row.phase == "total") {
      time_sum += row.sim_time;
      sent_max = std::max(sent_max, row.bytes_sent_max);
      ++totals;
    } else if (local_work.count(row.phase)) {
      local_sum += row.sim_time;
    }
  const double mean_time = totals ? time_sum / totals : 0;
  const double mean_communication = totals ? (time_sum - local_sum) / totals : 0;
  std::string s;
  s += fmt::format("{}: {} on {} ranks, n = {}, {} iteration(s)\n", config.name, config.algorithm->name(), config.ranks,
                   config.workload.n, config.iterations);
  s += fmt::format("  platform   {}\n", config.topology->describe());
  s += fmt::format("  routes     latency {} .. {}, bottleneck bandwidth {} .. {}\n",
                   format_duration(output.routes.latency_min), format_duration(output.routes.latency_max),
                   format_bandwidth(output.routes.bandwidth_min), format_bandwidth(output.routes.bandwidth_max));
  if (local_sum > 0)
    s += fmt::format("  time       {} per iteration, {} of it communication\n", format_duration(mean_time),
                     format_duration(mean_communication));
  s += fmt::format("  {:<10} {} per iteration (closed form, contention-free: {}; ratio {:.4f})\n",
                   local_sum > 0 ? "network" : "time", format_duration(mean_communication),
                   format_duration(output.closed_form.time),
                   output.closed_form.time > 0 ? mean_communication / output.closed_form.time : 0.0);
  s += fmt::format("  volume     {} sent by the busiest rank per iteration (closed form {})\n", format_bytes(sent_max),
                   format_bytes(output.closed_form.bytes_sent_per_rank));
  if (output.verified)
    s += fmt::format("  verified   {} (worst error {:.3g} of the rounding tolerance)\n", output.verification,
                     output.verify_max_error);
  if (output.real_run) // times measured with MPI_Wtime; the memory is rank 0's process
    s += fmt::format("  real run   {} MPI messages, wall {:.2f} s, rank 0's peak memory {}\n", output.messages,
                     output.wall_time, format_bytes(static_cast<double>(output.peak_rss_bytes)));
  else
    s += fmt::format("  simulation {} messages, wall {:.2f} s, peak memory {}\n", output.messages, output.wall_time,
                     format_bytes(static_cast<double>(output.peak_rss_bytes)));
  if (output.completed_iterations < config.iterations)
    s += fmt::format("  PARTIAL    {} of {} iterations: {}\n", output.completed_iterations, config.iterations,
                     output.stop_reason);
  return s;
}

} // namespace sparsim
