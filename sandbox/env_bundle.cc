// Loading and hashing bundles (sandbox/env_bundle.h).
//
// THE CANONICAL DUMP (format 1). The content hash is SHA-256 over a sequence of length-prefixed
// fields (Sha256::UpdateField); every SQL value is one field "<tag><payload>" with tag n (NULL),
// i (integer, decimal), r (real, shortest round-trip form), t (text) or b (blob bytes):
//   "envforge-bundle-content-v1"
//   data objects: "object", type, name, tbl_name, sql for every sqlite_schema entry with SQL whose
//     name and table do not start with "_" or "sqlite_", ordered by (type, name);
//   data rows: "table", name, then "row" + values for each row, for every ordinary or shadow table
//     of those (virtual tables keep their rows in shadow tables), ordered by name; rows in rowid
//     order (primary-key order for WITHOUT ROWID tables); then "sequence" + sqlite_sequence rows;
//   "_env" + (key, value) rows ordered by key, content_hash left out, and provenance re-dumped
//     without "source_dir" (where a bundle was packed from is not part of what it is);
//   "_tools" + (position, name, description, input_schema, source, builtin) ordered by position;
//   "_tasks" + (id, prompt, answer_schema, solution_source, verifier_source, oracle_source,
//     difficulty, knobs) ordered by id: never version, passk or audit;
//   "_files" + (path, data) ordered by path (fixtures change behaviour, so they are content too).
//
// LOAD ERRORS, each message starting with the file's path: NotFound (no such file),
// InvalidArgument (empty file, not SQLite, WAL mode, unsupported format_version, values that break
// the format's rules: bad kind, bad tool name, invalid schema), DataLoss (truncated or corrupt,
// missing reserved table, column or _env key, wrong column type, invalid JSON, content hash or
// task version mismatch).
#include "sandbox/env_bundle.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <map>
#include <set>
#include <variant>

#include "base/fd.h"
#include "base/sha256.h"
#include "base/sqlite.h"
#include "sandbox/internal/bundle_format.h"
#include "toolsets/code_tools.h"
#include "toolsets/interpreter_tools.h"
#include "toolsets/json_schema.h"
#include "toolsets/search_tools.h"

