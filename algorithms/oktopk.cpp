// Ok-Topk: the near-optimal sparse allreduce of S. Li and T. Hoefler, "Near-Optimal Sparse Allreduce for
// Distributed Deep Learning", PPoPP 2022. One iteration on rank r, given its local selection S_r (the rank
// loop selects with threshold reuse, exact every tau' iterations):
//   1. balanced space repartition (every tau iterations): boundaries = average over ranks of each rank's P-1
//      local quantiles of its selected indices (one allreduce of P-1 integers, 64-bit: recursive doubling, or
//      Rabenseifner's halving and doubling with "repartition_allreduce": "rabenseifner");
//   2. split and reduce: a count exchange, then P-1 steps in which rank r sends its part of region (r+s) mod P
//      to that region's owner and receives from (r-s) mod P (each step a permutation: no incast), grouped in
//      waves of B steps; the owner sums its region R_r;
//   3. global selection: on re-evaluation iterations every rank learns the reduced regions' sizes (an
//      allgather of one integer each, as the reference before its allgatherv), gathers all reduced regions and
//      takes the exact top-k (its k-th magnitude becomes the global threshold gth); otherwise G_r = entries of R_r with
//      |v| > gth, counts are allgathered, gth is corrected when the total leaves a window around k, the
//      concatenated G's are rebalanced into P equal blocks (data balancing) and allgathered by recursive
//      doubling (Bruck's algorithm, any P). Every rank ends with the same U.
// The rank loop's residual keeps acc minus the entries r selected that are in U.
//
// Paper model by default; the reference code's behaviours as options: "balancing": false (its VGG/LSTM code
// allgathered the unbalanced G's), "messages_per_step": 2 (indices and values sent apart), "rotation":
// false and "partition": "static" (the paper's ablations), "bucket" (its throttle, 4), "quantiles":
// "reference_stride" (its every-floor(m/P)-th-index quantiles). "repartition_allreduce": the reference leaves
// the quantiles' allreduce to its MPI library; recursive doubling (the default) sends log2(P) (P-1) integers
// per rank, Rabenseifner's 2 (P-1) at most, which matters at thousands of ranks (docs/study-oktopk.md).
//
// Cost (paper, per rank, non-re-evaluation iteration, words of 4 bytes): split (P-1) alpha + 2k(P-1)/P beta;
// balance and allgatherv <= (P + 2 log P) alpha + 4k(P-1)/P beta; total <= (2P + 2 log P) alpha + 6k(P-1)/P beta.
#include "algorithms/oktopk.hpp"

