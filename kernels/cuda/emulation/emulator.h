// The host CUDA emulator: what nvcc provides to a .cu file, rebuilt for g++ so the project's real
// kernel source runs on the CPU (the *_emulated test suites; cmake/EnvforgeCuda.cmake compiles every
// .cu with ENVFORGE_CUDA_EMULATION=1, and kernels/cuda/internal/cuda_compat.cuh includes this
// header first).
//
// Execution model (emulator.cc):
//   * A launch (ENVFORGE_LAUNCH) is checked like a GPU checks it (block <= 1024 threads, grid
//     dimensions in range, dynamic shared memory <= the limit opted into with
//     cudaFuncSetAttribute(MaxDynamicSharedMemorySize), 48 KiB by default, 227 KiB at most); a
//     violation becomes the launch error that cudaGetLastError returns, and nothing runs.
//   * Otherwise the whole grid runs synchronously, in the calling thread, before the launch
//     returns (streams are therefore trivially ordered). Blocks run one after another; a block's
//     threads are fibers (cooperative user-level threads with their own stacks) that switch only
//     at barriers and warp collectives. So `__shared__` is `static` (one block is alive at a time),
//     and atomics are plain read-modify-writes.
//   * __syncthreads / bar.sync wait for the block's threads (or the named barrier's count); warp
//     collectives (__shfl*_sync, __ballot_sync, __any/__all_sync, __syncwarp, ldmatrix, mma) wait
//     for all lanes of the warp and are computed at once when the last lane arrives, exactly like
//     the PTX they replace. Only full masks (every lane the warp has) are supported.
//   * A fault (deadlock: threads waiting at a barrier or collective that other threads never reach
//     or have exited; a collective whose lanes disagree on the operation or mask) prints a message
//     naming the kernel, grid, block and the waiting threads, then aborts the process (see
//     SetAbortOnFault for the tests' alternative).
//
// Checks that stand in for GPU faults (each is a fault, reported as above):
//   * Misaligned addresses: __ldg/__ldcg/__ldca/__ldcs/__ldlu and __stcg/__stcs/__stwt check their
//     pointer against alignof(T), as the GPU's load/store of that width does; ldmatrix row
//     addresses must be 16-byte aligned, and cp.async's source and destination aligned to its
//     copy size. Plain typed accesses (a uint4 or float4 dereference) are checked by UBSan's
//     alignment sanitizer, which the emulated libraries are built with (envforge_cuda_emulated_library):
//     a misaligned one aborts with the source line.
//   * Shared-memory operands: ldmatrix rows (16 bytes) and cp.async destinations must lie in a
//     shared-memory region: the launch's dynamic shared memory (its requested size, not the whole
//     227 KiB array) or a static `__shared__` variable. The emulator knows the latter only as
//     "static storage" (a writable segment of a loaded module), so a pointer to another global
//     passes; device memory (cudaMalloc), local arrays (fiber stacks) and dynamic shared memory
//     past the launch's size do not.
//   * Out-of-bounds writes: cudaMalloc places every allocation behind a 256-byte guard band and
//     before its rounding slack plus a 256-byte guard band, all filled with the garbage pattern;
//     after every launch the guards of all live allocations are compared with the pattern, and a
//     difference faults the launch with the allocation's address and size and the first bad offset
//     (then the guards are refilled). cudaFree checks its allocation's guards too (writes made by
//     host code such as the cuBLAS stand-ins), and cudaMemcpy* / cudaMemset* refuse a device range
//     that runs past its allocation (cudaErrorInvalidValue, as the runtime does). Without
//     AddressSanitizer, reads past the end are not caught: they return the garbage pattern.
//   * Out-of-bounds reads and writes, with AddressSanitizer (the CMake option
//     ENVFORGE_EMULATOR_ASAN, on by default, builds the emulated libraries and test executables
//     with -fsanitize=address): each allocation's guard bands and slack are poisoned, and so is the
//     dynamic shared memory array past the launch's size, so an instrumented access there (kernel
//     code, the cuBLAS stand-ins, test code) is reported by ASan at once with its source line, and
//     the process exits. The guard pattern check stays, for writes made by code ASan does not
//     instrument. Fiber switches are annotated (__sanitizer_start/finish_switch_fiber), so ASan
//     knows which stack runs.
//
// Block order: the environment variable ENVFORGE_EMULATOR_BLOCK_ORDER, read at the first launch,
// chooses the order in which a grid's blocks run:
//   forward (the default)   x fastest, then y, then z, as before;
//   reverse                 the exact reverse;
//   shuffle[:SEED]          a pseudo-random permutation, different per launch but deterministic:
//                           launch n (counted from 1 at the process's first launch, or from
//                           SetBlockOrder) permutes with SEED (decimal, default 1) and n. Fault
//                           messages name the order, seed and n.
// A kernel whose blocks communicate without a grid-wide synchronisation (one block reading what
// another writes in the same launch) usually passes in forward order, because block 0 always ran
// first; reverse and shuffle expose it as wrong results. Anything else in the variable is an error
// (the message names it, the process aborts). SetBlockOrder overrides it (tests).
//
// What the emulator cannot see: races between threads of a block that the GPU would expose (fibers
// never interleave between barriers), inter-block spinning (blocks never run concurrently: a block
// that waits for another block hangs), cp.async timing (copies complete at once), memory-model and
// L1-coherence faults, register pressure and speed. Static `__shared__` variables keep their values
// from the previous block (the GPU leaves them undefined); dynamic shared memory is refilled with a
// garbage pattern for every block. The __cvta_generic_to_shared address is the generic pointer
// (64-bit): the .cu emulation branches pass generic pointers to the collectives below.
#pragma once

