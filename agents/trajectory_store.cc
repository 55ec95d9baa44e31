// The trajectory store (agents/trajectory_store.h): a writer thread draining an in-memory FIFO
// into one SQLite file in batches, and per-call read connections for List/Get/Count.
//
// Records that cannot be applied are rejected, never retried forever and never silently lost:
//   * a step (message, model turn, context event) whose key is already stored keeps the first
//     record; the duplicate is rejected with an error log line naming episode and key, and
//     counted in Stats::write_errors (the batch it came in still commits);
//   * any record for an episode id the store never saw is rejected the same way.
// Everything else that fails (SQLITE_BUSY, I/O errors, a full disk) fails the whole batch, which
// stays with the writer and is retried with backoff (10 ms doubling to 1 s); errors other than a
// busy database also reopen the connection, so a condition that cleared (a file made writable
// again) is picked up.
#include "agents/trajectory_store.h"

#include <openssl/rand.h>
#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstring>
#include <condition_variable>
#include <deque>
#include <map>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>

#include "base/log.h"
#include "base/sqlite.h"

namespace envforge::agents {
namespace {

constexpr int kFormatVersion = 3;
constexpr int kBusyTimeoutWriterMs = 250;
constexpr int kBusyTimeoutReaderMs = 5000;
constexpr std::chrono::milliseconds kFirstBackoff{10};
constexpr std::chrono::milliseconds kMaxBackoff{1000};
// Episode ids the writer knows to be stored, so that a step needs no existence query; past this
// many the set starts over (a miss only costs that query).
constexpr size_t kKnownEpisodesMax = 1 << 16;

// Format 1: what every file holds. A new file gets it, then the migrations up to kFormatVersion
// (the same path an old file takes, so the two cannot drift apart).
constexpr const char* kSchemaV1 = R"SQL(
CREATE TABLE IF NOT EXISTS _meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS episodes(
  id TEXT PRIMARY KEY, env_id TEXT NOT NULL, env_version TEXT NOT NULL, env_name TEXT NOT NULL,
  task_id TEXT NOT NULL, task_version TEXT NOT NULL, verifier_version TEXT NOT NULL,
  seed INTEGER, parent_id TEXT, fork_step INTEGER, client TEXT NOT NULL,
  started_at_us INTEGER NOT NULL, ended_at_us INTEGER, outcome TEXT, answer TEXT, verdict TEXT,
  steps INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS episodes_by_start ON episodes(started_at_us);
CREATE TABLE IF NOT EXISTS steps(
  episode_id TEXT NOT NULL, step INTEGER NOT NULL, tool TEXT NOT NULL, arguments TEXT NOT NULL,
  result TEXT NOT NULL, outcome TEXT NOT NULL, started_at_us INTEGER NOT NULL,
  duration_us INTEGER NOT NULL, PRIMARY KEY(episode_id, step)) WITHOUT ROWID;
INSERT OR IGNORE INTO _meta(key, value) VALUES ('format_version', '1'), ('kind', 'envforge-trajectories');
)SQL";

// Listing newest first pages through this index alone (started_at_us DESC, id DESC): without it,
// page N of the viewer read and sorted N pages (100,000 episodes, offset 99,000: 70-125 ms, 4 ms
// with it). Not part of the format: every writer adds it to the file it opens, old files too.
constexpr const char* kListingIndex = "CREATE INDEX IF NOT EXISTS episodes_by_start_id ON episodes(started_at_us, id)";

// Format 1 -> 2: rollouts. Column defaults are what a served episode of format 1 means.
constexpr const char* kMigrateV1ToV2 = R"SQL(
ALTER TABLE episodes ADD COLUMN kind TEXT NOT NULL DEFAULT 'served';
ALTER TABLE episodes ADD COLUMN backend TEXT NOT NULL DEFAULT '';
ALTER TABLE episodes ADD COLUMN model TEXT NOT NULL DEFAULT '';
ALTER TABLE episodes ADD COLUMN sampling TEXT;
ALTER TABLE episodes ADD COLUMN rollout_id TEXT;
ALTER TABLE episodes ADD COLUMN sample_index INTEGER;
CREATE INDEX episodes_by_rollout ON episodes(rollout_id) WHERE rollout_id IS NOT NULL;
CREATE TABLE messages(
  episode_id TEXT NOT NULL, idx INTEGER NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL,
  reasoning_content TEXT NOT NULL, tool_calls TEXT NOT NULL, tool_call_id TEXT NOT NULL,
  tool_outcome TEXT NOT NULL, step INTEGER, created_at_us INTEGER NOT NULL,
  PRIMARY KEY(episode_id, idx)) WITHOUT ROWID;
CREATE TABLE model_turns(
  episode_id TEXT NOT NULL, turn INTEGER NOT NULL, message_index INTEGER NOT NULL,
  input_tokens BLOB, reused_tokens INTEGER NOT NULL, prompt_tokens INTEGER NOT NULL,
  output_tokens BLOB, logprobs BLOB, kept_counts BLOB, finish_reason TEXT NOT NULL,
  parse_error TEXT NOT NULL, raw_text TEXT NOT NULL, started_at_us INTEGER NOT NULL,
  duration_us INTEGER NOT NULL, PRIMARY KEY(episode_id, turn));
CREATE TABLE context_events(
  episode_id TEXT NOT NULL, seq INTEGER NOT NULL, turn INTEGER NOT NULL, strategy TEXT NOT NULL,
  tokens_before INTEGER NOT NULL, tokens_after INTEGER NOT NULL, messages_dropped INTEGER NOT NULL,
  summary TEXT NOT NULL, created_at_us INTEGER NOT NULL, PRIMARY KEY(episode_id, seq)) WITHOUT ROWID;
UPDATE _meta SET value = '2' WHERE key = 'format_version';
)SQL";

// Format 2 -> 3: keep routing and keep sampling mask on model turns; NULL: not recorded.
constexpr const char* kMigrateV2ToV3 = R"SQL(
ALTER TABLE model_turns ADD COLUMN routing_start INTEGER;
ALTER TABLE model_turns ADD COLUMN routing_width INTEGER;
ALTER TABLE model_turns ADD COLUMN routing BLOB;
ALTER TABLE model_turns ADD COLUMN kept_vocab INTEGER;
ALTER TABLE model_turns ADD COLUMN kept_ids BLOB;
UPDATE _meta SET value = '3' WHERE key = 'format_version';
)SQL";

// The migrations in order: kMigrations[v - 1] brings format v to v + 1.
constexpr const char* kMigrations[] = {kMigrateV1ToV2, kMigrateV2ToV3};
static_assert(std::size(kMigrations) == kFormatVersion - 1);

constexpr const char* kSummaryColumns =
    "id, env_id, env_name, task_id, task_version, verifier_version, seed, parent_id, fork_step, client, "
    "started_at_us, ended_at_us, outcome, answer, verdict, steps, kind, backend, model, sampling, rollout_id, "
    "sample_index";

// Where reads find episodes: the table itself, or for a format-1 file (read-only, not migrated)
// the table with the format-2 columns at the values the migration would give them.
std::string EpisodesSource(int format_version) {
  if (format_version >= 2) return "episodes";
  return "(SELECT *, 'served' AS kind, '' AS backend, '' AS model, NULL AS sampling, NULL AS rollout_id, "
         "NULL AS sample_index FROM episodes)";
}

int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string NewEpisodeId() {
  std::array<unsigned char, 12> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
    // OpenSSL's generator failing is close to impossible; the OS generator is still unpredictable.
    ENVFORGE_LOG(kWarn) << "RAND_bytes failed; episode id drawn from std::random_device";
    std::random_device device;
    for (auto& byte : bytes) byte = static_cast<unsigned char>(device());
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id = "t-";
  for (unsigned char byte : bytes) {
    id += kHex[byte >> 4];
    id += kHex[byte & 0xf];
  }
  return id;
}

SqlValue TextOrNull(const std::string& text) {
  if (text.empty()) return std::monostate{};
  return text;
}

// --- Token vectors as BLOBs of little-endian fixed-width values (see the header) ---------------

// The unsigned integer of T's width (T: int16_t, int32_t, int64_t, double).
template <typename T>
using BitsOf = std::conditional_t<sizeof(T) == 2, uint16_t, std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>;

template <typename T>
std::vector<uint8_t> PackLittleEndian(const std::vector<T>& values) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8);
  using Bits = BitsOf<T>;
  std::vector<uint8_t> bytes;
  bytes.reserve(values.size() * sizeof(T));
  for (T value : values) {
    Bits bits = std::bit_cast<Bits>(value);
    for (size_t i = 0; i < sizeof(T); ++i) bytes.push_back(static_cast<uint8_t>(bits >> (8 * i)));
  }
  return bytes;
}

// NULL reads as empty; a length that is not a whole number of values is DataLoss (`what` names
// the column).
template <typename T>
Result<std::vector<T>> UnpackLittleEndian(const SqlValue& value, const std::string& what) {
  using Bits = BitsOf<T>;
  if (std::holds_alternative<std::monostate>(value)) return std::vector<T>();
  const auto* bytes = std::get_if<std::vector<uint8_t>>(&value);
  if (bytes == nullptr) return DataLossError(what + " is not a BLOB");
  if (bytes->size() % sizeof(T) != 0) {
    return DataLossError(what + " holds " + std::to_string(bytes->size()) + " bytes, not a multiple of " +
                         std::to_string(sizeof(T)));
  }
  std::vector<T> values(bytes->size() / sizeof(T));
  for (size_t v = 0; v < values.size(); ++v) {
    Bits bits = 0;
    for (size_t i = 0; i < sizeof(T); ++i) bits |= static_cast<Bits>((*bytes)[v * sizeof(T) + i]) << (8 * i);
    values[v] = std::bit_cast<T>(bits);
  }
  return values;
}