namespace envforge::sandbox {
namespace {

constexpr std::string_view kSqliteMagic("SQLite format 3\0", 16);

std::string QuoteIdentifier(std::string_view name) {
  std::string out = "\"";
  for (char c : name) {
    out += c;
    if (c == '"') out += '"';
  }
  out += '"';
  return out;
}

void HashValue(Sha256& hasher, const SqlValue& value) {
  if (std::holds_alternative<std::monostate>(value)) {
    hasher.UpdateField("n");
  } else if (const auto* i = std::get_if<int64_t>(&value)) {
    hasher.UpdateField("i" + std::to_string(*i));
  } else if (const auto* d = std::get_if<double>(&value)) {
    char buffer[64];
    auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, *d);
    (void)error;  // 64 bytes always hold the shortest form of a double
    hasher.UpdateField("r" + std::string(buffer, end));
  } else if (const auto* s = std::get_if<std::string>(&value)) {
    hasher.UpdateField("t" + *s);
  } else {
    const auto& blob = std::get<std::vector<uint8_t>>(value);
    std::string bytes = "b";
    bytes.append(reinterpret_cast<const char*>(blob.data()), blob.size());
    hasher.UpdateField(bytes);
  }
}

// Hashes every row of `sql` as "row" + its values. `rewrite` may replace a column's value.
template <typename Rewrite>
Status HashRows(Database& db, Sha256& hasher, const std::string& sql, Rewrite rewrite) {
  auto stmt = db.Prepare(sql);
  if (!stmt.ok()) return DataLossError(stmt.status().message());
  while (true) {
    auto row = stmt->Step();
    if (!row.ok()) return DataLossError(row.status().message());
    if (!*row) return Status::Ok();
    hasher.UpdateField("row");
    for (int column = 0; column < stmt->ColumnCount(); ++column) {
      SqlValue value = stmt->Column(column);
      ENVFORGE_RETURN_IF_ERROR(rewrite(*stmt, column, value));
      HashValue(hasher, value);
    }
  }
}

Status HashRows(Database& db, Sha256& hasher, const std::string& sql) {
  return HashRows(db, hasher, sql, [](const Statement&, int, SqlValue&) { return Status::Ok(); });
}

// The expression that orders a rowid table by rowid, avoiding a column that shadows the name.
Result<std::string> RowidAlias(Database& db, const std::string& table) {
  auto stmt = db.Prepare("SELECT name FROM pragma_table_info(?)");
  if (!stmt.ok()) return DataLossError(stmt.status().message());
  ENVFORGE_RETURN_IF_ERROR(stmt->Bind(1, table));
  std::set<std::string> columns;
  while (true) {
    auto row = stmt->Step();
    if (!row.ok()) return DataLossError(row.status().message());
    if (!*row) break;
    std::string name = stmt->ColumnText(0);
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    columns.insert(name);
  }
  for (const char* alias : {"rowid", "_rowid_", "oid"}) {
    if (!columns.contains(alias)) return std::string(alias);
  }
  return DataLossError("table " + table + " shadows every rowid alias; cannot order its rows");
}

Status HashDataTables(Database& db, Sha256& hasher) {
  // Objects first: the schema SQL of every table, index, view and trigger outside the reserved set.
  constexpr const char* kUserObjects =
      "SELECT type, name, tbl_name, sql FROM sqlite_schema WHERE sql IS NOT NULL"
      " AND substr(name, 1, 1) <> '_' AND substr(tbl_name, 1, 1) <> '_'"
      " AND substr(name, 1, 7) <> 'sqlite_' ORDER BY type, name";
  hasher.UpdateField("objects");
  ENVFORGE_RETURN_IF_ERROR(HashRows(db, hasher, kUserObjects));

  auto list = db.Prepare(
      "SELECT name, wr FROM pragma_table_list WHERE schema = 'main' AND type IN ('table', 'shadow')"
      " AND substr(name, 1, 1) <> '_' AND substr(name, 1, 7) <> 'sqlite_' ORDER BY name");
  if (!list.ok()) return DataLossError(list.status().message());
  std::vector<std::pair<std::string, bool>> tables;
  while (true) {
    auto row = list->Step();
    if (!row.ok()) return DataLossError(row.status().message());
    if (!*row) break;
    tables.emplace_back(list->ColumnText(0), list->ColumnInt(1) != 0);
  }
  for (const auto& [table, without_rowid] : tables) {
    hasher.UpdateField("table");
    hasher.UpdateField(table);
    std::string sql = "SELECT * FROM " + QuoteIdentifier(table);
    if (!without_rowid) {
      ENVFORGE_ASSIGN_OR_RETURN(std::string alias, RowidAlias(db, table));
      sql += " ORDER BY " + alias;
    }
    ENVFORGE_RETURN_IF_ERROR(HashRows(db, hasher, sql));
  }

  auto has_sequence = db.Prepare("SELECT 1 FROM sqlite_schema WHERE name = 'sqlite_sequence'");
  if (!has_sequence.ok()) return DataLossError(has_sequence.status().message());
  auto present = has_sequence->Step();
  if (!present.ok()) return DataLossError(present.status().message());
  if (*present) {
    hasher.UpdateField("sequence");
    ENVFORGE_RETURN_IF_ERROR(HashRows(db, hasher, "SELECT name, seq FROM sqlite_sequence ORDER BY name"));
  }
  return Status::Ok();
}

// ---- Load helpers -------------------------------------------------------------------------------

// Reads the columns of one result row with type checks; errors name the table, row and column.
class RowReader {
 public:
  RowReader(const Statement& stmt, std::string where) : stmt_(stmt), where_(std::move(where)) {}

  Result<std::string> Text(int column) const {
    SqlValue value = stmt_.Column(column);
    if (auto* s = std::get_if<std::string>(&value)) return std::move(*s);
    return TypeError(column, "text");
  }
  Result<std::string> NullableText(int column) const {
    if (stmt_.ColumnIsNull(column)) return std::string();
    return Text(column);
  }
  Result<int64_t> Integer(int column) const {
    SqlValue value = stmt_.Column(column);
    if (auto* i = std::get_if<int64_t>(&value)) return *i;
    return TypeError(column, "an integer");
  }
  // A JSON column; `object` demands a JSON object. NULL gives null when `nullable`.
  Result<Json> JsonColumn(int column, bool nullable, bool object) const {
    if (nullable && stmt_.ColumnIsNull(column)) return Json();
    ENVFORGE_ASSIGN_OR_RETURN(std::string text, Text(column));
    std::string what = where_ + "." + stmt_.ColumnName(column);
    auto parsed = ParseJson(text, what);
    if (!parsed.ok()) return DataLossError(parsed.status().message());
    if (object && !parsed->is_object()) return DataLossError(what + " is not a JSON object");
    return std::move(*parsed);
  }
  const std::string& where() const { return where_; }

