// The CUDA runtime API over host memory, for the emulated builds (kernels/cuda/emulation/): the
// functions the project calls, with <cuda_runtime_api.h>'s signatures and C linkage, so
// device_runtime.cc and the engine compile unchanged against them.
//
// One device, "envforge CUDA emulator (host)", reported as sm_90 with an H100's shape (132 SMs,
// 227 KiB opt-in shared memory, 80 GB). Device memory is host memory (256-byte aligned, filled with
// a garbage pattern on allocation so reads of unwritten memory show as NaN / huge indices), with
// pattern-filled guard bands around each allocation that are checked after every launch and at
// cudaFree (see emulator.h, "Out-of-bounds writes"); with AddressSanitizer the guards and slack are
// also poisoned, so that any instrumented access to them is reported at once. Every
// operation completes before it returns (kernels too, see emulator.h), so streams and events only
// keep their handles and host timestamps. Failing calls record their error for cudaGetLastError,
// as the runtime does; a launch that faulted (non-aborting mode) is reported once by the next
// synchronising call.
#include "kernels/cuda/emulation/emulator.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <new>
#include <string>

#if ENVFORGE_EMULATION_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace {

using envforge::cuda_emulation::internal::RecordError;

constexpr size_t kTotalMemory = size_t{80} << 30;
constexpr int kSharedOptin = 227 * 1024;
constexpr uint32_t kGarbageWord = 0x7FC07FC0u;  // see emulator.cc

// Layout of one allocation: [front guard][the caller's `bytes`][slack to the next multiple of 256]
// [back guard]; everything but the caller's bytes must keep the garbage pattern, whose phase is
// that of a pattern laid from the (256-aligned) start of the block.
constexpr size_t kGuardBytes = 256;

struct Allocation {
  size_t bytes = 0;    // as asked for
  size_t rounded = 0;  // bytes rounded up to 256: the end of the slack
};

std::mutex memory_mutex;
std::map<uintptr_t, Allocation> allocations;  // by the address cudaMalloc returned
size_t allocated_bytes = 0;

unsigned char PatternByte(size_t offset) { return static_cast<unsigned char>(kGarbageWord >> (8 * (offset % 4))); }

// The pattern from phase 0, long enough to compare any guard or slack in one memcmp.
const unsigned char* Pattern() {
  static const auto* pattern = [] {
    auto* bytes = new unsigned char[2 * kGuardBytes + 8];
    for (size_t i = 0; i < 2 * kGuardBytes + 8; ++i) bytes[i] = PatternByte(i);
    return bytes;
  }();
  return pattern;
}

void FillPattern(unsigned char* begin, size_t phase, size_t length) {
  for (size_t i = 0; i < length; ++i) begin[i] = PatternByte(phase + i);
}

// "" when the guards and slack of the allocation at `user` hold the pattern; else the damage,
// and the pattern is restored. Reads the guards: the caller lifts ASan's poison (CheckGuards).
std::string DescribeGuardDamage(uintptr_t user, const Allocation& allocation) {
  auto* front = reinterpret_cast<unsigned char*>(user - kGuardBytes);
  auto* tail = reinterpret_cast<unsigned char*>(user + allocation.bytes);
  const size_t tail_length = allocation.rounded - allocation.bytes + kGuardBytes;
  // Offsets from the allocation's start; the front guard's are negative. The front guard starts a
  // multiple of 4 bytes before `user`, so both regions share the phase of their offset from `user`.
  const bool front_ok = std::memcmp(front, Pattern(), kGuardBytes) == 0;
  const bool tail_ok = std::memcmp(tail, Pattern() + allocation.bytes % 4, tail_length) == 0;
  if (front_ok && tail_ok) return "";
  int64_t first = 0, last = 0, count = 0;
  auto scan = [&](const unsigned char* region, int64_t start_offset, size_t length) {
    for (size_t i = 0; i < length; ++i) {
      const int64_t offset = start_offset + static_cast<int64_t>(i);
      if (region[i] == PatternByte(static_cast<size_t>(offset + static_cast<int64_t>(kGuardBytes)))) continue;
      if (count == 0) first = offset;
      last = offset;
      ++count;
    }
  };
  scan(front, -static_cast<int64_t>(kGuardBytes), kGuardBytes);
  scan(tail, static_cast<int64_t>(allocation.bytes), tail_length);
  char text[400];
  std::snprintf(text, sizeof text,
                "out-of-bounds write: the device allocation at 0x%" PRIxPTR " of %zu bytes has %" PRId64
                " byte(s) overwritten outside it, the first at offset %" PRId64 " (%s), the last at offset %" PRId64,
                user, allocation.bytes, count, first,
                first < 0 ? "before its start" : "past its end, in the slack or guard band", last);
  FillPattern(front, 0, kGuardBytes);
  FillPattern(tail, allocation.bytes, tail_length);
  return text;
}

