// Device presets: the GPU a rank runs on, for the compute model (config "compute.device"; docs/config.md).
//
// A model table's training step is an estimate for one device (configs/models/*.json: the P100 of Piz Daint).
// On another device the step is moved by the ratio of the two devices' figures: its compute-bound part by the
// ratio of arithmetic peaks (fp32, or the tensor cores' fp16/bf16 under "mixed" precision), its memory-bound
// part (a table's "memory_bound") by the ratio of memory bandwidths. The device's memory bandwidth is also the
// default rate of the selection kernels and of the reductions (compute.memory_bandwidth).
//
// LIMITATIONS
// - Every device reaches the same fraction of its peak as the table's estimate assumed on its own device: an
//   upper bound on the speed-up, since small batches reach a smaller fraction of a large GPU's peak.
// - Peaks are the vendors' dense figures (no structured sparsity); clocks, power limits and the input
//   pipeline are not modelled.
#pragma once

#include "sim/base/units.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace sparsim {

struct DevicePreset {
  std::string name;                    // "p100", "a100", "h100"
  std::string description;             // "NVIDIA Tesla P100 PCIe 16 GB (Piz Daint)"
  double fp32_flops = 0;               // peak fp32 FLOP/s without tensor cores
  double mixed_flops = 0;              // peak fp16/bf16 FLOP/s with fp32 accumulation (tensor cores where present)
  BytesPerSecond memory_bandwidth = 0; // device memory (HBM)
};

// Every preset, the default ("p100") first.
const std::vector<DevicePreset>& device_presets();
std::vector<std::string> device_preset_names();
// The preset of that name; throws std::out_of_range for another.
const DevicePreset& device_preset(std::string_view name);

// The arithmetic peak for a precision: "fp32" or "mixed".
double device_flops(const DevicePreset& device, std::string_view precision);

} // namespace sparsim