 private:
  Status TypeError(int column, std::string_view expected) const {
    return DataLossError(where_ + "." + stmt_.ColumnName(column) + " is not " + std::string(expected));
  }
  const Statement& stmt_;
  std::string where_;
};

struct TableColumns {
  const char* table;
  std::vector<const char*> columns;
};

const std::vector<TableColumns>& ReservedColumns() {
  static const std::vector<TableColumns> kColumns = {
      {"_env", {"key", "value"}},
      {"_tools", {"position", "name", "description", "input_schema", "source", "builtin"}},
      {"_tasks",
       {"id", "prompt", "answer_schema", "solution_source", "verifier_source", "oracle_source", "difficulty", "knobs",
        "version", "passk", "audit"}},
      {"_files", {"path", "data"}},
  };
  return kColumns;
}

Status CheckTableColumns(Database& db, const TableColumns& expected) {
  auto stmt = db.Prepare("SELECT name FROM pragma_table_info(?)");
  if (!stmt.ok()) return DataLossError(stmt.status().message());
  ENVFORGE_RETURN_IF_ERROR(stmt->Bind(1, std::string(expected.table)));
  std::set<std::string> present;
  while (true) {
    auto row = stmt->Step();
    if (!row.ok()) return DataLossError(row.status().message());
    if (!*row) break;
    present.insert(stmt->ColumnText(0));
  }
  if (present.empty()) return DataLossError(std::string("missing reserved table ") + expected.table);
  for (const char* column : expected.columns) {
    if (!present.contains(column)) {
      return DataLossError(std::string("reserved table ") + expected.table + " lacks column '" + column + "'");
    }
  }
  return Status::Ok();
}

bool IsHexDigest(std::string_view text) {
  return text.size() == 64 &&
         std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

uint32_t BigEndian(const unsigned char* bytes, int count) {
  uint32_t value = 0;
  for (int i = 0; i < count; ++i) value = (value << 8) | bytes[i];
  return value;
}

// Checks what SQLite does not check for a read-only open: that the file is a SQLite database in
// rollback mode and as long as its header says.
Status CheckFileHeader(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) return NotFoundError("no such file");
    return ErrnoError("cannot open", errno);
  }
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) return ErrnoError("cannot stat", errno);
  if (!S_ISREG(info.st_mode)) return InvalidArgumentError("not a regular file");
  auto size = static_cast<uint64_t>(info.st_size);
  if (size == 0) return InvalidArgumentError("empty file, not an environment bundle");
  unsigned char header[100] = {};
  size_t wanted = std::min<uint64_t>(size, sizeof header);
  ENVFORGE_RETURN_IF_ERROR(ReadFull(fd.get(), reinterpret_cast<char*>(header), wanted));
  std::string_view magic(reinterpret_cast<const char*>(header), std::min<size_t>(wanted, kSqliteMagic.size()));
  if (magic != kSqliteMagic.substr(0, magic.size())) {
    return InvalidArgumentError("not a SQLite database (no SQLite header)");
  }
  if (size < sizeof header) {
    return DataLossError("truncated: " + std::to_string(size) + " bytes, shorter than a SQLite header");
  }
  uint32_t page_size = BigEndian(header + 16, 2);
  if (page_size == 1) page_size = 65536;
  if (page_size < 512 || page_size > 65536 || (page_size & (page_size - 1)) != 0) {
    return DataLossError("corrupt SQLite header (page size " + std::to_string(page_size) + ")");
  }
  if (header[18] == 2 || header[19] == 2) {
    return InvalidArgumentError("database is in WAL mode; bundles are written in rollback-journal mode");
  }
  uint32_t pages = BigEndian(header + 28, 4);
  bool pages_valid = pages != 0 && BigEndian(header + 24, 4) == BigEndian(header + 92, 4);
  if (pages_valid && size < static_cast<uint64_t>(pages) * page_size) {
    return DataLossError("truncated: " + std::to_string(size) + " bytes, the SQLite header promises " +
                         std::to_string(static_cast<uint64_t>(pages) * page_size));
  }
  if (size % page_size != 0) {
    return DataLossError("truncated: " + std::to_string(size) + " bytes is not a whole number of " +
                         std::to_string(page_size) + "-byte pages");
  }
  return Status::Ok();
}