#include "algorithms/algorithm.hpp"
#include "algorithms/collectives.hpp"
#include "algorithms/registry.hpp"
#include "algorithms/steps.hpp"
#include "sim/data/dense.hpp"
#include "sim/data/sparse_ops.hpp"
#include "sim/data/wire_codec.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace sparsim {
namespace {

// Tags, one range per phase.
constexpr Tag kRepartitionTag = 100;
constexpr Tag kCountsTag = 1000;
constexpr Tag kSplitTag = 1'000'000; // + 1 for the values message in two-message mode
constexpr Tag kReevaluationCountsTag = 2'900'000;
constexpr Tag kGatherTag = 3'000'000;
constexpr Tag kGlobalCountsTag = 3'100'000;
constexpr Tag kBalanceTag = 3'200'000;
constexpr Tag kAllgathervTag = 3'300'000;

// The reference implementation's correction of the global threshold (algorithms.md, step 5): when the
// global count leaves (low*k, high*k), gth is divided by `down` (too few) or multiplied by `up` (too many).
struct GlobalRules {
  std::string preset;
  double low, high, down, up;
};
GlobalRules global_rules(const std::string& preset)
{
  if (preset == "lstm")
    return {"lstm", 3.0 / 4, 5.0 / 4, 1.01, 1.008};
  if (preset == "bert")
    return {"bert", 4.0 / 5, 5.0 / 4, 1.036, 1.025};
  return {"vgg", 2.0 / 3, 4.0 / 3, 1.008, 1.008};
}

struct Params {
  int repartition_every = 64; // tau
  bool balanced_partition = true;
  bool reference_quantiles = false;    // every floor(m/P)-th index (the reference code) instead of floor(j*m/P)
  bool repartition_by_halving = false; // Rabenseifner's allreduce of the quantiles instead of recursive doubling
  bool rotation = true;
  int bucket = 4; // steps per wave
  int messages_per_step = 1;
  bool balancing = true;
  GlobalRules rules = global_rules("vgg");
};

struct State final : SparseRankState {
  std::vector<std::uint64_t> boundaries; // region j is [boundaries[j], boundaries[j+1])
  double global_threshold = 0;
  bool have_global_threshold = false;
};

// Elements [from, to) of v by position.
SparseVector positions(const SparseVector& v, std::size_t from, std::size_t to)
{
  SparseVector out;
  out.indices.assign(v.indices.begin() + from, v.indices.begin() + to);
  out.values.assign(v.values.begin() + from, v.values.begin() + to);
  return out;
}

// Concatenation of parts whose index ranges are ordered and disjoint (regions, blocks).
SparseVector concatenate(const Gathered<SparseVector>& parts)
{
  std::size_t total = 0;
  for (const auto& part : parts)
    total += part->size();
  SparseVector out;
  out.reserve(total);
  for (const auto& part : parts) {
    out.indices.insert(out.indices.end(), part->indices.begin(), part->indices.end());
    out.values.insert(out.values.end(), part->values.begin(), part->values.end());
  }
  return out;
}

// The concatenation of allgathered parts: every rank holds the same parts, so it is assembled once for all.
std::shared_ptr<const SparseVector> concatenate_once(Communicator& comm, const Gathered<SparseVector>& parts)
{
  return comm.computed_once(parts, [&] { return std::make_shared<const SparseVector>(concatenate(parts)); });
}

class OkTopk final : public SparseAllreduce {
public:
  explicit OkTopk(Params params)
      : params_(std::move(params))
  {
  }

  static constexpr std::string_view kName = "oktopk";
  std::string name() const override { return std::string(kName); }
  nlohmann::json params() const override
  {
    return {{"repartition_every", params_.repartition_every},
            {"partition", params_.balanced_partition ? "balanced" : "static"},
            {"quantiles", params_.reference_quantiles ? "reference_stride" : "exact"},
            {"repartition_allreduce", params_.repartition_by_halving ? "rabenseifner" : "recursive_doubling"},
            {"rotation", params_.rotation},
            {"bucket", params_.bucket},
            {"messages_per_step", params_.messages_per_step},
            {"balancing", params_.balancing},
            {"global_rules", params_.rules.preset}};
  }
  ResidualRule residual_rule() const override { return ResidualRule::selected_in_result; }
  ResultSemantics result_semantics() const override { return ResultSemantics::restricted_sum; }
  LocalSelection default_local_selection() const override { return LocalSelection::threshold_reuse; }

  ClosedForm closed_form(const CostInputs& in) const override
  {
    const double P = in.ranks;
    const double element = in.wire.index_bytes + in.wire.value_bytes;
    ClosedForm cf;
    cf.bytes_sent_per_rank = 3 * in.k * (P - 1) / P * element; // 6k(P-1)/P words
    cf.bytes_recv_per_rank = cf.bytes_sent_per_rank;
    cf.time = (2 * P + 2 * std::ceil(std::log2(P))) * in.alpha + cf.bytes_sent_per_rank * in.seconds_per_byte;
    // Counts and split to every other rank, two Bruck allgathers (global counts, allgatherv), at most one
    // data-balancing message per rank; a re-evaluation iteration posts a few less.
    cf.messages = P > 1 ? 2 * P * (P - 1) + 2 * P * std::ceil(std::log2(P)) + P : 0;
    cf.messages_upper_bound = true;
    cf.formula = "upper bound, non-re-evaluation iteration: (2P + 2 log P) alpha + 6k(P-1)/P words beta";
    return cf;
  }