#include <cuda_runtime.h>  // the runtime API, dim3/uint3, make_float4, cudaFuncSetAttribute(T*)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

// 1 when this translation unit is built with AddressSanitizer (g++ defines __SANITIZE_ADDRESS__,
// clang answers __has_feature): the emulator then poisons what lies outside device allocations and
// annotates its fiber switches.
#if defined(__SANITIZE_ADDRESS__)
#define ENVFORGE_EMULATION_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ENVFORGE_EMULATION_ASAN 1
#endif
#endif
#ifndef ENVFORGE_EMULATION_ASAN
#define ENVFORGE_EMULATION_ASAN 0
#endif

// ---- nvcc's execution-space and storage keywords (host_defines.h gave them GPU meanings)

#undef __global__
#undef __device__
#undef __host__
#undef __shared__
#undef __constant__
#undef __managed__
#undef __forceinline__
#undef __launch_bounds__
#define __global__
#define __device__
#define __host__
#define __shared__ static
#define __constant__
#define __managed__
// always_inline: every call is inlined with this translation unit's body, so two .cu files with
// same-named helpers in one namespace (legal under nvcc: device code is per translation unit)
// never silently share one body through the linker.
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)

#define ENVFORGE_LAUNCH(grid, block, shared_bytes, stream, ...) \
  ::envforge::cuda_emulation::MakeLauncher(__VA_ARGS__, grid, block, shared_bytes, stream, #__VA_ARGS__)
#define ENVFORGE_DYNAMIC_SHARED(type, name) \
  type* const name = reinterpret_cast<type*>(::envforge::cuda_emulation::internal::dynamic_shared_memory)

// nvcc's C++ overload (cuda_runtime.h declares it only for nvcc): a kernel instead of a void*.
template <typename... Params>
cudaError_t cudaFuncSetAttribute(void (*kernel)(Params...), cudaFuncAttribute attribute, int value) {
  return ::cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), attribute, value);
}

// ---- built-in variables: set by the scheduler for the fiber that runs

inline uint3 threadIdx;
inline uint3 blockIdx;
inline dim3 blockDim;
inline dim3 gridDim;
inline constexpr int warpSize = 32;