Status QuickCheck(Database& db) {
  auto stmt = db.Prepare("PRAGMA quick_check(1)");
  if (!stmt.ok()) return DataLossError("corrupt: " + stmt.status().message());
  auto row = stmt->Step();
  if (!row.ok()) return DataLossError("corrupt: " + row.status().message());
  if (!*row) return DataLossError("corrupt: quick_check returned nothing");
  std::string verdict = stmt->ColumnText(0);
  if (verdict != "ok") return DataLossError("corrupt: " + verdict);
  return Status::Ok();
}

Result<std::map<std::string, std::string>> ReadEnvTable(Database& db) {
  ENVFORGE_RETURN_IF_ERROR(CheckTableColumns(db, ReservedColumns()[0]));
  auto stmt = db.Prepare("SELECT key, value FROM _env ORDER BY key");
  if (!stmt.ok()) return DataLossError(stmt.status().message());
  std::map<std::string, std::string> env;
  while (true) {
    auto row = stmt->Step();
    if (!row.ok()) return DataLossError(row.status().message());
    if (!*row) return env;
    RowReader reader(*stmt, "_env");
    ENVFORGE_ASSIGN_OR_RETURN(std::string key, reader.Text(0));
    RowReader value_reader(*stmt, "_env[" + key + "]");
    ENVFORGE_ASSIGN_OR_RETURN(std::string value, value_reader.Text(1));
    env[key] = std::move(value);
  }
}

Result<EnvManifest> ReadManifest(const std::map<std::string, std::string>& env, std::string* tools_module) {
  for (const char* key :
       {"name", "kind", "category", "description", "format_version", "provenance", "tools_module", "content_hash"}) {
    if (!env.contains(key)) return DataLossError(std::string("_env lacks key '") + key + "'");
  }
  EnvManifest manifest;
  manifest.name = env.at("name");
  manifest.kind = env.at("kind");
  manifest.category = env.at("category");
  manifest.description = env.at("description");
  manifest.content_hash = env.at("content_hash");
  *tools_module = env.at("tools_module");
  if (manifest.name.empty()) return InvalidArgumentError("_env name is empty");
  static const std::set<std::string> kKinds = {"general", "code", "search", "interpreter"};
  if (!kKinds.contains(manifest.kind)) {
    return InvalidArgumentError("_env kind '" + manifest.kind + "' is not one of general, code, search, interpreter");
  }
  auto provenance = ParseJson(env.at("provenance"), "_env provenance");
  if (!provenance.ok()) return DataLossError(provenance.status().message());
  if (!provenance->is_object()) return DataLossError("_env provenance is not a JSON object");
  manifest.provenance = std::move(*provenance);
  if (!IsHexDigest(manifest.content_hash)) {
    return DataLossError("_env content_hash '" + manifest.content_hash + "' is not a SHA-256 hex digest");
  }
  return manifest;
}