// ASan: everything of the allocation's block but the caller's bytes is poisoned while the
// allocation lives; the whole block is unpoisoned before the guard check reads it and before it is
// freed. No-ops without ASan.
void PoisonOutside([[maybe_unused]] uintptr_t user, [[maybe_unused]] const Allocation& allocation) {
#if ENVFORGE_EMULATION_ASAN
  ASAN_POISON_MEMORY_REGION(reinterpret_cast<void*>(user - kGuardBytes), kGuardBytes);
  ASAN_POISON_MEMORY_REGION(reinterpret_cast<void*>(user + allocation.bytes),
                            allocation.rounded - allocation.bytes + kGuardBytes);
#endif
}

void UnpoisonBlock([[maybe_unused]] uintptr_t user, [[maybe_unused]] const Allocation& allocation) {
#if ENVFORGE_EMULATION_ASAN
  ASAN_UNPOISON_MEMORY_REGION(reinterpret_cast<void*>(user - kGuardBytes),
                              kGuardBytes + allocation.rounded + kGuardBytes);
#endif
}

// Lifts ASan's poison from the guards and slack only: the caller's bytes were never poisoned, and
// unpoisoning the whole block rewrote the shadow of every byte of every live allocation after each
// launch (a quarter of an emulated engine test's time). The tail starts at its shadow granule's
// start (caller bytes, already addressable), as ASan unpoisons whole granules from an aligned start.
void UnpoisonGuards([[maybe_unused]] uintptr_t user, [[maybe_unused]] const Allocation& allocation) {
#if ENVFORGE_EMULATION_ASAN
  ASAN_UNPOISON_MEMORY_REGION(reinterpret_cast<void*>(user - kGuardBytes), kGuardBytes);
  const uintptr_t tail = (user + allocation.bytes) & ~uintptr_t{7};
  ASAN_UNPOISON_MEMORY_REGION(reinterpret_cast<void*>(tail), user + allocation.rounded + kGuardBytes - tail);
#endif
}

// DescribeGuardDamage with ASan's poison lifted while it reads (and restores) the guards.
std::string CheckGuards(uintptr_t user, const Allocation& allocation) {
  UnpoisonGuards(user, allocation);
  std::string damage = DescribeGuardDamage(user, allocation);
  PoisonOutside(user, allocation);
  return damage;
}

// A device range [pointer, pointer + bytes) that starts inside an allocation's block (guards
// included) but does not fit in the allocation: the runtime's cudaErrorInvalidValue.
bool OverrunsAllocation(const void* pointer, size_t bytes) {
  const auto begin = reinterpret_cast<uintptr_t>(pointer);
  std::lock_guard<std::mutex> lock(memory_mutex);
  auto it = allocations.upper_bound(begin + kGuardBytes);
  if (it == allocations.begin()) return false;
  --it;
  const uintptr_t user = it->first;
  if (begin + kGuardBytes < user || begin >= user + it->second.rounded + kGuardBytes) return false;
  return begin < user || begin - user > it->second.bytes || bytes > it->second.bytes - (begin - user);
}

bool CopyOverruns(const void* dst, const void* src, size_t dst_extent, size_t src_extent) {
  return OverrunsAllocation(dst, dst_extent) || OverrunsAllocation(src, src_extent);
}

cudaError_t Fail(cudaError_t error) {
  RecordError(error);
  return error;
}

// Synchronising calls report a faulted launch (non-aborting mode) once.
cudaError_t SyncResult() {
  const cudaError_t fault = envforge::cuda_emulation::internal::TakePendingFault();
  return fault == cudaSuccess ? cudaSuccess : Fail(fault);
}

struct EmulatedStream {
  unsigned flags = 0;
};

struct EmulatedEvent {
  std::chrono::steady_clock::time_point time{};
  bool recorded = false;
};

}  // namespace

namespace envforge::cuda_emulation::internal {

std::string CheckDeviceMemoryGuards() {
  std::lock_guard<std::mutex> lock(memory_mutex);
  for (const auto& [user, allocation] : allocations) {
    std::string damage = CheckGuards(user, allocation);
    if (!damage.empty()) return damage;
  }
  return "";
}

}  // namespace envforge::cuda_emulation::internal

extern "C" {

// ---- errors

cudaError_t cudaGetLastError(void) { return envforge::cuda_emulation::internal::TakeLastError(); }
cudaError_t cudaPeekAtLastError(void) { return envforge::cuda_emulation::internal::PeekLastError(); }

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDeviceFunction: return "cudaErrorInvalidDeviceFunction";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    default: return "cudaErrorUnknown";
  }
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDeviceFunction: return "invalid device function";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorLaunchFailure: return "unspecified launch failure (envforge CUDA emulator fault; see its message)";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    default: return "unknown error";
  }
}

