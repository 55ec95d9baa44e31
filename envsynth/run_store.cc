#include "envsynth/run_store.h"

#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>

namespace envforge::envsynth {
namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS run_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS environments (
  key TEXT PRIMARY KEY, category TEXT NOT NULL, idx INTEGER NOT NULL, seed TEXT NOT NULL,
  name TEXT NOT NULL, status TEXT NOT NULL, reason TEXT NOT NULL, output TEXT NOT NULL,
  kept_tasks INTEGER NOT NULL, seconds REAL NOT NULL, augmentations TEXT NOT NULL, draft TEXT NOT NULL,
  model_calls INTEGER NOT NULL, tokens INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS candidates (
  key TEXT PRIMARY KEY, env_key TEXT NOT NULL, category TEXT NOT NULL, lineage INTEGER NOT NULL,
  level INTEGER NOT NULL, task_id TEXT NOT NULL, artifact_hash TEXT NOT NULL, attempt INTEGER NOT NULL,
  stage TEXT NOT NULL, dropped_at TEXT NOT NULL, reason TEXT NOT NULL, knobs TEXT NOT NULL,
  validation TEXT NOT NULL, audit TEXT NOT NULL, filter TEXT NOT NULL, seconds REAL NOT NULL,
  model_calls INTEGER NOT NULL, tokens INTEGER NOT NULL, draft TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (
  id INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, env_key TEXT NOT NULL,
  candidate_key TEXT NOT NULL, kind TEXT NOT NULL, detail TEXT NOT NULL);
)sql";

constexpr const char* kCandidateColumns =
    "key, env_key, category, lineage, level, task_id, artifact_hash, attempt, stage, dropped_at, reason, knobs, "
    "validation, audit, filter, seconds, model_calls, tokens, draft";
constexpr const char* kEnvironmentColumns =
    "key, category, idx, seed, name, status, reason, output, kept_tasks, seconds, augmentations, draft, model_calls, "
    "tokens";

Result<Database> OpenDurable(const std::string& path, Database::Mode mode) {
  ENVFORGE_ASSIGN_OR_RETURN(Database db, Database::Open(path, mode));
  ENVFORGE_RETURN_IF_ERROR(db.Exec("PRAGMA busy_timeout=5000; PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"));
  return db;
}

// A reader sets no journal mode: it must not change the file (it may not even be a run database),
// and a run being written is already in WAL mode, which lets it read beside the writer.
Result<Database> OpenForReading(const std::string& path) {
  ENVFORGE_ASSIGN_OR_RETURN(Database db, Database::Open(path, Database::Mode::kReadOnly));
  ENVFORGE_RETURN_IF_ERROR(db.Exec("PRAGMA busy_timeout=5000;"));
  return db;
}

Result<Json> ParseStored(const std::string& text, const std::string& what) {
  auto parsed = ParseJson(text, what);
  if (!parsed.ok()) return DataLossError("run database: " + parsed.status().message());
  return std::move(parsed).value();
}

Status RunInTransaction(Database& db, const std::string& sql, const std::vector<SqlValue>& values) {
  ENVFORGE_ASSIGN_OR_RETURN(Transaction transaction, Transaction::Begin(db));
  ENVFORGE_ASSIGN_OR_RETURN(Statement statement, db.Prepare(sql));
  ENVFORGE_RETURN_IF_ERROR(statement.BindAll(values));
  ENVFORGE_RETURN_IF_ERROR(statement.Run());
  return transaction.Commit();
}

Result<EnvironmentRecord> ReadEnvironment(const Statement& row) {
  EnvironmentRecord record;
  record.key = row.ColumnText(0);
  record.category = row.ColumnText(1);
  record.index = row.ColumnInt(2);
  record.seed = std::strtoull(row.ColumnText(3).c_str(), nullptr, 10);
  record.name = row.ColumnText(4);
  record.status = row.ColumnText(5);
  record.reason = row.ColumnText(6);
  record.output = row.ColumnText(7);
  record.kept_tasks = row.ColumnInt(8);
  record.seconds = row.ColumnDouble(9);
  ENVFORGE_ASSIGN_OR_RETURN(record.augmentations, ParseStored(row.ColumnText(10), "augmentations of " + record.key));
  ENVFORGE_ASSIGN_OR_RETURN(record.draft, ParseStored(row.ColumnText(11), "draft of " + record.key));
  record.model_calls = row.ColumnInt(12);
  record.tokens = row.ColumnInt(13);
  return record;
}

Result<CandidateRecord> ReadCandidate(const Statement& row) {
  CandidateRecord record;
  record.key = row.ColumnText(0);
  record.env_key = row.ColumnText(1);
  record.category = row.ColumnText(2);
  record.lineage = row.ColumnInt(3);
  record.level = row.ColumnInt(4);
  record.task_id = row.ColumnText(5);
  record.artifact_hash = row.ColumnText(6);
  record.attempt = row.ColumnInt(7);
  record.stage = row.ColumnText(8);
  record.dropped_at = row.ColumnText(9);
  record.reason = row.ColumnText(10);
  ENVFORGE_ASSIGN_OR_RETURN(record.knobs, ParseStored(row.ColumnText(11), "knobs of " + record.key));
  ENVFORGE_ASSIGN_OR_RETURN(record.validation, ParseStored(row.ColumnText(12), "validation of " + record.key));
  ENVFORGE_ASSIGN_OR_RETURN(record.audit, ParseStored(row.ColumnText(13), "audit of " + record.key));
  ENVFORGE_ASSIGN_OR_RETURN(record.filter, ParseStored(row.ColumnText(14), "filter of " + record.key));
  record.seconds = row.ColumnDouble(15);
  record.model_calls = row.ColumnInt(16);
  record.tokens = row.ColumnInt(17);
  ENVFORGE_ASSIGN_OR_RETURN(record.draft, ParseStored(row.ColumnText(18), "draft of " + record.key));
  return record;
}

template <typename Record, typename Reader>
Result<std::vector<Record>> Query(Database& db, const std::string& sql, const std::vector<SqlValue>& values,
                                  Reader read) {
  ENVFORGE_ASSIGN_OR_RETURN(Statement statement, db.Prepare(sql));
  ENVFORGE_RETURN_IF_ERROR(statement.BindAll(values));
  std::vector<Record> out;
  while (true) {
    ENVFORGE_ASSIGN_OR_RETURN(bool has_row, statement.Step());
    if (!has_row) break;
    ENVFORGE_ASSIGN_OR_RETURN(Record record, read(statement));
    out.push_back(std::move(record));
  }
  return out;
}

}  // namespace

Result<RunStore> RunStore::Create(const std::string& path, const Json& config) {
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0) {
    return AlreadyExistsError("run database " + path + " exists; continue it with `envforge synth resume " + path +
                              "` or give another --run");
  }
  ENVFORGE_ASSIGN_OR_RETURN(Database db, OpenDurable(path, Database::Mode::kReadWriteCreate));
  ENVFORGE_RETURN_IF_ERROR(db.Exec(kSchema));
  ENVFORGE_RETURN_IF_ERROR(
      RunInTransaction(db, "INSERT INTO run_meta (key, value) VALUES ('format_version', ?), ('config', ?)",
                       {std::to_string(kRunFormatVersion), DumpJson(config)}));
  return RunStore(std::move(db), path, config);
}

