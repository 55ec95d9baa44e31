// A code session's working copy and its tools.
#include "sandbox/code/code_workspace.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <system_error>

#include "base/fd.h"
#include "sandbox/code/repo_snapshot.h"
#include "sandbox/code/scoped_directory.h"
#include "toolsets/code_tools.h"
#include "verifiers/junit_report.h"

namespace envforge::sandbox::code {
namespace {

namespace fs = std::filesystem;
using toolsets::Outcome;
using toolsets::ToolResult;

constexpr size_t kMaxViewLines = 2000;
constexpr size_t kMaxViewBytes = 256 * 1024;
constexpr size_t kMaxFileBytes = 16 << 20;  // read_file / edit_file refuse larger files
constexpr size_t kMaxListEntries = 1000;
constexpr size_t kCommandOutputBytes = 64 * 1024;
constexpr int64_t kMaxCommandSeconds = 600;

// A relative path of the working copy, as the model wrote it ("./src/a.py", "src/a.py/").
Result<std::string> RelativePath(const Json& arguments, const char* key, bool required) {
  std::string path = arguments.contains(key) ? arguments[key].get<std::string>() : "";
  while (path.starts_with("./")) path.erase(0, 2);
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  if (path.empty() || path == ".") {
    if (required) return InvalidArgumentError(std::string(key) + " is empty");
    return std::string(".");
  }
  if (path[0] == '/')
    return InvalidArgumentError("path " + path + " is absolute; paths are relative to the repository root");
  return path;
}

Result<UniqueFd> OpenBeneath(int root_fd, const std::string& path, int flags, mode_t mode = 0) {
  open_how how{};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
  how.mode = (flags & O_CREAT) ? mode : 0;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  const int fd = static_cast<int>(syscall(SYS_openat2, root_fd, path.c_str(), &how, sizeof(how)));
  if (fd < 0) {
    if (errno == ENOENT) return NotFoundError("no file " + path);
    if (errno == EXDEV) return InvalidArgumentError(path + " leads outside the repository");
    if (errno == EISDIR) return InvalidArgumentError(path + " is a directory");
    return ErrnoError(path, errno);
  }
  return UniqueFd(fd);
}

Result<std::string> ReadAll(int fd, const std::string& path) {
  struct stat info {};
  if (fstat(fd, &info) != 0) return ErrnoError(path, errno);
  if (S_ISDIR(info.st_mode)) return InvalidArgumentError(path + " is a directory (list_dir lists it)");
  if (static_cast<size_t>(info.st_size) > kMaxFileBytes) return InvalidArgumentError(path + " is larger than 16 MiB");
  std::string text(static_cast<size_t>(info.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = pread(fd, text.data() + done, text.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  return text;
}

std::string ShellQuote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

int64_t IntArgument(const Json& arguments, const char* key, int64_t fallback) {
  return arguments.contains(key) && arguments[key].is_number_integer() ? arguments[key].get<int64_t>() : fallback;
}

}  // namespace

Result<std::unique_ptr<CodeWorkspace>> CodeWorkspace::Create(const RepoSource& repo, const fs::path& dir,
                                                             CodeWorkspaceOptions options) {
  ENVFORGE_RETURN_IF_ERROR(repo.MaterializeAt(dir));
  return Open(dir, std::move(options));
}

Result<std::unique_ptr<CodeWorkspace>> CodeWorkspace::Open(const fs::path& dir, CodeWorkspaceOptions options) {
  std::unique_ptr<CodeWorkspace> workspace(new CodeWorkspace());
  workspace->dir_ = dir;  // the destructor disposes of it, whatever happens below
  workspace->options_ = std::move(options);
  workspace->root_fd_ = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (workspace->root_fd_ < 0) return ErrnoError("code workspace: open " + dir.string(), errno);
  return workspace;
}

CodeWorkspace::~CodeWorkspace() {
  if (root_fd_ >= 0) close(root_fd_);
  if (dir_.empty()) return;
  if (options_.discard) {
    options_.discard(dir_);
    return;
  }
  std::error_code ignored;
  fs::remove_all(dir_, ignored);
}

ToolResult CodeWorkspace::Call(const toolsets::ToolCall& call) {
  Result<Json> content = InvalidArgumentError("unknown code tool " + call.name);
  if (call.name == toolsets::kReadFileTool) content = ReadFile(call.arguments);
  if (call.name == toolsets::kListDirTool) content = ListDir(call.arguments);
  if (call.name == toolsets::kSearchCodeTool) content = SearchCode(call.arguments);
  if (call.name == toolsets::kEditFileTool) content = EditFile(call.arguments);
  if (call.name == toolsets::kApplyPatchTool) content = ApplyPatch(call.arguments);
  if (call.name == toolsets::kRunCommandTool) content = RunCommand(call.arguments);
  if (call.name == toolsets::kRunTestsTool) content = RunTests(call.arguments);
  if (!content.ok()) {
    const bool infra =
        content.status().code() == StatusCode::kUnavailable || content.status().code() == StatusCode::kInternal;
    return ToolResult::Error(infra ? Outcome::kInfraError : Outcome::kToolError, content.status().message(), call.id);
  }
  ToolResult result;
  result.call_id = call.id;
  result.content = std::move(content).value();
  return result;
}

Result<Json> CodeWorkspace::ReadFile(const Json& arguments) {
  ENVFORGE_ASSIGN_OR_RETURN(std::string path, RelativePath(arguments, "path", true));
  ENVFORGE_ASSIGN_OR_RETURN(UniqueFd fd, OpenBeneath(root_fd_, path, O_RDONLY));
  ENVFORGE_ASSIGN_OR_RETURN(std::string text, ReadAll(fd.get(), path));
  if (text.find('\0') != std::string::npos) return InvalidArgumentError(path + " is a binary file");
  const int64_t first = std::max<int64_t>(1, IntArgument(arguments, "start_line", 1));
  const int64_t last = IntArgument(arguments, "end_line", first + static_cast<int64_t>(kMaxViewLines) - 1);
  std::istringstream lines(text);
  std::string line, view;
  int64_t number = 0, total = 0;
  bool cut = false;
  while (std::getline(lines, line)) {
    ++total;
    if (++number < first || number > last) continue;
    if (view.size() + line.size() > kMaxViewBytes || number - first >= static_cast<int64_t>(kMaxViewLines)) {
      cut = true;
      continue;
    }
    view += std::to_string(number) + "\t" + line + "\n";
  }
  return Json{{"path", path}, {"content", view}, {"total_lines", total}, {"truncated", cut || last < total}};
}

Result<Json> CodeWorkspace::ListDir(const Json& arguments) {
  ENVFORGE_ASSIGN_OR_RETURN(std::string path, RelativePath(arguments, "path", false));
  const int64_t depth = std::clamp<int64_t>(IntArgument(arguments, "depth", 1), 1, 5);
  ENVFORGE_ASSIGN_OR_RETURN(UniqueFd fd, OpenBeneath(root_fd_, path, O_RDONLY | O_DIRECTORY));
  // The directory is beneath the root (checked above); walk it without following symlinks.
  const fs::path start = fs::weakly_canonical(dir_ / path);
  std::vector<std::string> entries;
  std::error_code error;
  bool cut = false;
  for (fs::recursive_directory_iterator it(start, fs::directory_options::none, error), end; !error && it != end;
       it.increment(error)) {
    if (it->path().filename() == ".git") {
      it.disable_recursion_pending();
      continue;
    }
    if (it.depth() >= depth - 1) it.disable_recursion_pending();
    if (entries.size() >= kMaxListEntries) {
      cut = true;
      break;
    }
    std::string name = fs::relative(it->path(), dir_).string();
    if (it->is_directory(error) && !it->is_symlink(error)) name += "/";
    entries.push_back(std::move(name));
  }
  std::sort(entries.begin(), entries.end());
  return Json{{"path", path}, {"entries", entries}, {"truncated", cut}};
}

Result<Json> CodeWorkspace::SearchCode(const Json& arguments) {
  const std::string pattern = arguments.value("pattern", "");
  if (pattern.empty()) return InvalidArgumentError("pattern is empty");
  ENVFORGE_ASSIGN_OR_RETURN(std::string path, RelativePath(arguments, "path", false));
  const int64_t max_results = std::clamp<int64_t>(IntArgument(arguments, "max_results", 100), 1, 1000);
  CommandLimits limits = options_.command_limits;
  limits.wall_ms = 30'000;
  limits.output_bytes = kCommandOutputBytes;
  ENVFORGE_ASSIGN_OR_RETURN(SandboxedCommandResult run,
                            Sandboxed("grep -rnIE --exclude-dir=.git -e \"$(cat /input/pattern)\" -- " +
                                          ShellQuote(path) + " | head -n " + std::to_string(max_results),
                                      limits, {{"pattern", pattern}}));
  if (run.timed_out) return InvalidArgumentError("search_code: the search ran past 30 s; narrow the path");
  std::vector<std::string> matches;
  std::istringstream lines(run.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("grep: ")) return InvalidArgumentError("search_code: " + line.substr(6));
    matches.push_back(line);
  }
  return Json{
      {"pattern", pattern}, {"matches", matches}, {"truncated", static_cast<int64_t>(matches.size()) >= max_results}};
}

Result<Json> CodeWorkspace::EditFile(const Json& arguments) {
  ENVFORGE_ASSIGN_OR_RETURN(std::string path, RelativePath(arguments, "path", true));
  const std::string old_text = arguments.value("old_text", ""), new_text = arguments.value("new_text", "");
  std::string text;
  if (old_text.empty()) {
    Result<UniqueFd> existing = OpenBeneath(root_fd_, path, O_RDONLY);
    if (existing.ok()) return InvalidArgumentError(path + " exists; give old_text to change it");
    text = new_text;
  } else {
    ENVFORGE_ASSIGN_OR_RETURN(UniqueFd fd, OpenBeneath(root_fd_, path, O_RDONLY));
    ENVFORGE_ASSIGN_OR_RETURN(text, ReadAll(fd.get(), path));
    size_t count = 0;
    for (size_t at = text.find(old_text); at != std::string::npos; at = text.find(old_text, at + old_text.size()))
      ++count;
    if (count == 0) return InvalidArgumentError("old_text does not occur in " + path);
    if (count > 1)
      return InvalidArgumentError("old_text occurs " + std::to_string(count) + " times in " + path +
                                  "; give more context");
    text.replace(text.find(old_text), old_text.size(), new_text);
  }
  // Rewritten in place (O_TRUNC), beneath the root: the file keeps its mode.
  ENVFORGE_ASSIGN_OR_RETURN(UniqueFd out, OpenBeneath(root_fd_, path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0644));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(out.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoError("write " + path, errno);
    done += static_cast<size_t>(n);
  }
  return Json{{"path", path}, {"bytes", text.size()}, {"created", old_text.empty()}};
}

Result<Json> CodeWorkspace::ApplyPatch(const Json& arguments) {
  const std::string patch = arguments.value("patch", "");
  if (patch.empty()) return InvalidArgumentError("patch is empty");
  CommandLimits limits = options_.command_limits;
  limits.wall_ms = 60'000;
  limits.output_bytes = kCommandOutputBytes;
  ENVFORGE_ASSIGN_OR_RETURN(
      SandboxedCommandResult run,
      Sandboxed("git apply --whitespace=nowarn --recount /input/patch 2>&1 && git apply --numstat /input/patch", limits,
                {{"patch", patch}}));
  if (!run.succeeded()) return InvalidArgumentError("the patch does not apply (nothing changed): " + run.output);
  std::vector<std::string> files;
  std::istringstream lines(run.output);
  for (std::string line; std::getline(lines, line);) {
    if (const size_t tab = line.rfind('\t'); tab != std::string::npos) files.push_back(line.substr(tab + 1));
  }
  return Json{{"applied", true}, {"files", files}};
}

Result<Json> CodeWorkspace::RunCommand(const Json& arguments) {
  const std::string command = arguments.value("command", "");
  if (command.empty()) return InvalidArgumentError("command is empty");
  CommandLimits limits = options_.command_limits;
  limits.wall_ms = std::clamp<int64_t>(IntArgument(arguments, "timeout_seconds", 120), 1, kMaxCommandSeconds) * 1000;
  limits.output_bytes = kCommandOutputBytes;
  ENVFORGE_ASSIGN_OR_RETURN(SandboxedCommandResult run, Sandboxed(command, limits));
  return Json{{"exit_code", run.exit_code},
              {"output", run.output},
              {"timed_out", run.timed_out},
              {"output_truncated", run.output_bytes > static_cast<int64_t>(run.output.size())},
              {"seconds", run.seconds}};
}

Result<Json> CodeWorkspace::RunTests(const Json& arguments) {
  const ScopedDirectory junit_dir(UniqueScratchPath(options_.scratch_root, "junit"));
  const fs::path& junit = junit_dir.path();
  std::error_code error;
  fs::create_directories(junit, error);
  CommandLimits limits = options_.test_limits;
  limits.output_bytes = kCommandOutputBytes;
  std::set<std::string> wanted;
  if (arguments.contains("tests")) {
    for (const Json& id : arguments["tests"]) wanted.insert(id.get<std::string>());
  }
  // A subset runs alone when the instance says how; otherwise the whole suite runs and the
  // answer is restricted to the subset.
  const bool subset = !wanted.empty() && !options_.test_subset_command.empty();
  std::string listed;
  for (const std::string& id : wanted) listed += id + "\n";
  ENVFORGE_ASSIGN_OR_RETURN(SandboxedCommandResult run,
                            subset ? Sandboxed(options_.test_subset_command, limits, {{"tests", listed}}, junit,
                                               {{"ENVFORGE_TESTS_FILE", "/input/tests"}})
                                   : Sandboxed(options_.test_command, limits, {}, junit));
  const char* selection = wanted.empty() ? "all" : subset ? "subset run" : "whole suite run, subset reported";
  ENVFORGE_ASSIGN_OR_RETURN(verifiers::JunitProducer producer,
                            verifiers::JunitProducerFromName(options_.junit_producer));
  verifiers::JunitOptions junit_options;
  junit_options.producer = producer;
  junit_options.source_root = "/work";
  junit_options.allow_empty = true;
  Json tests = Json::object();
  int64_t ran = 0;  // every test case in the reports, asked for or not
  std::vector<std::string> problems;
  for (fs::recursive_directory_iterator it(junit, error), end; !error && it != end; it.increment(error)) {
    if (!it->is_regular_file() || it->path().extension() != ".xml") continue;
    Result<verifiers::JunitReport> report = verifiers::ReadJunitFile(it->path().string(), junit_options);
    if (!report.ok()) {
      problems.push_back(it->path().filename().string() + ": " + report.status().message());
      continue;
    }
    ran += static_cast<int64_t>(report->tests.size());
    for (const verifiers::JunitTest& test : report->tests) {
      if (!wanted.empty() && !wanted.contains(test.id)) continue;
      tests[test.id] = std::string(verifiers::TestStatusName(test.status));
    }
    for (const auto& problem : report->problems) problems.push_back(problem.kind + ": " + problem.detail);
  }
  for (const std::string& id : wanted) {
    if (!tests.contains(id)) tests[id] = "missing";
  }
  return Json{{"tests", tests},       {"selection", selection},     {"ran", ran},
              {"problems", problems}, {"exit_code", run.exit_code}, {"timed_out", run.timed_out},
              {"output", run.output}, {"seconds", run.seconds}};
}

Result<std::string> CodeWorkspace::Diff() {
  CommandLimits limits = options_.command_limits;
  limits.wall_ms = 120'000;
  limits.output_bytes = 64 << 20;
  // The index is a copy: the agent's own staging is left alone.
  ENVFORGE_ASSIGN_OR_RETURN(SandboxedCommandResult run,
                            Sandboxed("cp .git/index /tmp/index && GIT_INDEX_FILE=/tmp/index git add -A && "
                                      "GIT_INDEX_FILE=/tmp/index git -c core.quotepath=off diff --cached --binary HEAD",
                                      limits));
  if (!run.succeeded())
    return FailedPreconditionError("the working copy's diff could not be taken (" + run.EndReason() +
                                   "): " + run.output.substr(0, 2000));
  if (run.output_bytes > static_cast<int64_t>(run.output.size()))
    return ResourceExhaustedError("the working copy's diff is larger than 64 MiB");
  return run.output;
}

Result<SandboxedCommandResult> CodeWorkspace::Sandboxed(const std::string& command, const CommandLimits& limits,
                                                        const std::vector<std::pair<std::string, std::string>>& files,
                                                        const fs::path& junit_dir,
                                                        const std::vector<std::pair<std::string, std::string>>& env) {
  SandboxedCommandOptions run;
  run.command = command;
  run.workdir = dir_;
  run.limits = limits;
  run.scratch_root = options_.scratch_root;
  const ScopedDirectory input_dir(files.empty() ? fs::path() : UniqueScratchPath(options_.scratch_root, "input"));
  const fs::path& input = input_dir.path();
  if (!files.empty()) {
    std::error_code error;
    fs::create_directories(input, error);
    for (const auto& [name, contents] : files)
      ENVFORGE_RETURN_IF_ERROR(WriteFileAtomically((input / name).string(), contents));
    run.binds.emplace_back(input, "/input");
  }
  if (!junit_dir.empty()) {
    run.binds.emplace_back(junit_dir, "/junit");
    run.env.emplace_back("ENVFORGE_JUNIT_DIR", "/junit");
  }
  run.env.insert(run.env.end(), env.begin(), env.end());
  return RunSandboxedCommand(run);
}

}  // namespace envforge::sandbox::code