namespace envforge::cuda_emulation {

// ---- collectives the .cu files' PTX wrappers call (by all 32 lanes of a warp, like the PTX)

// ldmatrix.sync.aligned.m8n8.x{count}[.trans].shared.b16: lane l supplies the address of row l % 8
// of matrix l / 8 (16 contiguous bytes; lanes >= 8 * count supply nothing that is read). Register i
// of lane l receives matrix i's elements (row l / 4, columns 2 * (l % 4) + {0, 1}) in its low and
// high halves; with `transpose`, elements (rows 2 * (l % 4) + {0, 1}, column l / 4).
void LdMatrix(uint32_t* regs, int count, const void* row_address, bool transpose);

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: d = a . b + c with g = lane / 4, t = lane % 4:
//   a (16 x 16 bf16): a[0] = A[g][2t, 2t+1], a[1] = A[g+8][2t, 2t+1], a[2] = A[g][2t+8, 2t+9],
//                     a[3] = A[g+8][2t+8, 2t+9] (lower column in the low half);
//   b (16 x 8 bf16):  b[0] = B[2t, 2t+1][g], b[1] = B[2t+8, 2t+9][g];
//   c, d (16 x 8 f32): [0] = C[g][2t], [1] = C[g][2t+1], [2] = C[g+8][2t], [3] = C[g+8][2t+1].
// Each output is c + sum over k = 0..15 in increasing k of a * b, accumulated in fp32 (every
// product of two bf16 is exact in fp32; hardware differs only in summation order). d may alias c.
void MmaBf16M16N8K16(float* d, const uint32_t* a, const uint32_t* b, const float* c);

// mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32, same scheme with four e4m3 per register:
//   a (16 x 32): a[0] = A[g][4t..4t+3], a[1] = A[g+8][4t..4t+3], a[2] = A[g][4t+16..4t+19],
//                a[3] = A[g+8][4t+16..4t+19] (lowest column in the lowest byte);
//   b (32 x 8):  b[0] = B[4t..4t+3][g], b[1] = B[4t+16..4t+19][g];  c, d as above.
// Accumulation as above (k = 0..31, fp32; e4m3 products are exact in fp32).
void MmaE4m3M16N8K32(float* d, const uint32_t* a, const uint32_t* b, const float* c);

// cp.async of copy_bytes (4, 8 or 16) with src_bytes (<= copy_bytes) read and the rest zero-filled:
// done at once; commit and wait are therefore no-ops.
void CpAsync(void* shared_dst, const void* global_src, int copy_bytes, int src_bytes);
inline void CpAsyncCommit() {}
inline void CpAsyncWait(int /*groups_pending*/) {}

// bar.sync id, thread_count (id 0 with the block's thread count is __syncthreads).
void NamedBarrier(int id, int thread_count);

// ---- test hooks

// true (the default): a fault prints its message and aborts the process. false: the faulting
// launch is abandoned (its fibers are dropped where they stand), the message is kept for
// LastFaultMessage, and the next cudaGetLastError / synchronising call reports
// cudaErrorLaunchFailure once. For the emulator's own tests.
void SetAbortOnFault(bool abort_on_fault);
std::string LastFaultMessage();

// The order of a grid's blocks (see "Block order" above). SetBlockOrder replaces the environment
// variable's choice for the following launches and restarts shuffle's launch count (so the same
// seed replays the same permutations); BlockOrderName gives the spelling the variable uses.
enum class BlockOrder { kForward, kReverse, kShuffle };
inline constexpr uint64_t kDefaultShuffleSeed = 1;
void SetBlockOrder(BlockOrder order, uint64_t seed = kDefaultShuffleSeed);
BlockOrder CurrentBlockOrder();
uint64_t CurrentShuffleSeed();
const char* BlockOrderName(BlockOrder order);

// Launch counters since process start (tests and speed measurements).
struct EmulatorStats {
  uint64_t launches = 0;
  uint64_t blocks = 0;
  uint64_t fiber_switches = 0;
};
EmulatorStats Stats();

// ---- launch machinery (ENVFORGE_LAUNCH)

namespace internal {

inline constexpr size_t kMaxDynamicSharedBytes = 227 * 1024;
alignas(128) inline unsigned char dynamic_shared_memory[kMaxDynamicSharedBytes];

struct LaunchConfig {
  dim3 grid;
  dim3 block;
  size_t shared_bytes = 0;
  cudaStream_t stream = nullptr;
  const void* kernel = nullptr;  // the key of cudaFuncSetAttribute's limit
  const char* name = "";
};

// Runs `body(closure)` as every thread of every block; returns the launch error (also recorded
// for cudaGetLastError).
cudaError_t RunGrid(const LaunchConfig& config, void (*body)(const void* closure), const void* closure);

// Warp collectives: all lanes deposit `in`, the last arrival runs `combine` over the warp, and each
// lane gets its `out`. `what` names the operation in fault messages (and must match across lanes).
struct LaneSlot {
  alignas(16) unsigned char in[48];
  alignas(16) unsigned char out[16];
};
using Combine = void (*)(LaneSlot* lanes, int lane_count);
LaneSlot& WarpCollective(const char* what, unsigned mask, Combine combine, const void* in, size_t in_bytes);

enum class ShuffleMode { kIndex, kUp, kDown, kXor };
uint64_t Shuffle(unsigned mask, uint64_t bits, ShuffleMode mode, int lane_arg, int width);
unsigned Vote(unsigned mask, bool predicate);  // the ballot of the warp

void BlockBarrier();  // __syncthreads
void WarpSync(unsigned mask);

// Shared with cudart_emulation.cc: the runtime's last-error slot (launch errors and failing API
// calls), a faulted launch's pending error, and cudaFuncSetAttribute's shared-memory opt-in.
void RecordError(cudaError_t error);
cudaError_t PeekLastError();
cudaError_t TakeLastError();
cudaError_t TakePendingFault();  // cudaErrorLaunchFailure once after a non-aborting fault
void SetMaxDynamicSharedBytes(const void* kernel, int bytes);

// Shared with cudart_emulation.cc. CheckDeviceMemoryGuards: "" when every live allocation's guard
// bands and slack still hold the garbage pattern, else a description of the first damaged one
// (whose guards are then refilled, so one overrun is reported once). RunGrid calls it after each
// grid. HostFault reports a fault found outside a launch (cudaFree's guard check) as a launch fault
// is reported: abort with the message, or (SetAbortOnFault(false)) keep it for LastFaultMessage
// and make the next synchronising call return cudaErrorLaunchFailure.
std::string CheckDeviceMemoryGuards();
void HostFault(const std::string& what);

// The alignment checks of the load/store intrinsics below (a fault naming the kernel, thread and
// address when `address` is not a multiple of `alignment`).
[[gnu::cold]] void MisalignedAccess(const char* what, const void* address, size_t bytes, size_t alignment);
template <typename T>
inline void CheckAligned(const char* what, const T* address) {
  if (reinterpret_cast<uintptr_t>(address) % alignof(T) != 0) MisalignedAccess(what, address, sizeof(T), alignof(T));
}

}  // namespace internal

// The callable ENVFORGE_LAUNCH returns: called with the kernel's arguments, it runs the grid.
template <typename... Params>
class Launcher {
 public:
  Launcher(void (*kernel)(Params...), const internal::LaunchConfig& config) : kernel_(kernel), config_(config) {}

