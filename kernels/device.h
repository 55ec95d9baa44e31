// Where the engine's kernels run: the one dispatch point between kernels/cpu and kernels/cuda.
//
// SelectDevice("cpu" | "cuda" | "auto") decides once per Model: "cuda" and "auto" run on the GPU
// when this build has the CUDA kernels (ENVFORGE_HAVE_CUDA) and ProbeDevice finds a usable device;
// otherwise they fall back to the CPU and `note` says why in one line, which the CLI prints
// ("envforge: --device cuda: no CUDA device (CUDA driver version is insufficient ...); running on
// the CPU"). "cpu" never probes. Any other name is InvalidArgument listing the valid ones.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace envforge::kernels {

enum class Device : unsigned char { kCpu, kCuda };
const char* DeviceName(Device device);  // "cpu", "cuda"

struct DeviceSelection {
  Device device = Device::kCpu;
  std::string requested;  // the name asked for
  std::string detail;     // the GPU's name and compute capability when kCuda
  std::string note;       // non-empty when the request could not be met (the fallback line)
};

// Whether this binary was built with the CUDA kernels.
bool BuiltWithCuda();

Result<DeviceSelection> SelectDevice(std::string_view requested);

}  // namespace envforge::kernels
