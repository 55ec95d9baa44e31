// The runtime tools of an interpreter environment's sessions (kind "interpreter"): execute,
// interrupt and restart on the session's Jupyter kernel. Like submit_result they are builtin:
// packing adds them to the bundle's _tools, tools.py may not define them, and the session
// manager answers them (sandbox/jupyter/kernel_session.h), never the worker.
#pragma once

#include <string_view>
#include <vector>

#include "toolsets/tool_protocol.h"

namespace envforge::toolsets {

inline constexpr std::string_view kExecuteTool = "execute";
inline constexpr std::string_view kInterruptTool = "interrupt";
inline constexpr std::string_view kRestartTool = "restart";

// The three specs, in the order sessions list them.
std::vector<ToolSpec> InterpreterToolSpecs();
bool IsInterpreterTool(std::string_view name);

}  // namespace envforge::toolsets
