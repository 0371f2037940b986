// What every collective offers the driver: a name, its parameters, the collective itself, and its
// closed-form alpha-beta cost next to it so runs can report measurement and theory side by side.
#pragma once

#include "sim/base/json_reader.hpp"
#include "sim/comm/communicator.hpp"
#include "sim/data/dense.hpp"
#include "sim/data/sparse.hpp"

#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

namespace sparsim {

// Inputs of a closed form: problem size and the platform's contention-free alpha and beta.
struct CostInputs {
  int ranks = 1;
  std::uint64_t n = 0; // gradient length (elements)
  std::uint64_t k = 0; // selected elements per rank (sparse algorithms)
  WireFormat wire;
  Seconds alpha = 0;           // per-message latency (the slowest route's)
  double seconds_per_byte = 0; // beta = 1 / bandwidth (the narrowest route's)
  // With multi-GPU nodes, alpha and beta of the routes between two ranks of one node and between ranks of
  // different nodes (zero where no pair of ranks is of that kind).
  struct Level {
    Seconds alpha = 0;
    double seconds_per_byte = 0;
  };
  Level intra_node;
  Level inter_node;
};

// Where the ranks run, for the collectives that depend on it (a node-aware one checks that its ranks per node
// are the platform's).
struct RankLayout {
  int ranks = 1;
  int gpus_per_node = 1;            // the platform's (topology.node.gpus)
  std::string placement = "linear"; // placement.type
};

// Predicted cost of one call, per rank (the busiest rank where ranks differ).
struct ClosedForm {
  Seconds time = 0;
  double bytes_sent_per_rank = 0;
  double bytes_recv_per_rank = 0;
  double messages = 0;               // messages one call posts, all ranks together (validate, run progress)
  bool messages_upper_bound = false; // `messages` is a bound (the count depends on the data)
  std::string formula;               // the expression, for reports: "2(P-1)(alpha + (n/P) w beta)"
};

class Algorithm {
public:
  virtual ~Algorithm() = default;
  virtual std::string name() const = 0;
  virtual nlohmann::json params() const = 0; // resolved parameters, for manifests
  virtual ClosedForm closed_form(const CostInputs& in) const = 0;
  // Throws a ConfigError naming the parameter when the collective cannot run on these ranks (a team count
  // that does not divide P, ranks per node that are not the platform's); most run on any.
  virtual void check_ranks(const RankLayout& /*layout*/) const {}
};

// A dense allreduce: every rank ends with the elementwise sum of all ranks' vectors.
class DenseAllreduce : public Algorithm {
public:
  virtual void allreduce(Communicator& comm, DenseVector& data) const = 0;
};

// What a rank hands a sparse allreduce in one iteration.
struct SparseInput {
  int iteration = 0;
  std::uint64_t n = 0;                                 // gradient length
  std::uint64_t k = 0;                                 // floor(density * n)
  std::shared_ptr<const SparseVector> local_selection; // this rank's selection from its accumulated gradient
  bool reevaluation = true; // a threshold re-evaluation iteration (every tau' = selection.reevaluate_every)
  // Every rank's local_selection holds exactly k entries (an exact top-k: selection.policy and top_k "exact"),
  // so a receiver knows the size of any rank's selection without being told.
  bool exactly_k = false;
  // For a collective that selects within itself (LocalSelection::within_collective, SparDL): the rank's dense
  // acc (residual + gradient), which the collective leaves as the rank's new residual; local_selection is then
  // empty. Empty for the others.
  std::span<float> acc = {};
};

// Facts of one iteration on one rank, reported beside the traffic (results.csv).
struct SparseReport {
  std::uint64_t global_selected = 0; // size of the global selection where the algorithm re-selects, else 0
  bool reevaluation = false;         // an iteration that re-evaluates thresholds exactly (Ok-Topk)
  double global_threshold = 0;       // threshold of the global selection, where there is one
};

// Per-rank state an algorithm keeps across iterations (thresholds, region boundaries).
class SparseRankState {
public:
  virtual ~SparseRankState() = default;
};

// A sparse allreduce: every rank contributes its local selection and ends with the same sparse result U.
class SparseAllreduce : public Algorithm {
public:
  // Which of its local selection a rank removes from its residual after the iteration.
  enum class ResidualRule {
    all_selected,       // everything it selected (TopkA, SparCML: the union sum keeps every value)
    selected_in_result, // what it selected and U kept (gTopk, Ok-Topk: values lost to re-selection stay)
    kept_by_algorithm,  // the collective wrote the residual into SparseInput::acc itself (SparDL)
  };
  virtual ResidualRule residual_rule() const = 0;
  // What U is, as the driver's verification checks it against the local selections S_r:
  enum class ResultSemantics {
    union_sum,      // U = sum_r S_r over the union of their indices (TopkA, SparCML)
    restricted_sum, // U[i] = sum_r S_r[i] on U's indices, a subset of the union (Ok-Topk)
    reselected,     // values may drop out at intermediate merges (gTopk); checked by its own tests
  };
  virtual ResultSemantics result_semantics() const = 0;
  // How ranks select their contributions unless the config's selection.policy says otherwise: the exact top-k
  // every iteration (the default for the baselines), thresholds reused between exact re-evaluations (Ok-Topk),
  // or a threshold fitted to a normal distribution (Gaussiank); sim/run/selection.hpp implements them. Or no local
  // selection at all: the collective selects within itself from the rank's dense acc (SparDL), and a
  // selection.policy other than "exact" is a config error.
  enum class LocalSelection { exact_top_k, threshold_reuse, gaussian_fit, within_collective };
  virtual LocalSelection default_local_selection() const { return LocalSelection::exact_top_k; }
  // What the collective holds at its peak, over all ranks, besides the selections, the reduced regions and U
  // (which the memory estimate counts for every sparse collective): the per-rank bookkeeping that grows with P
  // (a pointer per gathered part, a cut and a count per region), found with Valgrind's massif and checked
  // against peak RSS, with what the allocator keeps beyond it where that was measured (docs/scale.md). The
  // estimate adds no margin to it. One term per structure, named for `sparsim validate` (sim/run/memory.cpp).
  struct HeldMemory {
    std::string what;
    double bytes = 0;
  };
  virtual std::vector<HeldMemory> held_memory(const CostInputs& in) const = 0;
  virtual std::unique_ptr<SparseRankState> make_rank_state(RankId /*rank*/, int /*ranks*/, std::uint64_t /*n*/) const
  {
    return nullptr;
  }
  // Returns U. Ranks may hand back one shared object when U is computed once from shared payloads
  // (Communicator::computed_once); the driver treats it as immutable.
  virtual std::shared_ptr<const SparseVector> allreduce(Communicator& comm, const SparseInput& input,
                                                        SparseRankState* state, SparseReport& report) const = 0;
};

} // namespace sparsim
