// What every collective offers the driver: a name, its parameters, the collective itself, and its
// closed-form alpha-beta cost next to it so runs can report measurement and theory side by side.
#pragma once

#include "sim/comm.hpp"
#include "sim/dense.hpp"
#include "sim/json_reader.hpp"

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace sparsim {

// Inputs of a closed form: problem size and the platform's contention-free alpha and beta.
struct CostInputs {
  int ranks = 1;
  std::uint64_t n = 0;          // gradient length (elements)
  WireFormat wire;
  Seconds alpha = 0;            // per-message latency
  double seconds_per_byte = 0;  // beta = 1 / bandwidth
};

// Predicted cost of one call, per rank (the busiest rank where ranks differ).
struct ClosedForm {
  Seconds time = 0;
  double bytes_sent_per_rank = 0;
  double bytes_recv_per_rank = 0;
  std::string formula;  // the expression, for reports: "2(P-1)(alpha + (n/P) w beta)"
};

class Algorithm {
public:
  virtual ~Algorithm() = default;
  virtual std::string name() const = 0;
  virtual nlohmann::json params() const = 0;  // resolved parameters, for manifests
  virtual ClosedForm closed_form(const CostInputs& in) const = 0;
};

// A dense allreduce: every rank ends with the elementwise sum of all ranks' vectors.
class DenseAllreduce : public Algorithm {
public:
  virtual void allreduce(Communicator& comm, DenseVector& data) const = 0;
};

}  // namespace sparsim
