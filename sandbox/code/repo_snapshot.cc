// Snapshots of a repository at its base commit.
#include "sandbox/code/repo_snapshot.h"

#include <unistd.h>

#include <system_error>
#include <vector>

#include "base/subprocess.h"

namespace envforge::sandbox::code {
namespace {

namespace fs = std::filesystem;
constexpr size_t kMaxArchiveBytes = size_t{2} << 30;

std::string Trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace

Result<std::string> RunGit(const fs::path& repo, const std::vector<std::string>& args, const std::string& stdin_text) {
  // A fixed identity and no user or system configuration: the same steps give the same result
  // wherever envforge runs.
  std::vector<std::string> argv = {"env",
                                   "GIT_CONFIG_NOSYSTEM=1",
                                   "GIT_CONFIG_GLOBAL=/dev/null",
                                   "GIT_TERMINAL_PROMPT=0",
                                   "GIT_AUTHOR_NAME=envforge",
                                   "GIT_AUTHOR_EMAIL=envforge@localhost",
                                   "GIT_COMMITTER_NAME=envforge",
                                   "GIT_COMMITTER_EMAIL=envforge@localhost",
                                   "git",
                                   "-C",
                                   repo.string()};
  argv.insert(argv.end(), args.begin(), args.end());
  CommandOptions options;
  options.stdin_text = stdin_text;
  options.timeout = std::chrono::minutes(10);
  options.max_output_bytes = kMaxArchiveBytes;
  ENVFORGE_ASSIGN_OR_RETURN(CommandOutput output, RunCommand(argv, options));
  if (output.timed_out)
    return InternalError("git " + (args.empty() ? std::string() : args[0]) + " ran past 10 minutes");
  if (output.exit_code == 127) return UnavailableError("git is not installed (scripts/setup.sh installs it)");
  if (output.exit_code != 0 || output.term_signal != 0) {
    return InternalError("git " + (args.empty() ? std::string() : args[0]) + " failed: " + Trimmed(output.stderr_text));
  }
  return output.stdout_text;
}

Result<std::string> SnapshotRepository(const std::string& source_repo, const std::string& base_commit,
                                       const fs::path& out_dir) {
  std::error_code error;
  const fs::path source = fs::absolute(source_repo, error);
  if (!fs::is_directory(source, error)) return NotFoundError("repository " + source_repo + " is not a directory");
  Result<std::string> resolved = RunGit(source, {"rev-parse", "--verify", "--quiet", base_commit + "^{commit}"});
  if (!resolved.ok()) {
    if (resolved.status().code() == StatusCode::kUnavailable) return resolved.status();
    return NotFoundError("repository " + source_repo + " has no commit " + base_commit +
                         " (or is not a git repository)");
  }
  const std::string commit = Trimmed(*resolved);
  if (fs::exists(out_dir, error)) return InternalError("snapshot: " + out_dir.string() + " already exists");
  fs::create_directories(out_dir, error);
  if (error) return InternalError("snapshot: mkdir " + out_dir.string() + ": " + error.message());
  ENVFORGE_RETURN_IF_ERROR(RunGit(out_dir, {"init", "--quiet", "--initial-branch=main"}).status());
  // Only what the base commit reaches crosses over; allowAnySHA1InWant lets the source serve a
  // commit no ref names (the base is usually behind its branch).
  // --update-head-ok: main is the (unborn) current branch of the new repository.
  ENVFORGE_RETURN_IF_ERROR(
      RunGit(out_dir, {"fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--update-head-ok",
                       "--upload-pack=git -c uploadpack.allowAnySHA1InWant=true upload-pack", source.string(),
                       commit + ":refs/heads/main"})
          .status());
  ENVFORGE_RETURN_IF_ERROR(RunGit(out_dir, {"reset", "--quiet", "--hard", "main"}).status());
  ENVFORGE_RETURN_IF_ERROR(RunGit(out_dir, {"reflog", "expire", "--expire=now", "--all"}).status());
  ENVFORGE_RETURN_IF_ERROR(RunGit(out_dir, {"gc", "--quiet", "--prune=now"}).status());
  fs::remove(out_dir / ".git" / "FETCH_HEAD", error);
  fs::remove(out_dir / ".git" / "ORIG_HEAD", error);
  return commit;
}

Result<std::string> TarDirectory(const fs::path& dir) {
  CommandOptions options;
  options.timeout = std::chrono::minutes(10);
  options.max_output_bytes = kMaxArchiveBytes;
  ENVFORGE_ASSIGN_OR_RETURN(
      CommandOutput output,
      RunCommand({"tar", "-C", dir.string(), "--sort=name", "--numeric-owner", "-cf", "-", "."}, options));
  if (output.exit_code != 0) return InternalError("tar of " + dir.string() + " failed: " + Trimmed(output.stderr_text));
  if (output.stdout_text.size() >= kMaxArchiveBytes)
    return ResourceExhaustedError("tar of " + dir.string() + " is over 2 GiB");
  return output.stdout_text;
}

Status ExtractTar(const std::string& archive, const fs::path& out_dir) {
  CommandOptions options;
  options.stdin_text = archive;
  options.timeout = std::chrono::minutes(10);
  ENVFORGE_ASSIGN_OR_RETURN(CommandOutput output,
                            RunCommand({"tar", "-C", out_dir.string(), "--no-same-owner", "-xf", "-"}, options));
  if (output.exit_code != 0)
    return InternalError("extracting into " + out_dir.string() + " failed: " + Trimmed(output.stderr_text));
  return Status::Ok();
}

}  // namespace envforge::sandbox::code
