// `envforge bench kernels`: times every CUDA kernel at the real model's shapes (DeepSeek-V3.2:
// 64 indexer heads x 128, k = 2048, 128 MLA heads, kv_rank 512 + rope 64) and at the tiny
// model's, and rates each against the device's roofline (dsa-engine.md 9-10).
//
// Roofline: a table of the published dense peaks by device name (H100 SXM5 / H800 / H100 PCIe /
// H200; BF16 and FP8 TFLOPS, HBM GB/s); an unknown device gets the bandwidth from its clocks and
// no compute peak (fractions of compute are then null / negative).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "kernels/cuda/device_runtime.h"

namespace envforge::kernels::cuda {

struct Roofline {
  std::string device;      // the table row used, or "unknown"
  double bf16_tflops = 0;  // 0: unknown
  double fp8_tflops = 0;
  double hbm_gbs = 0;
};
// Pure function of the device name and clocks (tested on the host).
Roofline RooflineFor(const DeviceInfo& info);

struct KernelFigure {
  std::string kernel;  // "indexer_logits_prefill", "indexer_logits_decode", "topk", ...
  std::string shape;   // human-readable: "L=8192 H=64 D=128"
  std::string model;   // "v3.2" or "tiny"
  double time_us = 0;
  double flops = 0;  // useful FLOPs per call (causal work only)
  double bytes = 0;  // compulsory bytes per call
  double tflops = 0;
  double gbs = 0;
  std::string bound;              // "compute" or "memory": which roofline the fraction uses
  double roofline_fraction = -1;  // achieved / peak of `bound`; -1 when the peak is unknown
  std::string goal;               // the dsa-engine.md 10 goal this shape is judged on, "" if none
};

struct KernelBenchOptions {
  bool real_shapes = true;
  bool tiny_shapes = true;
  int iterations = 20;
  std::function<void(std::string_view)> progress;  // one line per kernel shape measured
};

// Unavailable when no device (ProbeDevice's reason).
Result<std::vector<KernelFigure>> RunKernelBench(const KernelBenchOptions& options, Roofline* roofline);

}  // namespace envforge::kernels::cuda
