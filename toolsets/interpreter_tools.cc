// The interpreter environments' builtin tools.
#include "toolsets/interpreter_tools.h"

#include "base/json.h"

namespace envforge::toolsets {

std::vector<ToolSpec> InterpreterToolSpecs() {
  const Json no_arguments = {{"type", "object"}, {"properties", Json::object()}, {"additionalProperties", false}};
  return {
      {std::string(kExecuteTool),
       "Runs Python code in this session's Jupyter kernel (IPython: state persists between calls, the value of a "
       "last expression is shown, the task's data files are in the working directory). Returns the outputs in "
       "order: stdout/stderr streams, results, displays (text and PNG images) and errors.",
       {{"type", "object"},
        {"properties", {{"code", {{"type", "string"}, {"description", "Python source to run"}}}}},
        {"required", {"code"}},
        {"additionalProperties", false}}},
      {std::string(kInterruptTool), "Interrupts the kernel (KeyboardInterrupt in running code); its state is kept.",
       no_arguments},
      {std::string(kRestartTool), "Restarts the kernel with a fresh interpreter: every variable and import is lost.",
       no_arguments},
  };
}

bool IsInterpreterTool(std::string_view name) {
  return name == kExecuteTool || name == kInterruptTool || name == kRestartTool;
}

}  // namespace envforge::toolsets
