#include "base/sqlite.h"

#include <sqlite3.h>

#include <cstring>

namespace envforge {
namespace {

Status SqliteError(sqlite3* db, std::string_view what, int rc) {
  std::string message(what);
  message += ": ";
  message += db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  int primary = rc & 0xff;
  if (primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB) return DataLossError(std::move(message));
  if (primary == SQLITE_CANTOPEN) return NotFoundError(std::move(message));
  if (primary == SQLITE_CONSTRAINT || primary == SQLITE_ERROR || primary == SQLITE_RANGE ||
      primary == SQLITE_READONLY || primary == SQLITE_MISMATCH)
    return InvalidArgumentError(std::move(message));
  if (primary == SQLITE_NOMEM || primary == SQLITE_FULL) return ResourceExhaustedError(std::move(message));
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) return UnavailableError(std::move(message));
  return InternalError(std::move(message));
}

}  // namespace

Result<Database> Database::Open(const std::string& path, Mode mode) {
  int flags = SQLITE_OPEN_NOMUTEX;
  switch (mode) {
    case Mode::kReadOnly: flags |= SQLITE_OPEN_READONLY; break;
    case Mode::kReadWrite: flags |= SQLITE_OPEN_READWRITE; break;
    case Mode::kReadWriteCreate: flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE; break;
  }
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    Status status = SqliteError(db, "cannot open " + path, rc);
    sqlite3_close(db);
    return status;
  }
  sqlite3_extended_result_codes(db, 1);
  return Database(db);
}

Result<Database> Database::OpenInMemory() { return Open(":memory:", Mode::kReadWriteCreate); }

Result<Database> Database::Deserialize(std::string_view image, bool read_only) {
  ENVFORGE_ASSIGN_OR_RETURN(Database db, OpenInMemory());
  if (image.empty()) return DataLossError("database image is empty");
  auto* buffer = static_cast<unsigned char*>(sqlite3_malloc64(image.size()));
  if (buffer == nullptr) return ResourceExhaustedError("out of memory copying a database image");
  std::memcpy(buffer, image.data(), image.size());
  unsigned flags =
      SQLITE_DESERIALIZE_FREEONCLOSE | (read_only ? SQLITE_DESERIALIZE_READONLY : SQLITE_DESERIALIZE_RESIZEABLE);
  int rc = sqlite3_deserialize(db.db_, "main", buffer, static_cast<sqlite3_int64>(image.size()),
                               static_cast<sqlite3_int64>(image.size()), flags);
  if (rc != SQLITE_OK) return SqliteError(db.db_, "cannot load database image", rc);
  // Deserialize accepts any bytes; touching the schema is what detects a bad image.
  ENVFORGE_ASSIGN_OR_RETURN(Statement probe, db.Prepare("SELECT count(*) FROM sqlite_schema"));
  auto stepped = probe.Step();
  if (!stepped.ok()) return DataLossError("database image is corrupt or truncated: " + stepped.status().message());
  return db;
}

Database::Database(Database&& other) noexcept : db_(other.db_) { other.db_ = nullptr; }
Database& Database::operator=(Database&& other) noexcept {
  if (this != &other) {
    if (db_) sqlite3_close_v2(db_);
    db_ = other.db_;
    other.db_ = nullptr;
  }
  return *this;
}
Database::~Database() {
  if (db_) sqlite3_close_v2(db_);
}

Status Database::Exec(std::string_view sql) {
  std::string owned(sql);
  char* error = nullptr;
  int rc = sqlite3_exec(db_, owned.c_str(), nullptr, nullptr, &error);
  if (rc != SQLITE_OK) {
    std::string message = error ? error : sqlite3_errstr(rc);
    sqlite3_free(error);
    Status base = SqliteError(nullptr, "SQL failed", rc);
    return Status(base.code(), "SQL failed: " + message);
  }
  return Status::Ok();
}

Result<Statement> Database::Prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) return SqliteError(db_, "cannot prepare '" + std::string(sql) + "'", rc);
  if (stmt == nullptr) return InvalidArgumentError("empty SQL statement");
  return Statement(db_, stmt, std::string(sql));
}

Result<std::string> Database::Serialize(const char* schema) {
  sqlite3_int64 size = 0;
  unsigned char* bytes = sqlite3_serialize(db_, schema, &size, 0);
  if (bytes == nullptr) {
    if (size == 0) {
      // An empty database serializes to nothing; a database of zero pages is valid.
      return std::string();
    }
    return ResourceExhaustedError("cannot serialize database");
  }
  std::string image(reinterpret_cast<const char*>(bytes), static_cast<size_t>(size));
  sqlite3_free(bytes);
  return image;
}