Result<RunStore> RunStore::Open(const std::string& path) { return OpenExisting(path, /*read_only=*/false); }

Result<RunStore> RunStore::OpenReadOnly(const std::string& path) { return OpenExisting(path, /*read_only=*/true); }

Result<RunStore> RunStore::OpenExisting(const std::string& path, bool read_only) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return ErrnoError("run database " + path, errno);
  ENVFORGE_ASSIGN_OR_RETURN(Database db,
                            read_only ? OpenForReading(path) : OpenDurable(path, Database::Mode::kReadWrite));
  auto statement = db.Prepare("SELECT key, value FROM run_meta");
  if (!statement.ok()) return InvalidArgumentError(path + " is not an envforge synth run database (no run_meta table)");
  std::string version, config_text;
  while (true) {
    ENVFORGE_ASSIGN_OR_RETURN(bool has_row, statement->Step());
    if (!has_row) break;
    if (statement->ColumnText(0) == "format_version") version = statement->ColumnText(1);
    if (statement->ColumnText(0) == "config") config_text = statement->ColumnText(1);
  }
  if (version != std::to_string(kRunFormatVersion)) {
    return FailedPreconditionError("run database " + path + " has format version '" + version +
                                   "'; this envforge reads version " + std::to_string(kRunFormatVersion));
  }
  ENVFORGE_ASSIGN_OR_RETURN(Json config, ParseStored(config_text, "run config"));
  return RunStore(std::move(db), path, std::move(config));
}

