// Loading a bundle into the zygote's two in-memory databases (see bundle_image.h).
#include "sandbox/worker/bundle_image.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstring>

#include "base/json.h"
#include "sandbox/worker/db_module.h"

namespace envforge::sandbox::worker {
namespace {

constexpr int kFormatVersion = 1;

// Hardening shared by both connections: no extension loading, no fts3_tokenizer() pointer
// tricks (Debian builds with SQLITE_ENABLE_FTS3_TOKENIZER), no schema corruption by tools.
void Harden(sqlite3* db) {
  sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, nullptr);
  sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER, 0, nullptr);
  sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
}

Status RequireColumns(Database& db, const std::string& path, const std::string& table,
                      std::initializer_list<const char*> columns) {
  ENVFORGE_ASSIGN_OR_RETURN(Statement info, db.Prepare("SELECT name FROM pragma_table_info('" + table + "')"));
  std::vector<std::string> present;
  for (;;) {
    ENVFORGE_ASSIGN_OR_RETURN(bool row, info.Step());
    if (!row) break;
    present.push_back(info.ColumnText(0));
  }
  if (present.empty())
    return InvalidArgumentError(path + ": not an environment bundle: table " + table + " is missing");
  for (const char* column : columns) {
    if (std::find(present.begin(), present.end(), column) == present.end()) {
      return InvalidArgumentError(path + ": table " + table + " has no column '" + column + "'");
    }
  }
  return Status::Ok();
}

Status ReadReservedTables(Database& db, const std::string& path, RuntimeEnvironment* env) {
  ENVFORGE_RETURN_IF_ERROR(RequireColumns(db, path, "_env", {"key", "value"}));
  ENVFORGE_RETURN_IF_ERROR(RequireColumns(db, path, "_tools", {"position", "name", "input_schema", "builtin"}));
  ENVFORGE_RETURN_IF_ERROR(
      RequireColumns(db, path, "_tasks", {"id", "solution_source", "verifier_source", "version", "oracle_source"}));
  std::string format_version;
  bool has_tools_module = false;
  {
    ENVFORGE_ASSIGN_OR_RETURN(Statement rows, db.Prepare("SELECT key, value FROM _env"));
    for (;;) {
      ENVFORGE_ASSIGN_OR_RETURN(bool row, rows.Step());
      if (!row) break;
      std::string key = rows.ColumnText(0);
      if (key == "format_version") format_version = rows.ColumnText(1);
      if (key == "tools_module") {
        env->tools_module = rows.ColumnText(1);
        has_tools_module = true;
      }
    }
  }
  if (format_version != std::to_string(kFormatVersion)) {
    return InvalidArgumentError(path + ": unsupported format_version '" + format_version + "' (this worker reads " +
                                std::to_string(kFormatVersion) + ")");
  }
  if (!has_tools_module) return InvalidArgumentError(path + ": _env has no tools_module");
  {
    ENVFORGE_ASSIGN_OR_RETURN(Statement tools,
                              db.Prepare("SELECT name, input_schema FROM _tools WHERE builtin = 0 ORDER BY position"));
    for (;;) {
      ENVFORGE_ASSIGN_OR_RETURN(bool row, tools.Step());
      if (!row) break;
      RuntimeTool tool{tools.ColumnText(0), tools.ColumnText(1)};
      auto schema = ParseJson(tool.input_schema);
      if (!schema.ok() || !schema->is_object()) {
        return InvalidArgumentError(path + ": input_schema of tool '" + tool.name + "' is not a JSON object");
      }
      env->tools.push_back(std::move(tool));
    }
  }
  {
    ENVFORGE_ASSIGN_OR_RETURN(Statement tasks, db.Prepare("SELECT id, solution_source, verifier_source, version, "
                                                          "coalesce(oracle_source, '') FROM _tasks ORDER BY id"));
    for (;;) {
      ENVFORGE_ASSIGN_OR_RETURN(bool row, tasks.Step());
      if (!row) break;
      env->tasks.push_back(
          {tasks.ColumnText(0), tasks.ColumnText(1), tasks.ColumnText(2), tasks.ColumnText(3), tasks.ColumnText(4)});
    }
  }
  return Status::Ok();
}

