// kernels/device.h: the dispatch point's choice of device and its fallback line. These cases run
// in every build; which branch they check depends on whether the build has CUDA and the machine a
// GPU, and each branch asserts what a user would see.
#include <doctest/doctest.h>

#include <string>

#include "kernels/device.h"
#if ENVFORGE_HAVE_CUDA
#include "kernels/cuda/device_runtime.h"
#endif

namespace envforge::kernels {
namespace {

TEST_CASE("SelectDevice: cpu never probes and has no note") {
  Result<DeviceSelection> selection = SelectDevice("cpu");
  REQUIRE(selection.ok());
  CHECK(selection->device == Device::kCpu);
  CHECK(selection->note.empty());
  CHECK(std::string(DeviceName(selection->device)) == "cpu");
}

TEST_CASE("SelectDevice: an unknown name is an error listing the valid ones") {
  Result<DeviceSelection> selection = SelectDevice("tpu");
  REQUIRE_FALSE(selection.ok());
  CHECK(selection.status().code() == StatusCode::kInvalidArgument);
  CHECK(selection.status().message().find("'tpu'") != std::string::npos);
  CHECK(selection.status().message().find("cpu, cuda or auto") != std::string::npos);
}

TEST_CASE("SelectDevice: cuda runs on the GPU when there is one, else falls back with a reason") {
  for (const char* name : {"cuda", "auto"}) {
    Result<DeviceSelection> selection = SelectDevice(name);
    REQUIRE(selection.ok());
    CHECK(selection->requested == name);
#if ENVFORGE_HAVE_CUDA
    CHECK(BuiltWithCuda());
    Result<cuda::DeviceInfo> probed = cuda::ProbeDevice();
    if (probed.ok()) {
      CHECK(selection->device == Device::kCuda);
      CHECK(selection->note.empty());
      CHECK(selection->detail.find(probed->name) != std::string::npos);
      continue;
    }
    CHECK(selection->device == Device::kCpu);
    // The runtime's own reason is in the line, so a user can tell a missing driver from no GPU.
    CHECK(selection->note.find(probed.status().message()) != std::string::npos);
#else
    CHECK_FALSE(BuiltWithCuda());
    CHECK(selection->device == Device::kCpu);
    CHECK(selection->note.find("built without the CUDA kernels") != std::string::npos);
#endif
    CHECK(selection->note.find(std::string("--device ") + name) == 0);
    CHECK(selection->note.find("running on the CPU") != std::string::npos);
  }
}

}  // namespace
}  // namespace envforge::kernels