  std::unique_ptr<SparseRankState> make_rank_state(RankId, int ranks, std::uint64_t n) const override
  {
    auto state = std::make_unique<State>();
    state->boundaries.reserve(ranks + 1);
    for (int j = 0; j <= ranks; ++j)
      state->boundaries.push_back(block_begin(n, ranks, j)); // static equal regions until repartitioned
    return state;
  }

  // At the split, per rank and region: the boundary (8 bytes, kept until the next repartition), the cut in the
  // rank's selection (4), the slice received from each source (24) and the count it announced (4); the
  // allgathers after it hold less (massif at P = 1024). Peak RSS grows by 16 P^2 bytes more (P = 1024 to 8192,
  // docs/scale.md): memory the allocator keeps, most likely the repartition allreduce's freed buffers.
  std::vector<HeldMemory> held_memory(const CostInputs& in) const override
  {
    const double P = in.ranks;
    return {{"boundaries, region cuts, slices and counts (40 P^2 bytes)", 40 * P * P},
            {"the allocator's beyond them, measured (16 P^2 bytes)", 16 * P * P}};
  }

  std::shared_ptr<const SparseVector> allreduce(Communicator& comm, const SparseInput& input,
                                                SparseRankState* base_state, SparseReport& report) const override
  {
    auto& state = static_cast<State&>(*base_state);
    const SparseVector& selection = *input.local_selection;

    // Phase 1: balanced space repartition, every tau iterations.
    if (params_.balanced_partition && input.iteration % params_.repartition_every == 0) {
      auto scope = comm.phase("repartition");
      state.boundaries = balanced_boundaries(comm, selection, input.n, params_);
    }

    // Phase 2: split and reduce; rank r ends with its reduced region R_r.
    const auto reduced =
        std::make_shared<const SparseVector>(split_and_reduce(comm, input.local_selection, state.boundaries));

    // Phase 3: global selection and allgather.
    std::shared_ptr<const SparseVector> result;
    if (input.reevaluation || !state.have_global_threshold) {
      report.reevaluation = true;
      result = reevaluate(comm, reduced, input.k, state);
    } else {
      report.global_threshold = state.global_threshold;
      result = select_and_allgather(comm, *reduced, input.k, state);
    }
    report.global_selected = result->size();
    return result;
  }

private:
  // Average over ranks of each rank's P-1 local quantiles of its selected indices. Quantile j is the
  // selected index at position floor(j*m/P) (the paper), or at j*floor(m/P) (the reference code: when m/P is
  // small the last region keeps up to m - (P-1)floor(m/P) of every rank's entries, a hot spot). A rank with
  // fewer than P selected entries contributes the static boundaries. Sums are 64-bit and travel as such, 8 bytes
  // a value (the reference's BERT code sums int64 indices; its VGG and LSTM code converts them to int32 first,
  // whose sum of the last boundaries overflows once P*n > 2^31: VGG-16 at P = 256).
  static std::vector<std::uint64_t> balanced_boundaries(Communicator& comm, const SparseVector& selection,
                                                        std::uint64_t n, const Params& params)
  {
    const bool reference_quantiles = params.reference_quantiles;
    const int P = comm.size();
    const std::size_t m = selection.size();
    std::vector<std::int64_t> quantiles;
    quantiles.reserve(P - 1);
    for (int j = 1; j < P; ++j) {
      const std::size_t position = reference_quantiles ? j * (m / P) : j * m / P;
      quantiles.push_back(m >= static_cast<std::size_t>(P) ? selection.indices[position]
                                                           : static_cast<std::int64_t>(block_begin(n, P, j)));
    }
    const std::vector<std::int64_t> sums = allreduce_sum(
        comm, quantiles, kRepartitionTag,
        params.repartition_by_halving ? IntegerAllreduce::rabenseifner : IntegerAllreduce::recursive_doubling);
    // Sized exactly: every rank keeps its boundaries until the next repartition (8 P^2 bytes over all ranks;
    // grown by push_back they held twice that).
    std::vector<std::uint64_t> boundaries;
    boundaries.reserve(P + 1);
    boundaries.push_back(0);
    for (int j = 1; j < P; ++j)
      boundaries.push_back(std::clamp<std::uint64_t>(sums[j - 1] / P, boundaries.back(), n));
    boundaries.push_back(n);
    return boundaries;
  }

