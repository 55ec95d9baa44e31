// The host CUDA emulator's own tests (kernels/cuda/emulation/; they run in
// kernels_cuda_emulated_test): one tiny kernel per collective, checked against the PTX ISA /
// CUDA programming guide definition written out independently here (ldmatrix x1/x2/x4 with and
// without .trans, both MMAs against a plain matrix product through the documented A/B/C fragment
// layouts, ldmatrix feeding mma as the kernels use them), shuffles, votes, atomics, block and named
// barriers, dynamic shared memory, the launch limits a GPU enforces, fault detection (deadlock,
// divergent and partial-mask collectives, reported instead of aborting through SetAbortOnFault),
// the checks that stand in for GPU faults (misaligned loads, ldmatrix and cp.async operands,
// out-of-bounds writes into allocation slack and guard bands; with AddressSanitizer, out-of-bounds
// reads and writes reported by ASan, in a child process, and fibers that ASan follows), the block orders
// (ENVFORGE_EMULATOR_BLOCK_ORDER) that expose cross-block races, the runtime and cuBLAS
// stand-ins, cuBLASLt's FP8 block-scaled matmul (the cuBLAS documentation's definition and scale
// layouts written out again, exact inputs, bit-for-bit; its statuses and descriptor attributes),
// and a speed figure for launches and fiber switches (printed, not asserted).
#if !ENVFORGE_CUDA_EMULATION
#error "cuda_emulation_test.cc belongs to the emulated suite (ENVFORGE_CUDA_EMULATION=1)"
#endif

#include "kernels/cuda/internal/cuda_compat.cuh"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#if ENVFORGE_EMULATION_ASAN
#include <sanitizer/asan_interface.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#endif

#include "kernels/cpu/float_formats.h"
#include "tests/kernels/cuda_test_util.h"

namespace envforge::kernels::cuda {
namespace {

using testing::DeviceZeros;
using testing::FromDevice;
using testing::ToDevice;

constexpr unsigned kFull = 0xffffffffu;

// ---- kernels under test

constexpr int kPitch = 24;  // 16-bit elements per shared row: 48 bytes, rows stay 16-byte aligned

// Four dense 8 x 8 matrices (matrix m, row r, column c at m * 64 + r * 8 + c) are copied into
// pitched shared memory; lane l gives the address of row l % 8 of matrix (l / 8) % count.
__global__ void ldmatrix_kernel(const uint16_t* matrices, int count, bool transpose, uint32_t* out) {
  __shared__ __align__(16) uint16_t tile[4 * 8 * kPitch];
  const int lane = static_cast<int>(threadIdx.x);
  for (int i = lane; i < 4 * 64; i += 32) tile[(i / 64) * 8 * kPitch + ((i / 8) % 8) * kPitch + i % 8] = matrices[i];
  __syncwarp();
  uint32_t regs[4] = {0, 0, 0, 0};
  cuda_emulation::LdMatrix(regs, count, &tile[((lane / 8) % count) * 8 * kPitch + (lane % 8) * kPitch], transpose);
  for (int i = 0; i < 4; ++i) out[lane * 4 + i] = regs[i];
}

// One warp: fragments in, fragments out (the test packs and unpacks them).
__global__ void mma_kernel(const uint32_t* a, const uint32_t* b, const float* c, bool fp8, float* d) {
  const int lane = static_cast<int>(threadIdx.x);
  float result[4];
  if (fp8) {
    cuda_emulation::MmaE4m3M16N8K32(result, a + 4 * lane, b + 2 * lane, c + 4 * lane);
  } else {
    cuda_emulation::MmaBf16M16N8K16(result, a + 4 * lane, b + 2 * lane, c + 4 * lane);
  }
  for (int i = 0; i < 4; ++i) d[4 * lane + i] = result[i];
}

// A (16 x 16 bf16, row-major) and B (16 x 8 bf16, k-major rows) through shared memory, ldmatrix.x4
// for A and ldmatrix.x2.trans for B, one mma, D (16 x 8 fp32, row-major) out: the pattern of the
// attention kernels.
__global__ void ldmatrix_mma_kernel(const uint16_t* a, const uint16_t* b, float* d) {
  __shared__ __align__(16) uint16_t a_tile[16 * kPitch];
  __shared__ __align__(16) uint16_t b_tile[16 * kPitch];
  const int lane = static_cast<int>(threadIdx.x);
  for (int i = lane; i < 256; i += 32) a_tile[(i / 16) * kPitch + i % 16] = a[i];
  for (int i = lane; i < 128; i += 32) b_tile[(i / 8) * kPitch + i % 8] = b[i];
  __syncwarp();
  uint32_t a_frag[4], b_frag[4] = {0, 0, 0, 0};
  cuda_emulation::LdMatrix(a_frag, 4, &a_tile[(lane % 16) * kPitch + (lane / 16) * 8], false);
  cuda_emulation::LdMatrix(b_frag, 2, &b_tile[(lane % 16) * kPitch], true);
  const float zero[4] = {0, 0, 0, 0};
  float out[4];
  cuda_emulation::MmaBf16M16N8K16(out, a_frag, b_frag, zero);
  const int g = lane / 4, t = lane % 4;
  d[g * 8 + 2 * t] = out[0];
  d[g * 8 + 2 * t + 1] = out[1];
  d[(g + 8) * 8 + 2 * t] = out[2];
  d[(g + 8) * 8 + 2 * t + 1] = out[3];
}

constexpr int kShuffleOutputs = 10;
__global__ void shuffle_kernel(int* out, double* out_double) {
  const int t = static_cast<int>(threadIdx.x);
  const int v = 100 + t;
  int* o = out + t * kShuffleOutputs;
  o[0] = __shfl_sync(kFull, v, (t * 7) % 32);
  o[1] = __shfl_up_sync(kFull, v, 3);
  o[2] = __shfl_down_sync(kFull, v, 5);
  o[3] = __shfl_xor_sync(kFull, v, 6);
  o[4] = __shfl_sync(kFull, v, 3, 8);
  o[5] = __shfl_up_sync(kFull, v, 2, 8);
  o[6] = __shfl_down_sync(kFull, v, 2, 8);
  o[7] = __shfl_xor_sync(kFull, v, 9, 8);
  o[8] = __shfl_sync(kFull, v, -1);
  o[9] = static_cast<int>(__shfl_xor_sync(kFull, static_cast<float>(v) + 0.5f, 16) - 0.5f);
  out_double[t] = __shfl_down_sync(kFull, 1e6 + t + 0.25, 1);
}

__global__ void vote_kernel(unsigned* ballots, int* any, int* all) {
  const int t = static_cast<int>(threadIdx.x);
  ballots[t] = __ballot_sync(kFull, t % 3 == 0);
  any[t] = __any_sync(kFull, t == 37);
  all[t] = __all_sync(kFull, t < 60);
}

struct AtomicCounters {
  int sum;
  unsigned bits;
  float half_sum;
  int max;
  int min;
  unsigned long long wide;
  int cas_increments;
  int exchanged;
};

__global__ void atomics_kernel(AtomicCounters* counters, unsigned* histogram_out) {
  __shared__ unsigned histogram[8];
  const int t = static_cast<int>(threadIdx.x);
  if (t < 8) histogram[t] = 0;
  __syncthreads();
  const int global_id = static_cast<int>(blockIdx.x * blockDim.x) + t;
  atomicAdd(&counters->sum, 1);
  atomicOr(&counters->bits, 1u << (global_id % 32));
  atomicAdd(&counters->half_sum, 0.5f);
  atomicMax(&counters->max, global_id * 3 - 50);
  atomicMin(&counters->min, 1000 - global_id);
  atomicAdd(&counters->wide, 1ull << 33);
  int seen = counters->cas_increments;
  for (;;) {
    const int previous = atomicCAS(&counters->cas_increments, seen, seen + 1);
    if (previous == seen) break;
    seen = previous;
  }
  atomicExch(&counters->exchanged, global_id);
  atomicAdd(&histogram[t % 8], 1u);
  __syncthreads();
  if (t < 8) atomicAdd(&histogram_out[t], histogram[t]);
}

struct Builtins {
  unsigned thread[3], block[3], block_dim[3], grid_dim[3];
  int neighbour_first, neighbour_second;
};

// Block (8, 4, 2): each thread writes its slot, then reads the next thread's after a barrier
// (written by a thread the scheduler runs later), twice over the same buffer.
__global__ void barrier_kernel(Builtins* out) {
  __shared__ int slots[64];
  const int linear = static_cast<int>(threadIdx.x + threadIdx.y * blockDim.x + threadIdx.z * blockDim.x * blockDim.y);
  const int block = static_cast<int>(blockIdx.x + blockIdx.y * gridDim.x);
  Builtins& b = out[block * 64 + linear];
  b.thread[0] = threadIdx.x, b.thread[1] = threadIdx.y, b.thread[2] = threadIdx.z;
  b.block[0] = blockIdx.x, b.block[1] = blockIdx.y, b.block[2] = blockIdx.z;
  b.block_dim[0] = blockDim.x, b.block_dim[1] = blockDim.y, b.block_dim[2] = blockDim.z;
  b.grid_dim[0] = gridDim.x, b.grid_dim[1] = gridDim.y, b.grid_dim[2] = gridDim.z;
  slots[linear] = linear * 3 + block * 1000;
  __syncthreads();
  b.neighbour_first = slots[(linear + 1) % 64];
  __syncthreads();
  slots[linear] = -linear;
  __syncthreads();
  b.neighbour_second = slots[(linear + 63) % 64];
}

// Two groups of 64 threads with their own barriers (1 and 2): in each group the second warp
// writes what the first warp reads.
__global__ void named_barrier_kernel(int* out) {
  __shared__ int values[2][32];
  const int t = static_cast<int>(threadIdx.x), group = t / 64, lane = t % 32;
  const bool writer = (t / 32) % 2 == 1;
  if (writer) values[group][lane] = 1000 * (group + 1) + lane;
  cuda_emulation::NamedBarrier(1 + group, 64);
  if (!writer) out[group * 32 + lane] = values[group][lane];
  __syncthreads();
}

__global__ void dynamic_shared_kernel(int n, int* out, uint32_t* unwritten) {
  ENVFORGE_DYNAMIC_SHARED(int, values);
  const int t = static_cast<int>(threadIdx.x);
  if (t == 0) *unwritten = static_cast<uint32_t>(values[n]);  // the one int past what is written
  __syncthreads();
  for (int i = t; i < n; i += static_cast<int>(blockDim.x)) values[i] = 2 * i;
  __syncthreads();
  for (int i = t; i < n; i += static_cast<int>(blockDim.x)) out[i] = values[n - 1 - i];
}

__global__ void mark_kernel(int* out) { out[blockIdx.x * blockDim.x + threadIdx.x] = 1; }

__global__ void cp_async_kernel(const uint8_t* src, uint8_t* out) {
  __shared__ __align__(16) uint8_t staging[32];
  if (threadIdx.x == 0) {
    cuda_emulation::CpAsync(staging, src, 16, 5);
    cuda_emulation::CpAsync(staging + 16, src + 16, 16, 16);
    cuda_emulation::CpAsyncCommit();
    cuda_emulation::CpAsyncWait(0);
    for (int i = 0; i < 32; ++i) out[i] = staging[i];
  }
}

__global__ void early_exit_kernel(int* out) {
  if (threadIdx.x >= 32) return;  // these threads never reach the barrier below
  __syncthreads();
  out[threadIdx.x] = 1;
}

__global__ void divergent_kernel(int* out) {
  const int lane = static_cast<int>(threadIdx.x);
  if (lane < 16) {
    out[lane] = __shfl_xor_sync(kFull, lane, 1);
  } else {
    out[lane] = static_cast<int>(__ballot_sync(kFull, 1));
  }
}

__global__ void partial_mask_kernel(int* out) {
  out[threadIdx.x] = __shfl_xor_sync(0x0000ffffu, static_cast<int>(threadIdx.x), 1);
}

__global__ void many_barriers_kernel(int rounds, int* out) {
  __shared__ int value;
  for (int i = 0; i < rounds; ++i) {
    if (threadIdx.x == 0) value = i;
    __syncthreads();
    if (threadIdx.x == blockDim.x - 1 && value != i) *out = -1;
    __syncthreads();
  }
}

__global__ void empty_kernel() {}

// ---- kernels with the bugs the fault checks catch

__global__ void misaligned_ldg_kernel(const unsigned char* bytes, int offset, float* out) {
  out[threadIdx.x] = __ldg(reinterpret_cast<const float*>(bytes + offset) + threadIdx.x);
}

// A float4 read 8 bytes into a float array: aligned for a float, not for the 16-byte load.
__global__ void misaligned_vector_ldcg_kernel(const float* values, float4* out) {
  *out = __ldcg(reinterpret_cast<const float4*>(values + 2));
}

enum LdMatrixSource : int {
  kStaticShared,
  kDynamicShared,
  kMisalignedRow,
  kGlobalRows,
  kLocalRows,
  kPastDynamicShared
};

// One warp, ldmatrix.x1 (lanes 0-7 give row addresses) from the chosen source; the launch gives
// 128 bytes of dynamic shared memory except for kPastDynamicShared (64: rows 4-7 are past it).
__global__ void ldmatrix_source_kernel(const uint16_t* global, int source, uint32_t* out) {
  __shared__ __align__(16) uint16_t tile[8 * 8 + 8];
  ENVFORGE_DYNAMIC_SHARED(uint16_t, dynamic_tile);
  __align__(16) uint16_t local[8 * 8];
  const int lane = static_cast<int>(threadIdx.x), row = lane % 8;
  for (int i = lane; i < 8 * 8 + 8; i += 32) tile[i] = static_cast<uint16_t>(i);
  for (int i = 0; i < 8 * 8; ++i) local[i] = static_cast<uint16_t>(i);
  if (source == kDynamicShared) {
    for (int i = lane; i < 8 * 8; i += 32) dynamic_tile[i] = static_cast<uint16_t>(i);
  }
  __syncwarp();
  const uint16_t* address = nullptr;
  switch (source) {
    case kStaticShared: address = &tile[row * 8]; break;
    case kDynamicShared: address = &dynamic_tile[row * 8]; break;
    case kMisalignedRow: address = &tile[row * 8 + 1]; break;
    case kGlobalRows: address = global + row * 8; break;
    case kLocalRows: address = &local[row * 8]; break;
    default: address = &dynamic_tile[row * 8]; break;
  }
  uint32_t regs[4] = {0, 0, 0, 0};
  cuda_emulation::LdMatrix(regs, 1, address, false);
  out[lane] = regs[0];
}

enum CpAsyncMistake : int { kNoMistake, kMisalignedDestination, kMisalignedSource, kGlobalDestination };

__global__ void cp_async_mistake_kernel(const uint8_t* src, int mistake, uint8_t* global_dst) {
  __shared__ __align__(16) uint8_t staging[32];
  if (threadIdx.x != 0) return;
  switch (mistake) {
    case kNoMistake: cuda_emulation::CpAsync(staging + 16, src + 16, 16, 16); break;
    case kMisalignedDestination: cuda_emulation::CpAsync(staging + 8, src, 16, 16); break;
    case kMisalignedSource: cuda_emulation::CpAsync(staging, src + 4, 16, 16); break;
    default: cuda_emulation::CpAsync(global_dst, src, 16, 16); break;
  }
  cuda_emulation::CpAsyncWait(0);
  global_dst[0] = staging[16];
}

// data[index] = value by one thread of block 0: an out-of-bounds write when index is outside the
// buffer.
[[maybe_unused]] __global__ void write_at_kernel(float* data, int index, float value) {
  if (threadIdx.x == 0 && blockIdx.x == 0) data[index] = value;
}

// Code ASan leaves alone (no_sanitize_address; never inlined into instrumented callers): what the
// guard pattern check is still there for, written like code built without ASan.
#if ENVFORGE_EMULATION_ASAN
#define ENVFORGE_TEST_NOT_SANITIZED __attribute__((no_sanitize_address, noinline))
#else
#define ENVFORGE_TEST_NOT_SANITIZED
#endif

// write_at_kernel, uninstrumented: its overruns reach the guard pattern check.
ENVFORGE_TEST_NOT_SANITIZED __global__ void unsanitized_write_at_kernel(float* data, int index, float value) {
  if (threadIdx.x == 0 && blockIdx.x == 0) data[index] = value;
}

ENVFORGE_TEST_NOT_SANITIZED void UnsanitizedStore(unsigned char* address, unsigned char value) { *address = value; }

// out[0] = data[index] by one thread of block 1 of 2: an out-of-bounds read when index is outside
// the buffer.
[[maybe_unused]] __global__ void read_at_kernel(const float* data, int index, float* out) {
  if (threadIdx.x == 5 && blockIdx.x == 1) out[0] = data[index];
}

// Each thread reads dynamic shared element threadIdx.x + offset after the block filled the launch's
// `count` elements: past the launch's dynamic shared memory when threadIdx.x + offset >= count.
[[maybe_unused]] __global__ void dynamic_shared_read_kernel(int count, int offset, int* out) {
  ENVFORGE_DYNAMIC_SHARED(int, values);
  const int t = static_cast<int>(threadIdx.x);
  for (int i = t; i < count; i += static_cast<int>(blockDim.x)) values[i] = i;
  __syncthreads();
  out[t] = values[t + offset];
}

// Kernel frames ASan guards with redzones (a local array whose address escapes) held across
// barriers, then (fault_thread >= 0) abandoned mid-kernel by a deadlock: the next launches reuse
// those fiber stacks and must see no stale redzone.
int SumThrough(const int* values, int count) {
  int sum = 0;
  for (int i = 0; i < count; ++i) sum += values[i];
  return sum;
}

__global__ void stack_frames_kernel(int fault_thread, int* out) {
  int local[48];
  const int t = static_cast<int>(threadIdx.x);
  for (int i = 0; i < 48; ++i) local[i] = t + i;
  __syncthreads();
  if (t == fault_thread) return;  // the others wait at the next barrier forever: a deadlock
  __syncthreads();
  out[t] = SumThrough(local, 48);
}

// Block b writes block b - 1's value plus one, with no grid-wide synchronisation: a cross-block
// race that running the blocks in index order repairs.
__global__ void chain_kernel(int* values) {
  if (threadIdx.x != 0) return;
  const int b = static_cast<int>(blockIdx.x);
  values[b] = b == 0 ? 1 : values[b - 1] + 1;
}

// position[linear block index] = the block's place in the execution order.
__global__ void block_order_kernel(int* counter, int* position) {
  if (threadIdx.x + threadIdx.y + threadIdx.z != 0) return;
  const unsigned linear = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  position[linear] = atomicAdd(counter, 1);
}

// ---- independent definitions (PTX ISA 9.7.14.5 / 9.7.14.5.15, CUDA guide warp shuffle)

uint16_t MatrixElement(int m, int r, int c) { return static_cast<uint16_t>(m * 64 + r * 8 + c); }

void CheckLdMatrix(int count, bool transpose) {
  std::vector<uint16_t> matrices(256);
  for (int m = 0; m < 4; ++m)
    for (int r = 0; r < 8; ++r)
      for (int c = 0; c < 8; ++c) matrices[static_cast<size_t>(m * 64 + r * 8 + c)] = MatrixElement(m, r, c);
  DeviceBuffer in = ToDevice(matrices);
  DeviceBuffer out = DeviceZeros<uint32_t>(128);
  ENVFORGE_LAUNCH(1, 32, 0, nullptr, ldmatrix_kernel)(in.as<uint16_t>(), count, transpose, out.as<uint32_t>());
  REQUIRE(cudaGetLastError() == cudaSuccess);
  const std::vector<uint32_t> regs = FromDevice<uint32_t>(out, 128);
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 4; ++i) {
      // Without .trans each thread holds two consecutive elements of one row: row lane / 4,
      // columns (lane % 4) * 2 and + 1; .trans delivers the transposed matrix the same way.
      uint32_t expected = 0;
      if (i < count) {
        const int row = lane / 4, col = (lane % 4) * 2;
        const uint16_t lo = transpose ? MatrixElement(i, col, row) : MatrixElement(i, row, col);
        const uint16_t hi = transpose ? MatrixElement(i, col + 1, row) : MatrixElement(i, row, col + 1);
        expected = lo | static_cast<uint32_t>(hi) << 16;
      }
      CHECK_MESSAGE(regs[static_cast<size_t>(lane * 4 + i)] == expected, "x", count, transpose ? ".trans" : "",
                    " lane ", lane, " reg ", i);
    }
  }
}