Result<std::vector<ToolRecord>> ReadTools(Database& db, const std::string& kind) {
  auto stmt = db.Prepare(
      "SELECT position, name, description, input_schema, source, builtin FROM _tools ORDER BY position, name");
  if (!stmt.ok()) return DataLossError(stmt.status().message());
  std::vector<ToolRecord> tools;
  std::set<int64_t> positions;
  bool has_submit = false;
  while (true) {
    auto row = stmt->Step();
    if (!row.ok()) return DataLossError(row.status().message());
    if (!*row) break;
    ENVFORGE_ASSIGN_OR_RETURN(std::string name, RowReader(*stmt, "_tools").Text(1));
    RowReader reader(*stmt, "_tools[" + name + "]");
    ENVFORGE_ASSIGN_OR_RETURN(int64_t position, reader.Integer(0));
    ENVFORGE_ASSIGN_OR_RETURN(int64_t builtin, reader.Integer(5));
    ToolRecord tool;
    tool.spec.name = name;
    ENVFORGE_ASSIGN_OR_RETURN(tool.spec.description, reader.Text(2));
    ENVFORGE_ASSIGN_OR_RETURN(tool.spec.input_schema, reader.JsonColumn(3, /*nullable=*/false, /*object=*/true));
    ENVFORGE_ASSIGN_OR_RETURN(tool.source, reader.Text(4));
    if (!toolsets::IsValidToolName(name)) return InvalidArgumentError("_tools: invalid tool name '" + name + "'");
    if (!positions.insert(position).second) {
      return DataLossError(reader.where() + ": position " + std::to_string(position) + " is used twice");
    }
    if (builtin != 0 && builtin != 1) return DataLossError(reader.where() + ".builtin is not 0 or 1");
    tool.builtin = builtin == 1;
    bool is_submit = name == toolsets::kSubmitResultTool;
    // Runtime tools: submit_result everywhere, the kernel tools of interpreter environments,
    // the working-copy tools of code environments and the search tools of search environments.
    bool is_runtime = is_submit || (kind == "interpreter" && toolsets::IsInterpreterTool(name)) ||
                      (kind == "code" && toolsets::IsCodeTool(name)) ||
                      (kind == "search" && toolsets::IsSearchTool(name));
    if (tool.builtin != is_runtime) {
      return InvalidArgumentError(reader.where() +
                                  (is_runtime ? " must be builtin" : " is marked builtin but is not a runtime tool"));
    }
    has_submit = has_submit || is_submit;
    Status schema = toolsets::CheckSchema(tool.spec.input_schema);
    if (!schema.ok()) return InvalidArgumentError(reader.where() + ".input_schema: " + schema.message());
    tools.push_back(std::move(tool));
  }
  if (!has_submit) return DataLossError("_tools lacks the builtin submit_result");
  return tools;
}

Result<std::vector<TaskRecord>> ReadTasks(Database& db) {
  auto stmt = db.Prepare(
      "SELECT id, prompt, answer_schema, solution_source, verifier_source, oracle_source, difficulty, knobs,"
      " version, passk, audit FROM _tasks ORDER BY id");
  if (!stmt.ok()) return DataLossError(stmt.status().message());
  std::vector<TaskRecord> tasks;
  while (true) {
    auto row = stmt->Step();
    if (!row.ok()) return DataLossError(row.status().message());
    if (!*row) break;
    TaskRecord task;
    ENVFORGE_ASSIGN_OR_RETURN(task.id, RowReader(*stmt, "_tasks").Text(0));
    RowReader reader(*stmt, "_tasks[" + task.id + "]");
    ENVFORGE_ASSIGN_OR_RETURN(task.prompt, reader.Text(1));
    ENVFORGE_ASSIGN_OR_RETURN(task.answer_schema, reader.JsonColumn(2, false, true));
    ENVFORGE_ASSIGN_OR_RETURN(task.solution_source, reader.Text(3));
    ENVFORGE_ASSIGN_OR_RETURN(task.verifier_source, reader.Text(4));
    ENVFORGE_ASSIGN_OR_RETURN(task.oracle_source, reader.NullableText(5));
    ENVFORGE_ASSIGN_OR_RETURN(int64_t difficulty, reader.Integer(6));
    if (difficulty < 1 || difficulty > 5) {
      return InvalidArgumentError(reader.where() + ".difficulty " + std::to_string(difficulty) + " is not in 1..5");
    }
    task.difficulty = static_cast<int>(difficulty);
    ENVFORGE_ASSIGN_OR_RETURN(task.knobs, reader.JsonColumn(7, false, true));
    ENVFORGE_ASSIGN_OR_RETURN(task.version, reader.Text(8));
    ENVFORGE_ASSIGN_OR_RETURN(Json passk, reader.JsonColumn(9, true, false));
    (void)passk;  // not part of TaskRecord; checked so that a later stage's damage is caught here
    ENVFORGE_ASSIGN_OR_RETURN(task.audit, reader.JsonColumn(10, true, false));
    Status schema = toolsets::CheckSchema(task.answer_schema);
    if (!schema.ok()) return InvalidArgumentError(reader.where() + ".answer_schema: " + schema.message());
    tasks.push_back(std::move(task));
  }
  return tasks;
}