  SparseVector split_and_reduce(Communicator& comm, const std::shared_ptr<const SparseVector>& selection,
                                const std::vector<std::uint64_t>& boundaries) const
  {
    const int P = comm.size();
    const int r = comm.rank();
    const RegionSlices slices(selection, boundaries); // views of the selection, one per region

    // Count exchange: an alltoall of one integer, in the same steps and waves as the data (posting all P-1
    // at once would also be slow to simulate: SimGrid's cost per event grows with the flows in flight).
    auto schedule = [&](int step) { return oktopk_split_step(r, P, step, params_.rotation); };
    std::vector<std::uint32_t> announced;
    {
      auto scope = comm.phase("split_counts");
      announced = exchange_counts(comm, params_.bucket, schedule, slices, kCountsTag);
    }

    // Split: P-1 steps in waves of `bucket`; each wave's messages fly together. The owner sums after the
    // last wave (charged by compute.reduction), so an overlap of sums with later waves is not modelled.
    std::vector<SparseSlice> parts(P); // [source rank]: what it sent of this rank's region
    parts[r] = slices.slice(r);
    {
      auto scope = comm.phase("split");
      const Tag tag = kSplitTag; // one message (pair) per source: the source alone identifies it
      exchange_in_waves(
          comm, params_.bucket, schedule,
          [&](const ExchangeStep& step, std::vector<Request>& sends, std::vector<Request>& receives) {
            const auto slice = slices.payload(step.dest);
            if (params_.messages_per_step == 1) {
              sends.push_back(comm.isend(step.dest, tag, slice));
              receives.push_back(comm.irecv(step.source, tag));
            } else {
              // The two halves of the slice in two-message mode.
              sends.push_back(comm.isend(
                  step.dest, tag, std::make_shared<const IndicesOf<SparseSlice>>(IndicesOf<SparseSlice>{slice})));
              sends.push_back(comm.isend(step.dest, tag + 1,
                                         std::make_shared<const ValuesOf<SparseSlice>>(ValuesOf<SparseSlice>{slice})));
              receives.push_back(comm.irecv(step.source, tag));
              receives.push_back(comm.irecv(step.source, tag + 1));
            }
          },
          [&](const ExchangeStep& step, std::span<Request> receives) {
            parts[step.source] = params_.messages_per_step == 1
                                     ? *comm.take<SparseSlice>(receives[0])
                                     : *rejoined(*comm.take<IndicesOf<SparseSlice>>(receives[0]),
                                                 *comm.take<ValuesOf<SparseSlice>>(receives[1]));
            if (parts[step.source].size() != announced[step.source])
              throw std::logic_error("oktopk: a region slice differs from its announced count");
          });
    }
    // Reduce: the owner sums the slices of its region in rank order.
    return sum_received_in_order(comm, parts);
  }