// Fragment element positions, exactly as the PTX ISA states them (groupID = lane >> 2,
// threadID_in_group = lane % 4); element i of a fragment is register i / per_reg, field i % per_reg.
struct Position {
  int row, col;
};
Position Bf16A(int lane, int i) {
  const int g = lane >> 2, t = lane % 4;
  return {(i < 2 || (i >= 4 && i < 6)) ? g : g + 8, t * 2 + (i & 1) + (i >= 4 ? 8 : 0)};
}
Position Bf16B(int lane, int i) { return {(lane % 4) * 2 + (i & 1) + (i >= 2 ? 8 : 0), lane >> 2}; }
Position E4m3A(int lane, int i) {
  const int g = lane >> 2, t = lane % 4;
  return {(i < 4 || (i >= 8 && i < 12)) ? g : g + 8, t * 4 + (i & 3) + (i >= 8 ? 16 : 0)};
}
Position E4m3B(int lane, int i) { return {(lane % 4) * 4 + (i & 3) + (i >= 4 ? 16 : 0), lane >> 2}; }
Position Accumulator(int lane, int i) { return {(lane >> 2) + (i >= 2 ? 8 : 0), (lane % 4) * 2 + (i & 1)}; }

void CheckMma(bool fp8, uint32_t seed) {
  const int k_dim = fp8 ? 32 : 16;
  std::mt19937 rng(seed);
  std::vector<float> a(static_cast<size_t>(16 * k_dim)), b(static_cast<size_t>(k_dim * 8)), c(128);
  std::vector<uint8_t> a_codes(a.size()), b_codes(b.size());
  auto random_value = [&](uint8_t* code) {
    if (fp8) {
      uint8_t byte;
      do {
        byte = static_cast<uint8_t>(rng());
      } while ((byte & 0x7f) == 0x7f);  // no NaN
      *code = byte;
      return Fp8E4M3ToFloat(byte);
    }
    // Multiples of 1/4 in [-8, 8]: bf16-exact, and every product and sum is exact in fp32.
    return static_cast<float>(static_cast<int>(rng() % 65) - 32) / 4.0f;
  };
  for (size_t i = 0; i < a.size(); ++i) a[i] = random_value(&a_codes[i]);
  for (size_t i = 0; i < b.size(); ++i) b[i] = random_value(&b_codes[i]);
  for (float& v : c) v = static_cast<float>(static_cast<int>(rng() % 33) - 16) / 2.0f;

  std::vector<uint32_t> a_frag(128, 0), b_frag(64, 0);
  std::vector<float> c_frag(128);
  const int per_reg = fp8 ? 4 : 2, bits = 32 / per_reg;
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 4 * per_reg; ++i) {
      const Position p = fp8 ? E4m3A(lane, i) : Bf16A(lane, i);
      const size_t at = static_cast<size_t>(p.row * k_dim + p.col);
      const uint32_t field = fp8 ? a_codes[at] : FloatToBf16(a[at]);
      a_frag[static_cast<size_t>(lane * 4 + i / per_reg)] |= field << (bits * (i % per_reg));
    }
    for (int i = 0; i < 2 * per_reg; ++i) {
      const Position p = fp8 ? E4m3B(lane, i) : Bf16B(lane, i);
      const size_t at = static_cast<size_t>(p.row * 8 + p.col);
      const uint32_t field = fp8 ? b_codes[at] : FloatToBf16(b[at]);
      b_frag[static_cast<size_t>(lane * 2 + i / per_reg)] |= field << (bits * (i % per_reg));
    }
    for (int i = 0; i < 4; ++i) {
      const Position p = Accumulator(lane, i);
      c_frag[static_cast<size_t>(lane * 4 + i)] = c[static_cast<size_t>(p.row * 8 + p.col)];
    }
  }
  DeviceBuffer a_dev = ToDevice(a_frag), b_dev = ToDevice(b_frag), c_dev = ToDevice(c_frag);
  DeviceBuffer d_dev = DeviceZeros<float>(128);
  ENVFORGE_LAUNCH(1, 32, 0, nullptr, mma_kernel)
  (a_dev.as<uint32_t>(), b_dev.as<uint32_t>(), c_dev.as<float>(), fp8, d_dev.as<float>());
  REQUIRE(cudaGetLastError() == cudaSuccess);
  const std::vector<float> d = FromDevice<float>(d_dev, 128);
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 4; ++i) {
      const Position p = Accumulator(lane, i);
      double expected = c[static_cast<size_t>(p.row * 8 + p.col)], magnitude = std::fabs(expected);
      for (int k = 0; k < k_dim; ++k) {
        const double term =
            static_cast<double>(a[static_cast<size_t>(p.row * k_dim + k)]) * b[static_cast<size_t>(k * 8 + p.col)];
        expected += term;
        magnitude += std::fabs(term);
      }
      // bf16 case: exact (see random_value). fp8 case: products are exact in fp32, so the only
      // error is fp32 summation of 33 terms: <= 33 * 2^-24 * sum |terms| < 2e-6 * sum |terms|.
      const double tolerance = fp8 ? 2e-6 * magnitude : 0.0;
      CHECK_MESSAGE(std::fabs(d[static_cast<size_t>(lane * 4 + i)] - expected) <= tolerance, "lane ", lane, " d", i,
                    " = ", d[static_cast<size_t>(lane * 4 + i)], " expected ", expected);
    }
  }
}