Status Database::BackupTo(const std::string& path) {
  ENVFORGE_ASSIGN_OR_RETURN(Database target, Open(path, Mode::kReadWriteCreate));
  sqlite3_backup* backup = sqlite3_backup_init(target.db_, "main", db_, "main");
  if (backup == nullptr) return SqliteError(target.db_, "cannot start backup to " + path, SQLITE_ERROR);
  int rc = sqlite3_backup_step(backup, -1);
  sqlite3_backup_finish(backup);
  if (rc != SQLITE_DONE) return SqliteError(target.db_, "backup to " + path + " failed", rc);
  return Status::Ok();
}

int64_t Database::LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }
int Database::Changes() const { return sqlite3_changes(db_); }

Statement::Statement(Statement&& other) noexcept : db_(other.db_), stmt_(other.stmt_), sql_(std::move(other.sql_)) {
  other.stmt_ = nullptr;
}
Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    if (stmt_) sqlite3_finalize(stmt_);
    db_ = other.db_;
    stmt_ = other.stmt_;
    sql_ = std::move(other.sql_);
    other.stmt_ = nullptr;
  }
  return *this;
}
Statement::~Statement() {
  if (stmt_) sqlite3_finalize(stmt_);
}

Status Statement::Error(std::string_view what) const {
  return SqliteError(db_, std::string(what) + " in '" + sql_ + "'", sqlite3_errcode(db_));
}

Status Statement::Bind(int index, const SqlValue& value) {
  int rc = SQLITE_OK;
  if (std::holds_alternative<std::monostate>(value)) {
    rc = sqlite3_bind_null(stmt_, index);
  } else if (auto* i = std::get_if<int64_t>(&value)) {
    rc = sqlite3_bind_int64(stmt_, index, *i);
  } else if (auto* d = std::get_if<double>(&value)) {
    rc = sqlite3_bind_double(stmt_, index, *d);
  } else if (auto* s = std::get_if<std::string>(&value)) {
    rc = sqlite3_bind_text64(stmt_, index, s->data(), s->size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  } else {
    const auto& blob = std::get<std::vector<uint8_t>>(value);
    rc = sqlite3_bind_blob64(stmt_, index, blob.data(), blob.size(), SQLITE_TRANSIENT);
  }
  if (rc != SQLITE_OK) return Error("cannot bind parameter " + std::to_string(index));
  return Status::Ok();
}

Status Statement::BindAll(const std::vector<SqlValue>& values) {
  int expected = sqlite3_bind_parameter_count(stmt_);
  if (static_cast<int>(values.size()) != expected) {
    return InvalidArgumentError("'" + sql_ + "' takes " + std::to_string(expected) + " parameters, " +
                                std::to_string(values.size()) + " given");
  }
  for (size_t i = 0; i < values.size(); ++i) ENVFORGE_RETURN_IF_ERROR(Bind(static_cast<int>(i) + 1, values[i]));
  return Status::Ok();
}

Result<bool> Statement::Step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return Error("step failed");
}

Status Statement::Run() {
  while (true) {
    ENVFORGE_ASSIGN_OR_RETURN(bool row, Step());
    if (!row) return Status::Ok();
  }
}

Status Statement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  return Status::Ok();
}

int Statement::ColumnCount() const { return sqlite3_column_count(stmt_); }
std::string Statement::ColumnName(int column) const {
  const char* name = sqlite3_column_name(stmt_, column);
  return name ? name : "";
}
SqlValue Statement::Column(int column) const {
  switch (sqlite3_column_type(stmt_, column)) {
    case SQLITE_INTEGER: return static_cast<int64_t>(sqlite3_column_int64(stmt_, column));
    case SQLITE_FLOAT: return sqlite3_column_double(stmt_, column);
    case SQLITE_TEXT: return ColumnText(column);
    case SQLITE_BLOB: {
      const auto* data = static_cast<const uint8_t*>(sqlite3_column_blob(stmt_, column));
      int size = sqlite3_column_bytes(stmt_, column);
      return std::vector<uint8_t>(data, data + size);
    }
    default: return std::monostate{};
  }
}
int64_t Statement::ColumnInt(int column) const { return sqlite3_column_int64(stmt_, column); }
double Statement::ColumnDouble(int column) const { return sqlite3_column_double(stmt_, column); }
std::string Statement::ColumnText(int column) const {
  const auto* text = sqlite3_column_text(stmt_, column);
  if (text == nullptr) return std::string();
  return std::string(reinterpret_cast<const char*>(text), static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
}
bool Statement::ColumnIsNull(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }

Result<Transaction> Transaction::Begin(Database& db) {
  ENVFORGE_RETURN_IF_ERROR(db.Exec("BEGIN IMMEDIATE"));
  return Transaction(&db);
}

Transaction::~Transaction() {
  if (db_) (void)db_->Exec("ROLLBACK");
}

Status Transaction::Commit() {
  if (db_ == nullptr) return FailedPreconditionError("transaction already finished");
  Status status = db_->Exec("COMMIT");
  if (status.ok()) db_ = nullptr;
  return status;
}

}  // namespace envforge
