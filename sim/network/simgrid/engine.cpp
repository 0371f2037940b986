#include "sim/network/simgrid/engine.hpp"

#include "sim/network/link_level/parking.hpp"

#include <fmt/format.h>
#include <simgrid/Exception.hpp>
#include <simgrid/s4u/Actor.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/version.h>

#include <exception>
#include <memory>

namespace sparsim {

std::vector<std::string> simgrid_options(const std::string& flow_model, bool crosstraffic)
{
  return {
      "--cfg=network/model:" + flow_model,
      std::string("--cfg=network/crosstraffic:") + (crosstraffic ? "1" : "0"),
      // Each rank actor's stack, in KiB (SimGrid's default is 8 MiB): the rank code needs between 16 and 32 KiB
      // (every baseline run passes at 32 KiB and overflows into the guard page at 16), and 4096 stacks 512 KiB apart
      // instead of 8 MiB apart share page-table pages (Ok-Topk at P = 4096: 1.16x, docs/benchmarks.md).
      "--cfg=contexts/stack-size:512",
      "--log=root.thresh:warning",
      "--log=xbt_cfg.thresh:warning",
  };
}

std::string simgrid_version()
{
  return fmt::format("{}.{}.{}", SIMGRID_VERSION_MAJOR, SIMGRID_VERSION_MINOR, SIMGRID_VERSION_PATCH);
}

simgrid::s4u::Engine& start_engine(const std::string& flow_model, bool crosstraffic)
{
  static std::unique_ptr<simgrid::s4u::Engine> engine;
  if (!engine) {
    // The engine takes argc/argv; hand it the network model options.
    std::vector<std::string> args = {"sparsim"};
    for (const auto& option : simgrid_options(flow_model, crosstraffic))
      args.push_back(option);
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    int argc = static_cast<int>(argv.size());
    engine = std::make_unique<simgrid::s4u::Engine>(&argc, argv.data());
  }
  return *engine;
}

int run_rank_actors(const std::vector<simgrid::s4u::Host*>& rank_hosts, const std::function<void(RankId)>& body)
{
  std::exception_ptr failure;
  RankId failed_rank = -1;
  int finished = 0;
  for (RankId rank = 0; rank < static_cast<RankId>(rank_hosts.size()); ++rank) {
    simgrid::s4u::Actor::create(fmt::format("rank{}", rank), rank_hosts[rank], [&, rank] {
      try {
        body(rank);
        ++finished;
      } catch (const simgrid::ForcefulKillException&) {
        throw; // SimGrid ends a rank it killed (a deadlock at the end of the run): not the rank's failure
      } catch (...) {
        if (!failure) {
          failure = std::current_exception();
          failed_rank = rank;
        }
        simgrid::s4u::Actor::kill_all();
      }
    });
  }
  simgrid::s4u::Engine::get_instance()->run();
  if (failure)
    rethrow_rank_failure(failure, failed_rank);
  return finished;
}

} // namespace sparsim