int ShuffleSource(int lane, int mode, int arg, int width) {
  // CUDA programming guide, warp shuffle functions: lanes form segments of `width`; index reads
  // lane arg mod width of the own segment; up/down do not wrap (the own value instead); xor
  // may read earlier segments but a later segment gives the own value.
  const int base = (lane / width) * width;
  switch (mode) {
    case 0: return base + ((arg % width) + width) % width;
    case 1: return lane - base >= arg ? lane - arg : lane;
    case 2: return lane - base + arg < width ? lane + arg : lane;
    default: return (lane ^ arg) >= base + width ? lane : (lane ^ arg);
  }
}

// Sets the emulator's block order for a scope (the tests that depend on it) and puts back the one
// the run started with (ENVFORGE_EMULATOR_BLOCK_ORDER's).
class ScopedBlockOrder {
 public:
  explicit ScopedBlockOrder(cuda_emulation::BlockOrder order, uint64_t seed = cuda_emulation::kDefaultShuffleSeed)
      : previous_(cuda_emulation::CurrentBlockOrder()), previous_seed_(cuda_emulation::CurrentShuffleSeed()) {
    cuda_emulation::SetBlockOrder(order, seed);
  }
  ~ScopedBlockOrder() { cuda_emulation::SetBlockOrder(previous_, previous_seed_); }
  ScopedBlockOrder(const ScopedBlockOrder&) = delete;
  ScopedBlockOrder& operator=(const ScopedBlockOrder&) = delete;

 private:
  cuda_emulation::BlockOrder previous_;
  uint64_t previous_seed_;
};

// Faults in non-aborting mode for a scope; the pending fault of the last one is consumed.
class ScopedNonAbortingFaults {
 public:
  ScopedNonAbortingFaults() {
    cuda_emulation::SetAbortOnFault(false);
    (void)cudaGetLastError();
  }
  ~ScopedNonAbortingFaults() {
    (void)cudaDeviceSynchronize();
    (void)cudaGetLastError();
    cuda_emulation::SetAbortOnFault(true);
  }
  ScopedNonAbortingFaults(const ScopedNonAbortingFaults&) = delete;
  ScopedNonAbortingFaults& operator=(const ScopedNonAbortingFaults&) = delete;
};

// The launch just made faulted: cudaGetLastError says so once, the next synchronising call reports
// it once, and the message (returned) names the kernel.
std::string ExpectLaunchFault(const char* kernel) {
  CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
  CHECK(cudaDeviceSynchronize() == cudaErrorLaunchFailure);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
  (void)cudaGetLastError();
  const std::string message = cuda_emulation::LastFaultMessage();
  MESSAGE(message);
  CHECK(message.find(kernel) != std::string::npos);
  return message;
}

std::string HexAddress(const void* address) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%" PRIxPTR, reinterpret_cast<uintptr_t>(address));
  return text;
}

#if ENVFORGE_EMULATION_ASAN
// What a child process said on stderr and how it ended (exit status, or 128 + the signal).
struct ChildOutcome {
  int status = -1;
  std::string stderr_text;
};

// Runs `body` in a forked child whose stderr is captured: ASan ends the process at its first
// report, so a case that expects one cannot run in the test process. The child exits 0 after
// `body` (without running exit handlers: the parent's doctest state is not the child's to report).
template <typename Body>
ChildOutcome RunInChild(Body body) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  std::fflush(nullptr);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], STDERR_FILENO);
    close(fds[1]);
    body();
    std::fflush(nullptr);
    _exit(0);
  }
  close(fds[1]);
  ChildOutcome outcome;
  char buffer[4096];
  for (;;) {
    const ssize_t got = read(fds[0], buffer, sizeof buffer);
    if (got > 0) {
      outcome.stderr_text.append(buffer, static_cast<size_t>(got));
    } else if (got == 0 || errno != EINTR) {
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  outcome.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return outcome;
}

// The child died of an ASan report of `kind` ("use-after-poison") for an access (e.g. "READ of
// size 4") made at `address` in `function`, whose source line (this file) the report names.
void CheckAsanReport(const ChildOutcome& outcome, const std::string& kind, const std::string& access,
                     const void* address, const std::string& function) {
  INFO(outcome.stderr_text);
  CHECK(outcome.status != 0);
  CHECK(outcome.stderr_text.find("ERROR: AddressSanitizer: " + kind + " on address " + HexAddress(address)) !=
        std::string::npos);
  CHECK(outcome.stderr_text.find(access + " at " + HexAddress(address)) != std::string::npos);
  const size_t frame = outcome.stderr_text.find(" in " + function);
  REQUIRE(frame != std::string::npos);
  const std::string first_frame = outcome.stderr_text.substr(frame, outcome.stderr_text.find('\n', frame) - frame);
  CHECK(first_frame.find("cuda_emulation_test.cc:") != std::string::npos);
}
#endif

// ---- cuBLASLt FP8 block-scaled matmul (the cuBLASLt stand-ins)

// Descriptors for one FP8 block-scaled matmul in cuBLAS's terms: D (m x n, ld ldd) = alpha *
// {scale_a, A^T} x {scale_b, B} + beta * C with A k x m (lda) and B k x n (ldb), "TN".
struct LtFp8Matmul {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;

  LtFp8Matmul(int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldd, cudaDataType d_type,
              int32_t a_mode, int32_t b_mode) {
    REQUIRE(cublasLtCreate(&handle) == CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS);
    Set(CUBLASLT_MATMUL_DESC_TRANSA, int32_t{CUBLAS_OP_T});
    Set(CUBLASLT_MATMUL_DESC_TRANSB, int32_t{CUBLAS_OP_N});
    Set(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, a_mode);
    Set(CUBLASLT_MATMUL_DESC_B_SCALE_MODE, b_mode);
    REQUIRE(cublasLtMatrixLayoutCreate(&a, CUDA_R_8F_E4M3, static_cast<uint64_t>(k), static_cast<uint64_t>(m), lda) ==
            CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasLtMatrixLayoutCreate(&b, CUDA_R_8F_E4M3, static_cast<uint64_t>(k), static_cast<uint64_t>(n), ldb) ==
            CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasLtMatrixLayoutCreate(&c, d_type, static_cast<uint64_t>(m), static_cast<uint64_t>(n), ldd) ==
            CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasLtMatrixLayoutCreate(&d, d_type, static_cast<uint64_t>(m), static_cast<uint64_t>(n), ldd) ==
            CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasLtMatmulPreferenceCreate(&preference) == CUBLAS_STATUS_SUCCESS);
  }
  ~LtFp8Matmul() {
    cublasLtMatmulPreferenceDestroy(preference);
    for (cublasLtMatrixLayout_t layout : {a, b, c, d}) cublasLtMatrixLayoutDestroy(layout);
    cublasLtMatmulDescDestroy(desc);
    cublasLtDestroy(handle);
  }
  LtFp8Matmul(const LtFp8Matmul&) = delete;
  LtFp8Matmul& operator=(const LtFp8Matmul&) = delete;

  template <typename T>
  void Set(cublasLtMatmulDescAttributes_t attribute, T value) {
    REQUIRE(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof value) == CUBLAS_STATUS_SUCCESS);
  }
  void SetScales(const void* a_scales, const void* b_scales) {
    Set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, a_scales);
    Set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, b_scales);
  }
  // The heuristic's status; `returned` and `result` receive its answer.
  cublasStatus_t Heuristic(int& returned, cublasLtMatmulHeuristicResult_t& result) {
    returned = -1;
    return cublasLtMatmulAlgoGetHeuristic(handle, desc, a, b, c, d, preference, 1, &result, &returned);
  }
  cublasStatus_t Run(const void* a_data, const void* b_data, void* d_data, float alpha, float beta,
                     const cublasLtMatmulAlgo_t* algo) {
    return cublasLtMatmul(handle, desc, &alpha, a_data, a, b_data, b, &beta, d_data, c, d_data, d, algo, nullptr, 0,
                          nullptr);
  }
};

// e4m3 codes whose values are +-(1 + m/8) * 2^e with e in {0, 1} (or zero): every product, every
// 128-term block sum, and with power-of-two block scales every promoted sum, is exact in fp32, so
// the emulated matmul must equal the double reference bit for bit.
uint8_t SmallE4m3Code(std::mt19937& rng) {
  const uint32_t r = rng();
  if (r % 13 == 0) return 0;
  return static_cast<uint8_t>(((r >> 4) & 1) << 7 | (7 + ((r >> 5) & 1)) << 3 | ((r >> 6) & 7));
}

// scale(outer, block) by the layouts of the cuBLAS documentation, 3.1.4.5.1, restated here:
// VEC128_32F [blocks][outer] (outer contiguous); BLK128x128_32F [outer / 128][blocks rounded up to 4].
size_t ScaleIndex(int32_t mode, int64_t outer, int64_t outer_count, int64_t block, int64_t blocks) {
  if (mode == CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F) return static_cast<size_t>(block * outer_count + outer);
  return static_cast<size_t>((outer / 128) * ((blocks + 3) / 4 * 4) + block);
}

size_t ScaleCount(int32_t mode, int64_t outer_count, int64_t blocks) {
  if (mode == CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F) return static_cast<size_t>(outer_count * blocks);
  return static_cast<size_t>((outer_count + 127) / 128 * ((blocks + 3) / 4 * 4));
}

