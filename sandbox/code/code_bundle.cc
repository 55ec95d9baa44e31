// Writing and reading code bundles.
#include "sandbox/code/code_bundle.h"

#include <unistd.h>

#include <filesystem>
#include <system_error>

#include "base/sqlite.h"
#include "sandbox/code/repo_snapshot.h"
#include "sandbox/env_bundle.h"
#include "sandbox/internal/bundle_format.h"
#include "toolsets/code_tools.h"

namespace envforge::sandbox::code {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kCodeTableSql =
    "CREATE TABLE _code(task_id TEXT PRIMARY KEY, instance TEXT NOT NULL, validation TEXT);\n";

std::string ArchivePath(const std::string& task_id) { return "code/" + task_id + "/repo.tar"; }

std::string DefaultEnvName(const std::vector<CodeInstance>& instances) {
  std::string name = instances.empty() || instances[0].repo.empty() ? "code" : instances[0].repo;
  for (size_t slash = name.find('/'); slash != std::string::npos; slash = name.find('/')) name.replace(slash, 1, "__");
  return name;
}

Status Run(Database& db, std::string_view sql, const std::vector<SqlValue>& values) {
  ENVFORGE_ASSIGN_OR_RETURN(Statement stmt, db.Prepare(sql));
  ENVFORGE_RETURN_IF_ERROR(stmt.BindAll(values));
  return stmt.Step().status();
}

Status WriteEnvAndTools(Database& db, const std::string& name, const CodeImportOptions& options,
                        const std::string& repo_path) {
  std::error_code error;
  const Json provenance = {{"generator", "envforge code import"},
                           {"source_dir", fs::absolute(repo_path, error).string()}};
  const std::vector<std::pair<std::string, std::string>> env = {
      {"name", name},
      {"kind", "code"},
      {"category", options.category},
      {"description", "repositories at a base commit, graded by their own tests (JUnit XML)"},
      {"format_version", std::to_string(kBundleFormatVersion)},
      {"provenance", DumpJson(provenance)},
      {"tools_module", ""},
      {"content_hash", ""}};
  for (const auto& [key, value] : env)
    ENVFORGE_RETURN_IF_ERROR(Run(db, "INSERT INTO _env VALUES (?, ?)", {key, value}));
  std::vector<toolsets::ToolSpec> tools = toolsets::CodeToolSpecs();
  tools.push_back({"submit_result",
                   "Submits the working copy's changes (its diff against the base commit) for grading.",
                   toolsets::CodeAnswerSchema()});
  for (size_t i = 0; i < tools.size(); ++i) {
    ENVFORGE_RETURN_IF_ERROR(
        Run(db, "INSERT INTO _tools VALUES (?, ?, ?, ?, '', 1)",
            {static_cast<int64_t>(i), tools[i].name, tools[i].description, DumpJson(tools[i].input_schema)}));
  }
  return Status::Ok();
}

// One task: its snapshot archive, its _tasks and _code rows.
Status WriteTask(Database& db, const CodeInstance& instance, const std::string& repo_path, const fs::path& scratch,
                 CodeImportReport* report) {
  const fs::path repo_dir = scratch / instance.instance_id;
  ENVFORGE_ASSIGN_OR_RETURN(std::string commit, SnapshotRepository(repo_path, instance.base_commit, repo_dir));
  ENVFORGE_ASSIGN_OR_RETURN(std::string archive, TarDirectory(repo_dir));
  std::error_code error;
  fs::remove_all(repo_dir, error);
  report->archive_bytes += static_cast<int64_t>(archive.size());
  ENVFORGE_RETURN_IF_ERROR(
      Run(db, "INSERT INTO _files VALUES (?, ?)",
          {ArchivePath(instance.instance_id), std::vector<uint8_t>(archive.begin(), archive.end())}));
  CodeInstance stored = instance;
  stored.base_commit = commit;
  const Json knobs = {{"language", instance.language},
                      {"repo", instance.repo},
                      {"base_commit", commit},
                      {"fail_to_pass", instance.fail_to_pass.size()},
                      {"pass_to_pass", instance.pass_to_pass.size()}};
  ENVFORGE_RETURN_IF_ERROR(
      Run(db, "INSERT INTO _tasks VALUES (?, ?, ?, '', '', NULL, 1, ?, '', NULL, NULL)",
          {instance.instance_id, instance.problem_statement, DumpJson(toolsets::CodeAnswerSchema()), DumpJson(knobs)}));
  ENVFORGE_RETURN_IF_ERROR(
      Run(db, "INSERT INTO _code VALUES (?, ?, NULL)", {instance.instance_id, DumpJson(stored.ToJson())}));
  report->task_ids.push_back(instance.instance_id);
  report->base_commits.push_back(commit);
  return Status::Ok();
}

// The content hash, then every task's version from it (versions are outside the hash).
Status SealBundle(Database& db, CodeImportReport* report) {
  ENVFORGE_ASSIGN_OR_RETURN(report->content_hash, internal::ContentHashOf(db));
  ENVFORGE_RETURN_IF_ERROR(Run(db, "UPDATE _env SET value = ? WHERE key = 'content_hash'", {report->content_hash}));
  ENVFORGE_ASSIGN_OR_RETURN(Statement tasks, db.Prepare("SELECT id, prompt FROM _tasks"));
  std::vector<std::pair<std::string, std::string>> versions;
  for (;;) {
    ENVFORGE_ASSIGN_OR_RETURN(bool row, tasks.Step());
    if (!row) break;
    TaskRecord task;
    task.id = tasks.ColumnText(0);
    task.prompt = tasks.ColumnText(1);
    versions.emplace_back(task.id, TaskVersion(report->content_hash, task));
  }
  for (const auto& [id, version] : versions)
    ENVFORGE_RETURN_IF_ERROR(Run(db, "UPDATE _tasks SET version = ? WHERE id = ?", {version, id}));
  return Status::Ok();
}

Result<Database> OpenCodeBundle(const std::string& envdb_path, Database::Mode mode) {
  if (!fs::exists(envdb_path)) return NotFoundError(envdb_path + ": no such bundle");
  ENVFORGE_ASSIGN_OR_RETURN(Database db, Database::Open(envdb_path, mode));
  ENVFORGE_ASSIGN_OR_RETURN(Statement check,
                            db.Prepare("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = '_code'"));
  ENVFORGE_ASSIGN_OR_RETURN(bool has_code, check.Step());
  if (!has_code)
    return InvalidArgumentError(envdb_path + " is not a code environment (no _code table; see envforge code import)");
  return db;
}

}  // namespace

