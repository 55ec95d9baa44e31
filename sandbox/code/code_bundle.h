// Code environments as bundles (kind "code"). Beside the reserved tables of env_bundle.h a code
// bundle has
//   _code(task_id TEXT PRIMARY KEY, instance TEXT NOT NULL (CodeInstance JSON: the gold patch, the
//         test patch, the test lists, install and test commands), validation TEXT (JSON, filled by
//         `envforge code validate`))
// and, per task, _files "code/<task_id>/repo.tar": the repository at its base commit with no
// history beyond it (repo_snapshot.h). A task's prompt is the problem statement; its answer is the
// working copy's diff (toolsets/code_tools.h). The gold and test patches live only in _code, which
// no session ever reads. _code's instances enter the content hash; validation does not.
#pragma once

#include <string>
#include <vector>

#include "base/json.h"
#include "base/status.h"
#include "sandbox/code/code_instance.h"

namespace envforge::sandbox::code {

struct CodeImportOptions {
  std::string env_name;  // default: the first instance's repo with '/' as '__', else "code"
  std::string category = "code";
};

struct CodeImportReport {
  std::vector<std::string> task_ids;
  std::vector<std::string> base_commits;  // full ids, per task
  int64_t archive_bytes = 0;              // the repositories' tar archives together
  std::string content_hash;
};

// Writes a new bundle at output_path (atomically: a temporary file renamed into place) holding one
// task per instance, every repository snapshotted from repo_path at its base commit. Errors: those
// of SnapshotRepository (a missing repository or commit), InvalidArgument for instances that do not
// fit (a patch touching no file), the database's errors.
Result<CodeImportReport> ImportCodeInstances(const std::vector<CodeInstance>& instances, const std::string& repo_path,
                                             const std::string& output_path, const CodeImportOptions& options = {});

struct CodeTask {
  CodeInstance instance;
  Json validation;  // null until validated
};

// The task's instance and validation. NotFound when the bundle has no such code task; DataLoss for
// a bundle that is not a code bundle or whose _code row is damaged.
Result<CodeTask> LoadCodeTask(const std::string& envdb_path, const std::string& task_id);
// The code tasks' ids, sorted.
Result<std::vector<std::string>> CodeTaskIds(const std::string& envdb_path);
// The repository archive of a task (a tar of the working copy with its .git).
Result<std::string> LoadRepoArchive(const std::string& envdb_path, const std::string& task_id);
// Records a validation result (a JSON object) in place, in one transaction; the content hash is
// unchanged.
Status StoreCodeValidation(const std::string& envdb_path, const std::string& task_id, const Json& validation);

}  // namespace envforge::sandbox::code