// --- Opening and format checks (shared by the store and the reader) --------------------------

// A non-empty file without SQLite's magic header is "not a store" (the user named the wrong
// file), not DataLoss (a store that got damaged).
Status CheckSqliteHeader(const std::string& path) {
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  if (ec || size == 0) return Status::Ok();
  std::ifstream in(path, std::ios::binary);
  std::array<char, 16> header{};
  in.read(header.data(), header.size());
  static constexpr char kMagic[16] = {'S', 'Q', 'L', 'i', 't', 'e', ' ', 'f', 'o', 'r', 'm', 'a', 't', ' ', '3', '\0'};
  if (in.gcount() != 16 || !std::equal(header.begin(), header.end(), kMagic)) {
    return InvalidArgumentError(path + " is not a trajectory store (not an SQLite database)");
  }
  return Status::Ok();
}

void SetBusyTimeout(Database& db, int ms) { sqlite3_busy_timeout(db.handle(), ms); }

Result<bool> HasTable(Database& db, const std::string& table) {
  ENVFORGE_ASSIGN_OR_RETURN(Statement stmt,
                            db.Prepare("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?"));
  ENVFORGE_RETURN_IF_ERROR(stmt.Bind(1, table));
  return stmt.Step();
}

Result<int> ReadFormatVersion(Database& db, const std::string& path) {
  ENVFORGE_ASSIGN_OR_RETURN(Statement meta, db.Prepare("SELECT value FROM _meta WHERE key = 'format_version'"));
  ENVFORGE_ASSIGN_OR_RETURN(bool row, meta.Step());
  if (!row) return InvalidArgumentError(path + " is not a trajectory store (_meta has no format_version)");
  std::string version_text = meta.ColumnText(0);
  int version = 0;
  try {
    version = std::stoi(version_text);
  } catch (const std::exception&) {
    return InvalidArgumentError(path + ": trajectory store format_version '" + version_text + "' is not a number");
  }
  if (version > kFormatVersion) {
    return InvalidArgumentError(path + " is a trajectory store of format " + version_text +
                                ", newer than this envforge reads (" + std::to_string(kFormatVersion) + ")");
  }
  if (version < 1)
    return InvalidArgumentError(path + ": trajectory store format_version '" + version_text + "' is not valid");
  return version;
}

// Runs the migrations from format `version` up to kFormatVersion (inside the caller's
// transaction); an error names the step that failed.
Status ApplyMigrations(Database& db, const std::string& path, int version) {
  for (int from = version; from < kFormatVersion; ++from) {
    Status migrated = db.Exec(kMigrations[from - 1]);
    if (!migrated.ok()) {
      return InternalError(path + ": migrating the trajectory store from format " + std::to_string(from) + " to " +
                           std::to_string(from + 1) + ": " + migrated.message());
    }
  }
  return Status::Ok();
}

// Brings an older store to kFormatVersion in one transaction: a failure (or a crash) leaves it at
// its format, never half migrated. The version is read again under the write lock, so two
// processes opening the same old file migrate it once.
Status Migrate(Database& db, const std::string& path) {
  ENVFORGE_ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(db));
  ENVFORGE_ASSIGN_OR_RETURN(int version, ReadFormatVersion(db, path));
  if (version == kFormatVersion) return Status::Ok();
  ENVFORGE_RETURN_IF_ERROR(ApplyMigrations(db, path, version));
  ENVFORGE_RETURN_IF_ERROR(txn.Commit());
  ENVFORGE_LOG(kInfo) << "trajectory store " << path << ": migrated from format " << version << " to "
                      << kFormatVersion;
  return Status::Ok();
}

// Checks the _meta format version and the tables that version has; returns the version. `create`:
// an empty database gets the current schema.
Result<int> CheckOrCreateSchema(Database& db, const std::string& path, bool create) {
  ENVFORGE_ASSIGN_OR_RETURN(bool has_meta, HasTable(db, "_meta"));
  if (!has_meta) {
    ENVFORGE_ASSIGN_OR_RETURN(Statement count, db.Prepare("SELECT count(*) FROM sqlite_schema"));
    ENVFORGE_ASSIGN_OR_RETURN(bool row, count.Step());
    bool empty = row && count.ColumnInt(0) == 0;
    if (!empty || !create) {
      return InvalidArgumentError(path + " is not a trajectory store (no _meta table" +
                                  std::string(empty ? ": the database is empty)" : ")"));
    }
    ENVFORGE_ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(db));
    ENVFORGE_RETURN_IF_ERROR(db.Exec(kSchemaV1));
    ENVFORGE_RETURN_IF_ERROR(ApplyMigrations(db, path, 1));
    ENVFORGE_RETURN_IF_ERROR(txn.Commit());
    return kFormatVersion;
  }
  ENVFORGE_ASSIGN_OR_RETURN(int version, ReadFormatVersion(db, path));
  std::vector<const char*> tables = {"episodes", "steps"};
  if (version >= 2) tables.insert(tables.end(), {"messages", "model_turns", "context_events"});
  for (const char* table : tables) {
    ENVFORGE_ASSIGN_OR_RETURN(bool present, HasTable(db, table));
    if (!present) return InvalidArgumentError(path + " is not a trajectory store (no " + table + " table)");
  }
  return version;
}

Result<Database> OpenForRead(const std::string& path) {
  ENVFORGE_ASSIGN_OR_RETURN(Database db, Database::Open(path, Database::Mode::kReadOnly));
  SetBusyTimeout(db, kBusyTimeoutReaderMs);
  return db;
}

// --- Reading ---------------------------------------------------------------------------------

// ListFilter's order as SQL: the chosen column, then newest first (started, then id: the listing
// index's order, so the default needs no sort at all).
Result<std::string> OrderByClause(const ListFilter& filter) {
  static const std::map<std::string, std::string, std::less<>> kColumns = {
      {"started", ""},        {"steps", "steps"},  {"duration", "(ended_at_us - started_at_us)"},
      {"outcome", "outcome"}, {"env", "env_name"}, {"task", "task_id"}};
  auto column = kColumns.find(filter.sort_by);
  if (column == kColumns.end()) {
    return InvalidArgumentError("cannot sort by '" + filter.sort_by.substr(0, 40) +
                                "' (started, steps, duration, outcome, env, task)");
  }
  const char* direction = filter.ascending ? " ASC" : " DESC";
  if (column->second.empty()) return std::string(" ORDER BY started_at_us") + direction + ", id" + direction;
  return " ORDER BY " + column->second + direction + ", started_at_us DESC, id DESC";
}

Result<EpisodeSummary> ReadSummaryRow(const Statement& stmt, const std::string& path) {
  EpisodeSummary summary;
  summary.id = stmt.ColumnText(0);
  summary.start.env_id = stmt.ColumnText(1);
  summary.start.env_name = stmt.ColumnText(2);
  summary.start.task_id = stmt.ColumnText(3);
  summary.start.task_version = stmt.ColumnText(4);
  summary.start.verifier_version = stmt.ColumnText(5);
  if (!stmt.ColumnIsNull(6)) summary.start.seed = stmt.ColumnInt(6);
  summary.start.parent_id = stmt.ColumnText(7);
  summary.start.fork_step = stmt.ColumnIsNull(8) ? 0 : stmt.ColumnInt(8);
  summary.start.client = stmt.ColumnText(9);
  summary.started_at_us = stmt.ColumnInt(10);
  if (!stmt.ColumnIsNull(11)) summary.ended_at_us = stmt.ColumnInt(11);
  if (!stmt.ColumnIsNull(12)) {
    std::string name = stmt.ColumnText(12);
    summary.outcome = EpisodeOutcomeFromName(name);
    if (!summary.outcome) {
      return DataLossError(path + ": episode " + summary.id + " has an unknown outcome '" + name + "'");
    }
  }
  if (!stmt.ColumnIsNull(13)) summary.answer = stmt.ColumnText(13);
  if (!stmt.ColumnIsNull(14)) {
    auto verdict = ParseJson(stmt.ColumnText(14), "verdict of episode " + summary.id);
    if (!verdict.ok()) return DataLossError(path + ": " + verdict.status().message());
    summary.verdict = std::move(*verdict);
  }
  summary.steps = stmt.ColumnInt(15);
  summary.start.kind = stmt.ColumnText(16);
  summary.start.backend = stmt.ColumnText(17);
  summary.start.model = stmt.ColumnText(18);
  if (!stmt.ColumnIsNull(19)) {
    auto sampling = ParseJson(stmt.ColumnText(19), "sampling of episode " + summary.id);
    if (!sampling.ok()) return DataLossError(path + ": " + sampling.status().message());
    summary.start.sampling = std::move(*sampling);
  }
  summary.start.rollout_id = stmt.ColumnText(20);
  summary.start.sample_index = stmt.ColumnIsNull(21) ? -1 : stmt.ColumnInt(21);
  return summary;
}

