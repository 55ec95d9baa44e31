#include "kernels/device.h"

#if ENVFORGE_HAVE_CUDA
#include "kernels/cuda/device_runtime.h"
#endif

namespace envforge::kernels {

const char* DeviceName(Device device) { return device == Device::kCuda ? "cuda" : "cpu"; }

bool BuiltWithCuda() {
#if ENVFORGE_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

Result<DeviceSelection> SelectDevice(std::string_view requested) {
  DeviceSelection selection;
  selection.requested = std::string(requested);
  if (requested == "cpu") return selection;
  if (requested != "cuda" && requested != "auto") {
    return InvalidArgumentError("unknown device '" + std::string(requested) + "' (expected cpu, cuda or auto)");
  }
#if ENVFORGE_HAVE_CUDA
  Result<cuda::DeviceInfo> info = cuda::ProbeDevice();
  if (info.ok()) {
    selection.device = Device::kCuda;
    selection.detail = info->name + " (sm_" + std::to_string(info->sm_major) + std::to_string(info->sm_minor) + ", " +
                       std::to_string(info->sm_count) + " SMs)";
    return selection;
  }
  selection.note = "--device " + selection.requested + ": no usable CUDA device (" + info.status().message() +
                   "); running on the CPU";
#else
  selection.note = "--device " + selection.requested +
                   ": this envforge was built without the CUDA kernels (ENVFORGE_CUDA=OFF or no nvcc at "
                   "build time); running on the CPU";
#endif
  return selection;
}

}  // namespace envforge::kernels