Result<CodeImportReport> ImportCodeInstances(const std::vector<CodeInstance>& instances, const std::string& repo_path,
                                             const std::string& output_path, const CodeImportOptions& options) {
  if (instances.empty()) return InvalidArgumentError("code import: no instance to import");
  const std::string temp_path = output_path + ".tmp-" + std::to_string(getpid());
  const fs::path scratch = fs::temp_directory_path() / ("envforge-code-import-" + std::to_string(getpid()));
  struct Cleanup {
    std::string temp;
    fs::path scratch;
    bool keep_temp = false;
    ~Cleanup() {
      std::error_code ignored;
      if (!keep_temp) fs::remove(temp, ignored);
      fs::remove_all(scratch, ignored);
    }
  } cleanup{temp_path, scratch};
  std::error_code error;
  fs::remove(temp_path, error);
  fs::create_directories(scratch, error);
  CodeImportReport report;
  {
    ENVFORGE_ASSIGN_OR_RETURN(Database db, Database::Open(temp_path, Database::Mode::kReadWriteCreate));
    ENVFORGE_RETURN_IF_ERROR(db.Exec("PRAGMA journal_mode = MEMORY; PRAGMA synchronous = OFF; BEGIN"));
    ENVFORGE_RETURN_IF_ERROR(db.Exec(std::string(internal::kReservedTablesSql) + std::string(kCodeTableSql)));
    const std::string name = options.env_name.empty() ? DefaultEnvName(instances) : options.env_name;
    ENVFORGE_RETURN_IF_ERROR(WriteEnvAndTools(db, name, options, repo_path));
    for (const CodeInstance& instance : instances)
      ENVFORGE_RETURN_IF_ERROR(WriteTask(db, instance, repo_path, scratch, &report));
    ENVFORGE_RETURN_IF_ERROR(SealBundle(db, &report));
    ENVFORGE_RETURN_IF_ERROR(db.Exec("COMMIT"));
  }
  fs::rename(temp_path, output_path, error);
  if (error) return InternalError("code import: rename into " + output_path + ": " + error.message());
  cleanup.keep_temp = true;
  return report;
}

