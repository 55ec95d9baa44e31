// Runtime CPU feature dispatch for the CPU kernels (private to kernels/cpu).
//
// The build never passes -mavx2: every AVX2 function is compiled with ENVFORGE_TARGET_AVX2
// (GCC/Clang function-level target attribute) and only called after UseAvx2() said the CPU has
// AVX2, FMA and F16C. A CPU without them runs the portable path of each op.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#define ENVFORGE_KERNELS_X86 1
#define ENVFORGE_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define ENVFORGE_TARGET_AVX512 __attribute__((target("avx512f,avx2,fma,f16c")))
#define ENVFORGE_TARGET_AVX512BF16 __attribute__((target("avx512bf16,avx512bw,avx512vl,avx512f,avx2,fma,f16c")))
#else
#define ENVFORGE_KERNELS_X86 0
#define ENVFORGE_TARGET_AVX2
#define ENVFORGE_TARGET_AVX512
#define ENVFORGE_TARGET_AVX512BF16
#endif

namespace envforge::kernels::internal {

bool CpuHasAvx2Fma();  // AVX2 + FMA + F16C
bool CpuHasAvx512F();
bool CpuHasAvx512Bf16();  // AVX512_BF16 (VDPBF16PS) with AVX512F, BW and VL
// True when the fast ops may take their AVX2 path: the CPU has it and tests did not turn it off.
bool UseAvx2();
// True when the ops that have an AVX-512 path may take it: the CPU has AVX-512F and tests turned
// off neither SIMD (TEST_ForcePortable) nor AVX-512 (TEST_ForceAvx2).
bool UseAvx512();
// True when the ops that have an AVX512_BF16 path may take it: UseAvx512() holds, the CPU has
// AVX512_BF16, and tests did not turn it off (TEST_ForceNoBf16).
bool UseAvx512Bf16();
// Test hook: force the portable (non-SIMD) path of every fast op, to test it on AVX2 machines.
void TEST_ForcePortable(bool force);
// Test hook: keep the AVX2 path where an op also has an AVX-512 one, to compare the two.
void TEST_ForceAvx2(bool force);
// Test hook: keep the AVX-512 fp32 path where an op also has an AVX512_BF16 one, to compare the two.
void TEST_ForceNoBf16(bool force);

}  // namespace envforge::kernels::internal
