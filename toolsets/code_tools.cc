// The code environments' builtin tools.
#include "toolsets/code_tools.h"

#include <algorithm>

#include "base/json.h"

namespace envforge::toolsets {
namespace {

Json StringProperty(const char* description) { return {{"type", "string"}, {"description", description}}; }

Json IntegerProperty(const char* description, int minimum) {
  return {{"type", "integer"}, {"minimum", minimum}, {"description", description}};
}

Json ObjectSchema(Json properties, std::vector<std::string> required) {
  return {{"type", "object"},
          {"properties", std::move(properties)},
          {"required", std::move(required)},
          {"additionalProperties", false}};
}

}  // namespace

std::vector<ToolSpec> CodeToolSpecs() {
  return {
      {std::string(kReadFileTool),
       "Reads a text file of the repository (path relative to its root), with line numbers; a range of lines "
       "when start_line/end_line are given. Long files are cut; ask for the next range.",
       ObjectSchema({{"path", StringProperty("file path relative to the repository root")},
                     {"start_line", IntegerProperty("first line to show (1-based)", 1)},
                     {"end_line", IntegerProperty("last line to show (inclusive)", 1)}},
                    {"path"})},
      {std::string(kListDirTool),
       "Lists a directory of the repository (default: its root) down to `depth` levels (default 1); "
       "directories end with '/'.",
       ObjectSchema({{"path", StringProperty("directory relative to the repository root")},
                     {"depth", IntegerProperty("levels to descend (1-5)", 1)}},
                    {})},
      {std::string(kSearchCodeTool),
       "Searches the repository's files for a regular expression (extended syntax); returns matching lines as "
       "path:line: text, at most max_results of them.",
       ObjectSchema({{"pattern", StringProperty("regular expression")},
                     {"path", StringProperty("directory or file to search in (default: the whole repository)")},
                     {"max_results", IntegerProperty("most matches to return (default 100)", 1)}},
                    {"pattern"})},
      {std::string(kEditFileTool),
       "Replaces one exact occurrence of old_text with new_text in a file (old_text must occur exactly once). "
       "With an empty old_text, creates the file with new_text (it must not exist).",
       ObjectSchema({{"path", StringProperty("file path relative to the repository root")},
                     {"old_text", StringProperty("text to replace, exactly as in the file")},
                     {"new_text", StringProperty("replacement text")}},
                    {"path", "old_text", "new_text"})},
      {std::string(kApplyPatchTool),
       "Applies a unified diff (as git diff writes it, paths relative to the repository root) to the working "
       "copy; nothing changes when a hunk does not apply.",
       ObjectSchema({{"patch", StringProperty("unified diff")}}, {"patch"})},
      {std::string(kRunCommandTool),
       "Runs a shell command in the repository root (sh -c) in the sandbox: no network, bounded time and "
       "output. Returns the exit code and the output.",
       ObjectSchema({{"command", StringProperty("shell command")},
                     {"timeout_seconds", IntegerProperty("wall clock (default 120, at most 600)", 1)}},
                    {"command"})},
      {std::string(kRunTestsTool),
       "Runs the repository's test suite (the environment's test command) and returns each test's status "
       "(pass, fail, error, skip, xfail) read from the runner's JUnit XML; `tests` runs only those test ids "
       "where the environment can select them (the answer's `selection` says), and restricts the answer to them.",
       ObjectSchema(
           {{"tests",
             {{"type", "array"}, {"items", {{"type", "string"}}}, {"description", "test ids to run and report"}}}},
           {})},
  };
}

bool IsCodeTool(std::string_view name) {
  static const std::string_view kNames[] = {kReadFileTool,   kListDirTool,    kSearchCodeTool, kEditFileTool,
                                            kApplyPatchTool, kRunCommandTool, kRunTestsTool};
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}

Json CodeAnswerSchema() {
  return {{"type", "object"},
          {"properties",
           {{"answer_text",
             {{"type", "string"},
              {"description", "optional words to the grader; the working copy's changes are what is graded"}}}}},
          {"additionalProperties", false}};
}

}  // namespace envforge::toolsets
