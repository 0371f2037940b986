// SparCML's split-allgather sparse allreduces (Renggli, Ashkboos, Aghagolzadeh, Alistarh and Hoefler,
// "SparCML: High-Performance Sparse Communication for Machine Learning", SC 2019), two registry entries:
// - SSAR_Split_allgather ("sparcml_ssar_split_allgather"): [0, n) is cut into P static near-equal regions
//   (block_begin), region j owned by rank j. A sparse reduce-scatter sends each region's slice of the local
//   top-k straight to its owner, which sums what it got; an allgather then hands every rank all the reduced
//   regions, sparse.
// - DSAR_Split_allgather ("sparcml_dsar_split_allgather"): the same, but a reduced region travels dense
//   (length * value_bytes) once its sparse encoding would cost more (nnz * (index_bytes + value_bytes) >
//   length * value_bytes: the paper's break-even density delta = value_bytes / (index_bytes + value_bytes)).
//   Parameter "switch": "per_region" (default, the paper's per-region decision) or "global": the behaviour of
//   the Ok-Topk reference code's TopkDSA (Shigangli/Ok-Topk, LSTM/allreducer.py, branch "topkSA"), which
//   exchanges the slices' sizes before the reduce-scatter, allgathers the reduced regions' counts before the
//   allgather and carries every region dense when
//   2 * (union nnz) >= floor(2n/3) (the union reaching n/3), every region sparse otherwise. (The reference
//   counts the nonzero reduced values; here the union's entries are counted, exact zero sums included.)
// The result U is the union sum of all selections (no re-selection): U holds exactly the indices some rank
// selected. A dense region's values at indices nobody selected are 0 and are not part of U.
//
// Phases, as in the paper:
// 0. "split_counts" (switch "global" only): the alltoall of the slices' sizes (one 4-byte integer to each
//    other rank, the reference's Alltoall of int32), in the same steps and waves as the reduce-scatter.
// 1. "reduce_scatter": at step s = 1..P-1 rank r sends its slice of region (r+s) mod P to that region's owner
//    and receives from (r-s) mod P (each step is a permutation: no incast); the steps are posted in waves of
//    `throttle` (default 32, MPICH's alltoall throttle), empty slices included, each wave waited before the
//    next (within a wave the messages share each rank's link whatever their order). The owner sums the P
//    slices in rank order.
// 2. "count_allgather" (switch "global" only): allgather of each region's nnz, one 4-byte integer per rank.
// 3. "allgather": Bruck's allgather (ceil(log2 P) steps, any P) of the reduced regions.
//
// Cost with selections disjoint and spread evenly over the regions (each rank puts k/P in each region, so a
// reduced region holds u = min(Pk, n)/P elements): reduce-scatter k(P-1)/P e bytes each way, allgather
// (P-1) b with b = u e (sparse) or (n/P) w (dense). The paper's bound for the whole: (P + 2 log P) alpha and
// between 4k(P-1)/P and 2k(P-1)/P + n(P-1)/P words.
#include "algorithms/algorithm.hpp"
#include "algorithms/collectives.hpp"
#include "algorithms/registry.hpp"
#include "algorithms/steps.hpp"
#include "sim/data/sparse_ops.hpp"

#include <algorithm>
#include <cmath>