  template <typename... Args>
  void operator()(Args&&... args) const {
    static_assert(sizeof...(Args) == sizeof...(Params), "kernel launched with the wrong number of arguments");
    struct Closure {
      void (*kernel)(Params...);
      std::tuple<std::decay_t<Params>...> params;
    };
    // Converted once, like the GPU's copy of the parameter buffer; every thread then gets its
    // own copy (by-value parameters) when the kernel is called.
    const Closure closure{kernel_, std::tuple<std::decay_t<Params>...>(std::forward<Args>(args)...)};
    internal::RunGrid(
        config_,
        [](const void* erased) {
          const auto* c = static_cast<const Closure*>(erased);
          std::apply(c->kernel, c->params);
        },
        &closure);
  }

 private:
  void (*kernel_)(Params...);
  internal::LaunchConfig config_;
};

template <typename... Params>
Launcher<Params...> MakeLauncher(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
                                 cudaStream_t stream, const char* name) {
  internal::LaunchConfig config;
  config.grid = grid;
  config.block = block;
  config.shared_bytes = shared_bytes;
  config.stream = stream;
  config.kernel = reinterpret_cast<const void*>(kernel);
  config.name = name;
  return Launcher<Params...>(kernel, config);
}

}  // namespace envforge::cuda_emulation

