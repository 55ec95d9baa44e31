// Helpers of the CUDA backend-consistency suite (kernels_cuda_test): every CUDA op is run against
// its kernels/cpu twin. Cases that need a GPU start with ENVFORGE_REQUIRE_GPU(), which ends the
// case with a clear "skipped: no CUDA device (<reason>)" message when ProbeDevice finds none (CI
// builds and links these suites but has no GPU). Host-side cases (argument validation, packing,
// planning) run everywhere.
#pragma once

#include <doctest/doctest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "kernels/cuda/device_runtime.h"

namespace envforge::kernels::cuda::testing {

// The device, or nullptr after printing the skip line (once per process).
inline const DeviceInfo* GpuOrNull() {
  static const Result<DeviceInfo> probed = ProbeDevice();
  if (probed.ok()) return &probed.value();
  static bool printed = false;
  if (!printed) {
    printed = true;
    std::fprintf(stderr, "kernels_cuda_test: GPU cases skipped: no CUDA device (%s)\n",
                 probed.status().message().c_str());
  }
  return nullptr;
}

// True when the probed device is the host emulator (kernels/cuda/emulation/, the *_emulated
// suites): every kernel then runs on the CPU, one fiber per CUDA thread, so suites shrink their
// largest shapes (the emulator checks indexing, synchronisation and numerics, never speed).
inline bool Emulated() {
  const DeviceInfo* device = GpuOrNull();
  return device != nullptr && device->name == "envforge CUDA emulator (host)";
}

#define ENVFORGE_REQUIRE_GPU()                                        \
  do {                                                                \
    if (::envforge::kernels::cuda::testing::GpuOrNull() == nullptr) { \
      MESSAGE("skipped: no CUDA device");                             \
      return;                                                         \
    }                                                                 \
  } while (0)

// Uploads a host vector into a new device buffer (REQUIREs success).
template <typename T>
DeviceBuffer ToDevice(const std::vector<T>& host) {
  Result<DeviceBuffer> buffer = DeviceBuffer::Allocate(host.size() * sizeof(T));
  REQUIRE_MESSAGE(buffer.ok(), buffer.status().message());
  Status status = buffer->Upload(host.data(), host.size() * sizeof(T));
  REQUIRE_MESSAGE(status.ok(), status.message());
  return std::move(buffer).value();
}

template <typename T>
DeviceBuffer DeviceZeros(size_t count) {
  Result<DeviceBuffer> buffer = DeviceBuffer::Allocate(count * sizeof(T));
  REQUIRE_MESSAGE(buffer.ok(), buffer.status().message());
  Status status = buffer->Fill(0);
  REQUIRE_MESSAGE(status.ok(), status.message());
  return std::move(buffer).value();
}

template <typename T>
std::vector<T> FromDevice(const DeviceBuffer& buffer, size_t count) {
  std::vector<T> host(count);
  Status status = buffer.Download(host.data(), count * sizeof(T));
  REQUIRE_MESSAGE(status.ok(), status.message());
  return host;
}

}  // namespace envforge::kernels::cuda::testing