Status RunStore::PutEnvironment(const EnvironmentRecord& r) {
  return RunInTransaction(
      db_,
      std::string("INSERT OR REPLACE INTO environments (") + kEnvironmentColumns +
          ") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
      {r.key, r.category, r.index, std::to_string(r.seed), r.name, r.status, r.reason, r.output, r.kept_tasks,
       r.seconds, DumpJson(r.augmentations), DumpJson(r.draft), r.model_calls, r.tokens});
}

Result<std::optional<EnvironmentRecord>> RunStore::GetEnvironment(const std::string& key) {
  ENVFORGE_ASSIGN_OR_RETURN(
      auto rows,
      Query<EnvironmentRecord>(db_, std::string("SELECT ") + kEnvironmentColumns + " FROM environments WHERE key = ?",
                               {key}, ReadEnvironment));
  if (rows.empty()) return std::optional<EnvironmentRecord>();
  return std::optional<EnvironmentRecord>(std::move(rows.front()));
}

Result<std::vector<EnvironmentRecord>> RunStore::Environments() {
  return Query<EnvironmentRecord>(
      db_, std::string("SELECT ") + kEnvironmentColumns + " FROM environments ORDER BY category, idx", {},
      ReadEnvironment);
}

Status RunStore::PutCandidate(const CandidateRecord& r) {
  return RunInTransaction(
      db_,
      std::string("INSERT OR REPLACE INTO candidates (") + kCandidateColumns +
          ") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
      {r.key, r.env_key, r.category, r.lineage, r.level, r.task_id, r.artifact_hash, r.attempt, r.stage, r.dropped_at,
       r.reason, DumpJson(r.knobs), DumpJson(r.validation), DumpJson(r.audit), DumpJson(r.filter), r.seconds,
       r.model_calls, r.tokens, DumpJson(r.draft)});
}

Result<std::optional<CandidateRecord>> RunStore::GetCandidate(const std::string& key) {
  ENVFORGE_ASSIGN_OR_RETURN(
      auto rows,
      Query<CandidateRecord>(db_, std::string("SELECT ") + kCandidateColumns + " FROM candidates WHERE key = ?", {key},
                             ReadCandidate));
  if (rows.empty()) return std::optional<CandidateRecord>();
  return std::optional<CandidateRecord>(std::move(rows.front()));
}

Result<std::vector<CandidateRecord>> RunStore::Candidates() {
  return Query<CandidateRecord>(
      db_, std::string("SELECT ") + kCandidateColumns + " FROM candidates ORDER BY env_key, lineage, level", {},
      ReadCandidate);
}

Status RunStore::DeleteCandidates(const std::string& env_key) {
  return RunInTransaction(db_, "DELETE FROM candidates WHERE env_key = ?", {env_key});
}

Status RunStore::AddEvent(const RunEvent& e) {
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return RunInTransaction(db_, "INSERT INTO events (at, env_key, candidate_key, kind, detail) VALUES (?,?,?,?,?)",
                          {now, e.env_key, e.candidate_key, e.kind, DumpJson(e.detail)});
}

Result<std::vector<RunEvent>> RunStore::Events() {
  return Query<RunEvent>(db_, "SELECT id, at, env_key, candidate_key, kind, detail FROM events ORDER BY id", {},
                         [](const Statement& row) -> Result<RunEvent> {
                           RunEvent event;
                           event.id = row.ColumnInt(0);
                           event.at = row.ColumnDouble(1);
                           event.env_key = row.ColumnText(2);
                           event.candidate_key = row.ColumnText(3);
                           event.kind = row.ColumnText(4);
                           ENVFORGE_ASSIGN_OR_RETURN(event.detail, ParseStored(row.ColumnText(5), "event detail"));
                           return event;
                         });
}

}  // namespace envforge::envsynth
