// Fat tree: an extended generalized fat tree XGFT(h; m_1..m_h; w_1..w_h) (Öhring, Ibel, Das, Kumar, "On
// generalized fat trees", IPPS 1995), parameterised like SimGrid's create_fatTree_zone.
//
// Level 0 holds the compute nodes, levels 1..h the switches. down[l] is the number of children of a switch at
// level l+1, up[l] the number of parents of an element at level l: nodes = prod(down), and level l+1 holds
// prod(up[0..l]) * prod(down[l+1..h-1]) switches. down[l] > up[l+1] oversubscribes the links above level l+1.
// Routing ("routing"): "d_mod_k" (the default) is SimGrid's (and InfiniBand's) D-mod-k: a message climbs to the
// lowest common ancestor level, taking at level l the parent (dst / prod(up[0..l-1])) mod up[l], then descends
// the unique path to dst. "random" (link-level model only) climbs the same levels but takes at each level a
// parent drawn from a hash of the message (the run's seed, its source, its number): a route per message, the
// load of any pattern spread over the parents (as oblivious random up-routing, or adaptive up-routing on
// average, would). Routes are computed by this file (builder.hpp); the graph view and the SimGrid zone are the
// same links.
//
// Rail-optimized ("rails": R > 1, with multi-GPU nodes of G = R GPUs, topologies/multi_gpu.cpp): the leaf
// switches come in groups of R, one per rail, and a group serves one scalable unit of S = down[0] nodes: NIC i
// of each of the unit's nodes is on the unit's leaf i. Endpoint (GPU) e = node * R + i sits at leaf position
// ((node / S) * R + i) * S + node mod S of the tree, which is otherwise unchanged: GPUs of one rail and unit
// share a leaf, other rails meet only above it.
//
// Config: {"type": "fat_tree", "levels": 3, "down": [16, 16, 16], "up": [1, 16, 16], "bandwidth": "100Gbps",
// "latency": "100ns", "per_level": [{"latency": "500ns"}, {}, {}]}. bandwidth/latency apply to every level
// unless "per_level" (one object per level, element l = links between levels l and l+1, so element 0 = the
// node links) overrides them. Link levels are named "fat_tree_L<l>" in the graph view.
//
// LIMITATIONS
// - Static D-mod-k routing or a random parent per message; no adaptive routing (a parent chosen by the load),
//   and a message keeps one path for all its bytes.
// - Parallel cables between one child and one parent are not modelled: give the level the aggregate bandwidth.
// - Switch-internal bandwidth and latency are not modelled: a switch hop costs the latency of the next link.
#include "topologies/builder.hpp"

#include <algorithm>
#include <array>
#include <fmt/format.h>
#include <fmt/ranges.h>

namespace sparsim {
namespace {

constexpr std::size_t kMaxLevels = 8;                      // routes of 2 * kMaxLevels links fit in a HopList
constexpr std::size_t kMaxElements = std::size_t{1} << 24; // switches or links per level

// The shape of the tree and the numbering of its vertices and links, shared by graph() and the router.
struct TreeShape {
  std::size_t levels = 0;
  std::array<std::size_t, kMaxLevels> down{};
  std::array<std::size_t, kMaxLevels> up{};
  std::array<std::size_t, kMaxLevels + 1> level_size{};  // elements at level l (level 0: compute nodes)
  std::array<std::size_t, kMaxLevels + 1> vertex_base{}; // vertex index of element 0 of level l
  std::array<std::size_t, kMaxLevels> link_base{};       // link index of the first link from level l up

  using Digits = std::array<std::size_t, kMaxLevels>;

  // Digit i of a level-l label counts parents (up[i]) below level l and children (down[i]) from level l on.
  std::size_t radix(std::size_t level, std::size_t i) const { return i < level ? up[i] : down[i]; }

  std::size_t index(std::size_t level, const Digits& digits) const
  {
    std::size_t index = 0;
    for (std::size_t i = levels; i-- > 0;)
      index = index * radix(level, i) + digits[i];
    return index;
  }

  Digits digits(std::size_t level, std::size_t index) const
  {
    Digits digits{};
    for (std::size_t i = 0; i < levels; ++i) {
      digits[i] = index % radix(level, i);
      index /= radix(level, i);
    }
    return digits;
  }

  // The link between element `child` of level l and its parent number p (digit l of the parent's label).
  std::size_t link(std::size_t level, std::size_t child, std::size_t p) const
  {
    return link_base[level] + child * up[level] + p;
  }

