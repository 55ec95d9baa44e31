// The environment bundle: one SQLite file (*.envdb) holding an environment's data tables beside
// the reserved tables below (ARCHITECTURE.md, "The environment bundle").
//
//   _env(key TEXT PRIMARY KEY, value TEXT NOT NULL)
//       keys: name, kind, category, description, format_version ("1"), provenance (JSON object:
//       generator, model, seed, source_dir), tools_module (the whole tools.py source),
//       content_hash (SHA-256, see ContentHash)
//   _tools(position INTEGER NOT NULL, name TEXT PRIMARY KEY, description TEXT NOT NULL,
//          input_schema TEXT NOT NULL (JSON), source TEXT NOT NULL (the function's own source,
//          for display), builtin INTEGER NOT NULL (1 for submit_result, added by the runtime))
//   _tasks(id TEXT PRIMARY KEY, prompt TEXT NOT NULL, answer_schema TEXT NOT NULL (JSON),
//          solution_source TEXT NOT NULL, verifier_source TEXT NOT NULL, oracle_source TEXT,
//          difficulty INTEGER NOT NULL, knobs TEXT NOT NULL (JSON), version TEXT NOT NULL,
//          passk TEXT (JSON, filled by later stages), audit TEXT (JSON, filled by the audit))
//   _files(path TEXT PRIMARY KEY, data BLOB NOT NULL)
//
// Versions: the content hash is the SHA-256 over a canonical dump of every data table (schema
// SQL and rows in rowid order), _env without content_hash, _tools, the sources, prompts,
// schemas, difficulty and knobs of _tasks (never passk/audit, which later stages fill in), and
// _files (path, data); _env.provenance enters without its source_dir key, so the same sources
// packed from two checkouts get one version. A task's version is SHA-256(content_hash, prompt,
// solution, verifier), field-separated.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/json.h"
#include "base/status.h"
#include "toolsets/tool_protocol.h"

namespace envforge::sandbox {

inline constexpr int kBundleFormatVersion = 1;

struct EnvManifest {
  std::string name;
  std::string kind;  // general | code | search | interpreter
  std::string category;
  std::string description;
  int format_version = kBundleFormatVersion;
  Json provenance = Json::object();
  std::string content_hash;
};

struct TaskRecord {
  std::string id;
  std::string prompt;
  Json answer_schema = Json::object();
  std::string solution_source;
  std::string verifier_source;
  std::string oracle_source;  // empty when the task has no oracle
  int difficulty = 1;
  Json knobs = Json::object();
  std::string version;
  Json audit;  // null until audited
};

struct ToolRecord {
  toolsets::ToolSpec spec;
  std::string source;
  bool builtin = false;
};

// A bundle read into memory. Loading checks the format thoroughly: a file that is not SQLite,
// truncated, missing a reserved table or column, with an unknown format_version, invalid JSON in
// a column, or whose recorded content hash does not match its content gets a Status that names
// the file and what is wrong, never a crash.
struct EnvBundle {
  std::string path;
  EnvManifest manifest;
  std::string tools_module;
  std::vector<ToolRecord> tools;  // in position order; submit_result included (builtin)
  std::vector<TaskRecord> tasks;  // sorted by id

  static Result<EnvBundle> Load(const std::string& path);
  const TaskRecord* FindTask(const std::string& id) const;
  const ToolRecord* FindTool(const std::string& name) const;
  // {"manifest", "tools": [ToolSpec JSON...], "tasks": [{"id", "prompt", "difficulty", "knobs",
  //  "answer_schema", "version", "has_oracle", "audit"}], "hash"}; "audit" is null for a task never
  //  audited, else {"verdict", "verifier_version", "current"} (see AuditStatus).
  Json ToJson() const;
};

// A task's audit as recorded in _tasks.audit: null when never audited, else {"verdict",
// "verifier_version", "current"}, current = the audit was made for the task's present version (an
// edited verifier, solution, prompt or environment gives the task a new version, so an older audit
// shows as not current: the task is un-audited).
Json AuditStatus(const TaskRecord& task);

// Records `audit` (a JSON object; envforge audit stores its per-task report with
// "verifier_version" and "verdict") in _tasks.audit of the bundle file, in place, in one
// transaction. The content hash is unchanged: audit results are outside it. Errors: NotFound (no
// such file or task), InvalidArgument (audit is not an object), the database's errors (e.g. a
// read-only file).
Status StoreTaskAudit(const std::string& envdb_path, const std::string& task_id, const Json& audit);

// Recomputes the content hash of an open bundle file (see the header comment).
Result<std::string> ComputeContentHash(const std::string& envdb_path);
std::string TaskVersion(const std::string& content_hash, const TaskRecord& task);

}  // namespace envforge::sandbox
