// envforge bench kernels: times every CUDA kernel of the DSA engine at the real model's shapes
// and/or the tiny model's and rates each against the device's roofline (kernels/cuda/kernel_bench.h).
//
//   envforge bench kernels [--json] [--iterations N] [--shapes real|tiny|all]
//
// Progress: one line per kernel shape on stderr. Output: a table on stdout, or with --json
// {"available": true, "device": {...}, "roofline": {...}, "kernels": [{kernel, shape, model,
// time_us, flops, bytes, tflops, gbs, bound, roofline_fraction (null when the peak is unknown),
// goal}]}.
//
// Without a usable GPU (no driver or device, a pre-Hopper device) or in a build without the CUDA
// kernels, it prints "envforge bench kernels: no CUDA device (<reason>)" on stderr (with --json,
// {"available": false, "reason": "..."} on stdout) and exits 3 (kExitInfra): the benchmark could
// not run on this machine, which is not a usage error (2) and not a failed check (1).
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "apps/envforge/cli_args.h"
#include "apps/envforge/commands.h"
#include "base/json.h"

#ifdef ENVFORGE_HAVE_CUDA
#include "kernels/cuda/device_runtime.h"
#include "kernels/cuda/kernel_bench.h"
#endif

namespace envforge::cli {
namespace {

int Unavailable(const std::string& reason, bool json) {
  std::fprintf(stderr, "envforge bench kernels: no CUDA device (%s)\n", reason.c_str());
  if (json) std::printf("%s\n", Json{{"available", false}, {"reason", reason}}.dump(2).c_str());
  return kExitInfra;
}

#ifdef ENVFORGE_HAVE_CUDA

double Round(double v, double unit) { return std::round(v / unit) * unit; }

Json FigureJson(const kernels::cuda::KernelFigure& f) {
  return Json{{"kernel", f.kernel},
              {"shape", f.shape},
              {"model", f.model},
              {"time_us", Round(f.time_us, 0.01)},
              {"flops", f.flops},
              {"bytes", f.bytes},
              {"tflops", Round(f.tflops, 0.01)},
              {"gbs", Round(f.gbs, 0.1)},
              {"bound", f.bound},
              {"roofline_fraction", f.roofline_fraction >= 0 ? Json(Round(f.roofline_fraction, 0.001)) : Json(nullptr)},
              {"goal", f.goal}};
}

void PrintTable(const kernels::cuda::DeviceInfo& device, const kernels::cuda::Roofline& roofline,
                const std::vector<kernels::cuda::KernelFigure>& figures) {
  std::printf("device: %s (sm_%d%d, %d SMs); roofline row: %s, BF16 %.0f TFLOPS, FP8 %.0f TFLOPS, HBM %.0f GB/s\n",
              device.name.c_str(), device.sm_major, device.sm_minor, device.sm_count, roofline.device.c_str(),
              roofline.bf16_tflops, roofline.fp8_tflops, roofline.hbm_gbs);
  std::printf("%-24s %-5s %-44s %10s %9s %9s %-8s %7s  %s\n", "kernel", "model", "shape", "time us", "TFLOPS", "GB/s",
              "bound", "of peak", "goal");
  for (const auto& f : figures) {
    char fraction[16] = "-";
    if (f.roofline_fraction >= 0) std::snprintf(fraction, sizeof fraction, "%.0f%%", 100 * f.roofline_fraction);
    std::printf("%-24s %-5s %-44s %10.1f %9.1f %9.0f %-8s %7s  %s\n", f.kernel.c_str(), f.model.c_str(),
                f.shape.c_str(), f.time_us, f.tflops, f.gbs, f.bound.c_str(), fraction, f.goal.c_str());
  }
}

#endif

int Kernels(const ParsedArgs& parsed) {
  auto iterations = parsed.IntOption("--iterations", 1, 100000);
  if (!iterations.ok()) return Fail(iterations.status(), kExitUsage);
  const std::string shapes = parsed.OptionOr("--shapes");
  if (shapes != "real" && shapes != "tiny" && shapes != "all") {
    return Fail(InvalidArgumentError("--shapes expects real, tiny or all, got '" + shapes + "'"), kExitUsage,
                "envforge bench kernels");
  }
  const bool json = parsed.Has("--json");

#ifndef ENVFORGE_HAVE_CUDA
  return Unavailable("built without the CUDA kernels", json);
#else
  namespace kc = kernels::cuda;
  auto device = kc::ProbeDevice();
  if (!device.ok()) return Unavailable(device.status().message(), json);
  kc::KernelBenchOptions options;
  options.real_shapes = shapes != "tiny";
  options.tiny_shapes = shapes != "real";
  options.iterations = static_cast<int>(*iterations);
  options.progress = [](std::string_view line) {
    std::fprintf(stderr, "bench kernels: %.*s\n", static_cast<int>(line.size()), line.data());
    std::fflush(stderr);
  };
  kc::Roofline roofline;
  auto figures = kc::RunKernelBench(options, &roofline);
  if (!figures.ok()) return Fail(figures.status(), ExitCodeFor(figures.status()), "envforge bench kernels");
  if (!json) {
    PrintTable(*device, roofline, *figures);
    return kExitOk;
  }
  Json kernels_json = Json::array();
  for (const auto& figure : *figures) kernels_json.push_back(FigureJson(figure));
  Json out{{"available", true},
           {"device",
            {{"name", device->name},
             {"sm", std::to_string(device->sm_major) + std::to_string(device->sm_minor)},
             {"sm_count", device->sm_count},
             {"memory_bytes", device->memory_bytes},
             {"theoretical_bandwidth_gbs", Round(device->theoretical_bandwidth_gbs(), 0.1)}}},
           {"roofline",
            {{"device", roofline.device},
             {"bf16_tflops", roofline.bf16_tflops},
             {"fp8_tflops", roofline.fp8_tflops},
             {"hbm_gbs", roofline.hbm_gbs}}},
           {"iterations", *iterations},
           {"kernels", kernels_json}};
  std::printf("%s\n", out.dump(2).c_str());
  return kExitOk;
#endif
}

}  // namespace

std::vector<Command> BenchKernelsCommands() {
  return {
      {{.name = "bench kernels",
        .summary = "every CUDA kernel at the real and tiny model shapes: time, TFLOPS or GB/s, fraction of the GPU's "
                   "roofline (exit 3 when there is no GPU)",
        .options =
            {{.name = "--shapes", .metavar = "real|tiny|all", .help = "which model shapes", .default_text = "all"},
             {.name = "--iterations", .metavar = "N", .help = "timed runs per kernel", .default_text = "20"},
             JsonOption("the figures as JSON")}},
       Kernels},
  };
}

}  // namespace envforge::cli