  // D-mod-k route from node src to node dst (src != dst); with a message, its parents drawn from a hash of
  // it instead (the "random" routing).
  void route(std::size_t src, std::size_t dst, HopList& hops, const std::uint64_t* message = nullptr) const
  {
    const Digits target = digits(0, dst);
    Digits current = digits(0, src);
    std::size_t top = levels;
    while (current[top - 1] == target[top - 1])
      --top;
    // Up to level `top`, the lowest level whose subtree holds both nodes.
    std::size_t stride = 1;
    for (std::size_t l = 0; l < top; ++l) {
      const std::size_t parent = message ? mix64(*message * kMaxLevels + l) % up[l] : (dst / stride) % up[l];
      hops.push(link(l, index(l, current), parent), true);
      current[l] = parent;
      stride *= up[l];
    }
    // Down the unique path to dst.
    for (std::size_t l = top; l-- > 0;) {
      const std::size_t parent = current[l];
      current[l] = target[l];
      hops.push(link(l, index(l, current), parent), false);
    }
  }
};

class FatTreeTopology : public Topology {
public:
  FatTreeTopology(TreeShape shape, LinkSpec default_link, std::vector<LinkSpec> per_level, std::string routing,
                  std::size_t rails)
      : shape_(shape)
      , default_link_(default_link)
      , per_level_(std::move(per_level))
      , routing_(std::move(routing))
      , random_(routing_ == "random")
      , rails_(rails)
  {
  }

  std::string type() const override { return "fat_tree"; }
  std::size_t node_count() const override { return shape_.level_size[0]; }
  std::size_t link_count() const override
  {
    const std::size_t top = shape_.levels - 1;
    return shape_.link_base[top] + shape_.level_size[top] * shape_.up[top];
  }

  NetworkGraph graph() const override
  {
    NetworkGraph graph(node_count());
    for (std::size_t l = 1; l <= shape_.levels; ++l)
      for (std::size_t i = 0; i < shape_.level_size[l]; ++i)
        graph.add_router(fmt::format("sw{}_{}", l, i));
    // Links in the order of TreeShape::link(): by level, child, then parent number.
    for (std::size_t l = 0; l < shape_.levels; ++l) {
      for (std::size_t child = 0; child < shape_.level_size[l]; ++child) {
        TreeShape::Digits digits = shape_.digits(l, child);
        for (std::size_t p = 0; p < shape_.up[l]; ++p) {
          digits[l] = p;
          const std::size_t from = l == 0 ? endpoint_at(child) : shape_.vertex_base[l] + child;
          const std::size_t to = shape_.vertex_base[l + 1] + shape_.index(l + 1, digits);
          graph.add_link({fmt::format("{}_{}", graph.vertex_name(from), graph.vertex_name(to)), from, to,
                          per_level_[l].bandwidth, per_level_[l].latency, fmt::format("fat_tree_L{}", l)});
        }
      }
    }
    return graph;
  }

  void route(std::size_t src, std::size_t dst, HopList& hops) const override
  {
    shape_.route(position_of(src), position_of(dst), hops);
  }
  bool routes_per_message() const override { return random_; }
  void route_message(std::size_t src, std::size_t dst, std::uint64_t message, HopList& hops) const override
  {
    shape_.route(position_of(src), position_of(dst), hops, random_ ? &message : nullptr);
  }
  std::size_t rails() const override { return rails_; }
  std::string routing() const override { return routing_; }

  nlohmann::json to_json() const override
  {
    nlohmann::json spec = link_spec_json(default_link_);
    spec["type"] = "fat_tree";
    spec["levels"] = shape_.levels;
    spec["down"] = std::vector<std::size_t>(shape_.down.begin(), shape_.down.begin() + shape_.levels);
    spec["up"] = std::vector<std::size_t>(shape_.up.begin(), shape_.up.begin() + shape_.levels);
    spec["per_level"] = nlohmann::json::array();
    for (const LinkSpec& level : per_level_)
      spec["per_level"].push_back(link_spec_json(level));
    spec["routing"] = routing_;
    if (rails_ > 1)
      spec["rails"] = rails_;
    return spec;
  }

