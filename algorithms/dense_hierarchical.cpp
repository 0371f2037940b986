// Node-aware dense allreduce on multi-GPU nodes: a ring reduce-scatter inside each node, a ring allreduce
// across the nodes per rail, a ring allgather inside each node (the two-level scheme of Horovod's hierarchical
// allreduce, and what NCCL-class libraries effectively run on nodes of several GPUs joined by a fast fabric).
//
// The P ranks form N = P/G nodes of G = "ranks_per_node" consecutive ranks (placement "linear" puts them on
// one platform node; the config checks that G is the platform's GPUs per node). Rank r is GPU l = r mod G of
// node q = r / G; the ranks with the same l across the nodes form rail l.
//   1. intra_reduce_scatter: the node's G ranks cut the vector into G blocks and run a ring reduce-scatter;
//      GPU l then holds the node's sum of block (l + 1) mod G.      (G-1)(alpha_i + (n/G) w beta_i)
//   2. inter_allreduce: rail l runs a ring allreduce (reduce-scatter, then allgather) of that block among its N
//      ranks, one GPU per node; every rail at once, each on its own NIC. 2(N-1)(alpha_e + n/(G N) w beta_e)
//   3. intra_allgather: the node's ranks pass the reduced blocks around their ring.  (G-1)(alpha_i + (n/G) w beta_i)
// alpha_i, beta_i are the intra-node fabric's (routes between two ranks of a node), alpha_e, beta_e the
// network's. With G = 1 this is the dense ring; with N = 1 a ring inside the node.
#include "algorithms/algorithm.hpp"
#include "algorithms/collectives.hpp"
#include "algorithms/registry.hpp"

#include <fmt/format.h>

namespace sparsim {
namespace {

class DenseHierarchical final : public DenseAllreduce {
public:
  static constexpr std::string_view kName = "dense_hierarchical";

  explicit DenseHierarchical(int ranks_per_node)
      : ranks_per_node_(ranks_per_node)
  {
  }

  std::string name() const override { return std::string(kName); }
  nlohmann::json params() const override { return {{"ranks_per_node", ranks_per_node_}}; }

  void check_ranks(const RankLayout& layout) const override
  {
    const std::string value = std::to_string(ranks_per_node_);
    if (ranks_per_node_ != layout.gpus_per_node)
      throw ConfigError("algorithm.ranks_per_node", value,
                        fmt::format("the platform's GPUs per node, {} (topology.node.gpus)", layout.gpus_per_node));
    if (layout.ranks % ranks_per_node_ != 0)
      throw ConfigError("algorithm.ranks_per_node", value,
                        fmt::format("a divisor of ranks ({}): whole nodes", layout.ranks));
    if (ranks_per_node_ > 1 && layout.placement != "linear")
      throw ConfigError("placement.type", "\"" + layout.placement + "\"",
                        "\"linear\" with dense_hierarchical: the ranks of a node must be consecutive");
  }

  ClosedForm closed_form(const CostInputs& in) const override
  {
    const double G = ranks_per_node_;
    const double N = in.ranks / G;
    const double block_bytes = static_cast<double>(in.n) / G * in.wire.value_bytes; // one GPU's block of the node
    const double rail_bytes = block_bytes / N;                                      // its part on the rail ring
    const double intra = (G - 1) * (in.intra_node.alpha + block_bytes * in.intra_node.seconds_per_byte);
    const double inter = 2 * (N - 1) * (in.inter_node.alpha + rail_bytes * in.inter_node.seconds_per_byte);
    ClosedForm cf;
    cf.time = 2 * intra + inter;
    cf.bytes_sent_per_rank = 2 * (G - 1) * block_bytes + 2 * (N - 1) * rail_bytes;
    cf.bytes_recv_per_rank = cf.bytes_sent_per_rank;
    cf.messages = in.ranks * (2 * (G - 1) + 2 * (N - 1));
    cf.formula = "2(G-1)(alpha_i + (n/G) w beta_i) + 2(N-1)(alpha_e + (n/(G N)) w beta_e)";
    return cf;
  }

  void allreduce(Communicator& comm, DenseVector& data) const override
  {
    const int G = ranks_per_node_;
    const int N = comm.size() / G;
    const int r = comm.rank();
    const RankGroup node{.base = r / G * G, .stride = 1, .size = G};
    const RankGroup rail{.base = r % G, .stride = G, .size = N};
    const DenseRange whole{0, data.length};
    const DenseRange my_block = whole.part(G, node.index_of(r) + 1);
    const Tag P = static_cast<Tag>(comm.size());

    // Phase 1: the node's sum of this GPU's block, over the intra-node fabric.
    {
      auto scope = comm.phase("intra_reduce_scatter");
      dense_ring_reduce_scatter(comm, data, whole, node, 0);
    }
    // Phase 2: the rail's sum of that block, one ring per rail across the nodes.
    {
      auto scope = comm.phase("inter_allreduce");
      dense_ring_reduce_scatter(comm, data, my_block, rail, P);
      dense_ring_allgather(comm, data, my_block, rail, 2 * P);
    }
    // Phase 3: every GPU of the node gets every reduced block.
    {
      auto scope = comm.phase("intra_allgather");
      dense_ring_allgather(comm, data, whole, node, 3 * P);
    }
  }

private:
  int ranks_per_node_;
};

} // namespace

SPARSIM_ALGORITHM_FILE(dense_hierarchical)
{
  return {algorithm_entry<DenseHierarchical>(
      DenseHierarchical::kName,
      "node-aware: ring reduce-scatter in the node, ring allreduce across nodes per rail, ring allgather in the node",
      [](JsonReader& params) {
        return std::make_unique<DenseHierarchical>(static_cast<int>(params.get_int("ranks_per_node", 1, 1, 64)));
      })};
}

} // namespace sparsim