Result<EnvBundle> LoadOpen(const std::string& path, Database& db) {
  ENVFORGE_RETURN_IF_ERROR(QuickCheck(db));
  // The format version decides what else to expect, so it is read before anything else.
  ENVFORGE_ASSIGN_OR_RETURN(auto env, ReadEnvTable(db));
  auto version = env.find("format_version");
  if (version == env.end()) return DataLossError("_env lacks key 'format_version'");
  if (version->second != std::to_string(kBundleFormatVersion)) {
    return InvalidArgumentError("unsupported format_version '" + version->second + "' (this build reads " +
                                std::to_string(kBundleFormatVersion) + ")");
  }
  for (const auto& table : ReservedColumns()) ENVFORGE_RETURN_IF_ERROR(CheckTableColumns(db, table));

  EnvBundle bundle;
  bundle.path = path;
  ENVFORGE_ASSIGN_OR_RETURN(bundle.manifest, ReadManifest(env, &bundle.tools_module));
  ENVFORGE_ASSIGN_OR_RETURN(bundle.tools, ReadTools(db, bundle.manifest.kind));
  ENVFORGE_ASSIGN_OR_RETURN(bundle.tasks, ReadTasks(db));

  ENVFORGE_ASSIGN_OR_RETURN(std::string computed, internal::ContentHashOf(db));
  if (computed != bundle.manifest.content_hash) {
    return DataLossError("content hash mismatch: recorded " + bundle.manifest.content_hash + ", computed " + computed);
  }
  for (const TaskRecord& task : bundle.tasks) {
    std::string expected = TaskVersion(computed, task);
    if (task.version != expected) {
      return DataLossError("task '" + task.id + "' version mismatch: recorded " + task.version + ", computed " +
                           expected);
    }
  }
  return bundle;
}

}  // namespace

namespace internal {

Result<std::string> ContentHashOf(Database& db) {
  Sha256 hasher;
  hasher.UpdateField("envforge-bundle-content-v1");
  ENVFORGE_RETURN_IF_ERROR(HashDataTables(db, hasher));

  hasher.UpdateField("_env");
  ENVFORGE_RETURN_IF_ERROR(HashRows(db, hasher, "SELECT key, value FROM _env WHERE key <> 'content_hash' ORDER BY key",
                                    [](const Statement& stmt, int column, SqlValue& value) -> Status {
                                      if (column != 1 || stmt.ColumnText(0) != "provenance") return Status::Ok();
                                      auto provenance = ParseJson(stmt.ColumnText(1), "_env provenance");
                                      if (!provenance.ok()) return DataLossError(provenance.status().message());
                                      if (provenance->is_object()) provenance->erase("source_dir");
                                      value = DumpJson(*provenance);
                                      return Status::Ok();
                                    }));
  hasher.UpdateField("_tools");
  ENVFORGE_RETURN_IF_ERROR(HashRows(
      db, hasher,
      "SELECT position, name, description, input_schema, source, builtin FROM _tools ORDER BY position, name"));
  hasher.UpdateField("_tasks");
  ENVFORGE_RETURN_IF_ERROR(
      HashRows(db, hasher,
               "SELECT id, prompt, answer_schema, solution_source, verifier_source, oracle_source, difficulty, knobs"
               " FROM _tasks ORDER BY id"));
  hasher.UpdateField("_files");
  ENVFORGE_RETURN_IF_ERROR(HashRows(db, hasher, "SELECT path, data FROM _files ORDER BY path"));
  // Code environments' instances (sandbox/code/code_bundle.h), not their validation results. A
  // bundle without the table hashes as it always did.
  auto code_table = db.Prepare("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = '_code'");
  if (!code_table.ok()) return DataLossError(code_table.status().message());
  auto has_code = code_table->Step();
  if (!has_code.ok()) return DataLossError(has_code.status().message());
  if (*has_code) {
    hasher.UpdateField("_code");
    ENVFORGE_RETURN_IF_ERROR(HashRows(db, hasher, "SELECT task_id, instance FROM _code ORDER BY task_id"));
  }
  return hasher.FinishHex();
}

}  // namespace internal

Result<EnvBundle> EnvBundle::Load(const std::string& path) {
  Status header = CheckFileHeader(path);
  if (!header.ok()) return header.WithContext(path);
  auto db = Database::Open(path, Database::Mode::kReadOnly);
  if (!db.ok()) return db.status().WithContext(path);
  auto bundle = LoadOpen(path, *db);
  if (!bundle.ok()) return bundle.status().WithContext(path);
  return bundle;
}