Result<std::vector<EpisodeSummary>> ReadList(const std::string& path, const ListFilter& filter) {
  ENVFORGE_ASSIGN_OR_RETURN(Database db, OpenForRead(path));
  // One read transaction: the version and the rows come from the same snapshot.
  ENVFORGE_RETURN_IF_ERROR(db.Exec("BEGIN"));
  ENVFORGE_ASSIGN_OR_RETURN(int version, ReadFormatVersion(db, path));
  std::string sql = std::string("SELECT ") + kSummaryColumns + " FROM " + EpisodesSource(version) + " WHERE 1";
  std::vector<SqlValue> values;
  if (!filter.env_id.empty()) {
    sql += " AND (env_id = ? OR env_name = ?)";
    values.emplace_back(filter.env_id);
    values.emplace_back(filter.env_id);
  }
  if (!filter.task_id.empty()) {
    sql += " AND task_id = ?";
    values.emplace_back(filter.task_id);
  }
  if (filter.outcome) {
    sql += " AND outcome = ?";
    values.emplace_back(std::string(EpisodeOutcomeName(*filter.outcome)));
  }
  if (!filter.rollout_id.empty()) {
    sql += " AND rollout_id = ?";
    values.emplace_back(filter.rollout_id);
  }
  if (!filter.kind.empty()) {
    sql += " AND kind = ?";
    values.emplace_back(filter.kind);
  }
  if (!filter.parent_id.empty()) {
    sql += " AND parent_id = ?";
    values.emplace_back(filter.parent_id);
  }
  ENVFORGE_ASSIGN_OR_RETURN(std::string order, OrderByClause(filter));
  sql += order + " LIMIT ? OFFSET ?";
  values.emplace_back(filter.limit > 0 ? filter.limit : int64_t{-1});
  values.emplace_back(std::max<int64_t>(filter.offset, 0));
  ENVFORGE_ASSIGN_OR_RETURN(Statement stmt, db.Prepare(sql));
  ENVFORGE_RETURN_IF_ERROR(stmt.BindAll(values));
  std::vector<EpisodeSummary> summaries;
  while (true) {
    ENVFORGE_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    ENVFORGE_ASSIGN_OR_RETURN(EpisodeSummary summary, ReadSummaryRow(stmt, path));
    summaries.push_back(std::move(summary));
  }
  (void)db.Exec("COMMIT");
  return summaries;
}

Result<std::optional<EpisodeSummary>> ReadSummaryById(Database& db, const std::string& path, int version,
                                                      const std::string& id) {
  ENVFORGE_ASSIGN_OR_RETURN(Statement stmt, db.Prepare(std::string("SELECT ") + kSummaryColumns + " FROM " +
                                                       EpisodesSource(version) + " WHERE id = ?"));
  ENVFORGE_RETURN_IF_ERROR(stmt.Bind(1, id));
  ENVFORGE_ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return std::optional<EpisodeSummary>();
  ENVFORGE_ASSIGN_OR_RETURN(EpisodeSummary summary, ReadSummaryRow(stmt, path));
  return std::optional<EpisodeSummary>(std::move(summary));
}

// The one id `id_or_prefix` names: itself, or the unique episode whose id starts with it.
Result<std::string> ResolveId(Database& db, const std::string& path, const std::string& id_or_prefix) {
  std::string wanted = id_or_prefix;
  std::transform(wanted.begin(), wanted.end(), wanted.begin(), [](unsigned char c) { return std::tolower(c); });
  std::string hex = wanted.rfind("t-", 0) == 0 ? wanted.substr(2) : wanted;
  if (hex.empty() || hex.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return NotFoundError("no episode '" + id_or_prefix + "' in " + path + " (ids look like t-<24 hex digits>)");
  }
  std::string prefix = "t-" + hex;
  {
    ENVFORGE_ASSIGN_OR_RETURN(Statement exact, db.Prepare("SELECT 1 FROM episodes WHERE id = ?"));
    ENVFORGE_RETURN_IF_ERROR(exact.Bind(1, prefix));
    ENVFORGE_ASSIGN_OR_RETURN(bool found, exact.Step());
    if (found) return prefix;
  }
  if (hex.size() < 6) {
    return InvalidArgumentError("episode id prefix '" + id_or_prefix + "' is too short: give at least 6 hex digits");
  }
  // Ids are ASCII below 0x7f, so [prefix, prefix + "\x7f") is exactly the ids starting with it.
  ENVFORGE_ASSIGN_OR_RETURN(Statement stmt,
                            db.Prepare("SELECT id FROM episodes WHERE id >= ? AND id < ? ORDER BY id LIMIT 11"));
  ENVFORGE_RETURN_IF_ERROR(stmt.BindAll({prefix, prefix + "\x7f"}));
  std::vector<std::string> candidates;
  while (true) {
    ENVFORGE_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    candidates.push_back(stmt.ColumnText(0));
  }
  if (candidates.empty()) return NotFoundError("no episode '" + id_or_prefix + "' in " + path);
  if (candidates.size() == 1) return candidates[0];
  std::string listed;
  for (size_t i = 0; i < std::min<size_t>(candidates.size(), 10); ++i) listed += (i ? ", " : "") + candidates[i];
  if (candidates.size() > 10) listed += ", ...";
  return InvalidArgumentError("episode id prefix '" + id_or_prefix + "' is ambiguous: " + listed);
}

Status ReadSteps(Database& db, const std::string& path, const std::string& id, Episode& episode) {
  ENVFORGE_ASSIGN_OR_RETURN(Statement stmt,
                            db.Prepare("SELECT step, tool, arguments, result, started_at_us, duration_us "
                                       "FROM steps WHERE episode_id = ? ORDER BY step"));
  ENVFORGE_RETURN_IF_ERROR(stmt.Bind(1, id));
  while (true) {
    ENVFORGE_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) return Status::Ok();
    StepRecord step;
    step.step = stmt.ColumnInt(0);
    step.tool = stmt.ColumnText(1);
    std::string where = path + ": episode " + id + " step " + std::to_string(step.step);
    auto arguments = ParseJson(stmt.ColumnText(2), "arguments");
    if (!arguments.ok()) return DataLossError(where + ": " + arguments.status().message());
    step.arguments = std::move(*arguments);
    auto result_json = ParseJson(stmt.ColumnText(3), "result");
    if (!result_json.ok()) return DataLossError(where + ": " + result_json.status().message());
    auto result = toolsets::ToolResultFromJson(*result_json);
    if (!result.ok()) return DataLossError(where + ": " + result.status().message());
    step.result = std::move(*result);
    step.started_at_us = stmt.ColumnInt(4);
    step.duration_us = stmt.ColumnInt(5);
    episode.steps.push_back(std::move(step));
  }
}

Status ReadMessages(Database& db, const std::string& path, const std::string& id, Episode& episode) {
  ENVFORGE_ASSIGN_OR_RETURN(
      Statement stmt, db.Prepare("SELECT idx, role, content, reasoning_content, tool_calls, tool_call_id, "
                                 "tool_outcome, step, created_at_us FROM messages WHERE episode_id = ? ORDER BY idx"));
  ENVFORGE_RETURN_IF_ERROR(stmt.Bind(1, id));
  while (true) {
    ENVFORGE_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) return Status::Ok();
    MessageRecord message;
    message.index = stmt.ColumnInt(0);
    message.role = stmt.ColumnText(1);
    message.content = stmt.ColumnText(2);
    message.reasoning_content = stmt.ColumnText(3);
    auto tool_calls = ParseJson(stmt.ColumnText(4), "tool_calls");
    if (!tool_calls.ok()) {
      return DataLossError(path + ": episode " + id + " message " + std::to_string(message.index) + ": " +
                           tool_calls.status().message());
    }
    message.tool_calls = std::move(*tool_calls);
    message.tool_call_id = stmt.ColumnText(5);
    message.tool_outcome = stmt.ColumnText(6);
    message.step = stmt.ColumnIsNull(7) ? -1 : stmt.ColumnInt(7);
    message.created_at_us = stmt.ColumnInt(8);
    episode.messages.push_back(std::move(message));
  }
}

// The format-3 columns of a model turn (columns 13..17 of ReadModelTurns' query); NULL: none.
Status ReadTurnRecordings(const Statement& stmt, const std::string& where, ModelTurnRecord& turn) {
  if (!stmt.ColumnIsNull(14)) {
    turn.routing_start = stmt.ColumnInt(13);
    turn.routing_width = stmt.ColumnInt(14);
    ENVFORGE_ASSIGN_OR_RETURN(turn.routing, UnpackLittleEndian<int16_t>(stmt.Column(15), where + "routing"));
  }
  if (!stmt.ColumnIsNull(16)) {
    turn.kept_vocab = stmt.ColumnInt(16);
    ENVFORGE_ASSIGN_OR_RETURN(turn.kept_ids, UnpackLittleEndian<int32_t>(stmt.Column(17), where + "kept_ids"));
  }
  return Status::Ok();
}