  std::string describe() const override
  {
    std::size_t switches = 0;
    for (std::size_t l = 1; l <= shape_.levels; ++l)
      switches += shape_.level_size[l];
    return fmt::format("{}fat tree {} levels, down {}, up {} ({} {}, {} switches)",
                       rails_ > 1 ? fmt::format("rail-optimized ({} rails) ", rails_) : "", shape_.levels,
                       fmt::join(shape_.down.begin(), shape_.down.begin() + shape_.levels, "x"),
                       fmt::join(shape_.up.begin(), shape_.up.begin() + shape_.levels, "x"), node_count(),
                       rails_ > 1 ? "NICs" : "nodes", switches);
  }

private:
  // Leaf position of endpoint e (NIC i of node m: e = m R + i) and back: see "Rail-optimized" above.
  std::size_t position_of(std::size_t endpoint) const
  {
    const std::size_t unit_nodes = shape_.down[0];
    const std::size_t node = endpoint / rails_;
    const std::size_t rail = endpoint % rails_;
    return ((node / unit_nodes) * rails_ + rail) * unit_nodes + node % unit_nodes;
  }
  std::size_t endpoint_at(std::size_t position) const
  {
    const std::size_t unit_nodes = shape_.down[0];
    const std::size_t leaf = position / unit_nodes;
    const std::size_t node = (leaf / rails_) * unit_nodes + position % unit_nodes;
    return node * rails_ + leaf % rails_;
  }

  TreeShape shape_;
  LinkSpec default_link_;
  std::vector<LinkSpec> per_level_;
  std::string routing_; // "d_mod_k" or "random"
  bool random_;
  std::size_t rails_; // 1: not rail-optimized
};

} // namespace

std::unique_ptr<Topology> parse_fat_tree(JsonReader& spec)
{
  TreeShape shape;
  shape.levels = read_count(spec, "levels", kMaxLevels);
  const std::string expected_length = fmt::format("{} integers (one per level, \"levels\")", shape.levels);
  for (const char* key : {"down", "up"}) {
    const std::vector<std::int64_t> counts = spec.get_int_list(key, 1, 1 << 16);
    if (counts.size() != shape.levels)
      spec.fail(key, counts, expected_length);
    auto& target = std::string_view(key) == "down" ? shape.down : shape.up;
    std::copy(counts.begin(), counts.end(), target.begin());
  }

  // Level sizes, vertex and link numbering; refuse trees that would not fit in memory.
  shape.level_size[0] = 1;
  for (std::size_t i = 0; i < shape.levels; ++i) {
    shape.level_size[0] *= shape.down[i];
    if (shape.level_size[0] > kMaxNodes)
      spec.fail("down", std::vector<std::size_t>(shape.down.begin(), shape.down.begin() + shape.levels),
                fmt::format("at most {} compute nodes (the product of \"down\")", kMaxNodes));
  }
  for (std::size_t l = 1; l <= shape.levels; ++l) {
    std::size_t size = 1;
    for (std::size_t i = 0; i < shape.levels && size <= kMaxElements; ++i)
      size *= shape.radix(l, i);
    if (size > kMaxElements || shape.level_size[l - 1] * shape.up[l - 1] > kMaxElements)
      spec.fail("up", std::vector<std::size_t>(shape.up.begin(), shape.up.begin() + shape.levels),
                fmt::format("at most {} switches or links per level", kMaxElements));
    shape.level_size[l] = size;
    shape.vertex_base[l] = shape.vertex_base[l - 1] + shape.level_size[l - 1];
    if (l < shape.levels)
      shape.link_base[l] = shape.link_base[l - 1] + shape.level_size[l - 1] * shape.up[l - 1];
  }

  const LinkSpec default_link = read_link_spec(spec);
  std::vector<LinkSpec> per_level(shape.levels, default_link);
  if (spec.has("per_level")) {
    std::vector<JsonReader> levels = spec.object_list("per_level");
    if (levels.size() != shape.levels)
      spec.fail("per_level", spec.raw("per_level"),
                fmt::format("{} objects (one per level, \"levels\")", shape.levels));
    const nlohmann::json defaults = link_spec_json(default_link);
    for (std::size_t l = 0; l < shape.levels; ++l) {
      per_level[l].bandwidth = levels[l].get_bandwidth("bandwidth", defaults["bandwidth"].get<std::string>());
      per_level[l].latency = levels[l].get_duration("latency", defaults["latency"].get<std::string>());
      levels[l].finish();
    }
  }
  const std::string routing = spec.get_enum("routing", kFatTreeRoutings, kFatTreeRoutings.front());
  const std::size_t rails = read_count(spec, "rails", 64, 1);
  const std::size_t leaves = shape.level_size[0] / shape.down[0];
  if (leaves % rails != 0)
    spec.fail("rails", std::to_string(rails),
              fmt::format("a divisor of the tree's {} leaf switches (a scalable unit has one leaf per rail)", leaves));
  return std::make_unique<FatTreeTopology>(shape, default_link, std::move(per_level), routing, rails);
}

} // namespace sparsim
