// A run with one rank per process (a real MPI run, sim/network/mpi/): what the ranks recorded, gathered into
// process 0, which checks the results and writes the outputs as the simulation does from its one process.
#pragma once

#include "sim/comm/process_group.hpp"
#include "sim/run/rank_loop.hpp"
#include "sim/run/verification.hpp"

#include <memory>
#include <span>

namespace sparsim {

// Every process's records of its rank into process 0's `run`: its records for every rank and iteration, each
// phase under process 0's id for its name (phase ids are per process), the receive counts from what the senders
// delivered (RankIteration::delivered), the largest verification error. Returns whether this is process 0.
bool gather_records(RunState& run, ProcessGroup& processes);

// A sparse iteration's check: the rank's local selection and result go to process 0, whose verifier checks
// every rank's in rank order. For a collective that selects within itself, also the acc the rank handed it
// (`acc_before`) and the residual it left (`residual`), n floats each, for the conservation check (process 0
// holds 2 P n floats for it). Returns the error ratio there (<= 1 passes), 0 elsewhere. Every process calls it.
double gathered_sparse_report(ProcessGroup& processes, const WireFormat& wire, SparseVerifier& verifier,
                              const SparseVector& selection, const std::shared_ptr<const SparseVector>& result,
                              std::span<const float> acc_before = {}, std::span<const float> residual = {});

} // namespace sparsim
