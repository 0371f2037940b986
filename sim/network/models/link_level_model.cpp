// The link-level model ("LinkLevel"): the project's own per-link timing (sim/network/link_level/), every link
// direction shared equally among the messages crossing it; the ranks run as fibers (the default) or as SimGrid
// actors on one host (network.runtime "simgrid": SimGrid's engine then only switches the ranks).
#include "sim/network/fibers/fiber_ranks.hpp"
#include "sim/network/link_level/transport.hpp"
#include "sim/network/models/link_slots.hpp"
#include "sim/network/models/model_list.hpp"
#include "sim/network/simgrid/engine.hpp"
#include "sim/network/simgrid/parking.hpp"

#include <fmt/format.h>

namespace sparsim {
namespace {

// The SimGrid model whose engine runs the ranks as actors (the link-level model approximates CM02).
constexpr const char* kApproximated = "CM02";

// Measured with the ranks as fibers, the default runtime (docs/benchmarks.md, "Wall-time estimate"): the dense
// ring with phantom data, and Ok-Topk at n = 2^18 (its merges and sums negligible). SimGrid actors cost up to
// 1.5x more (the ring at P = 1024), so the estimate errs on the short side for them.
constexpr MessageCost kLinkLevelCosts[] = {
    {256, 0.9e-6, 1.0e-6}, {1024, 1.0e-6, 2.0e-6}, {2048, 2.5e-6, 2.9e-6}, {4096, 2.8e-6, 3.0e-6}};

class LinkLevelRun : public NetworkRun {
public:
  explicit LinkLevelRun(const NetworkSite& site)
      : fibers_(site.options.fibers())
      , adaptive_(site.topology.adaptive_routing().candidates > 0)
      , link_loads_(site_link_loads(site))
  {
    if (fibers_) {
      auto fibers = std::make_unique<FiberRanks>(site.ranks, site.options.fiber_stack);
      fiber_ranks_ = fibers.get();
      parking_ = std::move(fibers);
    } else {
      start_engine(kApproximated);
      static int platforms = 0; // one engine per process: every platform needs a new name
      simgrid::s4u::Host* host = build_single_host_platform(fmt::format("link_level{}", platforms++));
      rank_hosts_.assign(static_cast<std::size_t>(site.ranks), host);
      parking_ = std::make_unique<ActorParking>(site.ranks);
    }
    // The transport times messages along the same routes the link loads count them on.
    transport_ = std::make_unique<LinkLevelTransport>(site.ranks, *parking_, link_slot_specs(site.graph),
                                                      link_loads_.route(), &link_loads_);
  }
  Transport& transport() override { return *transport_; }
  const LinkLoadCounter& link_loads() const override { return link_loads_; }
  int run_ranks(const std::function<void(RankId)>& body) override
  {
    return fibers_ ? fiber_ranks_->run(body) : run_rank_actors(rank_hosts_, body);
  }
  nlohmann::json manifest_fields() const override
  {
    // rank_parks: the ranks' switches, a host cost rather than a result.
    nlohmann::json fields = {{"rank_parks", transport_->rank_parks()}};
    if (adaptive_)
      fields["nonminimal_routes"] = transport_->nonminimal_routes(); // of the run's simulated_messages
    if (fibers_) {
      const FiberRanks::StackReach reach = fiber_ranks_->deepest_stack_reach();
      fields["fiber_stack"] = {{"bytes", fiber_ranks_->stack_bytes()},
                               {"deepest_reach_bytes", reach.bytes},
                               {"deepest_reach_rank", reach.rank}};
    } else {
      fields["simgrid_version"] = simgrid_version();
      fields["simgrid_options"] = simgrid_options(kApproximated, false);
    }
    return fields;
  }

private:
  bool fibers_;
  bool adaptive_;
  LinkLoadCounter link_loads_;
  std::unique_ptr<RankParking> parking_;
  FiberRanks* fiber_ranks_ = nullptr;           // parking_, when the ranks are fibers
  std::vector<simgrid::s4u::Host*> rank_hosts_; // when they are actors
  std::unique_ptr<LinkLevelTransport> transport_;
};

} // namespace

NetworkModel link_level_model()
{
  return {.name = NetworkOptions::kLinkLevel,
          .summary = "the link-level model; \"CM02\" is the reference",
          .runtimes = {NetworkOptions::kFibers, NetworkOptions::kSimGridActors},
          .acknowledgement_traffic = false,
          .routes_per_message = true,
          .message_costs = kLinkLevelCosts,
          .compared_with = kApproximated,
          .simgrid_model = kApproximated,
          .set_up = [](const NetworkSite& site) { return std::make_unique<LinkLevelRun>(site); }};
}

} // namespace sparsim
