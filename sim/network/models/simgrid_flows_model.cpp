// SimGrid's flow models ("CM02", "LV08", "SMPI"): every message one SimGrid transfer on the topology's
// platform, timed by SimGrid's max-min sharing of every link of its route; every rank one SimGrid actor on its
// node's host. The reference: the link-level model is checked against CM02 (docs/network-models.md).
#include "sim/network/models/link_slots.hpp"
#include "sim/network/models/model_list.hpp"
#include "sim/network/simgrid/engine.hpp"
#include "sim/network/simgrid/transport.hpp"
#include "sim/network/simgrid/zone.hpp"

namespace sparsim {
namespace {

// Under SimGrid's flows the max-min solver's work grows with the flows in flight: Ok-Topk 24-36 us per message
// at P = 256 and 121 us at P = 1024 (docs/benchmarks.md, "The link-level network model").
constexpr MessageCost kFlowCosts[] = {{256, 3.1e-6, 36e-6}, {1024, 8e-6, 120e-6}, {4096, 12.7e-6, 120e-6}};

class SimGridFlowsRun : public NetworkRun {
public:
  explicit SimGridFlowsRun(const NetworkSite& site)
      : options_(site.options)
      , link_loads_(site_link_loads(site))
  {
    start_engine(options_.model, options_.crosstraffic);
    const std::vector<simgrid::s4u::Host*> nodes = build_platform(site.topology, site.graph);
    for (std::size_t node : site.rank_nodes)
      rank_hosts_.push_back(nodes[node]);
    transport_ = std::make_unique<SimGridTransport>(rank_hosts_, &link_loads_);
  }
  Transport& transport() override { return *transport_; }
  const LinkLoadCounter& link_loads() const override { return link_loads_; }
  int run_ranks(const std::function<void(RankId)>& body) override { return run_rank_actors(rank_hosts_, body); }
  nlohmann::json manifest_fields() const override
  {
    return {{"simgrid_version", simgrid_version()},
            {"simgrid_options", simgrid_options(options_.model, options_.crosstraffic)}};
  }

private:
  NetworkOptions options_;
  LinkLoadCounter link_loads_;
  std::vector<simgrid::s4u::Host*> rank_hosts_;
  std::unique_ptr<SimGridTransport> transport_;
};

} // namespace

NetworkModel simgrid_flows_model(const std::string& name)
{
  return {.name = name,
          .summary = "SimGrid's flows; \"LinkLevel\" is much faster at scale",
          .runtimes = {NetworkOptions::kSimGridActors},
          .acknowledgement_traffic = true,
          .routes_per_message = false,
          .message_costs = kFlowCosts,
          .compared_with = NetworkOptions::kLinkLevel,
          .simgrid_model = name,
          .set_up = [](const NetworkSite& site) { return std::make_unique<SimGridFlowsRun>(site); }};
}

} // namespace sparsim
