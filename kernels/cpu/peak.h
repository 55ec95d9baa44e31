// Machine figures for `envforge bench engine`: the FMA peak and the streaming read bandwidth the
// kernels' efficiency is judged against, and the throughput of Linear at one shape.
//
// Each function runs for well under 2 s, uses its own threads (not the kernel pool, except
// MeasureLinearGflops, which calls Linear), and is not meant to run concurrently with other work
// on the same cores (the figures would be low).
#pragma once

#include <cstdint>

#include "kernels/cpu/float_formats.h"

namespace envforge::kernels {

// fp32 GFLOP/s (an FMA counts 2) of a register-resident FMA loop on `threads` threads, with the
// widest vector unit the CPU has (FmaPeakIsa() says which).
double MeasureFmaPeakGflops(int threads);
const char* FmaPeakIsa();  // "avx512", "avx2" or "scalar"

// GB/s (1e9 bytes) of summing a 256 MiB buffer (8x the largest common last-level cache) split over
// `threads` threads; the best of a few passes after a first touch.
double MeasureMemoryBandwidthGBs(int threads);

struct GemmFigure {
  int64_t m = 0, n = 0, k = 0;
  DType dtype = DType::kBF16;
  double seconds = 0;     // one Linear call, best of several
  double gflops = 0;      // 2 m n k / seconds / 1e9
  double weight_gbs = 0;  // weight bytes / seconds / 1e9 (the decode-side figure)
};
// Linear(x[m, k], W[n, k] of dtype) on random data with the current kernel thread count.
GemmFigure MeasureLinearGflops(int64_t m, int64_t n, int64_t k, DType dtype);

}  // namespace envforge::kernels
