// The kernel launcher's Python source (see kernel_launcher.h).
#include "sandbox/jupyter/kernel_launcher.h"

namespace envforge::sandbox::jupyter {

std::string_view KernelLauncherSource() {
  return R"py("""envforge's kernel: ipykernel's IPythonKernel with two per-execute costs removed (kernel_launcher.h)."""
import sys

# This script's directory is no module path of the user's: the working directory is, as with
# ipykernel_launcher (IPKernelApp puts '' first).
if sys.path and sys.path[0].startswith("/opt/envforge"):
    del sys.path[0]

from ipykernel.ipkernel import IPythonKernel
from ipykernel.kernelapp import IPKernelApp


class EnvforgeKernel(IPythonKernel):
    # The stock kernel sleeps 0.5 ms before each execute_reply for clients that read the reply
    # before the stream output; envforge's client waits for the idle status, sent after both.
    _execute_sleep = 0.0

    def _publish_execute_input(self, code, parent, execution_count):
        """No execute_input broadcast: the only client sent the code itself."""


if __name__ == "__main__":
    IPKernelApp.launch_instance(kernel_class=EnvforgeKernel)
)py";
}

}  // namespace envforge::sandbox::jupyter