  // Re-evaluation: gather every reduced region, take the exact top-k; its k-th magnitude becomes gth.
  static std::shared_ptr<const SparseVector> reevaluate(Communicator& comm, std::shared_ptr<const SparseVector> reduced,
                                                        std::uint64_t k, State& state)
  {
    Gathered<Count> sizes;
    {
      // The regions' sizes first (the allgatherv's receive counts).
      auto scope = comm.phase("reevaluation_counts");
      const Count size{static_cast<std::int64_t>(reduced->size())};
      sizes =
          bruck_allgather(comm, std::make_shared<const Count>(size), kReevaluationCountsTag, same_bytes_as(comm, size));
    }
    Gathered<SparseVector> regions;
    {
      auto scope = comm.phase("reevaluation_allgather");
      regions = bruck_allgather(comm, std::move(reduced), kGatherTag,
                                [&](int q) { return entries_bytes(comm, sizes[q]->value); });
    }
    // Every rank holds the same regions: the top-k of their concatenation is computed once for all.
    auto result = reduce_charged(comm, [&] {
      auto top = comm.computed_once(
          regions, [&] { return std::make_shared<const SparseVector>(top_k_by_magnitude(concatenate(regions), k)); });
      const Bytes traffic = pair_traffic(total_pairs(regions), top->size());
      return Reduced{std::move(top), traffic};
    });
    double kth = 0;
    if (result->size() == k && k > 0) {
      kth = std::fabs(result->values[0]);
      for (float v : result->values)
        kth = std::min(kth, static_cast<double>(std::fabs(v)));
    }
    state.global_threshold = kth;
    state.have_global_threshold = true;
    return result;
  }

  // The bytes of a sparse part of `entries` entries.
  static Bytes entries_bytes(const Communicator& comm, std::int64_t entries)
  {
    return sparse_wire_bytes(static_cast<std::uint64_t>(entries), comm.wire());
  }

  std::shared_ptr<const SparseVector> select_and_allgather(Communicator& comm, const SparseVector& reduced,
                                                           std::uint64_t k, State& state) const
  {
    const int P = comm.size();
    // G_r: the reduced entries above the global threshold.
    auto global = std::make_shared<SparseVector>();
    reduce_charged(comm, [&] {
      for (std::size_t e = 0; e < reduced.size(); ++e)
        if (std::fabs(reduced.values[e]) > state.global_threshold) {
          global->indices.push_back(reduced.indices[e]);
          global->values.push_back(reduced.values[e]);
        }
      return pair_traffic(reduced.size(), global->size());
    });

    // Every rank learns every |G_q|; gth is corrected for the next iteration when the total leaves the window.
    std::vector<std::int64_t> counts(P);
    {
      auto scope = comm.phase("global_counts");
      const Counts mine{{static_cast<std::int64_t>(global->size())}};
      auto gathered =
          bruck_allgather(comm, std::make_shared<const Counts>(mine), kGlobalCountsTag, same_bytes_as(comm, mine));
      for (int q = 0; q < P; ++q)
        counts[q] = gathered[q]->values.at(0);
    }
    const std::int64_t total_count = std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
    const double total = static_cast<double>(total_count);
    if (total < params_.rules.low * k)
      state.global_threshold /= params_.rules.down;
    else if (total > params_.rules.high * k)
      state.global_threshold *= params_.rules.up;

    if (!params_.balancing) {
      auto scope = comm.phase("allgatherv");
      return concatenate_once(comm, bruck_allgather(comm, std::shared_ptr<const SparseVector>(global), kAllgathervTag,
                                                    [&](int q) { return entries_bytes(comm, counts[q]); }));
    }
    std::shared_ptr<const SparseVector> block = balance(comm, *global, counts);
    auto scope = comm.phase("allgatherv");
    return concatenate_once(comm, bruck_allgather(comm, block, kAllgathervTag, [&](int b) {
                              return entries_bytes(comm,
                                                   block_start(total_count, P, b + 1) - block_start(total_count, P, b));
                            }));
  }

  // Where balance's block b of P starts in the concatenation of `total` entries: the first T mod P blocks hold
  // one entry more.
  static std::int64_t block_start(std::int64_t total, int P, int b)
  {
    return b * (total / P) + std::min<std::int64_t>(b, total % P);
  }