namespace sparsim {
namespace {

constexpr Tag kSplitCountsTag = 50;
constexpr Tag kReduceScatterTag = 100;
constexpr Tag kCountTags = 200;     // + Bruck step
constexpr Tag kAllgatherTags = 300; // + Bruck step

// How reduced regions travel in the allgather.
enum class Encoding {
  sparse,     // SSAR: always (index, value) pairs
  per_region, // DSAR: each region dense when that is cheaper
  global,     // DSAR as the reference's TopkDSA: all regions dense once the union reaches n/3
};

// One owner's reduced region as it travels in the allgather: sparse pairs, or a dense block of `length`
// values. A dense block does not say which of its entries some rank selected, yet U must hold exactly the
// selected indices (zeros included); `support` carries them as simulator bookkeeping, not on the wire (in
// SparCML the dense result is simply added to the model, where the unselected zeros change nothing).
struct ReducedRegion {
  Index begin = 0;
  Index length = 0;
  bool dense = false;
  SparseVector sparse;        // !dense: the reduced pairs
  std::vector<float> values;  // dense: `length` values, 0 where nobody selected
  std::vector<Index> support; // dense: the indices that some rank selected (not on the wire)
};

Bytes wire_bytes(const ReducedRegion& region, const WireFormat& wire)
{
  if (region.dense)
    return static_cast<Bytes>(region.length) * static_cast<Bytes>(wire.value_bytes);
  return wire_bytes(region.sparse, wire);
}
// On the wire (sim/data/wire_codec.hpp) as what it charges: the dense values or the sparse pairs; the receiver
// knows the region's place and form from the counts exchanged before.
WireBuffer encode(const ReducedRegion& region, const WireFormat& wire)
{
  if (region.dense)
    return encode(DenseBlock{region.length, region.values}, wire);
  return encode(region.sparse, wire);
}
bool decodes_to(const ReducedRegion& region, WireBytes bytes, const WireFormat& wire)
{
  if (region.dense)
    return decodes_to(DenseBlock{region.length, region.values}, bytes, wire);
  return decodes_to(region.sparse, bytes, wire);
}

// The reference TopkDSA's global switch: its allgatherv carries 2 words per pair and goes dense unless
// 2 * union_nnz < floor(2n / 3).
bool union_goes_dense(std::uint64_t union_nnz, std::uint64_t n) { return 2 * union_nnz >= 2 * n / 3; }

// The paper's per-region switch: dense when the sparse encoding would cost more bytes (a tie stays sparse).
bool region_goes_dense(std::uint64_t nnz, std::uint64_t length, const WireFormat& wire)
{
  return nnz * static_cast<std::uint64_t>(wire.index_bytes + wire.value_bytes) >
         length * static_cast<std::uint64_t>(wire.value_bytes);
}

ReducedRegion make_region(Index begin, Index length, SparseVector reduced, bool dense)
{
  ReducedRegion region;
  region.begin = begin;
  region.length = length;
  region.dense = dense;
  if (!dense) {
    region.sparse = std::move(reduced);
    return region;
  }
  region.values.assign(length, 0.0f);
  for (std::size_t e = 0; e < reduced.size(); ++e)
    region.values[reduced.indices[e] - begin] = reduced.values[e];
  region.support = std::move(reduced.indices);
  return region;
}

// Appends a region's part of U (its selected indices, in index order) to `out`.
void append_region(const ReducedRegion& region, SparseVector& out)
{
  if (!region.dense) {
    out.indices.insert(out.indices.end(), region.sparse.indices.begin(), region.sparse.indices.end());
    out.values.insert(out.values.end(), region.sparse.values.begin(), region.sparse.values.end());
    return;
  }
  for (Index i : region.support) {
    out.indices.push_back(i);
    out.values.push_back(region.values[i - region.begin]);
  }
}

class SparcmlSplitAllgather final : public SparseAllreduce {
public:
  static constexpr std::string_view kSsarName = "sparcml_ssar_split_allgather";
  static constexpr std::string_view kDsarName = "sparcml_dsar_split_allgather";

  SparcmlSplitAllgather(Encoding encoding, int throttle)
      : encoding_(encoding)
      , throttle_(throttle)
  {
  }

  std::string name() const override { return std::string(encoding_ == Encoding::sparse ? kSsarName : kDsarName); }
  nlohmann::json params() const override
  {
    if (encoding_ == Encoding::sparse)
      return {{"throttle", throttle_}};
    return {{"switch", encoding_ == Encoding::per_region ? "per_region" : "global"}, {"throttle", throttle_}};
  }
  ResidualRule residual_rule() const override { return ResidualRule::all_selected; }
  ResultSemantics result_semantics() const override { return ResultSemantics::union_sum; }