// `version`: the file's format (2 has no routing or kept-set columns).
Status ReadModelTurns(Database& db, const std::string& path, int version, const std::string& id, Episode& episode) {
  ENVFORGE_ASSIGN_OR_RETURN(
      Statement stmt,
      db.Prepare(
          std::string("SELECT turn, message_index, input_tokens, reused_tokens, prompt_tokens, output_tokens, "
                      "logprobs, kept_counts, finish_reason, parse_error, raw_text, started_at_us, duration_us") +
          (version >= 3 ? ", routing_start, routing_width, routing, kept_vocab, kept_ids" : "") +
          " FROM model_turns WHERE episode_id = ? ORDER BY turn"));
  ENVFORGE_RETURN_IF_ERROR(stmt.Bind(1, id));
  while (true) {
    ENVFORGE_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) return Status::Ok();
    ModelTurnRecord turn;
    turn.turn = stmt.ColumnInt(0);
    std::string where = path + ": episode " + id + " model turn " + std::to_string(turn.turn) + ": ";
    turn.message_index = stmt.ColumnInt(1);
    ENVFORGE_ASSIGN_OR_RETURN(turn.input_tokens, UnpackLittleEndian<int32_t>(stmt.Column(2), where + "input_tokens"));
    turn.reused_tokens = stmt.ColumnInt(3);
    turn.prompt_tokens = stmt.ColumnInt(4);
    ENVFORGE_ASSIGN_OR_RETURN(turn.output_tokens, UnpackLittleEndian<int32_t>(stmt.Column(5), where + "output_tokens"));
    ENVFORGE_ASSIGN_OR_RETURN(turn.logprobs, UnpackLittleEndian<double>(stmt.Column(6), where + "logprobs"));
    ENVFORGE_ASSIGN_OR_RETURN(turn.kept_counts, UnpackLittleEndian<int64_t>(stmt.Column(7), where + "kept_counts"));
    turn.finish_reason = stmt.ColumnText(8);
    turn.parse_error = stmt.ColumnText(9);
    turn.raw_text = stmt.ColumnText(10);
    turn.started_at_us = stmt.ColumnInt(11);
    turn.duration_us = stmt.ColumnInt(12);
    if (version >= 3) ENVFORGE_RETURN_IF_ERROR(ReadTurnRecordings(stmt, where, turn));
    episode.model_turns.push_back(std::move(turn));
  }
}

Status ReadContextEvents(Database& db, const std::string& id, Episode& episode) {
  ENVFORGE_ASSIGN_OR_RETURN(Statement stmt,
                            db.Prepare("SELECT seq, turn, strategy, tokens_before, tokens_after, messages_dropped, "
                                       "summary, created_at_us FROM context_events WHERE episode_id = ? ORDER BY seq"));
  ENVFORGE_RETURN_IF_ERROR(stmt.Bind(1, id));
  while (true) {
    ENVFORGE_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) return Status::Ok();
    ContextEventRecord event;
    event.seq = stmt.ColumnInt(0);
    event.turn = stmt.ColumnInt(1);
    event.strategy = stmt.ColumnText(2);
    event.tokens_before = stmt.ColumnInt(3);
    event.tokens_after = stmt.ColumnInt(4);
    event.messages_dropped = stmt.ColumnInt(5);
    event.summary = stmt.ColumnText(6);
    event.created_at_us = stmt.ColumnInt(7);
    episode.context_events.push_back(std::move(event));
  }
}

Result<Episode> ReadEpisode(const std::string& path, const std::string& id_or_prefix) {
  ENVFORGE_ASSIGN_OR_RETURN(Database db, OpenForRead(path));
  // One read transaction: the summary and its records come from the same snapshot.
  ENVFORGE_RETURN_IF_ERROR(db.Exec("BEGIN"));
  ENVFORGE_ASSIGN_OR_RETURN(int version, ReadFormatVersion(db, path));
  ENVFORGE_ASSIGN_OR_RETURN(std::string id, ResolveId(db, path, id_or_prefix));
  ENVFORGE_ASSIGN_OR_RETURN(auto summary, ReadSummaryById(db, path, version, id));
  if (!summary) return NotFoundError("no episode '" + id_or_prefix + "' in " + path);
  Episode episode;
  episode.summary = std::move(*summary);
  ENVFORGE_RETURN_IF_ERROR(ReadSteps(db, path, id, episode));
  if (version >= 2) {
    ENVFORGE_RETURN_IF_ERROR(ReadMessages(db, path, id, episode));
    ENVFORGE_RETURN_IF_ERROR(ReadModelTurns(db, path, version, id, episode));
    ENVFORGE_RETURN_IF_ERROR(ReadContextEvents(db, id, episode));
  }
  (void)db.Exec("COMMIT");
  return episode;
}

Result<TrajectoryStore::Counts> ReadCounts(const std::string& path) {
  ENVFORGE_ASSIGN_OR_RETURN(Database db, OpenForRead(path));
  ENVFORGE_RETURN_IF_ERROR(db.Exec("BEGIN"));
  ENVFORGE_ASSIGN_OR_RETURN(int version, ReadFormatVersion(db, path));
  ENVFORGE_ASSIGN_OR_RETURN(
      Statement stmt, db.Prepare(std::string("SELECT (SELECT count(*) FROM episodes), (SELECT count(*) FROM steps), "
                                             "(SELECT count(*) FROM episodes WHERE outcome IS NULL), ") +
                                 (version >= 2 ? "(SELECT count(*) FROM model_turns)" : "0")));
  ENVFORGE_ASSIGN_OR_RETURN(bool row, stmt.Step());
  TrajectoryStore::Counts counts;
  if (row) {
    counts.episodes = stmt.ColumnInt(0);
    counts.steps = stmt.ColumnInt(1);
    counts.open_episodes = stmt.ColumnInt(2);
    counts.model_turns = stmt.ColumnInt(3);
  }
  (void)db.Exec("COMMIT");
  return counts;
}

// --- Write records ---------------------------------------------------------------------------

struct BeginRecord {
  std::string episode_id;
  EpisodeStart start;
  int64_t started_at_us = 0;
};
struct StepRecordItem {
  std::string episode_id;
  StepRecord step;
};
struct SubmitRecord {
  std::string episode_id;
  std::string answer_text;
  Json verdict;
};
struct EndRecord {
  std::string episode_id;
  EpisodeOutcome outcome = EpisodeOutcome::kClosed;
  int64_t ended_at_us = 0;
};
struct MessageItem {
  std::string episode_id;
  MessageRecord message;
};
struct ModelTurnItem {
  std::string episode_id;
  ModelTurnRecord turn;
};
struct ContextEventItem {
  std::string episode_id;
  ContextEventRecord event;
};
using Record =
    std::variant<BeginRecord, StepRecordItem, SubmitRecord, EndRecord, MessageItem, ModelTurnItem, ContextEventItem>;

// The writer thread's connection and its prepared statements.
struct WriterConnection {
  Database db;
  Statement insert_episode;
  Statement episode_exists;
  Statement insert_step;
  Statement count_step;
  Statement set_submit;
  Statement set_end;
  Statement insert_message;
  Statement insert_model_turn;
  Statement insert_context_event;

  static Result<std::unique_ptr<WriterConnection>> Open(const std::string& path) {
    ENVFORGE_ASSIGN_OR_RETURN(Database db, Database::Open(path, Database::Mode::kReadWrite));
    return Prepare(std::move(db));
  }

