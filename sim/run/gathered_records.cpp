#include "sim/run/gathered_records.hpp"

#include "sim/data/wire_codec.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <cstring>
#include <stdexcept>
#include <string>

namespace sparsim {
namespace {

std::vector<std::byte> packed(const nlohmann::json& value)
{
  const std::vector<std::uint8_t> bytes = nlohmann::json::to_msgpack(value);
  const auto* begin = reinterpret_cast<const std::byte*>(bytes.data());
  return {begin, begin + bytes.size()};
}

nlohmann::json unpacked(std::span<const std::byte> bytes)
{
  const auto* begin = reinterpret_cast<const std::uint8_t*>(bytes.data());
  return nlohmann::json::from_msgpack(begin, begin + bytes.size());
}

// What process `own` recorded: its phase names with their first entries, and per iteration its rank's record
// (phases by this process's ids, and what its sends delivered).
nlohmann::json own_records(const RunState& run, RankId own)
{
  const PhaseNames& names = run.world.phases();
  nlohmann::json phases = nlohmann::json::array();
  for (PhaseId id = 0; id < names.names().size(); ++id) {
    const PhaseEntry& entry = names.first_entry(id);
    phases.push_back({names.names()[id], entry.time, entry.rank, entry.sequence});
  }
  nlohmann::json iterations = nlohmann::json::array();
  for (const std::vector<RankIteration>& ranks : run.records) {
    const RankIteration& record = ranks[own];
    nlohmann::json stats = nlohmann::json::array();
    for (PhaseId id = 0; id < record.phases.size(); ++id) {
      const PhaseStats& s = record.phases[id];
      stats.push_back({id, s.msgs_sent, s.msgs_recv, s.bytes_sent, s.bytes_recv, s.time});
    }
    nlohmann::json delivered = nlohmann::json::array();
    for (RankId dest = 0; dest < static_cast<RankId>(record.delivered.size()); ++dest)
      for (PhaseId id = 0; id < record.delivered[dest].size(); ++id)
        if (const PhaseStats& s = record.delivered[dest][id]; s.msgs_recv > 0)
          delivered.push_back({dest, id, s.msgs_recv, s.bytes_recv});
    iterations.push_back({{"time", record.time},
                          {"local_selected", record.local_selected},
                          {"global_selected", record.sparse.global_selected},
                          {"reevaluation", record.sparse.reevaluation},
                          {"global_threshold", record.sparse.global_threshold},
                          {"result_nnz", record.result_nnz},
                          {"phases", stats},
                          {"delivered", delivered}});
  }
  return {{"phases", phases}, {"iterations", iterations}, {"verify_max_error", run.verify_max_error}};
}

PhaseStats& stats_of(RankIteration& record, PhaseId id)
{
  if (record.phases.size() <= id)
    record.phases.resize(id + 1);
  return record.phases[id];
}

} // namespace

bool gather_records(RunState& run, ProcessGroup& processes)
{
  const std::vector<std::vector<std::byte>> parts = processes.gather(packed(own_records(run, processes.rank())));
  if (processes.rank() != 0)
    return false;
  PhaseNames& names = run.world.phases();
  std::vector<std::vector<PhaseId>> id_here(parts.size()); // [rank][its phase id]: process 0's id
  std::vector<nlohmann::json> iterations(parts.size());
  for (RankId rank = 0; rank < static_cast<RankId>(parts.size()); ++rank) {
    const nlohmann::json theirs = unpacked(parts[rank]);
    for (const nlohmann::json& phase : theirs.at("phases"))
      id_here[rank].push_back(
          names.intern(phase[0].get<std::string>(), PhaseEntry{.time = phase[1].get<Seconds>(),
                                                               .rank = phase[2].get<RankId>(),
                                                               .sequence = phase[3].get<std::uint64_t>()}));
    iterations[rank] = theirs.at("iterations");
    if (iterations[rank].size() != run.records.size())
      throw std::runtime_error("rank " + std::to_string(rank) + " recorded " + std::to_string(iterations[rank].size()) +
                               " iterations, rank 0 " + std::to_string(run.records.size()));
    run.verify_max_error = std::max(run.verify_max_error, theirs.at("verify_max_error").get<double>());
  }
  for (std::size_t it = 0; it < run.records.size(); ++it) {
    for (RankId rank = 0; rank < static_cast<RankId>(parts.size()); ++rank) {
      const nlohmann::json& theirs = iterations[rank][it];
      RankIteration record;
      record.time = theirs.at("time").get<Seconds>();
      record.local_selected = theirs.at("local_selected").get<std::uint64_t>();
      record.sparse.global_selected = theirs.at("global_selected").get<std::uint64_t>();
      record.sparse.reevaluation = theirs.at("reevaluation").get<bool>();
      record.sparse.global_threshold = theirs.at("global_threshold").get<double>();
      record.result_nnz = theirs.at("result_nnz").get<std::uint64_t>();
      for (const nlohmann::json& s : theirs.at("phases")) {
        PhaseStats& stats = stats_of(record, id_here[rank].at(s[0].get<PhaseId>()));
        stats.msgs_sent = s[1].get<std::uint64_t>();
        stats.msgs_recv += s[2].get<std::uint64_t>(); // its messages to itself
        stats.bytes_sent = s[3].get<Bytes>();
        stats.bytes_recv += s[4].get<Bytes>();
        stats.time = s[5].get<Seconds>();
      }
      run.records[it][rank] = std::move(record);
    }
    // The receivers' counts, under the sender's phase, from what each sender delivered.
    for (RankId rank = 0; rank < static_cast<RankId>(parts.size()); ++rank)
      for (const nlohmann::json& d : iterations[rank][it].at("delivered")) {
        PhaseStats& stats = stats_of(run.records[it].at(d[0].get<RankId>()), id_here[rank].at(d[1].get<PhaseId>()));
        stats.msgs_recv += d[2].get<std::uint64_t>();
        stats.bytes_recv += d[3].get<Bytes>();
      }
  }
  return true;
}

double gathered_sparse_report(ProcessGroup& processes, const WireFormat& wire, SparseVerifier& verifier,
                              const SparseVector& selection, const std::shared_ptr<const SparseVector>& result,
                              std::span<const float> acc_before, std::span<const float> residual)
{
  // [the four sections' byte counts, 8 bytes each][selection][result][acc_before][residual]
  const WireBuffer selected = encode(selection, wire), reduced = encode(*result, wire);
  const std::array<std::uint64_t, 4> sizes = {selected.size(), reduced.size(), acc_before.size_bytes(),
                                              residual.size_bytes()};
  std::vector<std::byte> all(sizeof sizes);
  std::memcpy(all.data(), sizes.data(), sizeof sizes);
  const auto append = [&all](std::span<const std::byte> bytes) { all.insert(all.end(), bytes.begin(), bytes.end()); };
  append(selected);
  append(reduced);
  append(std::as_bytes(acc_before));
  append(std::as_bytes(residual));

  struct RankCheck {
    SparseVector selection;
    std::shared_ptr<const SparseVector> result;
    std::vector<float> acc_before, residual;
  };
  std::vector<RankCheck> ranks;
  for (const std::vector<std::byte>& part : processes.gather(all)) {
    std::array<std::uint64_t, 4> at{};
    std::memcpy(at.data(), part.data(), sizeof at);
    WireBytes rest = WireBytes(part).subspan(sizeof at);
    const auto next = [&rest](std::uint64_t bytes) {
      const WireBytes section = rest.subspan(0, bytes);
      rest = rest.subspan(bytes);
      return section;
    };
    const auto floats = [](WireBytes bytes) {
      std::vector<float> values(bytes.size() / sizeof(float));
      if (!values.empty()) // memcpy must not see the null pointers of empty spans
        std::memcpy(values.data(), bytes.data(), bytes.size());
      return values;
    };
    RankCheck rank;
    rank.selection = decode_sparse(next(at[0]), wire);
    rank.result = std::make_shared<const SparseVector>(decode_sparse(next(at[1]), wire));
    rank.acc_before = floats(next(at[2]));
    rank.residual = floats(next(at[3]));
    ranks.push_back(std::move(rank));
  }
  if (ranks.empty()) // not process 0
    return 0;
  if (!acc_before.empty()) // a collective that selects within itself: the accs it was handed
    verifier.record_accs([&](RankId r) { return std::span<const float>(ranks[r].acc_before); });
  double worst = 0;
  for (const RankCheck& rank : ranks)
    worst = std::max(worst, verifier.report(rank.selection, rank.result, rank.residual));
  return worst;
}

} // namespace sparsim