// ---- device intrinsics (global namespace, as nvcc declares them)

inline void __syncthreads() { ::envforge::cuda_emulation::internal::BlockBarrier(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { ::envforge::cuda_emulation::internal::WarpSync(mask); }
inline unsigned __activemask() {
  return blockDim.x * blockDim.y * blockDim.z >= 32 ? 0xffffffffu : (1u << (blockDim.x * blockDim.y * blockDim.z)) - 1;
}
inline void __threadfence() {}
inline void __threadfence_block() {}
inline void __threadfence_system() {}

namespace envforge::cuda_emulation::internal {
template <typename T>
T ShuffleAs(unsigned mask, T value, ShuffleMode mode, int lane_arg, int width) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffles move values of at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  bits = Shuffle(mask, bits, mode, lane_arg, width);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}
}  // namespace envforge::cuda_emulation::internal

template <typename T>
T __shfl_sync(unsigned mask, T value, int src_lane, int width = 32) {
  using namespace ::envforge::cuda_emulation::internal;
  return ShuffleAs(mask, value, ShuffleMode::kIndex, src_lane, width);
}
template <typename T>
T __shfl_up_sync(unsigned mask, T value, unsigned delta, int width = 32) {
  using namespace ::envforge::cuda_emulation::internal;
  return ShuffleAs(mask, value, ShuffleMode::kUp, static_cast<int>(delta), width);
}
template <typename T>
T __shfl_down_sync(unsigned mask, T value, unsigned delta, int width = 32) {
  using namespace ::envforge::cuda_emulation::internal;
  return ShuffleAs(mask, value, ShuffleMode::kDown, static_cast<int>(delta), width);
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = 32) {
  using namespace ::envforge::cuda_emulation::internal;
  return ShuffleAs(mask, value, ShuffleMode::kXor, lane_mask, width);
}
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  return ::envforge::cuda_emulation::internal::Vote(mask, predicate != 0);
}
inline int __any_sync(unsigned mask, int predicate) {
  return ::envforge::cuda_emulation::internal::Vote(mask, predicate != 0) != 0;
}
inline int __all_sync(unsigned mask, int predicate) {
  return ::envforge::cuda_emulation::internal::Vote(mask, predicate == 0) == 0;
}

// Bit manipulation.
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
inline unsigned __brev(unsigned x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
  return __builtin_bswap32(x);
}
inline unsigned long long __brevll(unsigned long long x) {
  return (static_cast<unsigned long long>(__brev(static_cast<unsigned>(x))) << 32) |
         __brev(static_cast<unsigned>(x >> 32));
}
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned selector) {
  const uint64_t bytes = (static_cast<uint64_t>(y) << 32) | x;
  unsigned out = 0;
  for (int i = 0; i < 4; ++i)
    out |= static_cast<unsigned>((bytes >> (8 * ((selector >> (4 * i)) & 7))) & 0xff) << (8 * i);
  return out;
}
inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned shift) {
  const uint64_t both = (static_cast<uint64_t>(hi) << 32) | lo;
  return static_cast<unsigned>((both << (shift & 31)) >> 32);
}
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned shift) {
  const uint64_t both = (static_cast<uint64_t>(hi) << 32) | lo;
  return static_cast<unsigned>(both >> (shift & 31));
}

