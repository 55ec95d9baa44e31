// The warp-collective PTX the kernels use (ldmatrix, mma.sync, cp.async, named barriers), one
// wrapper each, shared by every .cu. Each has an ENVFORGE_CUDA_EMULATION branch calling the
// emulator's equivalent (kernels/cuda/emulation/emulator.h, same semantics, called by all 32
// lanes), so the *_emulated suites run the same kernel source on the CPU. Pointers into shared
// memory are generic; the nvcc branch converts them to the 32-bit shared-space addresses the
// instructions want. Include after kernels/cuda/internal/cuda_compat.cuh.
#pragma once

#include <cstdint>

namespace envforge::kernels::cuda::internal {

#if !ENVFORGE_CUDA_EMULATION
__device__ __forceinline__ uint32_t SharedAddress(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}
#endif

// ldmatrix.x4 (b16) from shared memory: this lane supplies the row address `row_address`.
__device__ __forceinline__ void LdMatrixX4(const void* row_address, uint32_t (&r)[4]) {
#if ENVFORGE_CUDA_EMULATION
  cuda_emulation::LdMatrix(r, 4, row_address, false);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SharedAddress(row_address))
               : "memory");
#endif
}

// ldmatrix.x4.trans (b16): the transposed fragments.
__device__ __forceinline__ void LdMatrixX4Trans(const void* row_address, uint32_t (&r)[4]) {
#if ENVFORGE_CUDA_EMULATION
  cuda_emulation::LdMatrix(r, 4, row_address, true);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SharedAddress(row_address))
               : "memory");
#endif
}

// c += a . b for one m16n8k16 tile: bf16 inputs, fp32 accumulators.
__device__ __forceinline__ void MmaBf16M16N8K16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if ENVFORGE_CUDA_EMULATION
  const uint32_t b[2] = {b0, b1};
  cuda_emulation::MmaBf16M16N8K16(c, a, b, c);
#else
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// c += a . b for one m16n8k32 tile: e4m3 inputs, fp32 accumulators.
__device__ __forceinline__ void MmaE4m3M16N8K32(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if ENVFORGE_CUDA_EMULATION
  cuda_emulation::MmaE4m3M16N8K32(c, a, b, c);
#else
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// cp.async of kBytes (16 or 4) global -> shared.
template <int kBytes>
__device__ __forceinline__ void CpAsync(void* shared_dst, const void* global_src) {
  static_assert(kBytes == 16 || kBytes == 4, "cp.async piece of 4 or 16 bytes");
#if ENVFORGE_CUDA_EMULATION
  cuda_emulation::CpAsync(shared_dst, global_src, kBytes, kBytes);
#else
  if constexpr (kBytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(SharedAddress(shared_dst)), "l"(global_src)
                 : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(SharedAddress(shared_dst)), "l"(global_src)
                 : "memory");
  }
#endif
}

// 16-byte cp.async of which `bytes` in [0, 16] are read and the rest zero-filled (global_src must
// still be a valid address when bytes == 0).
__device__ __forceinline__ void CpAsync16ZeroFill(void* shared_dst, const void* global_src, int bytes) {
#if ENVFORGE_CUDA_EMULATION
  cuda_emulation::CpAsync(shared_dst, global_src, 16, bytes);
#else
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(SharedAddress(shared_dst)), "l"(global_src),
               "r"(bytes)
               : "memory");
#endif
}

__device__ __forceinline__ void CpAsyncCommit() {
#if ENVFORGE_CUDA_EMULATION
  cuda_emulation::CpAsyncCommit();
#else
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits for every committed cp.async group of this thread.
__device__ __forceinline__ void CpAsyncWaitAll() {
#if ENVFORGE_CUDA_EMULATION
  cuda_emulation::CpAsyncWait(0);
#else
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#endif
}

// bar.sync on barrier `id` (1..15; 0 is __syncthreads') among `threads` threads.
__device__ __forceinline__ void NamedBarrier(int id, int threads) {
#if ENVFORGE_CUDA_EMULATION
  cuda_emulation::NamedBarrier(id, threads);
#else
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
#endif
}

}  // namespace envforge::kernels::cuda::internal
