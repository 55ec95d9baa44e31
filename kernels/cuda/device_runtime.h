// The CUDA runtime as the rest of envforge sees it: probing for a device, RAII device memory and
// streams, and cudaError_t turned into Status. Host-only header: it does not include the CUDA
// headers (cudaStream_t is the runtime's opaque pointer type, declared here the same way), so
// any translation unit may include it.
//
// Every kernel in kernels/cuda/ takes device pointers plus a stream, validates its arguments on
// the host first (InvalidArgument naming the argument; no CUDA call is made for bad arguments,
// so these paths are testable without a GPU) and returns the launch error, if any, as a Status.
// Kernels run asynchronously on the stream; errors of the kernel itself surface at the next
// synchronising call (Stream::Synchronize).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

typedef struct CUstream_st* cudaStream_t;  // the CUDA runtime's own declaration

namespace envforge::kernels::cuda {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;  // e.g. "NVIDIA H100 80GB HBM3"
  int sm_major = 0, sm_minor = 0;
  int sm_count = 0;
  int64_t memory_bytes = 0;
  int64_t shared_memory_per_block_optin = 0;  // bytes a block may opt into
  double memory_clock_khz = 0;
  int memory_bus_bits = 0;
  // 2 * memory clock * bus width: the HBM figure the roofline uses when the name is not in the
  // table of kernel_bench.h.
  double theoretical_bandwidth_gbs() const;
};

// The first CUDA device, probed once per process (thread-safe). Unavailable with the runtime's
// reason when there is none: no driver, "CUDA driver version is insufficient", no device, or a
// device older than sm_90 (the kernels are built for sm_90 and its PTX).
Result<DeviceInfo> ProbeDevice();

// OK for cudaSuccess, else Internal "<what>: <cudaGetErrorName>: <cudaGetErrorString>".
// `code` is a cudaError_t.
Status CheckCuda(int code, std::string_view what);

// Device memory, freed on destruction. Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // ResourceExhausted naming the size when cudaMalloc fails. bytes == 0 gives an empty buffer.
  static Result<DeviceBuffer> Allocate(size_t bytes);

  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }

  // Copies into / out of [offset, offset + bytes) that have completed on the device when they
  // return (so a kernel on any stream sees them); InvalidArgument when the range exceeds the
  // buffer. Fill likewise.
  Status Upload(const void* host, size_t bytes, size_t offset = 0);
  Status Download(void* host, size_t bytes, size_t offset = 0) const;
  Status Fill(unsigned char byte);  // cudaMemset over the whole buffer

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// A non-blocking stream, destroyed on destruction. Move-only.
class Stream {
 public:
  Stream() = default;
  ~Stream();
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  static Result<Stream> Create();
  cudaStream_t get() const { return stream_; }
  Status Synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

// Elapsed milliseconds of `iterations` calls of fn on `stream`, timed with CUDA events after one
// warm-up call; fn returns a Status (the first error stops the timing and is returned).
template <typename Fn>
Result<double> TimeOnStream(cudaStream_t stream, int iterations, Fn&& fn);

namespace internal {
// Event pair used by TimeOnStream (kept out of line so the header needs no CUDA include).
class EventTimer {
 public:
  static Result<EventTimer> Create();
  ~EventTimer();
  EventTimer(EventTimer&& other) noexcept;
  EventTimer& operator=(EventTimer&&) = delete;
  EventTimer(const EventTimer&) = delete;
  Status Start(cudaStream_t stream);
  Result<double> StopMs(cudaStream_t stream);  // synchronises on the stop event

 private:
  EventTimer() = default;
  void* start_ = nullptr;
  void* stop_ = nullptr;
};
}  // namespace internal

template <typename Fn>
Result<double> TimeOnStream(cudaStream_t stream, int iterations, Fn&& fn) {
  ENVFORGE_RETURN_IF_ERROR(fn());
  ENVFORGE_ASSIGN_OR_RETURN(internal::EventTimer timer, internal::EventTimer::Create());
  ENVFORGE_RETURN_IF_ERROR(timer.Start(stream));
  for (int i = 0; i < iterations; ++i) ENVFORGE_RETURN_IF_ERROR(fn());
  ENVFORGE_ASSIGN_OR_RETURN(double ms, timer.StopMs(stream));
  return ms / (iterations > 0 ? iterations : 1);
}

}  // namespace envforge::kernels::cuda