// ---- device

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return Fail(cudaErrorInvalidValue);
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : Fail(cudaErrorInvalidDevice); }

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return Fail(cudaErrorInvalidValue);
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (prop == nullptr) return Fail(cudaErrorInvalidValue);
  if (device != 0) return Fail(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof *prop);
  std::snprintf(prop->name, sizeof prop->name, "%s", "envforge CUDA emulator (host)");
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 132;
  prop->totalGlobalMem = kTotalMemory;
  prop->sharedMemPerBlock = 48 * 1024;
  prop->sharedMemPerBlockOptin = kSharedOptin;
  prop->sharedMemPerMultiprocessor = 228 * 1024;
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = 1024;
  prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 0x7fffffff;
  prop->maxGridSize[1] = 65535;
  prop->maxGridSize[2] = 65535;
  prop->maxThreadsPerMultiProcessor = 2048;
  prop->l2CacheSize = 50 * 1024 * 1024;
  prop->memoryBusWidth = 5120;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device) {
  if (value == nullptr) return Fail(cudaErrorInvalidValue);
  if (device != 0) return Fail(cudaErrorInvalidDevice);
  switch (attribute) {
    case cudaDevAttrMemoryClockRate: *value = 2619000; break;  // kHz, an H100 SXM's HBM3
    case cudaDevAttrGlobalMemoryBusWidth: *value = 5120; break;
    case cudaDevAttrMultiProcessorCount: *value = 132; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = kSharedOptin; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = 48 * 1024; break;
    case cudaDevAttrComputeCapabilityMajor: *value = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; break;
    case cudaDevAttrWarpSize: *value = 32; break;
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; break;
    case cudaDevAttrL2CacheSize: *value = 50 * 1024 * 1024; break;
    default: return Fail(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) { return SyncResult(); }
cudaError_t cudaDeviceReset(void) { return cudaSuccess; }

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attribute, int value) {
  if (func == nullptr) return Fail(cudaErrorInvalidDeviceFunction);
  if (attribute == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || value > kSharedOptin) return Fail(cudaErrorInvalidValue);
    envforge::cuda_emulation::internal::SetMaxDynamicSharedBytes(func, value);
    return cudaSuccess;
  }
  if (attribute == cudaFuncAttributePreferredSharedMemoryCarveout) return cudaSuccess;
  return Fail(cudaErrorInvalidValue);
}

// ---- memory

cudaError_t cudaMalloc(void** pointer, size_t bytes) {
  if (pointer == nullptr) return Fail(cudaErrorInvalidValue);
  *pointer = nullptr;
  if (bytes == 0) return cudaSuccess;
  std::lock_guard<std::mutex> lock(memory_mutex);
  if (bytes > kTotalMemory - allocated_bytes) return Fail(cudaErrorMemoryAllocation);
  const size_t rounded = (bytes + 255) / 256 * 256;  // cudaMalloc's 256-byte alignment
  void* block = std::aligned_alloc(256, kGuardBytes + rounded + kGuardBytes);
  if (block == nullptr) return Fail(cudaErrorMemoryAllocation);
  // The pattern, doubled by memcpy: a word loop here (instrumented by ASan) was an eighth of an
  // emulated engine test's time, spent filling its page pools.
  const size_t total = kGuardBytes + rounded + kGuardBytes;
  auto* bytes_out = static_cast<unsigned char*>(block);
  std::memcpy(bytes_out, Pattern(), kGuardBytes);
  for (size_t filled = kGuardBytes; filled < total; filled *= 2) {
    std::memcpy(bytes_out + filled, bytes_out, std::min(filled, total - filled));
  }
  unsigned char* user = static_cast<unsigned char*>(block) + kGuardBytes;
  allocations.emplace(reinterpret_cast<uintptr_t>(user), Allocation{bytes, rounded});
  PoisonOutside(reinterpret_cast<uintptr_t>(user), Allocation{bytes, rounded});
  allocated_bytes += bytes;
  *pointer = user;
  return cudaSuccess;
}