// Reinterpretation.
inline unsigned __float_as_uint(float x) {
  unsigned u;
  std::memcpy(&u, &x, 4);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
inline int __float_as_int(float x) {
  int i;
  std::memcpy(&i, &x, 4);
  return i;
}
inline float __int_as_float(int i) {
  float x;
  std::memcpy(&x, &i, 4);
  return x;
}
inline long long __double_as_longlong(double x) {
  long long i;
  std::memcpy(&i, &x, 8);
  return i;
}
inline double __longlong_as_double(long long i) {
  double x;
  std::memcpy(&x, &i, 8);
  return x;
}

// Arithmetic with explicit rounding: the _rn forms are never contracted into an FMA (nvcc's
// promise); g++ without -mfma never contracts anyway.
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __frcp_rn(float a) { return 1.0f / a; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline float __fdividef(float a, float b) { return a / b; }
inline float __saturatef(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; }  // NaN -> 0
inline float __expf(float x) { return std::exp(x); }
inline float __exp10f(float x) { return std::pow(10.0f, x); }
inline float __logf(float x) { return std::log(x); }
inline float __log2f(float x) { return std::log2(x); }
inline float __powf(float a, float b) { return std::pow(a, b); }
inline float __sinf(float x) { return std::sin(x); }
inline float __cosf(float x) { return std::cos(x); }
inline float __tanhf(float x) { return std::tanh(x); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline int __float2int_rn(float x) { return static_cast<int>(std::nearbyint(x)); }
inline int __float2int_rz(float x) { return static_cast<int>(x); }
inline int __float2int_rd(float x) { return static_cast<int>(std::floor(x)); }
inline int __float2int_ru(float x) { return static_cast<int>(std::ceil(x)); }
inline unsigned __float2uint_rn(float x) { return static_cast<unsigned>(std::nearbyint(x)); }
inline float __int2float_rn(int x) { return static_cast<float>(x); }
inline float __uint2float_rn(unsigned x) { return static_cast<float>(x); }

// CUDA's global min/max overloads for arithmetic types (usual arithmetic conversions; the
// floating forms are fminf/fmaxf, which return the non-NaN operand).
template <typename A, typename B>
requires(std::is_arithmetic_v<A>&& std::is_arithmetic_v<B>) constexpr std::common_type_t<A, B> max(A a, B b) {
  using T = std::common_type_t<A, B>;
  if constexpr (std::is_floating_point_v<T>) {
    return std::fmax(static_cast<T>(a), static_cast<T>(b));
  } else {
    return static_cast<T>(a) < static_cast<T>(b) ? static_cast<T>(b) : static_cast<T>(a);
  }
}
template <typename A, typename B>
requires(std::is_arithmetic_v<A>&& std::is_arithmetic_v<B>) constexpr std::common_type_t<A, B> min(A a, B b) {
  using T = std::common_type_t<A, B>;
  if constexpr (std::is_floating_point_v<T>) {
    return std::fmin(static_cast<T>(a), static_cast<T>(b));
  } else {
    return static_cast<T>(b) < static_cast<T>(a) ? static_cast<T>(b) : static_cast<T>(a);
  }
}

// Loads through the read-only / L2 paths and cache-hinted stores: plain accesses on the host,
// after the alignment check a GPU's access of that width makes.
#define ENVFORGE_EMULATED_LOAD(name)                              \
  template <typename T>                                           \
  T name(const T* p) {                                            \
    ::envforge::cuda_emulation::internal::CheckAligned(#name, p); \
    return *p;                                                    \
  }
ENVFORGE_EMULATED_LOAD(__ldg)
ENVFORGE_EMULATED_LOAD(__ldcg)
ENVFORGE_EMULATED_LOAD(__ldca)
ENVFORGE_EMULATED_LOAD(__ldcs)
ENVFORGE_EMULATED_LOAD(__ldlu)
#undef ENVFORGE_EMULATED_LOAD
#define ENVFORGE_EMULATED_STORE(name)                             \
  template <typename T>                                           \
  void name(T* p, T value) {                                      \
    ::envforge::cuda_emulation::internal::CheckAligned(#name, p); \
    *p = value;                                                   \
  }
ENVFORGE_EMULATED_STORE(__stcg)
ENVFORGE_EMULATED_STORE(__stcs)
ENVFORGE_EMULATED_STORE(__stwt)
#undef ENVFORGE_EMULATED_STORE

inline size_t __cvta_generic_to_shared(const void* p) { return reinterpret_cast<size_t>(p); }

// Atomics: fibers switch only at barriers and collectives, so a read-modify-write is atomic.
// Plain overloads (not templates), as nvcc declares them, so arguments convert the same way.
#define ENVFORGE_EMULATED_ATOMIC(name, T, update) \
  inline T name(T* address, T value) {            \
    const T old = *address;                       \
    *address = (update);                          \
    return old;                                   \
  }
ENVFORGE_EMULATED_ATOMIC(atomicAdd, int, old + value)
ENVFORGE_EMULATED_ATOMIC(atomicAdd, unsigned, old + value)
ENVFORGE_EMULATED_ATOMIC(atomicAdd, unsigned long long, old + value)
ENVFORGE_EMULATED_ATOMIC(atomicAdd, float, old + value)
ENVFORGE_EMULATED_ATOMIC(atomicAdd, double, old + value)
ENVFORGE_EMULATED_ATOMIC(atomicSub, int, old - value)
ENVFORGE_EMULATED_ATOMIC(atomicSub, unsigned, old - value)
ENVFORGE_EMULATED_ATOMIC(atomicMax, int, value > old ? value : old)
ENVFORGE_EMULATED_ATOMIC(atomicMax, unsigned, value > old ? value : old)
ENVFORGE_EMULATED_ATOMIC(atomicMax, long long, value > old ? value : old)
ENVFORGE_EMULATED_ATOMIC(atomicMax, unsigned long long, value > old ? value : old)
ENVFORGE_EMULATED_ATOMIC(atomicMin, int, value < old ? value : old)
ENVFORGE_EMULATED_ATOMIC(atomicMin, unsigned, value < old ? value : old)
ENVFORGE_EMULATED_ATOMIC(atomicMin, long long, value < old ? value : old)
ENVFORGE_EMULATED_ATOMIC(atomicMin, unsigned long long, value < old ? value : old)
ENVFORGE_EMULATED_ATOMIC(atomicExch, int, value)
ENVFORGE_EMULATED_ATOMIC(atomicExch, unsigned, value)
ENVFORGE_EMULATED_ATOMIC(atomicExch, unsigned long long, value)
ENVFORGE_EMULATED_ATOMIC(atomicExch, float, value)
ENVFORGE_EMULATED_ATOMIC(atomicOr, int, old | value)
ENVFORGE_EMULATED_ATOMIC(atomicOr, unsigned, old | value)
ENVFORGE_EMULATED_ATOMIC(atomicOr, unsigned long long, old | value)
ENVFORGE_EMULATED_ATOMIC(atomicAnd, int, old& value)
ENVFORGE_EMULATED_ATOMIC(atomicAnd, unsigned, old& value)
ENVFORGE_EMULATED_ATOMIC(atomicAnd, unsigned long long, old& value)
ENVFORGE_EMULATED_ATOMIC(atomicXor, int, old ^ value)
ENVFORGE_EMULATED_ATOMIC(atomicXor, unsigned, old ^ value)
ENVFORGE_EMULATED_ATOMIC(atomicXor, unsigned long long, old ^ value)
ENVFORGE_EMULATED_ATOMIC(atomicInc, unsigned, old >= value ? 0u : old + 1)
ENVFORGE_EMULATED_ATOMIC(atomicDec, unsigned, (old == 0 || old > value) ? value : old - 1)
#undef ENVFORGE_EMULATED_ATOMIC

#define ENVFORGE_EMULATED_CAS(T)                       \
  inline T atomicCAS(T* address, T compare, T value) { \
    const T old = *address;                            \
    if (old == compare) *address = value;              \
    return old;                                        \
  }
ENVFORGE_EMULATED_CAS(int)
ENVFORGE_EMULATED_CAS(unsigned)
ENVFORGE_EMULATED_CAS(unsigned long long)
ENVFORGE_EMULATED_CAS(unsigned short)
#undef ENVFORGE_EMULATED_CAS
