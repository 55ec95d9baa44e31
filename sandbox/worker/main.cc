// envforge-worker: `analyze` (static checks, JSON on stdin -> JSON on stdout) and `zygote` (one
// environment's session factory; see sandbox/internal/wire.h).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <string>
#include <string_view>

#include "base/fd.h"
#include "sandbox/worker/python_host.h"
#include "sandbox/worker/zygote.h"

namespace {

constexpr char kUsage[] =
    "usage: envforge-worker analyze            < request.json > result.json\n"
    "       envforge-worker zygote --bundle PATH --control-fd N [--scratch-root DIR]\n";

int Analyze() {
  std::string request((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  if (auto status = envforge::sandbox::worker::StartPython(); !status.ok()) {
    std::cerr << "envforge-worker analyze: " << status.message() << "\n";
    return 2;
  }
  auto result = envforge::sandbox::worker::RunAnalyze(request);
  if (!result.ok()) {
    std::cerr << "envforge-worker analyze: " << result.status().message() << "\n";
    return 2;
  }
  std::string out = *result + "\n";
  if (!envforge::WriteFull(STDOUT_FILENO, out).ok()) return 2;
  // Skip interpreter finalisation: nothing is left to flush, and it only costs time.
  std::_Exit(0);
}

int Zygote(int argc, char** argv) {
  envforge::sandbox::worker::ZygoteOptions options;
  for (int i = 2; i < argc; ++i) {
    std::string_view arg = argv[i];
    bool has_value = i + 1 < argc;
    if (arg == "--bundle" && has_value) {
      options.bundle_path = argv[++i];
    } else if (arg == "--control-fd" && has_value) {
      char* end = nullptr;
      long fd = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || fd < 0 || fd > 1 << 20) {
        std::cerr << "envforge-worker: bad --control-fd\n" << kUsage;
        return 2;
      }
      options.control_fd = static_cast<int>(fd);
    } else if (arg == "--scratch-root" && has_value) {
      options.scratch_root = argv[++i];
    } else {
      std::cerr << "envforge-worker: unknown argument '" << arg << "'\n" << kUsage;
      return 2;
    }
  }
  if (options.bundle_path.empty() || options.control_fd < 0) {
    std::cerr << kUsage;
    return 2;
  }
  return envforge::sandbox::worker::RunZygote(options);
}

}  // namespace

int main(int argc, char** argv) {
  std::string_view mode = argc > 1 ? argv[1] : "";
  if (mode == "analyze" && argc == 2) return Analyze();
  if (mode == "zygote") return Zygote(argc, argv);
  std::cerr << kUsage;
  return 2;
}
