// The runtime tools of a code environment's sessions (kind "code"): reading, searching and editing
// the session's working copy of the repository, running commands and the tests in it. Like
// submit_result they are builtin: `envforge code import` writes them into the bundle's _tools and
// the session manager answers them, never a Python worker. submit_result of a code task grades the
// working copy's diff against the base commit, not a text from the model.
#pragma once

#include <string_view>
#include <vector>

#include "toolsets/tool_protocol.h"

namespace envforge::toolsets {

inline constexpr std::string_view kReadFileTool = "read_file";
inline constexpr std::string_view kListDirTool = "list_dir";
inline constexpr std::string_view kSearchCodeTool = "search_code";
inline constexpr std::string_view kEditFileTool = "edit_file";
inline constexpr std::string_view kApplyPatchTool = "apply_patch";
inline constexpr std::string_view kRunCommandTool = "run_command";
inline constexpr std::string_view kRunTestsTool = "run_tests";

// The seven specs, in the order sessions list them (submit_result follows them).
std::vector<ToolSpec> CodeToolSpecs();
bool IsCodeTool(std::string_view name);
// The answer schema of every code task: submit_result's optional answer_text, a note to the
// grader (the same argument every environment's submit_result takes, here not required).
Json CodeAnswerSchema();

}  // namespace envforge::toolsets
