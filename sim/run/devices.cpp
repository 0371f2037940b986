// The device presets and their sources (docs/config.md, "Devices").
#include "sim/run/devices.hpp"

#include <stdexcept>

namespace sparsim {

const std::vector<DevicePreset>& device_presets()
{
  // P100: 9.3 TFLOPS fp32 and 18.7 TFLOPS fp16 for the PCIe card of Piz Daint's nodes (NVIDIA Tesla P100
  // datasheet, as quoted by Dell EMC HPC Innovation Lab, 2016), 732 GB/s HBM2; no tensor cores.
  // A100 SXM4 40 GB: 19.5 TFLOPS fp32, 312 TFLOPS fp16/bf16 tensor (dense), 1555 GB/s HBM2 (NVIDIA A100 datasheet).
  // H100 SXM5 80 GB: 67 TFLOPS fp32, 989 TFLOPS fp16/bf16 tensor (dense), 3.35 TB/s HBM3 (NVIDIA H100 datasheet).
  static const std::vector<DevicePreset> presets = {
      {"p100", "NVIDIA Tesla P100 PCIe 16 GB (Piz Daint)", 9.3e12, 18.7e12, 732e9},
      {"a100", "NVIDIA A100 SXM4 40 GB", 19.5e12, 312e12, 1555e9},
      {"h100", "NVIDIA H100 SXM5 80 GB", 67e12, 989e12, 3350e9},
  };
  return presets;
}

std::vector<std::string> device_preset_names()
{
  std::vector<std::string> names;
  for (const auto& preset : device_presets())
    names.push_back(preset.name);
  return names;
}

const DevicePreset& device_preset(std::string_view name)
{
  for (const auto& preset : device_presets())
    if (preset.name == name)
      return preset;
  throw std::out_of_range("no device preset named " + std::string(name));
}

double device_flops(const DevicePreset& device, std::string_view precision)
{
  return precision == "mixed" ? device.mixed_flops : device.fp32_flops;
}

} // namespace sparsim