cudaError_t cudaFree(void* pointer) {
  if (pointer == nullptr) return cudaSuccess;
  std::string damage;
  {
    std::lock_guard<std::mutex> lock(memory_mutex);
    auto it = allocations.find(reinterpret_cast<uintptr_t>(pointer));
    if (it == allocations.end()) return Fail(cudaErrorInvalidValue);
    damage = CheckGuards(it->first, it->second);
    UnpoisonBlock(it->first, it->second);
    allocated_bytes -= it->second.bytes;
    allocations.erase(it);
    std::free(static_cast<unsigned char*>(pointer) - kGuardBytes);
  }
  // Kernels' overruns were reported after their launch; this one came from host code since.
  // The fault stays pending for the next synchronising call, like a kernel's.
  if (damage.empty()) return cudaSuccess;
  envforge::cuda_emulation::internal::HostFault("cudaFree: " + damage + " (written since the last launch)");
  return cudaErrorLaunchFailure;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  std::lock_guard<std::mutex> lock(memory_mutex);
  if (free_bytes != nullptr) *free_bytes = kTotalMemory - allocated_bytes;
  if (total_bytes != nullptr) *total_bytes = kTotalMemory;
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return Fail(cudaErrorInvalidMemcpyDirection);
  if (bytes == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) return Fail(cudaErrorInvalidValue);
  if (CopyOverruns(dst, src, bytes, bytes)) return Fail(cudaErrorInvalidValue);
  std::memmove(dst, src, bytes);
  return SyncResult();
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t /*stream*/) {
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return Fail(cudaErrorInvalidMemcpyDirection);
  if (bytes == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) return Fail(cudaErrorInvalidValue);
  if (CopyOverruns(dst, src, bytes, bytes)) return Fail(cudaErrorInvalidValue);
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpy2DAsync(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width,
                              size_t height, cudaMemcpyKind kind, cudaStream_t /*stream*/) {
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return Fail(cudaErrorInvalidMemcpyDirection);
  if (width > dst_pitch || width > src_pitch) return Fail(cudaErrorInvalidValue);  // the runtime's "invalid pitch"
  if (width == 0 || height == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) return Fail(cudaErrorInvalidValue);
  if (CopyOverruns(dst, src, (height - 1) * dst_pitch + width, (height - 1) * src_pitch + width)) {
    return Fail(cudaErrorInvalidValue);
  }
  for (size_t row = 0; row < height; ++row) {
    std::memmove(static_cast<char*>(dst) + row * dst_pitch, static_cast<const char*>(src) + row * src_pitch, width);
  }
  return cudaSuccess;
}

cudaError_t cudaMemcpy2D(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, size_t height,
                         cudaMemcpyKind kind) {
  const cudaError_t error = cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, height, kind, nullptr);
  return error == cudaSuccess ? SyncResult() : error;
}

cudaError_t cudaMemset(void* dst, int value, size_t bytes) {
  if (bytes == 0) return cudaSuccess;
  if (dst == nullptr) return Fail(cudaErrorInvalidValue);
  if (OverrunsAllocation(dst, bytes)) return Fail(cudaErrorInvalidValue);
  std::memset(dst, value, bytes);
  return SyncResult();
}

cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t /*stream*/) {
  if (bytes == 0) return cudaSuccess;
  if (dst == nullptr) return Fail(cudaErrorInvalidValue);
  if (OverrunsAllocation(dst, bytes)) return Fail(cudaErrorInvalidValue);
  std::memset(dst, value, bytes);
  return cudaSuccess;
}

// ---- streams

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  if (stream == nullptr) return Fail(cudaErrorInvalidValue);
  *stream = reinterpret_cast<cudaStream_t>(new EmulatedStream{flags});
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (stream == nullptr) return Fail(cudaErrorInvalidResourceHandle);
  delete reinterpret_cast<EmulatedStream*>(stream);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t /*stream*/) { return SyncResult(); }
cudaError_t cudaStreamQuery(cudaStream_t /*stream*/) { return cudaSuccess; }
cudaError_t cudaStreamWaitEvent(cudaStream_t /*stream*/, cudaEvent_t /*event*/, unsigned int /*flags*/) {
  return cudaSuccess;
}

// ---- events

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  if (event == nullptr) return Fail(cudaErrorInvalidValue);
  *event = reinterpret_cast<cudaEvent_t>(new EmulatedEvent());
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int /*flags*/) { return cudaEventCreate(event); }

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (event == nullptr) return Fail(cudaErrorInvalidResourceHandle);
  delete reinterpret_cast<EmulatedEvent*>(event);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t /*stream*/) {
  if (event == nullptr) return Fail(cudaErrorInvalidResourceHandle);
  auto* e = reinterpret_cast<EmulatedEvent*>(event);
  e->time = std::chrono::steady_clock::now();
  e->recorded = true;
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (event == nullptr) return Fail(cudaErrorInvalidResourceHandle);
  return SyncResult();
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (event == nullptr) return Fail(cudaErrorInvalidResourceHandle);
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (ms == nullptr) return Fail(cudaErrorInvalidValue);
  if (start == nullptr || end == nullptr) return Fail(cudaErrorInvalidResourceHandle);
  const auto* a = reinterpret_cast<const EmulatedEvent*>(start);
  const auto* b = reinterpret_cast<const EmulatedEvent*>(end);
  if (!a->recorded || !b->recorded) return Fail(cudaErrorInvalidResourceHandle);
  *ms = std::chrono::duration<float, std::milli>(b->time - a->time).count();
  return cudaSuccess;
}

}  // extern "C"
