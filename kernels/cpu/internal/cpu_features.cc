#include "kernels/cpu/internal/cpu_features.h"

#include <atomic>

namespace envforge::kernels::internal {
namespace {

std::atomic<bool> force_portable{false};
std::atomic<bool> force_avx2{false};
std::atomic<bool> force_no_bf16{false};

}  // namespace

bool CpuHasAvx2Fma() {
#if ENVFORGE_KERNELS_X86
  static const bool has =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  return has;
#else
  return false;
#endif
}

bool CpuHasAvx512F() {
#if ENVFORGE_KERNELS_X86
  static const bool has = __builtin_cpu_supports("avx512f") && CpuHasAvx2Fma();
  return has;
#else
  return false;
#endif
}

bool CpuHasAvx512Bf16() {
#if ENVFORGE_KERNELS_X86
  static const bool has = __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && CpuHasAvx512F();
  return has;
#else
  return false;
#endif
}

bool UseAvx2() { return CpuHasAvx2Fma() && !force_portable.load(std::memory_order_relaxed); }

bool UseAvx512() { return CpuHasAvx512F() && UseAvx2() && !force_avx2.load(std::memory_order_relaxed); }

bool UseAvx512Bf16() { return CpuHasAvx512Bf16() && UseAvx512() && !force_no_bf16.load(std::memory_order_relaxed); }

void TEST_ForcePortable(bool force) { force_portable.store(force, std::memory_order_relaxed); }

void TEST_ForceAvx2(bool force) { force_avx2.store(force, std::memory_order_relaxed); }

void TEST_ForceNoBf16(bool force) { force_no_bf16.store(force, std::memory_order_relaxed); }

}  // namespace envforge::kernels::internal
