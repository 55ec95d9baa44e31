// The script envforge's kernels start from: Debian's ipykernel (IPKernelApp, IPythonKernel, the
// Jupyter protocol unchanged) with two per-execute costs taken out, which cut ipykernel's time for
// execute("1+1") by about a third (Python client, this 2-core machine: p50 3.0 ms -> 2.0 ms):
// - no execute_input broadcast on iopub (the client sent the code; envforge's client ignores it);
// - no 0.5 ms sleep before execute_reply (Kernel._execute_sleep, a workaround for clients that
//   read the reply before the stream output; envforge's client waits for the iopub idle status,
//   which comes after both).
// Stream output and its flushes are ipykernel's own. (Skipping the flushes when nothing was
// written saved little more and let the output of subprocesses, which reaches the kernel through
// a pipe and a thread, slip into the next execute: not done.)
#pragma once

#include <string_view>

namespace envforge::sandbox::jupyter {

// Where the launcher is bind-mounted (read-only) inside a kernel's sandbox.
inline constexpr std::string_view kKernelLauncherPath = "/opt/envforge/kernel_launcher.py";

// The launcher's Python source. Its command line is ipykernel's (-f <connection file> and
// traitlets options such as --HistoryManager.enabled=False).
std::string_view KernelLauncherSource();

}  // namespace envforge::sandbox::jupyter