const TaskRecord* EnvBundle::FindTask(const std::string& id) const {
  auto it = std::lower_bound(tasks.begin(), tasks.end(), id,
                             [](const TaskRecord& task, const std::string& key) { return task.id < key; });
  return it != tasks.end() && it->id == id ? &*it : nullptr;
}

const ToolRecord* EnvBundle::FindTool(const std::string& name) const {
  for (const ToolRecord& tool : tools) {
    if (tool.spec.name == name) return &tool;
  }
  return nullptr;
}

Json EnvBundle::ToJson() const {
  Json manifest_json = {
      {"name", manifest.name},
      {"kind", manifest.kind},
      {"category", manifest.category},
      {"description", manifest.description},
      {"format_version", manifest.format_version},
      {"provenance", manifest.provenance},
      {"content_hash", manifest.content_hash},
  };
  Json tools_json = Json::array();
  for (const ToolRecord& tool : tools) tools_json.push_back(toolsets::ToJson(tool.spec));
  Json tasks_json = Json::array();
  for (const TaskRecord& task : tasks) {
    tasks_json.push_back({
        {"id", task.id},
        {"prompt", task.prompt},
        {"difficulty", task.difficulty},
        {"knobs", task.knobs},
        {"answer_schema", task.answer_schema},
        {"version", task.version},
        {"has_oracle", !task.oracle_source.empty()},
        {"audit", AuditStatus(task)},
    });
  }
  return {{"manifest", std::move(manifest_json)},
          {"tools", std::move(tools_json)},
          {"tasks", std::move(tasks_json)},
          {"hash", manifest.content_hash}};
}

Json AuditStatus(const TaskRecord& task) {
  if (!task.audit.is_object()) return nullptr;
  auto text = [&](const char* key) {
    auto it = task.audit.find(key);
    return it != task.audit.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  std::string version = text("verifier_version");
  return Json{{"verdict", text("verdict")}, {"verifier_version", version}, {"current", version == task.version}};
}

Status StoreTaskAudit(const std::string& envdb_path, const std::string& task_id, const Json& audit) {
  if (!audit.is_object()) return InvalidArgumentError("task audit must be a JSON object");
  Status header = CheckFileHeader(envdb_path);
  if (!header.ok()) return header.WithContext(envdb_path);
  auto db = Database::Open(envdb_path, Database::Mode::kReadWrite);
  if (!db.ok()) return db.status().WithContext(envdb_path);
  auto transaction = Transaction::Begin(*db);
  if (!transaction.ok()) return transaction.status().WithContext(envdb_path);
  auto stmt = db->Prepare("UPDATE _tasks SET audit = ? WHERE id = ?");
  if (!stmt.ok()) return stmt.status().WithContext(envdb_path);
  ENVFORGE_RETURN_IF_ERROR(stmt->BindAll({DumpJson(audit), task_id}));
  Status run = stmt->Run();
  if (!run.ok()) return run.WithContext(envdb_path);
  if (db->Changes() != 1) return NotFoundError(envdb_path + ": no task '" + task_id + "'");
  Status committed = transaction->Commit();
  if (!committed.ok()) return committed.WithContext(envdb_path);
  return Status::Ok();
}

Result<std::string> ComputeContentHash(const std::string& envdb_path) {
  Status header = CheckFileHeader(envdb_path);
  if (!header.ok()) return header.WithContext(envdb_path);
  auto db = Database::Open(envdb_path, Database::Mode::kReadOnly);
  if (!db.ok()) return db.status().WithContext(envdb_path);
  for (const auto& table : ReservedColumns()) {
    Status columns = CheckTableColumns(*db, table);
    if (!columns.ok()) return columns.WithContext(envdb_path);
  }
  auto hash = internal::ContentHashOf(*db);
  if (!hash.ok()) return hash.status().WithContext(envdb_path);
  return hash;
}

std::string TaskVersion(const std::string& content_hash, const TaskRecord& task) {
  Sha256 hasher;
  hasher.UpdateField(content_hash);
  hasher.UpdateField(task.prompt);
  hasher.UpdateField(task.solution_source);
  hasher.UpdateField(task.verifier_source);
  return hasher.FinishHex();
}

}  // namespace envforge::sandbox