// Powers of two in [2^-1, 2], neighbours differing, some negative (fp32 scales are applied with their sign);
// entries no (outer, block) maps to (BLK128x128's padding blocks) hold NaN, so reading one shows.
std::vector<float> BlockScales(int32_t mode, int64_t outer_count, int64_t blocks, int salt) {
  std::vector<float> scales(ScaleCount(mode, outer_count, blocks), std::numeric_limits<float>::quiet_NaN());
  for (int64_t outer = 0; outer < outer_count; ++outer) {
    for (int64_t block = 0; block < blocks; ++block) {
      const int64_t group = mode == CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F ? outer : outer / 128;
      const float magnitude = std::ldexp(1.0f, static_cast<int>((group * 5 + block * 3 + salt) % 3) - 1);
      scales[ScaleIndex(mode, outer, outer_count, block, blocks)] =
          (group + block + salt) % 5 == 0 ? -magnitude : magnitude;
    }
  }
  return scales;
}

TEST_SUITE("kernels.cuda.emulation") {
  TEST_CASE("the emulator is the probed device, an sm_90 with an H100's limits") {
    ENVFORGE_REQUIRE_GPU();
    CHECK(testing::Emulated());
    const Result<DeviceInfo> device = ProbeDevice();
    REQUIRE(device.ok());
    CHECK(device->name == "envforge CUDA emulator (host)");
    CHECK(device->sm_major == 9);
    CHECK(device->sm_count == 132);
    CHECK(device->shared_memory_per_block_optin == 227 * 1024);
    CHECK(device->theoretical_bandwidth_gbs() > 3000);
  }

  TEST_CASE("ldmatrix x1, x2 and x4, with and without .trans, deliver the PTX ISA fragments") {
    for (int count : {1, 2, 4}) {
      for (bool transpose : {false, true}) CheckLdMatrix(count, transpose);
    }
  }

  TEST_CASE("mma.m16n8k16 bf16 and mma.m16n8k32 e4m3 compute A . B + C through the documented fragment layouts") {
    for (uint32_t seed : {1u, 2u, 3u}) {
      CheckMma(false, seed);
      CheckMma(true, seed);
    }
  }

  TEST_CASE("ldmatrix.x4 and ldmatrix.x2.trans feed mma.m16n8k16 as the attention kernels use them") {
    std::mt19937 rng(7);
    std::vector<float> a(256), b(128);
    for (float& v : a) v = static_cast<float>(static_cast<int>(rng() % 17) - 8) / 2.0f;
    for (float& v : b) v = static_cast<float>(static_cast<int>(rng() % 17) - 8) / 2.0f;
    std::vector<uint16_t> a_bits(256), b_bits(128);
    for (size_t i = 0; i < a.size(); ++i) a_bits[i] = FloatToBf16(a[i]);
    for (size_t i = 0; i < b.size(); ++i) b_bits[i] = FloatToBf16(b[i]);
    DeviceBuffer a_dev = ToDevice(a_bits), b_dev = ToDevice(b_bits), d_dev = DeviceZeros<float>(128);
    ENVFORGE_LAUNCH(1, 32, 0, nullptr, ldmatrix_mma_kernel)
    (a_dev.as<uint16_t>(), b_dev.as<uint16_t>(), d_dev.as<float>());
    const std::vector<float> d = FromDevice<float>(d_dev, 128);
    for (int row = 0; row < 16; ++row) {
      for (int col = 0; col < 8; ++col) {
        float expected = 0;  // exact: halves times halves, 16 terms
        for (int k = 0; k < 16; ++k)
          expected += a[static_cast<size_t>(row * 16 + k)] * b[static_cast<size_t>(k * 8 + col)];
        CHECK_MESSAGE(d[static_cast<size_t>(row * 8 + col)] == expected, "D[", row, "][", col, "]");
      }
    }
  }

  TEST_CASE("shuffles (index, up, down, xor; widths 32 and 8; int, float and double) follow the CUDA definitions") {
    DeviceBuffer out = DeviceZeros<int>(64 * kShuffleOutputs), out_double = DeviceZeros<double>(64);
    ENVFORGE_LAUNCH(1, 64, 0, nullptr, shuffle_kernel)(out.as<int>(), out_double.as<double>());
    REQUIRE(cudaGetLastError() == cudaSuccess);
    const std::vector<int> got = FromDevice<int>(out, 64 * kShuffleOutputs);
    const std::vector<double> got_double = FromDevice<double>(out_double, 64);
    for (int t = 0; t < 64; ++t) {
      const int lane = t % 32, warp_base = t - lane;
      const int expected[kShuffleOutputs] = {100 + warp_base + ShuffleSource(lane, 0, (t * 7) % 32, 32),
                                             100 + warp_base + ShuffleSource(lane, 1, 3, 32),
                                             100 + warp_base + ShuffleSource(lane, 2, 5, 32),
                                             100 + warp_base + ShuffleSource(lane, 3, 6, 32),
                                             100 + warp_base + ShuffleSource(lane, 0, 3, 8),
                                             100 + warp_base + ShuffleSource(lane, 1, 2, 8),
                                             100 + warp_base + ShuffleSource(lane, 2, 2, 8),
                                             100 + warp_base + ShuffleSource(lane, 3, 9, 8),
                                             100 + warp_base + 31,
                                             100 + warp_base + (lane ^ 16)};
      for (int i = 0; i < kShuffleOutputs; ++i) {
        CHECK_MESSAGE(got[static_cast<size_t>(t * kShuffleOutputs + i)] == expected[i], "thread ", t, " output ", i);
      }
      CHECK(got_double[static_cast<size_t>(t)] == 1e6 + (lane == 31 ? t : t + 1) + 0.25);
    }
  }

  TEST_CASE("ballot, any and all vote over the warp") {
    DeviceBuffer ballots = DeviceZeros<unsigned>(64), any = DeviceZeros<int>(64), all = DeviceZeros<int>(64);
    ENVFORGE_LAUNCH(1, 64, 0, nullptr, vote_kernel)(ballots.as<unsigned>(), any.as<int>(), all.as<int>());
    const std::vector<unsigned> b = FromDevice<unsigned>(ballots, 64);
    const std::vector<int> an = FromDevice<int>(any, 64), al = FromDevice<int>(all, 64);
    for (int t = 0; t < 64; ++t) {
      unsigned expected = 0;
      for (int lane = 0; lane < 32; ++lane) {
        if ((t - t % 32 + lane) % 3 == 0) expected |= 1u << lane;
      }
      CHECK(b[static_cast<size_t>(t)] == expected);
      CHECK(an[static_cast<size_t>(t)] == (t >= 32 ? 1 : 0));  // thread 37 is in the second warp
      CHECK(al[static_cast<size_t>(t)] == (t < 32 ? 1 : 0));   // 60..63 fail in the second warp
    }
  }

  TEST_CASE("atomics on global and shared memory see every thread of every block") {
    AtomicCounters initial{};
    initial.min = 1 << 30;
    initial.max = -(1 << 30);
    DeviceBuffer counters = ToDevice(std::vector<AtomicCounters>{initial});
    DeviceBuffer histogram = DeviceZeros<unsigned>(8);
    ENVFORGE_LAUNCH(4, 256, 0, nullptr, atomics_kernel)(counters.as<AtomicCounters>(), histogram.as<unsigned>());
    REQUIRE(cudaGetLastError() == cudaSuccess);
    const AtomicCounters got = FromDevice<AtomicCounters>(counters, 1)[0];
    CHECK(got.sum == 1024);
    CHECK(got.bits == 0xffffffffu);
    CHECK(got.half_sum == 512.0f);
    CHECK(got.max == 1023 * 3 - 50);
    CHECK(got.min == 1000 - 1023);
    CHECK(got.wide == 1024ull << 33);
    CHECK(got.cas_increments == 1024);
    CHECK(got.exchanged >= 0);
    CHECK(got.exchanged < 1024);
    for (unsigned count : FromDevice<unsigned>(histogram, 8)) CHECK(count == 128);
  }

  TEST_CASE("__syncthreads orders a block's threads; 3-D built-in variables are set per thread and block") {
    const dim3 grid(3, 2), block(8, 4, 2);
    DeviceBuffer out = DeviceZeros<Builtins>(6 * 64);
    ENVFORGE_LAUNCH(grid, block, 0, nullptr, barrier_kernel)(out.as<Builtins>());
    REQUIRE(cudaGetLastError() == cudaSuccess);
    const std::vector<Builtins> got = FromDevice<Builtins>(out, 6 * 64);
    for (int block_id = 0; block_id < 6; ++block_id) {
      for (int linear = 0; linear < 64; ++linear) {
        const Builtins& b = got[static_cast<size_t>(block_id * 64 + linear)];
        CHECK(b.thread[0] == static_cast<unsigned>(linear % 8));
        CHECK(b.thread[1] == static_cast<unsigned>((linear / 8) % 4));
        CHECK(b.thread[2] == static_cast<unsigned>(linear / 32));
        CHECK(b.block[0] == static_cast<unsigned>(block_id % 3));
        CHECK(b.block[1] == static_cast<unsigned>(block_id / 3));
        CHECK(b.block[2] == 0u);
        CHECK((b.block_dim[0] == 8 && b.block_dim[1] == 4 && b.block_dim[2] == 2));
        CHECK((b.grid_dim[0] == 3 && b.grid_dim[1] == 2 && b.grid_dim[2] == 1));
        CHECK(b.neighbour_first == ((linear + 1) % 64) * 3 + block_id * 1000);
        CHECK(b.neighbour_second == -((linear + 63) % 64));
      }
    }
  }

  TEST_CASE("named barriers (bar.sync id, count) synchronise their own group of threads") {
    DeviceBuffer out = DeviceZeros<int>(64);
    ENVFORGE_LAUNCH(1, 128, 0, nullptr, named_barrier_kernel)(out.as<int>());
    REQUIRE(cudaGetLastError() == cudaSuccess);
    const std::vector<int> got = FromDevice<int>(out, 64);
    for (int i = 0; i < 64; ++i) CHECK(got[static_cast<size_t>(i)] == 1000 * (i / 32 + 1) + i % 32);
  }

  TEST_CASE("dynamic shared memory: 48 KiB by default, more after the opt-in, garbage before it is written") {
    const int n = 16 * 1024;  // 64 KiB of ints
    DeviceBuffer out = DeviceZeros<int>(static_cast<size_t>(n));
    DeviceBuffer unwritten = DeviceZeros<uint32_t>(1);
    const size_t bytes = static_cast<size_t>(n + 1) * sizeof(int);
    (void)cudaGetLastError();
    ENVFORGE_LAUNCH(1, 256, bytes, nullptr, dynamic_shared_kernel)(n, out.as<int>(), unwritten.as<uint32_t>());
    CHECK(cudaGetLastError() == cudaErrorInvalidValue);  // over the default 48 KiB: nothing ran
    CHECK(FromDevice<int>(out, 1)[0] == 0);

    CHECK(cudaFuncSetAttribute(dynamic_shared_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 228 * 1024) ==
          cudaErrorInvalidValue);
    (void)cudaGetLastError();
    REQUIRE(cudaFuncSetAttribute(dynamic_shared_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(bytes)) == cudaSuccess);
    ENVFORGE_LAUNCH(1, 256, bytes, nullptr, dynamic_shared_kernel)(n, out.as<int>(), unwritten.as<uint32_t>());
    REQUIRE(cudaGetLastError() == cudaSuccess);
    const std::vector<int> got = FromDevice<int>(out, static_cast<size_t>(n));
    for (int i = 0; i < n; i += 97) CHECK(got[static_cast<size_t>(i)] == 2 * (n - 1 - i));
    CHECK(FromDevice<uint32_t>(unwritten, 1)[0] == 0x7FC07FC0u);
  }

  TEST_CASE("launches a GPU refuses report cudaErrorInvalidConfiguration and run nothing") {
    DeviceBuffer out = DeviceZeros<int>(2048);
    (void)cudaGetLastError();
    const dim3 bad_blocks[] = {dim3(1025), dim3(32, 32, 2), dim3(1, 1, 65), dim3(0)};
    for (const dim3& block : bad_blocks) {
      ENVFORGE_LAUNCH(1, block, 0, nullptr, mark_kernel)(out.as<int>());
      CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
    }
    const dim3 bad_grids[] = {dim3(1, 65536), dim3(1, 1, 65536), dim3(0)};
    for (const dim3& grid : bad_grids) {
      ENVFORGE_LAUNCH(grid, 32, 0, nullptr, mark_kernel)(out.as<int>());
      CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
    }
    for (int v : FromDevice<int>(out, 2048)) REQUIRE(v == 0);
    ENVFORGE_LAUNCH(2, 1024, 0, nullptr, mark_kernel)(out.as<int>());  // the largest legal block
    CHECK(cudaGetLastError() == cudaSuccess);
    for (int v : FromDevice<int>(out, 2048)) REQUIRE(v == 1);
  }

  TEST_CASE("cp.async copies src-size bytes and zero-fills the rest") {
    std::vector<uint8_t> src(32);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i + 1);
    DeviceBuffer in = ToDevice(src), out = DeviceZeros<uint8_t>(32);
    ENVFORGE_LAUNCH(1, 32, 0, nullptr, cp_async_kernel)(in.as<uint8_t>(), out.as<uint8_t>());
    const std::vector<uint8_t> got = FromDevice<uint8_t>(out, 32);
    for (int i = 0; i < 32; ++i) CHECK(got[static_cast<size_t>(i)] == (i < 5 || i >= 16 ? i + 1 : 0));
  }

  TEST_CASE("faults (deadlock, divergent or partial-mask collectives) name the kernel, grid and block") {
    // The default aborts the process with the message; here the launch is abandoned instead.
    // Forward order: the deadlock below is then reported in block (0,0,0).
    const ScopedBlockOrder forward(cuda_emulation::BlockOrder::kForward);
    cuda_emulation::SetAbortOnFault(false);
    DeviceBuffer out = DeviceZeros<int>(64);
    (void)cudaGetLastError();

    ENVFORGE_LAUNCH(2, 64, 0, nullptr, early_exit_kernel)(out.as<int>());
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
    CHECK(cudaDeviceSynchronize() == cudaErrorLaunchFailure);  // reported once by the next sync
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    std::string message = cuda_emulation::LastFaultMessage();
    MESSAGE(message);
    CHECK(message.find("early_exit_kernel") != std::string::npos);
    CHECK(message.find("grid 2x1x1, block 64x1x1") != std::string::npos);
    CHECK(message.find("block (0,0,0)") != std::string::npos);
    CHECK(message.find("deadlock") != std::string::npos);
    CHECK(message.find("threads 0-31 wait at __syncthreads") != std::string::npos);
    CHECK(message.find("threads 32-63 have exited") != std::string::npos);

    ENVFORGE_LAUNCH(1, 32, 0, nullptr, divergent_kernel)(out.as<int>());
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
    message = cuda_emulation::LastFaultMessage();
    MESSAGE(message);
    CHECK(message.find("diverged") != std::string::npos);

    ENVFORGE_LAUNCH(1, 32, 0, nullptr, partial_mask_kernel)(out.as<int>());
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
    message = cuda_emulation::LastFaultMessage();
    MESSAGE(message);
    CHECK(message.find("mask 0x0000ffff") != std::string::npos);
    (void)cudaDeviceSynchronize();
    (void)cudaGetLastError();
    cuda_emulation::SetAbortOnFault(true);

    // The emulator recovers: the next launch runs normally.
    DeviceBuffer marks = DeviceZeros<int>(64);
    ENVFORGE_LAUNCH(1, 64, 0, nullptr, mark_kernel)(marks.as<int>());
    CHECK(cudaGetLastError() == cudaSuccess);
    for (int v : FromDevice<int>(marks, 64)) CHECK(v == 1);
  }

  TEST_CASE(
      "misaligned __ldg / __ldcg fault naming the kernel, thread and address, as a GPU's misaligned-address error") {
    const ScopedNonAbortingFaults non_aborting;
    std::vector<unsigned char> bytes(64);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i);
    DeviceBuffer in = ToDevice(bytes), out = DeviceZeros<float>(32);

    ENVFORGE_LAUNCH(1, 8, 0, nullptr, misaligned_ldg_kernel)(in.as<unsigned char>(), 4, out.as<float>());
    REQUIRE(cudaGetLastError() == cudaSuccess);  // 4-byte aligned: fine

    ENVFORGE_LAUNCH(1, 8, 0, nullptr, misaligned_ldg_kernel)(in.as<unsigned char>(), 2, out.as<float>());
    std::string message = ExpectLaunchFault("misaligned_ldg_kernel");
    CHECK(message.find("thread (0,0,0)") != std::string::npos);
    CHECK(message.find("misaligned address: __ldg of a 4-byte value at " + HexAddress(in.as<unsigned char>() + 2)) !=
          std::string::npos);

    DeviceBuffer vector_out = DeviceZeros<float4>(1);
    ENVFORGE_LAUNCH(1, 1, 0, nullptr, misaligned_vector_ldcg_kernel)(in.as<float>(), vector_out.as<float4>());
    message = ExpectLaunchFault("misaligned_vector_ldcg_kernel");
    CHECK(message.find("__ldcg of a 16-byte value at " + HexAddress(in.as<float>() + 2) +
                       ", which is not 16-byte aligned") != std::string::npos);
  }

  TEST_CASE(
      "ldmatrix rows must be 16-byte aligned and in shared memory; cp.async operands aligned, its destination shared") {
    const ScopedNonAbortingFaults non_aborting;
    std::vector<uint16_t> rows(64);
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<uint16_t>(i);
    DeviceBuffer global = ToDevice(rows), out = DeviceZeros<uint32_t>(32);
    auto launch = [&](int source) {
      const size_t shared_bytes = source == kPastDynamicShared ? 64 : 128;
      ENVFORGE_LAUNCH(1, 32, shared_bytes, nullptr, ldmatrix_source_kernel)
      (global.as<uint16_t>(), source, out.as<uint32_t>());
    };
    for (int source : {kStaticShared, kDynamicShared}) {
      launch(source);
      REQUIRE(cudaGetLastError() == cudaSuccess);
      // x1 without .trans: lane l holds row l / 4, columns 2 (l % 4) and + 1 of the 8 x 8 matrix.
      const std::vector<uint32_t> got = FromDevice<uint32_t>(out, 32);
      for (int lane = 0; lane < 32; ++lane) {
        const uint32_t first = static_cast<uint32_t>((lane / 4) * 8 + 2 * (lane % 4));
        CHECK(got[static_cast<size_t>(lane)] == (first | (first + 1) << 16));
      }
    }
    launch(kMisalignedRow);
    std::string message = ExpectLaunchFault("ldmatrix_source_kernel");
    CHECK(message.find("misaligned address: ldmatrix row address") != std::string::npos);
    CHECK(message.find("is not 16-byte aligned") != std::string::npos);

    launch(kGlobalRows);
    message = ExpectLaunchFault("ldmatrix_source_kernel");
    CHECK(message.find("ldmatrix row address " + HexAddress(global.as<uint16_t>()) +
                       " (16 bytes) is outside shared memory") != std::string::npos);

    launch(kLocalRows);
    message = ExpectLaunchFault("ldmatrix_source_kernel");
    CHECK(message.find("is outside shared memory") != std::string::npos);

    launch(kPastDynamicShared);  // rows 4-7 lie past the launch's 64 bytes
    message = ExpectLaunchFault("ldmatrix_source_kernel");
    CHECK(message.find("thread (4,0,0)") != std::string::npos);
    CHECK(message.find("is outside shared memory (shared memory is the launch's 64 bytes of dynamic shared memory") !=
          std::string::npos);

    std::vector<uint8_t> source_bytes(48);
    for (size_t i = 0; i < source_bytes.size(); ++i) source_bytes[i] = static_cast<uint8_t>(i + 1);
    DeviceBuffer src = ToDevice(source_bytes), dst = DeviceZeros<uint8_t>(16);
    ENVFORGE_LAUNCH(1, 32, 0, nullptr, cp_async_mistake_kernel)(src.as<uint8_t>(), kNoMistake, dst.as<uint8_t>());
    REQUIRE(cudaGetLastError() == cudaSuccess);
    CHECK(FromDevice<uint8_t>(dst, 1)[0] == 17);
    ENVFORGE_LAUNCH(1, 32, 0, nullptr, cp_async_mistake_kernel)
    (src.as<uint8_t>(), kMisalignedDestination, dst.as<uint8_t>());
    message = ExpectLaunchFault("cp_async_mistake_kernel");
    CHECK(message.find("thread (0,0,0): misaligned address: cp.async of 16 bytes from " +
                       HexAddress(src.as<uint8_t>())) != std::string::npos);
    ENVFORGE_LAUNCH(1, 32, 0, nullptr, cp_async_mistake_kernel)
    (src.as<uint8_t>(), kMisalignedSource, dst.as<uint8_t>());
    message = ExpectLaunchFault("cp_async_mistake_kernel");
    CHECK(message.find("misaligned address: cp.async of 16 bytes from " + HexAddress(src.as<uint8_t>() + 4)) !=
          std::string::npos);
    ENVFORGE_LAUNCH(1, 32, 0, nullptr, cp_async_mistake_kernel)
    (src.as<uint8_t>(), kGlobalDestination, dst.as<uint8_t>());
    message = ExpectLaunchFault("cp_async_mistake_kernel");
    CHECK(message.find("to " + HexAddress(dst.as<uint8_t>()) + ": the destination is outside shared memory") !=
          std::string::npos);
  }

  TEST_CASE(
      "writes past an allocation (slack, guard band) or before it fault the launch with the size and first bad "
      "offset") {
    const ScopedNonAbortingFaults non_aborting;
    // 100 floats: 400 bytes, rounded to 512 (112 bytes of slack), then a 256-byte guard band.
    DeviceBuffer data = DeviceZeros<float>(100);
    ENVFORGE_LAUNCH(2, 32, 0, nullptr, unsanitized_write_at_kernel)(data.as<float>(), 99, 1.0f);
    REQUIRE(cudaGetLastError() == cudaSuccess);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);

    const std::string size = "allocation at " + HexAddress(data.data()) + " of 400 bytes";
    const struct {
      int index;
      std::string first;
    } overruns[] = {{100, "the first at offset 400 (past its end"},  // one past the end
                    {127, "the first at offset 508 (past its end"},  // the last float of the slack
                    {191, "the first at offset 764 (past its end"},  // the last float of the guard band
                    {-1, "the first at offset -4 (before its start)"}};
    for (const auto& overrun : overruns) {
      ENVFORGE_LAUNCH(2, 32, 0, nullptr, unsanitized_write_at_kernel)(data.as<float>(), overrun.index, 1.0f);
      const std::string message = ExpectLaunchFault("unsanitized_write_at_kernel");
      CHECK(message.find("after the launch: out-of-bounds write: the device " + size) != std::string::npos);
      CHECK(message.find(overrun.first) != std::string::npos);
      CHECK(message.find("4 byte(s) overwritten") != std::string::npos);
    }
    // Each overrun is reported once (the guards are refilled): the next correct launch is clean.
    ENVFORGE_LAUNCH(2, 32, 0, nullptr, unsanitized_write_at_kernel)(data.as<float>(), 0, 2.0f);
    CHECK(cudaGetLastError() == cudaSuccess);
    CHECK(FromDevice<float>(data, 100)[0] == 2.0f);
  }

  TEST_CASE("cudaFree reports host writes past an allocation; copies and memsets past it are refused") {
    const ScopedNonAbortingFaults non_aborting;
    void* memory = nullptr;
    REQUIRE(cudaMalloc(&memory, 100) == cudaSuccess);
    std::vector<unsigned char> host(101, 1);
    CHECK(cudaMemcpy(memory, host.data(), 101, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
    CHECK(cudaGetLastError() == cudaErrorInvalidValue);
    CHECK(cudaMemcpy(host.data(), static_cast<unsigned char*>(memory) + 1, 100, cudaMemcpyDeviceToHost) ==
          cudaErrorInvalidValue);
    CHECK(cudaMemset(static_cast<unsigned char*>(memory) + 50, 0, 51) == cudaErrorInvalidValue);
    CHECK(cudaMemcpy2DAsync(memory, 40, host.data(), 30, 30, 3, cudaMemcpyHostToDevice, nullptr) ==
          cudaErrorInvalidValue);
    (void)cudaGetLastError();
    CHECK(cudaMemcpy(memory, host.data(), 100, cudaMemcpyHostToDevice) == cudaSuccess);
    CHECK(cudaMemset(static_cast<unsigned char*>(memory) + 50, 0, 50) == cudaSuccess);
    CHECK(cudaMemcpy2DAsync(memory, 35, host.data(), 30, 30, 3, cudaMemcpyHostToDevice, nullptr) == cudaSuccess);

    UnsanitizedStore(static_cast<unsigned char*>(memory) + 103, 0);  // host code writing into the slack
    CHECK(cudaFree(memory) == cudaErrorLaunchFailure);
    CHECK(cudaDeviceSynchronize() == cudaErrorLaunchFailure);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    const std::string message = cuda_emulation::LastFaultMessage();
    MESSAGE(message);
    CHECK(message.find("cudaFree: out-of-bounds write: the device allocation at " + HexAddress(memory) +
                       " of 100 bytes has 1 byte(s) overwritten outside it, the first at offset 103") !=
          std::string::npos);
  }

  TEST_CASE("fiber stacks are reused after kernels that finished and kernels a fault abandoned mid-frame") {
    // Under ASan, frames with redzones left on a reused fiber stack would be reported as stack
    // overflows by the next kernel; without it, the results are checked all the same.
    const int threads = 96;
    DeviceBuffer out = DeviceZeros<int>(threads);
    auto expect_sums = [&] {
      const std::vector<int> got = FromDevice<int>(out, threads);
      for (int t = 0; t < threads; ++t) CHECK(got[static_cast<size_t>(t)] == 48 * t + 47 * 48 / 2);
    };
    ENVFORGE_LAUNCH(2, threads, 0, nullptr, stack_frames_kernel)(-1, out.as<int>());
    REQUIRE(cudaGetLastError() == cudaSuccess);
    expect_sums();
    {
      const ScopedNonAbortingFaults non_aborting;
      ENVFORGE_LAUNCH(2, threads, 0, nullptr, stack_frames_kernel)(37, out.as<int>());
      const std::string message = ExpectLaunchFault("stack_frames_kernel");
      CHECK(message.find("deadlock") != std::string::npos);
    }
    REQUIRE(cudaMemset(out.data(), 0, threads * sizeof(int)) == cudaSuccess);
    for (int repeat = 0; repeat < 3; ++repeat) {
      ENVFORGE_LAUNCH(3, threads, 0, nullptr, stack_frames_kernel)(-1, out.as<int>());
      REQUIRE(cudaGetLastError() == cudaSuccess);
      expect_sums();
    }
  }

#if ENVFORGE_EMULATION_ASAN
  TEST_CASE("with AddressSanitizer, guards, slack and dynamic shared memory past the launch's size are poisoned") {
    // 100 floats: 400 bytes, rounded to 512, guard bands of 256 bytes on both sides.
    DeviceBuffer data = DeviceZeros<float>(100);
    const auto* bytes = static_cast<const unsigned char*>(data.data());
    CHECK(__asan_address_is_poisoned(bytes) == 0);
    CHECK(__asan_address_is_poisoned(bytes + 399) == 0);
    CHECK(__asan_address_is_poisoned(bytes + 400) != 0);
    CHECK(__asan_address_is_poisoned(bytes + 511) != 0);
    CHECK(__asan_address_is_poisoned(bytes + 767) != 0);
    CHECK(__asan_address_is_poisoned(bytes - 1) != 0);
    CHECK(__asan_address_is_poisoned(bytes - 256) != 0);
    CHECK(__asan_region_is_poisoned(const_cast<unsigned char*>(bytes), 400) == nullptr);
    // An odd size: the poison starts at the exact byte.
    DeviceBuffer odd = DeviceZeros<uint8_t>(13);
    const auto* odd_bytes = static_cast<const unsigned char*>(odd.data());
    CHECK(__asan_address_is_poisoned(odd_bytes + 12) == 0);
    CHECK(__asan_address_is_poisoned(odd_bytes + 13) != 0);

    // The guard check (after each launch) reads the guards and leaves them poisoned.
    DeviceBuffer out = DeviceZeros<int>(64);
    ENVFORGE_LAUNCH(1, 64, 100 * sizeof(int), nullptr, dynamic_shared_read_kernel)(100, 36, out.as<int>());
    REQUIRE(cudaGetLastError() == cudaSuccess);
    const std::vector<int> got = FromDevice<int>(out, 64);
    for (int t = 0; t < 64; ++t) CHECK(got[static_cast<size_t>(t)] == t + 36);
    CHECK(__asan_address_is_poisoned(bytes + 400) != 0);
    CHECK(__asan_address_is_poisoned(bytes - 1) != 0);
    const unsigned char* shared = cuda_emulation::internal::dynamic_shared_memory;
    CHECK(__asan_address_is_poisoned(shared + 399) == 0);
    CHECK(__asan_address_is_poisoned(shared + 400) != 0);
    CHECK(__asan_address_is_poisoned(shared + cuda_emulation::internal::kMaxDynamicSharedBytes - 1) != 0);
  }

  TEST_CASE("with AddressSanitizer, a kernel's out-of-bounds read or write is reported at once with its source line") {
    DeviceBuffer data = DeviceZeros<float>(100);
    DeviceBuffer out = DeviceZeros<float>(1);
    const float* base = data.as<float>();
    auto read_at = [&](int index) {
      return RunInChild([&] {
        ENVFORGE_LAUNCH(2, 32, 0, nullptr, read_at_kernel)(data.as<float>(), index, out.as<float>());
      });
    };
    // The harness itself: an in-bounds read runs to the end of the child, silently.
    const ChildOutcome clean = read_at(99);
    CHECK(clean.status == 0);
    CHECK(clean.stderr_text.find("AddressSanitizer") == std::string::npos);

    CheckAsanReport(read_at(100), "use-after-poison", "READ of size 4", base + 100,
                    "read_at_kernel");  // one past the end
    CheckAsanReport(read_at(127), "use-after-poison", "READ of size 4", base + 127,
                    "read_at_kernel");  // the slack's last
    CheckAsanReport(read_at(191), "use-after-poison", "READ of size 4", base + 191,
                    "read_at_kernel");                                                               // the guard's last
    CheckAsanReport(read_at(-1), "use-after-poison", "READ of size 4", base - 1, "read_at_kernel");  // before the start

    // Writes are reported by ASan before the guard check after the launch could see them.
    const ChildOutcome write = RunInChild([&] {
      ENVFORGE_LAUNCH(2, 32, 0, nullptr, write_at_kernel)
      (data.as<float>(), 100, 1.0f);
    });
    CheckAsanReport(write, "use-after-poison", "WRITE of size 4", base + 100, "write_at_kernel");
    CHECK(write.stderr_text.find("envforge CUDA emulator") == std::string::npos);

    // Dynamic shared memory past the launch's 100 ints: thread 63 reads element 100.
    DeviceBuffer shared_out = DeviceZeros<int>(64);
    const ChildOutcome shared = RunInChild([&] {
      ENVFORGE_LAUNCH(1, 64, 100 * sizeof(int), nullptr, dynamic_shared_read_kernel)(100, 37, shared_out.as<int>());
    });
    CheckAsanReport(shared, "use-after-poison", "READ of size 4",
                    reinterpret_cast<const int*>(cuda_emulation::internal::dynamic_shared_memory) + 100,
                    "dynamic_shared_read_kernel");
  }
#endif

  TEST_CASE("block order: forward hides a cross-block race that reverse and shuffle expose") {
    const int blocks = 16;
    DeviceBuffer values = DeviceZeros<int>(blocks);
    {
      const ScopedBlockOrder order(cuda_emulation::BlockOrder::kForward);
      ENVFORGE_LAUNCH(blocks, 32, 0, nullptr, chain_kernel)(values.as<int>());
      REQUIRE(cudaGetLastError() == cudaSuccess);
      CHECK(FromDevice<int>(values, blocks)[blocks - 1] == blocks);  // the race goes unnoticed
    }
    for (const cuda_emulation::BlockOrder exposing :
         {cuda_emulation::BlockOrder::kReverse, cuda_emulation::BlockOrder::kShuffle}) {
      const ScopedBlockOrder order(exposing);
      REQUIRE(cudaMemset(values.data(), 0, blocks * sizeof(int)) == cudaSuccess);
      ENVFORGE_LAUNCH(blocks, 32, 0, nullptr, chain_kernel)(values.as<int>());
      REQUIRE(cudaGetLastError() == cudaSuccess);
      CHECK_MESSAGE(FromDevice<int>(values, blocks)[blocks - 1] != blocks, cuda_emulation::BlockOrderName(exposing));
    }
  }

  TEST_CASE(
      "block orders run every block of a 3-D grid once: forward, its exact reverse, seeded deterministic shuffles") {
    const dim3 grid(5, 3, 2);
    const int blocks = 30;
    DeviceBuffer counter = DeviceZeros<int>(1), position = DeviceZeros<int>(blocks);
    auto run = [&]() {
      REQUIRE(cudaMemset(counter.data(), 0, sizeof(int)) == cudaSuccess);
      ENVFORGE_LAUNCH(grid, dim3(4, 2), 0, nullptr, block_order_kernel)(counter.as<int>(), position.as<int>());
      REQUIRE(cudaGetLastError() == cudaSuccess);
      CHECK(FromDevice<int>(counter, 1)[0] == blocks);
      return FromDevice<int>(position, blocks);
    };
    std::vector<int> identity(blocks), reversed(blocks);
    for (int i = 0; i < blocks; ++i)
      identity[static_cast<size_t>(i)] = i, reversed[static_cast<size_t>(i)] = blocks - 1 - i;
    {
      const ScopedBlockOrder order(cuda_emulation::BlockOrder::kForward);
      CHECK(run() == identity);
    }
    {
      const ScopedBlockOrder order(cuda_emulation::BlockOrder::kReverse);
      CHECK(run() == reversed);
    }
    std::vector<int> first, second;
    {
      const ScopedBlockOrder order(cuda_emulation::BlockOrder::kShuffle, 5);
      first = run();
      second = run();  // the next launch: another permutation
    }
    for (const std::vector<int>* order : {&first, &second}) {
      std::vector<int> sorted = *order;
      std::sort(sorted.begin(), sorted.end());
      CHECK(sorted == identity);  // a permutation: every block ran exactly once
      CHECK(*order != identity);
      CHECK(*order != reversed);
    }
    CHECK(first != second);
    {
      const ScopedBlockOrder order(cuda_emulation::BlockOrder::kShuffle, 5);  // the same seed replays
      CHECK(run() == first);
      CHECK(run() == second);
    }
    {
      const ScopedBlockOrder order(cuda_emulation::BlockOrder::kShuffle, 6);
      CHECK(run() != first);
    }
  }

  TEST_CASE("the runtime stand-ins: garbage-filled allocations, 2-D copies, streams, events, memory info") {
    void* memory = nullptr;
    REQUIRE(cudaMalloc(&memory, 64) == cudaSuccess);
    uint32_t first = 0;
    REQUIRE(cudaMemcpy(&first, memory, 4, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(first == 0x7FC07FC0u);
    float as_float;
    std::memcpy(&as_float, &first, 4);
    CHECK(std::isnan(as_float));
    size_t free_bytes = 0, total_bytes = 0;
    REQUIRE(cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess);
    CHECK(total_bytes == size_t{80} << 30);
    CHECK(free_bytes <= total_bytes - 64);

    cudaStream_t stream = nullptr;
    REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
    const uint8_t rows[3][5] = {{1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}, {11, 12, 13, 14, 15}};
    REQUIRE(cudaMemcpy2DAsync(memory, 8, rows, 5, 3, 3, cudaMemcpyHostToDevice, stream) == cudaSuccess);
    REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
    uint8_t back[24];
    REQUIRE(cudaMemcpy(back, memory, 24, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK((back[0] == 1 && back[2] == 3 && back[8] == 6 && back[10] == 8 && back[16] == 11 && back[18] == 13));
    CHECK(back[3] == 0x7F);  // untouched: byte 3 of the garbage word 0x7FC07FC0
    CHECK(cudaMemcpy2DAsync(memory, 2, rows, 5, 3, 3, cudaMemcpyHostToDevice, stream) == cudaErrorInvalidValue);
    CHECK(cudaGetLastError() == cudaErrorInvalidValue);
    CHECK(cudaGetLastError() == cudaSuccess);  // cleared by the read

    cudaEvent_t start = nullptr, stop = nullptr;
    REQUIRE(cudaEventCreate(&start) == cudaSuccess);
    REQUIRE(cudaEventCreate(&stop) == cudaSuccess);
    REQUIRE(cudaEventRecord(start, stream) == cudaSuccess);
    REQUIRE(cudaEventRecord(stop, stream) == cudaSuccess);
    REQUIRE(cudaEventSynchronize(stop) == cudaSuccess);
    float ms = -1;
    REQUIRE(cudaEventElapsedTime(&ms, start, stop) == cudaSuccess);
    CHECK(ms >= 0.0f);
    CHECK(cudaEventDestroy(start) == cudaSuccess);
    CHECK(cudaEventDestroy(stop) == cudaSuccess);
    CHECK(cudaStreamDestroy(stream) == cudaSuccess);
    CHECK(cudaFree(memory) == cudaSuccess);
    CHECK(std::string(cudaGetErrorName(cudaErrorInvalidConfiguration)) == "cudaErrorInvalidConfiguration");
  }

  TEST_CASE("cuBLAS stand-ins follow the column-major GemmEx / strided-batched / geam definitions") {
    cublasHandle_t handle = nullptr;
    REQUIRE(cublasCreate(&handle) == CUBLAS_STATUS_SUCCESS);
    // C (m x n, ld 5) = alpha * A^T . B + beta * C with A k x m (ld 4) and B k x n (ld 3), fp32.
    const int m = 3, n = 2, k = 3;
    std::vector<float> a(4 * m), b(3 * n), c(5 * n);
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i) - 4.0f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 4) + 0.5f;
    for (size_t i = 0; i < c.size(); ++i) c[i] = static_cast<float>(i);
    std::vector<float> expected = c;
    const float alpha = 2.0f, beta = -1.0f;
    for (int j = 0; j < n; ++j) {
      for (int i = 0; i < m; ++i) {
        float sum = 0;
        for (int p = 0; p < k; ++p) sum += a[static_cast<size_t>(p + i * 4)] * b[static_cast<size_t>(p + j * 3)];
        expected[static_cast<size_t>(i + j * 5)] = alpha * sum + beta * c[static_cast<size_t>(i + j * 5)];
      }
    }
    REQUIRE(cublasGemmEx_64(handle, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, a.data(), CUDA_R_32F, 4, b.data(),
                            CUDA_R_32F, 3, &beta, c.data(), CUDA_R_32F, 5, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
    CHECK(c == expected);

    // Strided batches with a shared (stride 0) A, op N: C_b = A . B_b, beta 0 ignores NaN in C.
    std::vector<float> a2 = {1, 2, 3, 4};              // 2 x 2 column-major: [[1, 3], [2, 4]]
    std::vector<float> b2 = {1, 0, 0, 1, 2, 0, 0, 2};  // two 2 x 2: I and 2I
    std::vector<float> c2(8, std::numeric_limits<float>::quiet_NaN());
    const float one = 1.0f, zero = 0.0f;
    REQUIRE(cublasGemmStridedBatchedEx_64(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, a2.data(), CUDA_R_32F, 2, 0,
                                          b2.data(), CUDA_R_32F, 2, 4, &zero, c2.data(), CUDA_R_32F, 2, 4, 2,
                                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
    CHECK(c2 == std::vector<float>{1, 2, 3, 4, 2, 4, 6, 8});

    // geam: C (3 x 2) = A^T with A 2 x 3 (ld 2); beta 0 does not read B.
    std::vector<float> a3 = {1, 2, 3, 4, 5, 6}, c3(6, -1);
    REQUIRE(cublasSgeam_64(handle, CUBLAS_OP_T, CUBLAS_OP_T, 3, 2, &one, a3.data(), 2, &zero, nullptr, 2, c3.data(),
                           3) == CUBLAS_STATUS_SUCCESS);
    CHECK(c3 == std::vector<float>{1, 3, 5, 2, 4, 6});
    CHECK(cublasDestroy(handle) == CUBLAS_STATUS_SUCCESS);
  }

  // The cuBLAS documentation's definition (3.1.4.5) and scale layouts (3.1.4.5.1) written out again
  // as a double loop; exact inputs (SmallE4m3Code, power-of-two scales) make the comparison exact,
  // so a scale read from a neighbouring row, block or padding entry changes the result. m and n
  // span two 128-row scale blocks, k = 272 has a partial third block (L4 = 4 with one padding
  // entry), and lda, ldb > k put NaN codes in the padding rows that must not be read.
  TEST_CASE("cuBLASLt FP8 block-scaled matmul follows the documented definition and scale layouts") {
    const int64_t m = 132, n = 136, k = 272, lda = k + 16, ldb = k + 32, blocks = 3;
    std::mt19937 rng(2024);
    std::vector<uint8_t> a_codes(static_cast<size_t>(lda * m), 0x7f), b_codes(static_cast<size_t>(ldb * n), 0x7f);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t l = 0; l < k; ++l) a_codes[static_cast<size_t>(l + i * lda)] = SmallE4m3Code(rng);
    }
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t l = 0; l < k; ++l) b_codes[static_cast<size_t>(l + j * ldb)] = SmallE4m3Code(rng);
    }
    DeviceBuffer a_device = ToDevice(a_codes), b_device = ToDevice(b_codes);
    const int32_t vec = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, blk = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
    struct Modes {
      int32_t a, b;
    };
    for (const Modes modes : {Modes{vec, blk}, Modes{blk, vec}, Modes{vec, vec}}) {
      CAPTURE(modes.a);
      CAPTURE(modes.b);
      const std::vector<float> a_scales = BlockScales(modes.a, m, blocks, 1),
                               b_scales = BlockScales(modes.b, n, blocks, 2);
      std::vector<double> expected(static_cast<size_t>(m * n));
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t i = 0; i < m; ++i) {
          double sum = 0;
          for (int64_t block = 0; block < blocks; ++block) {
            double partial = 0;
            for (int64_t l = block * 128; l < std::min(k, block * 128 + 128); ++l) {
              partial += static_cast<double>(Fp8E4M3ToFloat(a_codes[static_cast<size_t>(l + i * lda)])) *
                         Fp8E4M3ToFloat(b_codes[static_cast<size_t>(l + j * ldb)]);
            }
            sum += static_cast<double>(a_scales[ScaleIndex(modes.a, i, m, block, blocks)]) *
                   b_scales[ScaleIndex(modes.b, j, n, block, blocks)] * partial;
          }
          expected[static_cast<size_t>(i + j * m)] = sum;
        }
      }
      DeviceBuffer a_scales_device = ToDevice(a_scales), b_scales_device = ToDevice(b_scales);

      // fp32 D (ld m + 4, padding rows keep their sentinel), alpha 1, beta 0: C is not read.
      const int64_t ldd = m + 4;
      LtFp8Matmul fp32(m, n, k, lda, ldb, ldd, CUDA_R_32F, modes.a, modes.b);
      fp32.SetScales(a_scales_device.data(), b_scales_device.data());
      int returned = 0;
      cublasLtMatmulHeuristicResult_t result{};
      REQUIRE(fp32.Heuristic(returned, result) == CUBLAS_STATUS_SUCCESS);
      REQUIRE(returned == 1);
      CHECK(result.state == CUBLAS_STATUS_SUCCESS);
      CHECK(result.workspaceSize == 0);
      DeviceBuffer d_device = ToDevice(std::vector<float>(static_cast<size_t>(ldd * n), -7.0f));
      REQUIRE(fp32.Run(a_device.data(), b_device.data(), d_device.data(), 1.0f, 0.0f, &result.algo) ==
              CUBLAS_STATUS_SUCCESS);
      const std::vector<float> d = FromDevice<float>(d_device, static_cast<size_t>(ldd * n));
      int64_t mismatches = 0;
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t i = 0; i < ldd; ++i) {
          const float actual = d[static_cast<size_t>(i + j * ldd)];
          const float wanted = i < m ? static_cast<float>(expected[static_cast<size_t>(i + j * m)]) : -7.0f;
          if (actual != wanted) ++mismatches;
        }
      }
      CHECK(mismatches == 0);

      // bf16 C and D in place (C == D), alpha 0.5, beta 2, no algo (cublasLtMatmul chooses): the
      // fp32 result (still exact) rounded once to bf16.
      LtFp8Matmul bf16(m, n, k, lda, ldb, m, CUDA_R_16BF, modes.a, modes.b);
      bf16.SetScales(a_scales_device.data(), b_scales_device.data());
      std::vector<uint16_t> c_values(static_cast<size_t>(m * n));
      for (size_t i = 0; i < c_values.size(); ++i)
        c_values[i] = FloatToBf16(static_cast<float>(static_cast<int>(i % 33) - 16) / 4.0f);
      DeviceBuffer cd_device = ToDevice(c_values);
      REQUIRE(bf16.Run(a_device.data(), b_device.data(), cd_device.data(), 0.5f, 2.0f, nullptr) ==
              CUBLAS_STATUS_SUCCESS);
      const std::vector<uint16_t> cd = FromDevice<uint16_t>(cd_device, c_values.size());
      mismatches = 0;
      for (size_t i = 0; i < cd.size(); ++i) {
        const double wanted = 0.5 * expected[i] + 2.0 * Bf16ToFloat(c_values[i]);
        if (cd[i] != FloatToBf16(static_cast<float>(wanted))) ++mismatches;
      }
      CHECK(mismatches == 0);
    }
  }

  TEST_CASE(
      "cuBLASLt FP8 block-scaled matmul: unsupported configurations find no algorithm, bad arguments are "
      "INVALID_VALUE") {
    const int32_t vec = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, blk = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
    int returned = 0;
    cublasLtMatmulHeuristicResult_t result{};
    auto no_algorithm = [&](LtFp8Matmul& matmul) {
      const cublasStatus_t status = matmul.Heuristic(returned, result);
      return status == CUBLAS_STATUS_NOT_SUPPORTED && returned == 0;
    };
    {
      LtFp8Matmul both_blocks(128, 128, 256, 256, 256, 128, CUDA_R_32F, blk, blk);  // the documented "No" combination
      CHECK(no_algorithm(both_blocks));
      LtFp8Matmul tensorwide(128, 128, 256, 256, 256, 128, CUDA_R_32F, CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F,
                             CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F);  // documented, not emulated
      CHECK(no_algorithm(tensorwide));
      LtFp8Matmul outer_vector(128, 128, 256, 256, 256, 128, CUDA_R_32F, CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F,
                               vec);
      CHECK(no_algorithm(outer_vector));
      LtFp8Matmul m_not_multiple_of_4(126, 128, 256, 256, 256, 128, CUDA_R_32F, vec, blk);
      CHECK(no_algorithm(m_not_multiple_of_4));
      LtFp8Matmul n_not_multiple_of_4(128, 6, 256, 256, 256, 128, CUDA_R_32F, vec, blk);
      CHECK(no_algorithm(n_not_multiple_of_4));
      LtFp8Matmul fp8_output(128, 128, 256, 256, 256, 128, CUDA_R_8F_E4M3, vec, blk);
      CHECK(no_algorithm(fp8_output));
      LtFp8Matmul not_tn(128, 128, 256, 256, 256, 128, CUDA_R_32F, vec, blk);
      not_tn.Set(CUBLASLT_MATMUL_DESC_TRANSA, int32_t{CUBLAS_OP_N});
      CHECK(no_algorithm(not_tn));
      LtFp8Matmul c_scale_mode(128, 128, 256, 256, 256, 128, CUDA_R_32F, vec, blk);
      c_scale_mode.Set(CUBLASLT_MATMUL_DESC_C_SCALE_MODE, vec);  // "all the other scaling modes must not be modified"
      CHECK(no_algorithm(c_scale_mode));
      LtFp8Matmul fast_accum(128, 128, 256, 256, 256, 128, CUDA_R_32F, vec, blk);
      fast_accum.Set(CUBLASLT_MATMUL_DESC_FAST_ACCUM, int8_t{1});
      CHECK(no_algorithm(fast_accum));
      LtFp8Matmul under_aligned(128, 128, 256, 256, 256, 128, CUDA_R_32F, vec, blk);
      const uint32_t eight = 8;
      REQUIRE(cublasLtMatmulPreferenceSetAttribute(under_aligned.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                   &eight, sizeof eight) == CUBLAS_STATUS_SUCCESS);
      CHECK(no_algorithm(under_aligned));
    }

    // Arguments in conflict: INVALID_VALUE from the heuristic and the matmul alike.
    LtFp8Matmul matmul(128, 128, 256, 256, 256, 128, CUDA_R_32F, vec, blk);
    CHECK(cublasLtMatmulAlgoGetHeuristic(matmul.handle, matmul.desc, matmul.a, matmul.b, matmul.c, matmul.d,
                                         matmul.preference, 0, &result, &returned) == CUBLAS_STATUS_INVALID_VALUE);
    cublasLtMatrixLayout_t short_k = nullptr;  // B with k = 240 while A has 256
    REQUIRE(cublasLtMatrixLayoutCreate(&short_k, CUDA_R_8F_E4M3, 240, 128, 256) == CUBLAS_STATUS_SUCCESS);
    CHECK(cublasLtMatmulAlgoGetHeuristic(matmul.handle, matmul.desc, matmul.a, short_k, matmul.c, matmul.d,
                                         matmul.preference, 1, &result, &returned) == CUBLAS_STATUS_INVALID_VALUE);
    CHECK(cublasLtMatrixLayoutDestroy(short_k) == CUBLAS_STATUS_SUCCESS);
    cublasLtMatrixLayout_t short_ld = nullptr;  // ld below the row count
    REQUIRE(cublasLtMatrixLayoutCreate(&short_ld, CUDA_R_8F_E4M3, 256, 128, 240) == CUBLAS_STATUS_SUCCESS);
    CHECK(cublasLtMatmulAlgoGetHeuristic(matmul.handle, matmul.desc, short_ld, matmul.b, matmul.c, matmul.d,
                                         matmul.preference, 1, &result, &returned) == CUBLAS_STATUS_INVALID_VALUE);
    CHECK(cublasLtMatrixLayoutDestroy(short_ld) == CUBLAS_STATUS_SUCCESS);

    DeviceBuffer a = DeviceZeros<uint8_t>(256 * 128), b = DeviceZeros<uint8_t>(256 * 128),
                 d = DeviceZeros<float>(128 * 128);
    DeviceBuffer scales = ToDevice(std::vector<float>(256, 1.0f));
    // No scale pointers yet: the heuristic does not need them, the matmul does.
    REQUIRE(matmul.Heuristic(returned, result) == CUBLAS_STATUS_SUCCESS);
    CHECK(matmul.Run(a.data(), b.data(), d.data(), 1.0f, 0.0f, &result.algo) == CUBLAS_STATUS_INVALID_VALUE);
    matmul.SetScales(static_cast<const char*>(scales.data()) + 4, scales.data());  // not 16-byte aligned
    CHECK(matmul.Run(a.data(), b.data(), d.data(), 1.0f, 0.0f, &result.algo) == CUBLAS_STATUS_INVALID_VALUE);
    matmul.SetScales(scales.data(), scales.data());
    CHECK(matmul.Run(a.data(), b.data(), d.data(), 1.0f, 0.0f, &result.algo) == CUBLAS_STATUS_SUCCESS);
    CHECK(FromDevice<float>(d, 128 * 128) == std::vector<float>(128 * 128, 0.0f));
    CHECK(matmul.Run(static_cast<const char*>(a.data()) + 8, b.data(), d.data(), 1.0f, 0.0f, &result.algo) ==
          CUBLAS_STATUS_INVALID_VALUE);  // FP8 matrix pointers must be 16-byte aligned
    cublasLtMatmulAlgo_t foreign{};
    CHECK(matmul.Run(a.data(), b.data(), d.data(), 1.0f, 0.0f, &foreign) == CUBLAS_STATUS_INVALID_VALUE);
    CHECK(cublasLtMatmul(matmul.handle, matmul.desc, nullptr, a.data(), matmul.a, b.data(), matmul.b, nullptr, d.data(),
                         matmul.c, d.data(), matmul.d, &result.algo, nullptr, 0,
                         nullptr) == CUBLAS_STATUS_INVALID_VALUE);
    CHECK(cublasLtMatmul(nullptr, matmul.desc, nullptr, a.data(), matmul.a, b.data(), matmul.b, nullptr, d.data(),
                         matmul.c, d.data(), matmul.d, &result.algo, nullptr, 0,
                         nullptr) == CUBLAS_STATUS_NOT_INITIALIZED);
    matmul.Set(CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, d.data());  // D is fp32, not a narrow type
    CHECK(matmul.Heuristic(returned, result) == CUBLAS_STATUS_INVALID_VALUE);
  }

  TEST_CASE("cuBLASLt descriptor attributes: set, get, size queries and the documented INVALID_VALUE cases") {
    cublasLtMatmulDesc_t desc = nullptr;
    REQUIRE(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS);
    int32_t value = -1;
    size_t written = 0;
    REQUIRE(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &value, sizeof value, &written) ==
            CUBLAS_STATUS_SUCCESS);
    CHECK(value == CUBLAS_OP_N);  // the documented default
    CHECK(written == sizeof value);
    REQUIRE(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_SCALE_TYPE, &value, sizeof value, nullptr) ==
            CUBLAS_STATUS_SUCCESS);
    CHECK(value == CUDA_R_32F);
    const int32_t blk = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
    REQUIRE(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &blk, sizeof blk) ==
            CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &value, sizeof value, &written) ==
            CUBLAS_STATUS_SUCCESS);
    CHECK(value == blk);
    const int64_t wide = 1;
    CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &wide, sizeof wide) ==
          CUBLAS_STATUS_INVALID_VALUE);
    CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, nullptr, sizeof value) ==
          CUBLAS_STATUS_INVALID_VALUE);
    CHECK(cublasLtMatmulDescSetAttribute(desc, static_cast<cublasLtMatmulDescAttributes_t>(9999), &value,
                                         sizeof value) == CUBLAS_STATUS_INVALID_VALUE);
    // Size 0 asks for the size; it needs somewhere to write it.
    written = 0;
    REQUIRE(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, nullptr, 0, &written) ==
            CUBLAS_STATUS_SUCCESS);
    CHECK(written == sizeof(void*));
    CHECK(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, nullptr, 0, nullptr) ==
          CUBLAS_STATUS_INVALID_VALUE);
    CHECK(cublasLtMatmulDescDestroy(desc) == CUBLAS_STATUS_SUCCESS);

    cublasLtMatrixLayout_t layout = nullptr;
    REQUIRE(cublasLtMatrixLayoutCreate(&layout, CUDA_R_16BF, 12, 5, 16) == CUBLAS_STATUS_SUCCESS);
    uint64_t rows = 0;
    int64_t ld = 0;
    uint32_t type = 0;
    REQUIRE(cublasLtMatrixLayoutGetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, sizeof rows, &written) ==
            CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasLtMatrixLayoutGetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_LD, &ld, sizeof ld, &written) ==
            CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasLtMatrixLayoutGetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_TYPE, &type, sizeof type, &written) ==
            CUBLAS_STATUS_SUCCESS);
    CHECK(rows == 12);
    CHECK(ld == 16);
    CHECK(type == CUDA_R_16BF);
    const int32_t batch = 3;
    REQUIRE(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch) ==
            CUBLAS_STATUS_SUCCESS);
    CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_ROWS, &batch, sizeof batch) ==
          CUBLAS_STATUS_INVALID_VALUE);
    CHECK(cublasLtMatrixLayoutDestroy(layout) == CUBLAS_STATUS_SUCCESS);

    cublasLtMatmulPreference_t preference = nullptr;
    REQUIRE(cublasLtMatmulPreferenceCreate(&preference) == CUBLAS_STATUS_SUCCESS);
    uint32_t alignment = 0;
    REQUIRE(cublasLtMatmulPreferenceGetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alignment,
                                                 sizeof alignment, &written) == CUBLAS_STATUS_SUCCESS);
    CHECK(alignment == 256);  // the documented default
    const uint64_t workspace = 1 << 20;
    CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                               sizeof workspace) == CUBLAS_STATUS_SUCCESS);
    CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &alignment,
                                               sizeof alignment) == CUBLAS_STATUS_INVALID_VALUE);
    CHECK(cublasLtMatmulPreferenceDestroy(preference) == CUBLAS_STATUS_SUCCESS);
  }

  TEST_CASE("speed: launch and fiber-switch costs (printed, not asserted)") {
    DeviceBuffer out = DeviceZeros<int>(1);
    const auto t0 = std::chrono::steady_clock::now();
    const int launches = 2000;
    for (int i = 0; i < launches; ++i) ENVFORGE_LAUNCH(1, 32, 0, nullptr, empty_kernel)();
    const auto t1 = std::chrono::steady_clock::now();
    const cuda_emulation::EmulatorStats before = cuda_emulation::Stats();
    const int rounds = 200;
    ENVFORGE_LAUNCH(1, 1024, 0, nullptr, many_barriers_kernel)(rounds, out.as<int>());
    const auto t2 = std::chrono::steady_clock::now();
    const cuda_emulation::EmulatorStats after = cuda_emulation::Stats();
    CHECK(FromDevice<int>(out, 1)[0] == 0);
    const double launch_us = std::chrono::duration<double, std::micro>(t1 - t0).count() / launches;
    const uint64_t switches = after.fiber_switches - before.fiber_switches;
    const double switch_ns = std::chrono::duration<double, std::nano>(t2 - t1).count() / static_cast<double>(switches);
    MESSAGE("empty 32-thread launch: " << launch_us << " us; barrier-bound kernel: " << switches << " switches, "
                                       << switch_ns << " ns per switch (including the barrier bookkeeping)");
  }
}

}  // namespace
}  // namespace envforge::kernels::cuda