  // Exact on a contention-free network for selections disjoint and spread evenly over equal regions
  // (n divisible by P, k/P per region per rank). The reduce-scatter posts its P-1 messages in waves of
  // `throttle`: the latencies of a wave overlap and its bytes share the rank's link.
  ClosedForm closed_form(const CostInputs& in) const override
  {
    ClosedForm cf;
    const double P = in.ranks;
    if (in.ranks == 1) {
      cf.formula = "0 (one rank)";
      return cf;
    }
    const double e = in.wire.index_bytes + in.wire.value_bytes;
    const double w = in.wire.value_bytes;
    const double steps = std::ceil(std::log2(P));
    const std::uint64_t union_nnz = std::min<std::uint64_t>(in.ranks * in.k, in.n);
    const double region_nnz = static_cast<double>(union_nnz) / P;
    const double region_length = static_cast<double>(in.n) / P;
    bool dense = false;
    if (encoding_ == Encoding::per_region)
      dense = region_nnz * e > region_length * w;
    else if (encoding_ == Encoding::global)
      dense = union_goes_dense(union_nnz, in.n);
    const double region_bytes = dense ? region_length * w : region_nnz * e;

    const double scatter_bytes = static_cast<double>(in.k) * (P - 1) / P * e;
    const double gather_bytes = (P - 1) * region_bytes;
    // The global switch's two count exchanges: the slices' sizes (alltoall), the regions' counts (allgather).
    const double count_bytes = encoding_ == Encoding::global ? (P - 1) * 4 : 0;
    cf.bytes_sent_per_rank = scatter_bytes + 2 * count_bytes + gather_bytes;
    cf.bytes_recv_per_rank = cf.bytes_sent_per_rank;
    const double waves = std::ceil((P - 1) / throttle_);
    cf.time =
        waves * in.alpha + scatter_bytes * in.seconds_per_byte + steps * in.alpha + gather_bytes * in.seconds_per_byte;
    if (encoding_ == Encoding::global)
      cf.time += (waves + steps) * in.alpha + 2 * count_bytes * in.seconds_per_byte;
    // Reduce-scatter to every other rank, Bruck allgather (and the global switch's alltoall and Bruck allgather
    // of counts).
    cf.messages = encoding_ == Encoding::global ? 2 * P * (P - 1) + 2 * P * steps : P * (P - 1) + P * steps;

    std::string gather = "u e";
    if (encoding_ == Encoding::per_region)
      gather = "(u e > (n/P) w ? (n/P) w : u e)";
    else if (encoding_ == Encoding::global)
      gather = "(2 min(Pk, n) >= floor(2n/3) ? (n/P) w : u e)";
    cf.formula =
        "ceil((P-1)/throttle) alpha + k(P-1)/P e beta + ceil(log2 P) alpha + (P-1) " + gather + " beta" +
        (encoding_ == Encoding::global ? " + (ceil((P-1)/throttle) + ceil(log2 P)) alpha + 8(P-1) beta (counts)" : "") +
        ", u = min(Pk, n)/P; assumes disjoint selections spread evenly over the P regions "
        "(paper: (P + 2 log P) alpha, 4k(P-1)/P to 2k(P-1)/P + n(P-1)/P words)";
    return cf;
  }

  // The reduce-scatter's boundaries (8 bytes per rank and region), cuts (4) and received slices (24) end before
  // the allgather, whose gathered regions (16) and bundles in flight hold less (measured with massif at P = 1024).
  std::vector<HeldMemory> held_memory(const CostInputs& in) const override
  {
    const double P = in.ranks;
    return {{"boundaries, region cuts and slices (36 P^2 bytes)", 36 * P * P}};
  }

