#include "kernels/cuda/device_runtime.h"

#include <cuda_runtime_api.h>

#include <mutex>
#include <utility>

namespace envforge::kernels::cuda {

double DeviceInfo::theoretical_bandwidth_gbs() const {
  // DDR: two transfers per clock; kHz * bytes per transfer -> GB/s.
  return 2.0 * memory_clock_khz * 1e3 * (memory_bus_bits / 8.0) / 1e9;
}

Status CheckCuda(int code, std::string_view what) {
  if (code == cudaSuccess) return Status();
  auto error = static_cast<cudaError_t>(code);
  return InternalError(std::string(what) + ": " + cudaGetErrorName(error) + ": " + cudaGetErrorString(error));
}

namespace {

Result<DeviceInfo> ProbeOnce() {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky-free error so later probes start clean
    return UnavailableError(std::string(cudaGetErrorString(error)));
  }
  if (count == 0) return UnavailableError("the CUDA runtime reports no device");
  DeviceInfo info;
  info.ordinal = 0;
  cudaDeviceProp prop{};
  error = cudaGetDeviceProperties(&prop, 0);
  if (error != cudaSuccess)
    return UnavailableError(std::string("cudaGetDeviceProperties: ") + cudaGetErrorString(error));
  info.name = prop.name;
  info.sm_major = prop.major;
  info.sm_minor = prop.minor;
  info.sm_count = prop.multiProcessorCount;
  info.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  info.shared_memory_per_block_optin = static_cast<int64_t>(prop.sharedMemPerBlockOptin);
  int clock_khz = 0;
  if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, 0) == cudaSuccess)
    info.memory_clock_khz = clock_khz;
  int bus_bits = 0;
  if (cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0) == cudaSuccess)
    info.memory_bus_bits = bus_bits;
  if (info.sm_major < 9) {
    return UnavailableError(info.name + " is sm_" + std::to_string(info.sm_major) + std::to_string(info.sm_minor) +
                            "; the kernels are built for sm_90 (Hopper) and newer");
  }
  error = cudaSetDevice(0);
  if (error != cudaSuccess) return UnavailableError(std::string("cudaSetDevice(0): ") + cudaGetErrorString(error));
  return info;
}

}  // namespace

Result<DeviceInfo> ProbeDevice() {
  static std::once_flag once;
  static Result<DeviceInfo>* probed = nullptr;
  std::call_once(once, [] { probed = new Result<DeviceInfo>(ProbeOnce()); });  // never freed: process-wide
  return *probed;
}

// ---- DeviceBuffer

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) cudaFree(data_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

Result<DeviceBuffer> DeviceBuffer::Allocate(size_t bytes) {
  DeviceBuffer buffer;
  if (bytes == 0) return buffer;
  cudaError_t error = cudaMalloc(&buffer.data_, bytes);
  if (error != cudaSuccess) {
    (void)cudaGetLastError();
    buffer.data_ = nullptr;
    return ResourceExhaustedError("cudaMalloc of " + std::to_string(bytes) + " bytes: " + cudaGetErrorString(error));
  }
  buffer.bytes_ = bytes;
  return buffer;
}

Status DeviceBuffer::Upload(const void* host, size_t bytes, size_t offset) {
  if (offset > bytes_ || bytes > bytes_ - offset) {
    return InvalidArgumentError("DeviceBuffer::Upload of " + std::to_string(bytes) + " bytes at offset " +
                                std::to_string(offset) + " exceeds the buffer's " + std::to_string(bytes_));
  }
  if (bytes == 0) return Status();
  ENVFORGE_RETURN_IF_ERROR(
      CheckCuda(cudaMemcpy(static_cast<char*>(data_) + offset, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D"));
  // From pageable memory cudaMemcpy may return before the DMA lands, and our streams are
  // non-blocking (they do not wait for the legacy stream): finish here so the contract holds.
  return CheckCuda(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize after H2D");
}

Status DeviceBuffer::Download(void* host, size_t bytes, size_t offset) const {
  if (offset > bytes_ || bytes > bytes_ - offset) {
    return InvalidArgumentError("DeviceBuffer::Download of " + std::to_string(bytes) + " bytes at offset " +
                                std::to_string(offset) + " exceeds the buffer's " + std::to_string(bytes_));
  }
  if (bytes == 0) return Status();
  return CheckCuda(cudaMemcpy(host, static_cast<const char*>(data_) + offset, bytes, cudaMemcpyDeviceToHost),
                   "cudaMemcpy D2H");
}

Status DeviceBuffer::Fill(unsigned char byte) {
  if (bytes_ == 0) return Status();
  ENVFORGE_RETURN_IF_ERROR(CheckCuda(cudaMemset(data_, byte, bytes_), "cudaMemset"));
  return CheckCuda(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize after memset");
}

// ---- Stream

Stream::~Stream() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

Stream::Stream(Stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

Result<Stream> Stream::Create() {
  Stream stream;
  ENVFORGE_RETURN_IF_ERROR(
      CheckCuda(cudaStreamCreateWithFlags(&stream.stream_, cudaStreamNonBlocking), "cudaStreamCreate"));
  return stream;
}

Status Stream::Synchronize() const { return CheckCuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

// ---- EventTimer

namespace internal {

Result<EventTimer> EventTimer::Create() {
  EventTimer timer;
  cudaEvent_t start = nullptr, stop = nullptr;
  ENVFORGE_RETURN_IF_ERROR(CheckCuda(cudaEventCreate(&start), "cudaEventCreate"));
  timer.start_ = start;
  ENVFORGE_RETURN_IF_ERROR(CheckCuda(cudaEventCreate(&stop), "cudaEventCreate"));
  timer.stop_ = stop;
  return timer;
}

EventTimer::~EventTimer() {
  if (start_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(start_));
  if (stop_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(stop_));
}

EventTimer::EventTimer(EventTimer&& other) noexcept
    : start_(std::exchange(other.start_, nullptr)), stop_(std::exchange(other.stop_, nullptr)) {}

Status EventTimer::Start(cudaStream_t stream) {
  return CheckCuda(cudaEventRecord(static_cast<cudaEvent_t>(start_), stream), "cudaEventRecord");
}

Result<double> EventTimer::StopMs(cudaStream_t stream) {
  ENVFORGE_RETURN_IF_ERROR(CheckCuda(cudaEventRecord(static_cast<cudaEvent_t>(stop_), stream), "cudaEventRecord"));
  ENVFORGE_RETURN_IF_ERROR(CheckCuda(cudaEventSynchronize(static_cast<cudaEvent_t>(stop_)), "cudaEventSynchronize"));
  float ms = 0;
  ENVFORGE_RETURN_IF_ERROR(
      CheckCuda(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start_), static_cast<cudaEvent_t>(stop_)),
                "cudaEventElapsedTime"));
  return static_cast<double>(ms);
}

}  // namespace internal

}  // namespace envforge::kernels::cuda