Result<CodeTask> LoadCodeTask(const std::string& envdb_path, const std::string& task_id) {
  ENVFORGE_ASSIGN_OR_RETURN(Database db, OpenCodeBundle(envdb_path, Database::Mode::kReadOnly));
  ENVFORGE_ASSIGN_OR_RETURN(Statement stmt, db.Prepare("SELECT instance, validation FROM _code WHERE task_id = ?"));
  ENVFORGE_RETURN_IF_ERROR(stmt.Bind(1, task_id));
  ENVFORGE_ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return NotFoundError(envdb_path + " has no code task '" + task_id + "'");
  Result<Json> json = ParseJson(stmt.ColumnText(0), "_code.instance");
  if (!json.ok()) return DataLossError(envdb_path + ": _code[" + task_id + "].instance: " + json.status().message());
  Result<CodeInstance> instance = ParseCodeInstance(*json, envdb_path + " _code[" + task_id + "]");
  if (!instance.ok()) return DataLossError(instance.status().message());
  CodeTask task{std::move(instance).value(), nullptr};
  if (!stmt.ColumnIsNull(1)) {
    Result<Json> validation = ParseJson(stmt.ColumnText(1), "_code.validation");
    if (!validation.ok())
      return DataLossError(envdb_path + ": _code[" + task_id + "].validation: " + validation.status().message());
    task.validation = std::move(validation).value();
  }
  return task;
}

Result<std::vector<std::string>> CodeTaskIds(const std::string& envdb_path) {
  ENVFORGE_ASSIGN_OR_RETURN(Database db, OpenCodeBundle(envdb_path, Database::Mode::kReadOnly));
  ENVFORGE_ASSIGN_OR_RETURN(Statement stmt, db.Prepare("SELECT task_id FROM _code ORDER BY task_id"));
  std::vector<std::string> ids;
  for (;;) {
    ENVFORGE_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) return ids;
    ids.push_back(stmt.ColumnText(0));
  }
}

Result<std::string> LoadRepoArchive(const std::string& envdb_path, const std::string& task_id) {
  ENVFORGE_ASSIGN_OR_RETURN(Database db, OpenCodeBundle(envdb_path, Database::Mode::kReadOnly));
  ENVFORGE_ASSIGN_OR_RETURN(Statement stmt, db.Prepare("SELECT data FROM _files WHERE path = ?"));
  ENVFORGE_RETURN_IF_ERROR(stmt.Bind(1, ArchivePath(task_id)));
  ENVFORGE_ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return NotFoundError(envdb_path + " has no repository for task '" + task_id + "'");
  return stmt.ColumnText(0);
}

Status StoreCodeValidation(const std::string& envdb_path, const std::string& task_id, const Json& validation) {
  if (!validation.is_object()) return InvalidArgumentError("a code validation must be a JSON object");
  ENVFORGE_ASSIGN_OR_RETURN(Database db, OpenCodeBundle(envdb_path, Database::Mode::kReadWrite));
  ENVFORGE_ASSIGN_OR_RETURN(Statement stmt, db.Prepare("UPDATE _code SET validation = ? WHERE task_id = ?"));
  ENVFORGE_RETURN_IF_ERROR(stmt.BindAll({DumpJson(validation), task_id}));
  ENVFORGE_RETURN_IF_ERROR(stmt.Step().status());
  if (db.Changes() != 1) return NotFoundError(envdb_path + " has no code task '" + task_id + "'");
  return Status::Ok();
}

}  // namespace envforge::sandbox::code