  std::shared_ptr<const SparseVector> allreduce(Communicator& comm, const SparseInput& input, SparseRankState*,
                                                SparseReport&) const override
  {
    const int P = comm.size();
    const RankId r = comm.rank();
    auto region_begin = [&](int j) { return static_cast<Index>(block_begin(input.n, P, j)); };

    // Phase 1, sparse reduce-scatter (with phase 0 before it under the global switch).
    SparseVector reduced = reduce_scatter(comm, input);

    // Phase 2 (global switch only): every rank learns the union's size, as the reference's allgather of
    // counts before its allgatherv.
    bool dense = false;
    if (encoding_ == Encoding::global) {
      auto scope = comm.phase("count_allgather");
      const auto counts = bruck_allgather(
          comm, std::make_shared<const Counts>(Counts{{static_cast<std::int64_t>(reduced.size())}}), kCountTags);
      std::uint64_t union_nnz = 0;
      for (const auto& c : counts)
        union_nnz += static_cast<std::uint64_t>(c->values[0]);
      dense = union_goes_dense(union_nnz, input.n);
    } else if (encoding_ == Encoding::per_region) {
      dense = region_goes_dense(reduced.size(), region_begin(r + 1) - region_begin(r), comm.wire());
    }

    // Phase 3, allgather of the reduced regions (Bruck), sparse or dense as decided above.
    const std::uint64_t region_length = region_begin(r + 1) - region_begin(r);
    auto region = [&] {
      return std::make_shared<const ReducedRegion>(
          make_region(region_begin(r), region_length, std::move(reduced), dense));
    };
    std::shared_ptr<const ReducedRegion> mine;
    if (dense) // the reduced pairs scattered into a zeroed fp32 region
      mine = reduce_charged(comm, [&] {
        const Bytes traffic = pair_traffic(reduced.size(), 0) + 4 * region_length;
        return Reduced{region(), traffic};
      });
    else
      mine = region();
    Gathered<ReducedRegion> regions;
    {
      auto scope = comm.phase("allgather");
      regions = bruck_allgather(comm, mine, kAllgatherTags);
    }

    // U: the regions in index order, each reduced once by its owner; every rank holds the same regions, so
    // U is assembled once for all.
    return comm.computed_once(regions, [&] {
      auto result = std::make_shared<SparseVector>();
      for (const auto& region : regions)
        append_region(*region, *result);
      return std::shared_ptr<const SparseVector>(std::move(result));
    });
  }

private:
  // Each region's slice goes straight to its owner, destinations rotated so that every step is a permutation;
  // the owner sums the slices in rank order. Its per-region cuts and received slices (36 P^2 bytes over all
  // ranks) end with it, before the allgather.
  SparseVector reduce_scatter(Communicator& comm, const SparseInput& input) const
  {
    const int P = comm.size();
    const RankId r = comm.rank();
    auto region_begin = [&](int j) { return static_cast<Index>(block_begin(input.n, P, j)); };

    std::vector<std::uint64_t> boundaries(P + 1);
    for (int j = 0; j <= P; ++j)
      boundaries[j] = region_begin(j);
    const RegionSlices own(input.local_selection, boundaries); // views of the selection, one per region
    auto schedule = [&](int s) { return rotated_step(r, P, s); };
    if (encoding_ == Encoding::global) { // phase 0: the reference's exchange of the slices' sizes
      auto scope = comm.phase("split_counts");
      exchange_counts(comm, throttle_, schedule, own, kSplitCountsTag);
    }
    std::vector<SparseSlice> slices(P); // [source rank]
    {
      auto scope = comm.phase("reduce_scatter");
      exchange_in_waves(
          comm, throttle_, schedule,
          [&](const ExchangeStep& step, std::vector<Request>& sends, std::vector<Request>& receives) {
            sends.push_back(comm.isend(step.dest, kReduceScatterTag, own.payload(step.dest)));
            receives.push_back(comm.irecv(step.source, kReduceScatterTag));
          },
          [&](const ExchangeStep& step, std::span<Request> receives) {
            slices[step.source] = *comm.take<SparseSlice>(receives[0]);
          });
    }
    slices[r] = own.slice(r);
    return sum_received_in_order(comm, slices);
  }

  Encoding encoding_;
  int throttle_;
};

// The reduce-scatter posts at most `throttle` steps at a time (MPICH's MPIR_CVAR_ALLTOALL_THROTTLE, 32).
int read_throttle(JsonReader& params) { return static_cast<int>(params.get_int("throttle", 32, 1, 1 << 20)); }

} // namespace

SPARSIM_ALGORITHM_FILE(sparcml_split_allgather)
{
  return {
      algorithm_entry<SparcmlSplitAllgather>(
          SparcmlSplitAllgather::kSsarName,
          "SparCML: sparse reduce-scatter to static region owners, Bruck allgather of the sparse regions, union sum",
          [](JsonReader& params) {
            return std::make_unique<SparcmlSplitAllgather>(Encoding::sparse, read_throttle(params));
          }),
      algorithm_entry<SparcmlSplitAllgather>(
          SparcmlSplitAllgather::kDsarName,
          "SparCML: as the SSAR split allgather, regions switch to dense when cheaper (switch: per_region, global)",
          [](JsonReader& params) {
            const std::string rule = params.get_enum("switch", {"per_region", "global"}, "per_region");
            return std::make_unique<SparcmlSplitAllgather>(rule == "global" ? Encoding::global : Encoding::per_region,
                                                           read_throttle(params));
          }),
  };
}

} // namespace sparsim