  static Result<std::unique_ptr<WriterConnection>> Prepare(Database db) {
    SetBusyTimeout(db, kBusyTimeoutWriterMs);
    ENVFORGE_RETURN_IF_ERROR(db.Exec("PRAGMA synchronous = NORMAL"));
    // The steps table is keyed by (random episode id, step), so a batch touches pages all over
    // it; a page cache that holds the working set saves re-reading them for every batch.
    ENVFORGE_RETURN_IF_ERROR(db.Exec("PRAGMA cache_size = -16384"));
    // Checkpoints copy each page once however often the WAL rewrote it, and end in an fsync: a
    // WAL of up to ~16 MiB between them (instead of 4) makes both rarer per record.
    ENVFORGE_RETURN_IF_ERROR(db.Exec("PRAGMA wal_autocheckpoint = 4000"));
    ENVFORGE_ASSIGN_OR_RETURN(
        Statement insert_episode,
        db.Prepare(
            "INSERT OR IGNORE INTO episodes(id, env_id, env_version, env_name, task_id, task_version, "
            "verifier_version, seed, parent_id, fork_step, client, started_at_us, steps, kind, backend, model, "
            "sampling, rollout_id, sample_index) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?)"));
    ENVFORGE_ASSIGN_OR_RETURN(Statement episode_exists, db.Prepare("SELECT 1 FROM episodes WHERE id = ?"));
    ENVFORGE_ASSIGN_OR_RETURN(
        Statement insert_step,
        db.Prepare("INSERT OR IGNORE INTO steps(episode_id, step, tool, arguments, result, outcome, started_at_us, "
                   "duration_us) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"));
    ENVFORGE_ASSIGN_OR_RETURN(Statement count_step, db.Prepare("UPDATE episodes SET steps = steps + ? WHERE id = ?"));
    ENVFORGE_ASSIGN_OR_RETURN(Statement set_submit,
                              db.Prepare("UPDATE episodes SET answer = ?, verdict = ? WHERE id = ?"));
    ENVFORGE_ASSIGN_OR_RETURN(
        Statement set_end,
        db.Prepare("UPDATE episodes SET ended_at_us = ?, outcome = ? WHERE id = ? AND outcome IS NULL"));
    ENVFORGE_ASSIGN_OR_RETURN(
        Statement insert_message,
        db.Prepare("INSERT OR IGNORE INTO messages(episode_id, idx, role, content, reasoning_content, tool_calls, "
                   "tool_call_id, tool_outcome, step, created_at_us) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
    ENVFORGE_ASSIGN_OR_RETURN(
        Statement insert_model_turn,
        db.Prepare("INSERT OR IGNORE INTO model_turns(episode_id, turn, message_index, input_tokens, reused_tokens, "
                   "prompt_tokens, output_tokens, logprobs, kept_counts, finish_reason, parse_error, raw_text, "
                   "started_at_us, duration_us, routing_start, routing_width, routing, kept_vocab, kept_ids) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
    ENVFORGE_ASSIGN_OR_RETURN(
        Statement insert_context_event,
        db.Prepare("INSERT OR IGNORE INTO context_events(episode_id, seq, turn, strategy, tokens_before, tokens_after, "
                   "messages_dropped, summary, created_at_us) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"));
    return std::unique_ptr<WriterConnection>(
        new WriterConnection{std::move(db), std::move(insert_episode), std::move(episode_exists),
                             std::move(insert_step), std::move(count_step), std::move(set_submit), std::move(set_end),
                             std::move(insert_message), std::move(insert_model_turn), std::move(insert_context_event)});
  }
};

// Runs a prepared statement once with `values` and leaves it reset (no lock held by it).
Status RunWith(Statement& stmt, const std::vector<SqlValue>& values) {
  Status status = stmt.BindAll(values);
  if (status.ok()) status = stmt.Run();
  (void)stmt.Reset();
  return status;
}

Result<bool> EpisodeExists(WriterConnection& conn, const std::string& id) {
  Status bound = conn.episode_exists.Bind(1, id);
  Result<bool> row = bound.ok() ? conn.episode_exists.Step() : Result<bool>(bound);
  (void)conn.episode_exists.Reset();
  return row;
}

}  // namespace

// --- Names and JSON ----------------------------------------------------------------------------

std::string_view EpisodeOutcomeName(EpisodeOutcome outcome) {
  switch (outcome) {
    case EpisodeOutcome::kSubmitted: return "submitted";
    case EpisodeOutcome::kClosed: return "closed";
    case EpisodeOutcome::kCrashed: return "crashed";
    case EpisodeOutcome::kExpired: return "expired";
    case EpisodeOutcome::kInfraError: return "infra_error";
    case EpisodeOutcome::kShutdown: return "shutdown";
    case EpisodeOutcome::kReset: return "reset";
    case EpisodeOutcome::kMaxTurns: return "max_turns";
    case EpisodeOutcome::kMaxTokens: return "max_tokens";
    case EpisodeOutcome::kContextExhausted: return "context_exhausted";
    case EpisodeOutcome::kInvalidCalls: return "invalid_calls";
    case EpisodeOutcome::kTimeout: return "timeout";
  }
  return "closed";
}

const std::vector<EpisodeOutcome>& AllEpisodeOutcomes() {
  static const std::vector<EpisodeOutcome> kAll = {EpisodeOutcome::kSubmitted,    EpisodeOutcome::kClosed,
                                                   EpisodeOutcome::kCrashed,      EpisodeOutcome::kExpired,
                                                   EpisodeOutcome::kInfraError,   EpisodeOutcome::kShutdown,
                                                   EpisodeOutcome::kReset,        EpisodeOutcome::kMaxTurns,
                                                   EpisodeOutcome::kMaxTokens,    EpisodeOutcome::kContextExhausted,
                                                   EpisodeOutcome::kInvalidCalls, EpisodeOutcome::kTimeout};
  return kAll;
}

std::optional<EpisodeOutcome> EpisodeOutcomeFromName(std::string_view name) {
  for (EpisodeOutcome outcome : AllEpisodeOutcomes()) {
    if (EpisodeOutcomeName(outcome) == name) return outcome;
  }
  return std::nullopt;
}

Json EpisodeSummaryToJson(const EpisodeSummary& summary) {
  const EpisodeStart& start = summary.start;
  Json json{{"id", summary.id},
            {"env_id", start.env_id},
            {"env_name", start.env_name},
            {"task_id", start.task_id},
            {"task_version", start.task_version},
            {"verifier_version", start.verifier_version},
            {"seed", start.seed ? Json(*start.seed) : Json()},
            {"parent_id", start.parent_id.empty() ? Json() : Json(start.parent_id)},
            {"fork_step", start.parent_id.empty() ? Json() : Json(start.fork_step)},
            {"client", start.client},
            {"started_at_us", summary.started_at_us},
            {"ended_at_us", summary.ended_at_us ? Json(*summary.ended_at_us) : Json()},
            {"outcome", summary.outcome ? Json(std::string(EpisodeOutcomeName(*summary.outcome))) : Json()},
            {"answer", summary.answer ? Json(*summary.answer) : Json()},
            {"verdict", summary.verdict ? *summary.verdict : Json()},
            {"steps", summary.steps},
            {"kind", start.kind},
            {"backend", start.backend},
            {"model", start.model},
            {"sampling", start.sampling},
            {"rollout_id", start.rollout_id.empty() ? Json() : Json(start.rollout_id)},
            {"sample_index", start.sample_index < 0 ? Json() : Json(start.sample_index)}};
  return json;
}

namespace {

// A model turn's keep-routing and keep-sampling-mask fields, null when not recorded.
void AddTurnRecordings(const ModelTurnRecord& t, Json& json) {
  const bool routing = t.routing_width > 0, kept = t.kept_vocab > 0;
  json["routing_start"] = routing ? Json(t.routing_start) : Json();
  json["routing_width"] = routing ? Json(t.routing_width) : Json();
  json["routing"] = routing ? Json(t.routing) : Json();
  json["kept_vocab"] = kept ? Json(t.kept_vocab) : Json();
  json["kept_ids"] = kept ? Json(t.kept_ids) : Json();
}

}  // namespace

Json EpisodeToJson(const Episode& episode) {
  Json json = EpisodeSummaryToJson(episode.summary);
  json["step_count"] = episode.summary.steps;
  Json steps = Json::array();
  for (const StepRecord& step : episode.steps) {
    steps.push_back(Json{{"step", step.step},
                         {"tool", step.tool},
                         {"arguments", step.arguments},
                         {"result", toolsets::ToJson(step.result)},
                         {"started_at_us", step.started_at_us},
                         {"duration_us", step.duration_us}});
  }
  json["steps"] = std::move(steps);
  Json messages = Json::array();
  for (const MessageRecord& m : episode.messages) {
    messages.push_back(Json{{"index", m.index},
                            {"role", m.role},
                            {"content", m.content},
                            {"reasoning_content", m.reasoning_content},
                            {"tool_calls", m.tool_calls},
                            {"tool_call_id", m.tool_call_id},
                            {"tool_outcome", m.tool_outcome},
                            {"step", m.step < 0 ? Json() : Json(m.step)},
                            {"created_at_us", m.created_at_us}});
  }
  json["messages"] = std::move(messages);
  Json turns = Json::array();
  for (const ModelTurnRecord& t : episode.model_turns) {
    turns.push_back(Json{{"turn", t.turn},
                         {"message_index", t.message_index},
                         {"input_tokens", t.input_tokens},
                         {"reused_tokens", t.reused_tokens},
                         {"prompt_tokens", t.prompt_tokens},
                         {"output_tokens", t.output_tokens},
                         {"logprobs", t.logprobs},
                         {"kept_counts", t.kept_counts},
                         {"finish_reason", t.finish_reason},
                         {"parse_error", t.parse_error},
                         {"raw_text", t.raw_text},
                         {"started_at_us", t.started_at_us},
                         {"duration_us", t.duration_us}});
    AddTurnRecordings(t, turns.back());
  }
  json["model_turns"] = std::move(turns);
  Json events = Json::array();
  for (const ContextEventRecord& e : episode.context_events) {
    events.push_back(Json{{"seq", e.seq},
                          {"turn", e.turn},
                          {"strategy", e.strategy},
                          {"tokens_before", e.tokens_before},
                          {"tokens_after", e.tokens_after},
                          {"messages_dropped", e.messages_dropped},
                          {"summary", e.summary},
                          {"created_at_us", e.created_at_us}});
  }
  json["context_events"] = std::move(events);
  json["tokens"] = TokenSegmentsToJson(episode.model_turns);
  return json;
}

namespace {

// A segment of TokenSegmentsToJson being built. routing and kept always have one entry per id
// (null where nothing was recorded); they are left out of the JSON when every entry is null.
struct Segment {
  Json ids = Json::array();
  Json mask = Json::array();
  Json logprobs = Json::array();
  Json routing = Json::array();
  Json kept = Json::array();
  Json turns = Json::array();
  Json problems = Json::array();
  Json prefix_of;  // null unless the segment starts with a prefix of an earlier one
  bool has_routing = false;
  bool has_kept = false;

  void Push(int32_t id, int mask_bit, Json logprob, Json kept_ids = nullptr) {
    ids.push_back(id);
    mask.push_back(mask_bit);
    logprobs.push_back(std::move(logprob));
    routing.push_back(nullptr);
    has_kept = has_kept || !kept_ids.is_null();
    kept.push_back(std::move(kept_ids));
  }

  Json ToJson() && {
    Json json{{"ids", std::move(ids)},     {"mask", std::move(mask)},        {"logprobs", std::move(logprobs)},
              {"turns", std::move(turns)}, {"consistent", problems.empty()}, {"problems", std::move(problems)}};
    if (has_routing) json["routing"] = std::move(routing);
    if (has_kept) json["kept"] = std::move(kept);
    if (!prefix_of.is_null()) json["prefix_of"] = std::move(prefix_of);
    return json;
  }
};

// Starts the segment `turn` continues: a fresh one, or one holding the reused prefix of `current`.
Segment StartSegment(const ModelTurnRecord& turn, const Segment* current, size_t current_index) {
  Segment segment;
  if (turn.reused_tokens <= 0) return segment;
  const std::string where = "turn " + std::to_string(turn.turn) + ": ";
  if (current == nullptr) {
    segment.problems.push_back(where + "reuses " + std::to_string(turn.reused_tokens) +
                               " tokens but no earlier turn recorded a context");
    return segment;
  }
  size_t take = std::min<size_t>(static_cast<size_t>(turn.reused_tokens), current->ids.size());
  for (size_t i = 0; i < take; ++i) {
    segment.Push(current->ids[i].get<int32_t>(), 0, nullptr);  // trained once, in the segment that sampled it
    segment.routing[i] = current->routing[i];                  // the same tokens route the same way
    segment.has_routing = segment.has_routing || !current->routing[i].is_null();
  }
  segment.prefix_of = Json{{"segment", current_index}, {"tokens", take}};
  return segment;
}

// Output token i's kept ids (null when not recorded or not truncated); advances `offset` through
// turn.kept_ids, never past its end.
Json KeptSet(const ModelTurnRecord& turn, size_t i, size_t& offset) {
  if (turn.kept_vocab <= 0 || i >= turn.kept_counts.size()) return nullptr;
  const int64_t count = turn.kept_counts[i];
  if (count <= 0 || count >= turn.kept_vocab) return nullptr;
  const size_t end = offset + static_cast<size_t>(count);
  if (end > turn.kept_ids.size()) {
    offset = end;  // reported by AppendTurn as a count mismatch
    return nullptr;
  }
  Json ids(std::vector<int32_t>(turn.kept_ids.begin() + static_cast<std::ptrdiff_t>(offset),
                                turn.kept_ids.begin() + static_cast<std::ptrdiff_t>(end)));
  offset = end;
  return ids;
}

// The turn's routing at its context positions (the segment's ids hold the turn already).
void AddRouting(const ModelTurnRecord& turn, Segment& segment) {
  if (turn.routing_width <= 0) return;
  const std::string where = "turn " + std::to_string(turn.turn) + ": ";
  const auto width = static_cast<size_t>(turn.routing_width);
  const size_t positions = turn.routing.size() / width;
  const int64_t end = turn.routing_start + static_cast<int64_t>(positions);
  if (turn.routing.size() % width != 0) {
    segment.problems.push_back(where + "routing holds " + std::to_string(turn.routing.size()) +
                               " ids, not whole positions of " + std::to_string(width));
    return;
  }
  if (turn.routing_start < 0 || end > static_cast<int64_t>(segment.ids.size())) {
    segment.problems.push_back(where + "routing covers positions " + std::to_string(turn.routing_start) + ".." +
                               std::to_string(end - 1) + ", outside the segment's " +
                               std::to_string(segment.ids.size()) + " ids");
    return;
  }
  for (size_t p = 0; p < positions; ++p) {
    const auto first = turn.routing.begin() + static_cast<std::ptrdiff_t>(p * width);
    segment.routing[static_cast<size_t>(turn.routing_start) + p] =
        Json(std::vector<int16_t>(first, first + static_cast<std::ptrdiff_t>(width)));
  }
  segment.has_routing = segment.has_routing || positions > 0;
}

void AppendTurn(const ModelTurnRecord& turn, Segment& segment) {
  const std::string where = "turn " + std::to_string(turn.turn) + ": ";
  int64_t before = static_cast<int64_t>(segment.ids.size());
  if (turn.reused_tokens > before) {
    segment.problems.push_back(where + "reused_tokens " + std::to_string(turn.reused_tokens) + " exceeds the " +
                               std::to_string(before) + " tokens the recording holds for its context");
  }
  int64_t fed = static_cast<int64_t>(turn.input_tokens.size());
  if (turn.prompt_tokens != 0 && turn.prompt_tokens != turn.reused_tokens + fed) {
    segment.problems.push_back(where + "prompt_tokens " + std::to_string(turn.prompt_tokens) + " != reused_tokens " +
                               std::to_string(turn.reused_tokens) + " + " + std::to_string(fed) + " input tokens");
  }
  bool have_logprobs = !turn.logprobs.empty();
  if (have_logprobs && turn.logprobs.size() != turn.output_tokens.size()) {
    segment.problems.push_back(where + std::to_string(turn.logprobs.size()) + " logprobs for " +
                               std::to_string(turn.output_tokens.size()) + " output tokens");
  }
  if (turn.output_tokens.empty() && !turn.raw_text.empty()) {
    segment.problems.push_back(where + "generated text without output token ids");
  }
  for (int32_t id : turn.input_tokens) segment.Push(id, 0, nullptr);
  size_t kept_offset = 0;
  for (size_t i = 0; i < turn.output_tokens.size(); ++i) {
    const bool finite = i < turn.logprobs.size() && std::isfinite(turn.logprobs[i]);
    segment.Push(turn.output_tokens[i], 1, finite ? Json(turn.logprobs[i]) : Json(), KeptSet(turn, i, kept_offset));
  }
  if (turn.kept_vocab > 0 && kept_offset != turn.kept_ids.size()) {
    segment.problems.push_back(where + "kept_ids holds " + std::to_string(turn.kept_ids.size()) +
                               " ids, kept_counts call for " + std::to_string(kept_offset));
  }
  AddRouting(turn, segment);
  segment.turns.push_back(turn.turn);
}

}  // namespace

Json TokenSegmentsToJson(const std::vector<ModelTurnRecord>& model_turns) {
  std::vector<Segment> segments;
  for (const ModelTurnRecord& turn : model_turns) {
    bool continues = !segments.empty() && turn.reused_tokens > 0 &&
                     turn.reused_tokens >= static_cast<int64_t>(segments.back().ids.size());
    if (!continues) {
      const Segment* current = segments.empty() ? nullptr : &segments.back();
      Segment next = StartSegment(turn, current, segments.empty() ? 0 : segments.size() - 1);
      segments.push_back(std::move(next));
    }
    AppendTurn(turn, segments.back());
  }
  Json json = Json::array();
  for (Segment& segment : segments) json.push_back(std::move(segment).ToJson());
  return json;
}

// --- TrajectoryStore ---------------------------------------------------------------------------

class TrajectoryStore::Impl {
 public:
  Impl(std::string path, TrajectoryStoreOptions options, std::unique_ptr<WriterConnection> conn)
      : path_(std::move(path)), options_(options), conn_(std::move(conn)) {
    if (options_.batch_max_records == 0) options_.batch_max_records = 1;
    writer_ = std::thread([this] { WriterLoop(); });
  }

  ~Impl() {
    Status flushed = Flush();
    if (!flushed.ok()) {
      ENVFORGE_LOG(kError) << "trajectory store " << path_ << ": closing: " << flushed.message();
    }
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    work_cv_.notify_all();
    writer_.join();
  }

  void Enqueue(Record record) {
    bool wake = false;
    {
      std::lock_guard lock(mu_);
      queue_.push_back(std::move(record));
      ++enqueued_;
      // The writer sleeps either for work (wake on the first record) or for a fuller batch.
      wake = queue_.size() == 1 || queue_.size() >= options_.batch_max_records;
    }
    if (wake) work_cv_.notify_one();
  }

  Status Flush() {
    std::unique_lock lock(mu_);
    const uint64_t target = enqueued_;
    if (processed_ >= target) return Status::Ok();
    ++flush_waiters_;
    work_cv_.notify_all();
    bool done = done_cv_.wait_for(lock, options_.flush_deadline, [&] { return processed_ >= target; });
    --flush_waiters_;
    if (done) return Status::Ok();
    std::string message = "trajectory store " + path_ + ": " + std::to_string(target - processed_) +
                          " records not committed after " + std::to_string(options_.flush_deadline.count()) + " ms";
    if (!last_error_.empty()) message += "; last write error: " + last_error_;
    return DeadlineExceededError(std::move(message));
  }

  void WhenCommitted(std::function<void(Status)> committed) {
    {
      std::lock_guard lock(mu_);
      if (processed_ < enqueued_) {
        commit_waiters_.push_back(
            {enqueued_, std::chrono::steady_clock::now() + options_.flush_deadline, std::move(committed)});
        committed = nullptr;
      }
    }
    if (committed) return committed(Status::Ok());
    work_cv_.notify_all();
  }

  TrajectoryStoreStats Stats() const {
    std::lock_guard lock(mu_);
    TrajectoryStoreStats stats;
    stats.records_enqueued = enqueued_;
    stats.records_written = records_written_;
    stats.batches_written = batches_written_;
    stats.queue_depth = queue_.size() + in_flight_;
    stats.write_errors = write_errors_;
    stats.last_error = last_error_;
    return stats;
  }

  const std::string& path() const { return path_; }

 private:
  void WriterLoop() {
    std::vector<Record> batch;
    std::chrono::milliseconds backoff = kFirstBackoff;
    uint64_t consecutive_failures = 0;
    while (true) {
      if (batch.empty()) {
        std::unique_lock lock(mu_);
        work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping with nothing left
        // Let the batch fill up (one transaction per batch) unless someone waits for it.
        work_cv_.wait_for(lock, options_.flush_interval, [&] {
          return stopping_ || flush_waiters_ > 0 || !commit_waiters_.empty() ||
                 queue_.size() >= options_.batch_max_records;
        });
        size_t take = std::min(queue_.size(), options_.batch_max_records);
        batch.reserve(take);
        for (size_t i = 0; i < take; ++i) {
          batch.push_back(std::move(queue_.front()));
          queue_.pop_front();
        }
        in_flight_ = take;
      }
      std::vector<std::string> rejections;
      Status status = WriteBatch(batch, &rejections);
      std::unique_lock lock(mu_);
      if (status.ok()) {
        for (const std::string& rejection : rejections) {
          ENVFORGE_LOG(kError) << "trajectory store " << path_ << ": " << rejection;
        }
        processed_ += batch.size();
        records_written_ += batch.size() - rejections.size();
        write_errors_ += rejections.size();
        ++batches_written_;
        last_error_ = rejections.empty() ? std::string() : rejections.back();
        in_flight_ = 0;
        batch.clear();
        backoff = kFirstBackoff;
        consecutive_failures = 0;
        auto committed = TakeWaiters([&](const CommitWaiter& waiter) { return waiter.target <= processed_; });
        lock.unlock();
        done_cv_.notify_all();
        Answer(committed, Status::Ok());
        continue;
      }
      ++write_errors_;
      ++consecutive_failures;
      last_error_ = status.ToString();
      // One line per failure would flood the log while a lock is held for minutes.
      if (consecutive_failures == 1 || consecutive_failures % 50 == 0) {
        ENVFORGE_LOG(kWarn) << "trajectory store " << path_ << ": writing " << batch.size()
                            << " records failed (attempt " << consecutive_failures
                            << ", retrying): " << status.message();
      }
      if (stopping_) {
        ENVFORGE_LOG(kError) << "trajectory store " << path_ << ": closing with " << batch.size() + queue_.size()
                             << " records not written: " << status.message();
        auto abandoned = TakeWaiters([](const CommitWaiter&) { return true; });
        lock.unlock();
        Answer(abandoned,
               UnavailableError("trajectory store " + path_ + " closed before committing: " + status.message()));
        return;
      }
      auto now = std::chrono::steady_clock::now();
      auto overdue = TakeWaiters([&](const CommitWaiter& waiter) { return waiter.deadline <= now; });
      if (!overdue.empty()) {
        lock.unlock();
        Answer(overdue, DeadlineExceededError("trajectory store " + path_ + ": records not committed after " +
                                              std::to_string(options_.flush_deadline.count()) +
                                              " ms; last write error: " + status.message()));
        lock.lock();
      }
      if (status.code() != StatusCode::kUnavailable) {
        conn_.reset();            // reopen on the next attempt
        known_episodes_.clear();  // and trust nothing learnt through the old connection
      }
      work_cv_.wait_for(lock, backoff, [&] { return stopping_; });
      backoff = std::min(backoff * 2, kMaxBackoff);
    }
  }

  struct CommitWaiter {
    uint64_t target;  // committed once processed_ reaches it
    std::chrono::steady_clock::time_point deadline;
    std::function<void(Status)> committed;
  };

  // Removes the waiters `due` selects (caller holds mu_), in the order they came.
  template <typename Predicate>
  std::vector<CommitWaiter> TakeWaiters(Predicate due) {
    std::vector<CommitWaiter> taken;
    for (auto it = commit_waiters_.begin(); it != commit_waiters_.end();) {
      if (!due(*it)) {
        ++it;
        continue;
      }
      taken.push_back(std::move(*it));
      it = commit_waiters_.erase(it);
    }
    return taken;
  }

  // Runs the callbacks without mu_ held: they reply to clients.
  static void Answer(std::vector<CommitWaiter>& waiters, const Status& status) {
    for (CommitWaiter& waiter : waiters) waiter.committed(status);
  }

  // One transaction for the whole batch. Records that cannot apply are described in
  // `rejections` (the batch still commits); an error Status means nothing was committed.
  Status WriteBatch(const std::vector<Record>& batch, std::vector<std::string>* rejections) {
    if (conn_ == nullptr) {
      ENVFORGE_ASSIGN_OR_RETURN(conn_, WriterConnection::Open(path_));
    }
    ENVFORGE_ASSIGN_OR_RETURN(Transaction txn, Transaction::Begin(conn_->db));
    BatchState state;
    for (const Record& record : batch) {
      ENVFORGE_RETURN_IF_ERROR(std::visit([&](const auto& item) { return Apply(item, state, rejections); }, record));
    }
    // One counter update per episode and batch, not per step (same transaction, same result).
    for (const auto& [episode_id, steps] : state.steps_added) {
      ENVFORGE_RETURN_IF_ERROR(RunWith(conn_->count_step, {steps, episode_id}));
    }
    ENVFORGE_RETURN_IF_ERROR(txn.Commit());
    // Only what committed may skip the existence query later.
    if (known_episodes_.size() + state.confirmed.size() > kKnownEpisodesMax) known_episodes_.clear();
    known_episodes_.merge(state.confirmed);
    for (const std::string& id : state.ended) known_episodes_.erase(id);
    return Status::Ok();
  }

  // What one batch learns while it is applied.
  struct BatchState {
    std::unordered_map<std::string, int64_t> steps_added;  // episode -> steps inserted
    std::unordered_set<std::string> confirmed;             // episodes seen to exist
    std::vector<std::string> ended;                        // episodes ended (rarely stepped again)
  };

  Result<bool> Known(const std::string& episode_id, BatchState& state) {
    if (known_episodes_.count(episode_id) != 0 || state.confirmed.count(episode_id) != 0) return true;
    ENVFORGE_ASSIGN_OR_RETURN(bool exists, EpisodeExists(*conn_, episode_id));
    if (exists) state.confirmed.insert(episode_id);
    return exists;
  }

  Status Apply(const BeginRecord& record, BatchState& state, std::vector<std::string>* rejections) {
    const EpisodeStart& start = record.start;
    ENVFORGE_RETURN_IF_ERROR(
        RunWith(conn_->insert_episode,
                {record.episode_id, start.env_id, start.env_id, start.env_name, start.task_id, start.task_version,
                 start.verifier_version, start.seed ? SqlValue(*start.seed) : SqlValue(), TextOrNull(start.parent_id),
                 start.parent_id.empty() ? SqlValue() : SqlValue(start.fork_step), start.client, record.started_at_us,
                 start.kind.empty() ? std::string("served") : start.kind, start.backend, start.model,
                 start.sampling.is_null() ? SqlValue() : SqlValue(DumpJson(start.sampling)),
                 TextOrNull(start.rollout_id), start.sample_index < 0 ? SqlValue() : SqlValue(start.sample_index)}));
    if (conn_->db.Changes() == 0)
      rejections->push_back("episode " + record.episode_id + " begun twice; the first kept");
    state.confirmed.insert(record.episode_id);
    return Status::Ok();
  }

  Status Apply(const StepRecordItem& record, BatchState& state, std::vector<std::string>* rejections) {
    const StepRecord& step = record.step;
    ENVFORGE_ASSIGN_OR_RETURN(bool exists, Known(record.episode_id, state));
    if (!exists) {
      rejections->push_back("step " + std::to_string(step.step) + " (" + step.tool + ") of unknown episode " +
                            record.episode_id + " rejected");
      return Status::Ok();
    }
    ENVFORGE_RETURN_IF_ERROR(RunWith(
        conn_->insert_step,
        {record.episode_id, step.step, step.tool, DumpJson(step.arguments), DumpJson(toolsets::ToJson(step.result)),
         std::string(toolsets::OutcomeName(step.result.outcome)), step.started_at_us, step.duration_us}));
    if (conn_->db.Changes() == 0) {
      rejections->push_back("duplicate step " + std::to_string(step.step) + " (" + step.tool + ") of episode " +
                            record.episode_id + " rejected; the step first recorded is kept");
      return Status::Ok();
    }
    ++state.steps_added[record.episode_id];
    return Status::Ok();
  }

  Status Apply(const SubmitRecord& record, BatchState&, std::vector<std::string>* rejections) {
    ENVFORGE_RETURN_IF_ERROR(
        RunWith(conn_->set_submit, {record.answer_text, DumpJson(record.verdict), record.episode_id}));
    if (conn_->db.Changes() == 0) rejections->push_back("submit of unknown episode " + record.episode_id + " rejected");
    return Status::Ok();
  }

  Status Apply(const EndRecord& record, BatchState& state, std::vector<std::string>* rejections) {
    ENVFORGE_RETURN_IF_ERROR(RunWith(
        conn_->set_end, {record.ended_at_us, std::string(EpisodeOutcomeName(record.outcome)), record.episode_id}));
    if (conn_->db.Changes() > 0) {
      state.ended.push_back(record.episode_id);
      return Status::Ok();
    }
    ENVFORGE_ASSIGN_OR_RETURN(bool exists, EpisodeExists(*conn_, record.episode_id));
    // An episode ended twice keeps its first outcome: expected (close after a crash), not an error.
    if (!exists) rejections->push_back("end of unknown episode " + record.episode_id + " rejected");
    return Status::Ok();
  }

  // A message, model turn or context event: inserted when its episode exists and its key is new.
  Status InsertKeyed(const std::string& episode_id, const std::string& what, Statement& insert,
                     const std::vector<SqlValue>& values, BatchState& state, std::vector<std::string>* rejections) {
    ENVFORGE_ASSIGN_OR_RETURN(bool exists, Known(episode_id, state));
    if (!exists) {
      rejections->push_back(what + " of unknown episode " + episode_id + " rejected");
      return Status::Ok();
    }
    ENVFORGE_RETURN_IF_ERROR(RunWith(insert, values));
    if (conn_->db.Changes() == 0) {
      rejections->push_back("duplicate " + what + " of episode " + episode_id +
                            " rejected; the first recorded is kept");
    }
    return Status::Ok();
  }

  Status Apply(const MessageItem& record, BatchState& state, std::vector<std::string>* rejections) {
    const MessageRecord& m = record.message;
    return InsertKeyed(record.episode_id, "message " + std::to_string(m.index) + " (" + m.role + ")",
                       conn_->insert_message,
                       {record.episode_id, m.index, m.role, m.content, m.reasoning_content,
                        DumpJson(m.tool_calls.is_null() ? Json::array() : m.tool_calls), m.tool_call_id, m.tool_outcome,
                        m.step < 0 ? SqlValue() : SqlValue(m.step), m.created_at_us},
                       state, rejections);
  }

  Status Apply(const ModelTurnItem& record, BatchState& state, std::vector<std::string>* rejections) {
    const ModelTurnRecord& t = record.turn;
    // Turns that recorded no routing or kept sets store NULLs (format 3 columns).
    const bool routing = t.routing_width > 0, kept = t.kept_vocab > 0;
    return InsertKeyed(
        record.episode_id, "model turn " + std::to_string(t.turn), conn_->insert_model_turn,
        {record.episode_id, t.turn, t.message_index, PackLittleEndian(t.input_tokens), t.reused_tokens, t.prompt_tokens,
         PackLittleEndian(t.output_tokens), PackLittleEndian(t.logprobs), PackLittleEndian(t.kept_counts),
         t.finish_reason, t.parse_error, t.raw_text, t.started_at_us, t.duration_us,
         routing ? SqlValue(t.routing_start) : SqlValue(), routing ? SqlValue(t.routing_width) : SqlValue(),
         routing ? SqlValue(PackLittleEndian(t.routing)) : SqlValue(), kept ? SqlValue(t.kept_vocab) : SqlValue(),
         kept ? SqlValue(PackLittleEndian(t.kept_ids)) : SqlValue()},
        state, rejections);
  }

  Status Apply(const ContextEventItem& record, BatchState& state, std::vector<std::string>* rejections) {
    const ContextEventRecord& e = record.event;
    return InsertKeyed(record.episode_id, "context event " + std::to_string(e.seq) + " (" + e.strategy + ")",
                       conn_->insert_context_event,
                       {record.episode_id, e.seq, e.turn, e.strategy, e.tokens_before, e.tokens_after,
                        e.messages_dropped, e.summary, e.created_at_us},
                       state, rejections);
  }

  const std::string path_;
  TrajectoryStoreOptions options_;
  std::unique_ptr<WriterConnection> conn_;          // writer thread only (null: reopen before the next batch)
  std::unordered_set<std::string> known_episodes_;  // writer thread only: committed episode ids

  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // the writer waits for records, a flush, or stopping_
  std::condition_variable done_cv_;  // Flush waits for processed_
  std::deque<Record> queue_;
  size_t in_flight_ = 0;    // records the writer took and has not committed yet
  uint64_t enqueued_ = 0;   // records handed in, ever
  uint64_t processed_ = 0;  // records committed or rejected, in FIFO order
  uint64_t records_written_ = 0;
  uint64_t batches_written_ = 0;
  uint64_t write_errors_ = 0;
  std::string last_error_;
  uint64_t flush_waiters_ = 0;
  std::deque<CommitWaiter> commit_waiters_;  // by target, ascending (targets only grow)
  bool stopping_ = false;
  std::thread writer_;  // last: started once everything above exists
};

Result<std::unique_ptr<TrajectoryStore>> TrajectoryStore::Open(const std::string& path,
                                                               TrajectoryStoreOptions options) {
  ENVFORGE_RETURN_IF_ERROR(CheckSqliteHeader(path));
  auto db = Database::Open(path, Database::Mode::kReadWriteCreate);
  if (!db.ok()) {
    if (db.status().code() == StatusCode::kDataLoss) return db.status();
    return InternalError("cannot open trajectory store: " + db.status().message());
  }
  SetBusyTimeout(*db, kBusyTimeoutReaderMs);
  ENVFORGE_RETURN_IF_ERROR(db->Exec("PRAGMA journal_mode = WAL"));
  ENVFORGE_ASSIGN_OR_RETURN(int version, CheckOrCreateSchema(*db, path, /*create=*/true));
  if (version < kFormatVersion) ENVFORGE_RETURN_IF_ERROR(Migrate(*db, path));
  ENVFORGE_RETURN_IF_ERROR(db->Exec(kListingIndex));
  ENVFORGE_ASSIGN_OR_RETURN(auto conn, WriterConnection::Prepare(std::move(*db)));
  return std::unique_ptr<TrajectoryStore>(new TrajectoryStore(std::make_unique<Impl>(path, options, std::move(conn))));
}

TrajectoryStore::TrajectoryStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TrajectoryStore::~TrajectoryStore() = default;

std::string TrajectoryStore::BeginEpisode(EpisodeStart start) {
  std::string id = NewEpisodeId();
  impl_->Enqueue(BeginRecord{id, std::move(start), NowMicros()});
  return id;
}

void TrajectoryStore::RecordStep(const std::string& episode_id, StepRecord step) {
  impl_->Enqueue(StepRecordItem{episode_id, std::move(step)});
}

void TrajectoryStore::RecordSubmit(const std::string& episode_id, std::string answer_text, Json verdict) {
  impl_->Enqueue(SubmitRecord{episode_id, std::move(answer_text), std::move(verdict)});
}

void TrajectoryStore::EndEpisode(const std::string& episode_id, EpisodeOutcome outcome) {
  impl_->Enqueue(EndRecord{episode_id, outcome, NowMicros()});
}

void TrajectoryStore::RecordMessage(const std::string& episode_id, MessageRecord message) {
  impl_->Enqueue(MessageItem{episode_id, std::move(message)});
}

void TrajectoryStore::RecordModelTurn(const std::string& episode_id, ModelTurnRecord turn) {
  impl_->Enqueue(ModelTurnItem{episode_id, std::move(turn)});
}

void TrajectoryStore::RecordContextEvent(const std::string& episode_id, ContextEventRecord event) {
  impl_->Enqueue(ContextEventItem{episode_id, std::move(event)});
}

Status TrajectoryStore::Flush() { return impl_->Flush(); }
void TrajectoryStore::WhenCommitted(std::function<void(Status)> committed) {
  impl_->WhenCommitted(std::move(committed));
}
TrajectoryStoreStats TrajectoryStore::Stats() const { return impl_->Stats(); }
const std::string& TrajectoryStore::path() const { return impl_->path(); }

Result<std::vector<EpisodeSummary>> TrajectoryStore::List(const ListFilter& filter) const {
  return ReadList(impl_->path(), filter);
}
Result<Episode> TrajectoryStore::Get(const std::string& id_or_prefix) const {
  return ReadEpisode(impl_->path(), id_or_prefix);
}
Result<TrajectoryStore::Counts> TrajectoryStore::Count() const { return ReadCounts(impl_->path()); }

// --- TrajectoryReader --------------------------------------------------------------------------

class TrajectoryReader::Impl {
 public:
  explicit Impl(std::string path) : path(std::move(path)) {}
  std::string path;
};

Result<std::unique_ptr<TrajectoryReader>> TrajectoryReader::Open(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return NotFoundError("no trajectory store " + path);
  if (std::filesystem::is_directory(path, ec))
    return InvalidArgumentError(path + " is a directory, not a trajectory store");
  ENVFORGE_RETURN_IF_ERROR(CheckSqliteHeader(path));
  if (std::filesystem::file_size(path, ec) == 0)
    return InvalidArgumentError(path + " is not a trajectory store (empty file)");
  auto db = OpenForRead(path);
  if (!db.ok()) {
    if (db.status().code() == StatusCode::kDataLoss) return db.status();
    return InternalError("cannot open trajectory store: " + db.status().message());
  }
  ENVFORGE_RETURN_IF_ERROR(CheckOrCreateSchema(*db, path, /*create=*/false).status());
  return std::unique_ptr<TrajectoryReader>(new TrajectoryReader(std::make_unique<Impl>(path)));
}

TrajectoryReader::TrajectoryReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TrajectoryReader::~TrajectoryReader() = default;

Result<std::vector<EpisodeSummary>> TrajectoryReader::List(const ListFilter& filter) const {
  return ReadList(impl_->path, filter);
}
Result<Episode> TrajectoryReader::Get(const std::string& id_or_prefix) const {
  return ReadEpisode(impl_->path, id_or_prefix);
}
Result<TrajectoryStore::Counts> TrajectoryReader::Count() const { return ReadCounts(impl_->path); }

}  // namespace envforge::agents