// A writable in-memory database over a copy of `image` with room to grow in place (see header).
Result<Database> OpenSessionDatabase(const std::string& image) {
  ENVFORGE_ASSIGN_OR_RETURN(Database db, Database::OpenInMemory());
  size_t capacity = SessionDatabaseCapacity(image.size());
  auto* buffer = static_cast<unsigned char*>(sqlite3_malloc64(capacity));
  if (buffer == nullptr) return ResourceExhaustedError("out of memory for the session database");
  std::memcpy(buffer, image.data(), image.size());
  // Not RESIZEABLE on purpose: SQLite's in-memory VFS only serves pages by pointer (xFetch)
  // from a buffer that can never move.
  int rc = sqlite3_deserialize(db.handle(), "main", buffer, static_cast<sqlite3_int64>(image.size()),
                               static_cast<sqlite3_int64>(capacity), SQLITE_DESERIALIZE_FREEONCLOSE);
  if (rc != SQLITE_OK) return DataLossError(std::string("cannot load the data image: ") + sqlite3_errstr(rc));
  return db;
}

}  // namespace

Result<BundleImage> LoadBundleImage(const std::string& path) {
  RuntimeEnvironment environment;
  environment.bundle_path = path;
  std::string image;
  {
    auto file = Database::Open(path, Database::Mode::kReadOnly);
    if (!file.ok()) return Status(file.status().code(), path + ": " + file.status().message());
    Status reserved = ReadReservedTables(*file, path, &environment);
    if (!reserved.ok()) {
      // SQLite's own errors (not a database, corrupt) do not name the file yet.
      if (reserved.message().rfind(path, 0) == 0) return reserved;
      return Status(reserved.code(), path + ": " + reserved.message());
    }
    // Serialize reads through SQLite (a WAL the file may have included), not the raw file.
    auto bytes = file->Serialize();
    if (!bytes.ok()) return Status(bytes.status().code(), path + ": " + bytes.status().message());
    image = std::move(*bytes);
  }
  {
    auto scratch = Database::Deserialize(image, false);
    if (!scratch.ok()) return Status(scratch.status().code(), path + ": " + scratch.status().message());
    Status dropped = scratch->Exec(
        "DROP TABLE IF EXISTS _env; DROP TABLE IF EXISTS _tools; DROP TABLE IF EXISTS _tasks;"
        "DROP TABLE IF EXISTS _files; VACUUM;");
    if (!dropped.ok()) return InvalidArgumentError(path + ": cannot strip the reserved tables: " + dropped.message());
    ENVFORGE_ASSIGN_OR_RETURN(image, scratch->Serialize());
  }
  ENVFORGE_ASSIGN_OR_RETURN(Database session_db, OpenSessionDatabase(image));
  auto verifier = Database::Deserialize(image, true);
  if (!verifier.ok()) return Status(verifier.status().code(), path + ": " + verifier.status().message());
  BundleImage result{std::move(environment), std::move(session_db), std::move(*verifier), image.size()};
  for (Database* db : {&result.session_db, &result.verifier_db}) {
    Harden(db->handle());
    // Pages by pointer from the shared image instead of a private page cache per session.
    ENVFORGE_RETURN_IF_ERROR(db->Exec("PRAGMA mmap_size=2147418112"));
    // Parse the schema now, in the zygote, so sessions inherit it instead of each parsing it.
    ENVFORGE_RETURN_IF_ERROR(db->Exec("SELECT count(*) FROM sqlite_schema"));
  }
  ENVFORGE_RETURN_IF_ERROR(result.verifier_db.Exec("PRAGMA query_only=1"));
  return result;
}

}  // namespace envforge::sandbox::worker