  // Data balancing: the concatenation of all G_q (in rank order) is cut into P blocks of floor(T/P) or
  // ceil(T/P) elements (the first T mod P get one more); each rank sends the pieces of its G_r that fall in
  // block b to rank b and assembles its own block from the pieces it receives, in rank order.
  static std::shared_ptr<const SparseVector> balance(Communicator& comm, const SparseVector& global,
                                                     const std::vector<std::int64_t>& counts)
  {
    const int P = comm.size();
    const int r = comm.rank();
    std::vector<std::int64_t> offset(P + 1, 0); // G_q occupies [offset[q], offset[q+1])
    for (int q = 0; q < P; ++q)
      offset[q + 1] = offset[q] + counts[q];
    const std::int64_t total = offset[P];
    auto overlap = [&](int q, int b) {
      return std::pair{std::max(offset[q], block_start(total, P, b)),
                       std::min(offset[q + 1], block_start(total, P, b + 1))};
    };

    auto scope = comm.phase("balance");
    std::vector<Request> requests; // the sends, then the receives in source order, waited together
    std::vector<std::pair<int, std::shared_ptr<const SparseVector>>> pieces; // (source rank, piece) of block r
    for (int b = 0; b < P; ++b) {
      auto [from, to] = overlap(r, b);
      if (from >= to)
        continue;
      auto piece = std::make_shared<const SparseVector>(positions(global, from - offset[r], to - offset[r]));
      if (b == r)
        pieces.emplace_back(r, std::move(piece));
      else
        requests.push_back(comm.isend(b, kBalanceTag, piece));
    }
    const std::size_t sends = requests.size();
    std::vector<int> sources;
    for (int q = 0; q < P; ++q) {
      auto [from, to] = overlap(q, r);
      if (q != r && from < to) {
        sources.push_back(q);
        requests.push_back(comm.irecv(q, kBalanceTag));
      }
    }
    comm.wait_all(requests);
    for (std::size_t i = 0; i < sources.size(); ++i)
      pieces.emplace_back(sources[i], comm.take<SparseVector>(requests[sends + i]));
    std::sort(pieces.begin(), pieces.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    Gathered<SparseVector> present; // in rank order
    for (auto& [source, piece] : pieces)
      present.push_back(std::move(piece));
    return std::make_shared<const SparseVector>(concatenate(present));
  }

  Params params_;
};

} // namespace

SplitStep oktopk_split_step(RankId r, int ranks, int step, bool rotation)
{
  if (rotation)
    return rotated_step(r, ranks, step);
  // Ablation: every rank walks the destinations in rank order (region 0 first), skipping itself.
  const RankId peer = step - 1 < r ? step - 1 : step;
  return {peer, peer};
}

namespace {

std::unique_ptr<OkTopk> make_oktopk(JsonReader& reader)
{
  Params p;
  p.repartition_every = static_cast<int>(reader.get_int("repartition_every", 64, 1, 1'000'000));
  p.balanced_partition = reader.get_enum("partition", {"balanced", "static"}, "balanced") == "balanced";
  p.reference_quantiles = reader.get_enum("quantiles", {"exact", "reference_stride"}, "exact") == "reference_stride";
  p.repartition_by_halving = reader.get_enum("repartition_allreduce", {"recursive_doubling", "rabenseifner"},
                                             "recursive_doubling") == "rabenseifner";
  p.rotation = reader.get_bool("rotation", true);
  p.bucket = static_cast<int>(reader.get_int("bucket", 4, 1, 1 << 20));
  p.messages_per_step = static_cast<int>(reader.get_int("messages_per_step", 1, 1, 2));
  p.balancing = reader.get_bool("balancing", true);
  p.rules = global_rules(reader.get_enum("global_rules", {"vgg", "lstm", "bert"}, "vgg"));
  return std::make_unique<OkTopk>(std::move(p));
}

} // namespace

SPARSIM_ALGORITHM_FILE(oktopk)
{
  return {algorithm_entry<OkTopk>(
      OkTopk::kName, "Ok-Topk: balanced split-and-reduce, global threshold, balanced allgatherv", make_oktopk)};
}

} // namespace sparsim
