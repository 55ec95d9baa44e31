// RAII wrapper over SQLite: connections, prepared statements, transactions and in-memory images.
//
// Thread safety: a Database and its Statements belong to one thread at a time (SQLite is built
// in serialized mode by Debian, but envforge never shares a connection between threads).
// Errors: every call that can fail returns Status/Result whose message carries SQLite's own
// message and, for statements, the SQL that failed.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace envforge {

// A value as SQLite stores it.
using SqlValue = std::variant<std::monostate, int64_t, double, std::string, std::vector<uint8_t>>;

class Statement;

class Database {
 public:
  enum class Mode { kReadOnly, kReadWrite, kReadWriteCreate };

  // Opens a file. kReadWriteCreate creates it when missing.
  static Result<Database> Open(const std::string& path, Mode mode);
  // A private, empty in-memory database.
  static Result<Database> OpenInMemory();
  // An in-memory database holding a copy of `image` (a whole database file's bytes). With
  // read_only the connection refuses writes. A truncated or non-SQLite image is DataLoss.
  static Result<Database> Deserialize(std::string_view image, bool read_only);

  Database(Database&&) noexcept;
  Database& operator=(Database&&) noexcept;
  ~Database();

  // Runs one or more SQL statements with no parameters and no results (e.g. a schema script).
  Status Exec(std::string_view sql);
  Result<Statement> Prepare(std::string_view sql);
  // The whole database as the bytes of a database file (for main, or the given schema).
  Result<std::string> Serialize(const char* schema = "main");
  // Copies this database into the file at `path` with the online backup API.
  Status BackupTo(const std::string& path);

  int64_t LastInsertRowId() const;
  int Changes() const;
  sqlite3* handle() const { return db_; }

 private:
  explicit Database(sqlite3* db) : db_(db) {}
  sqlite3* db_ = nullptr;
};

class Statement {
 public:
  Statement(Statement&&) noexcept;
  Statement& operator=(Statement&&) noexcept;
  ~Statement();

  // Binding positions start at 1, as in SQLite.
  Status Bind(int index, const SqlValue& value);
  Status BindAll(const std::vector<SqlValue>& values);
  // Advances; true when a row is available, false when done.
  Result<bool> Step();
  // Runs to completion, ignoring rows.
  Status Run();
  Status Reset();

  int ColumnCount() const;
  std::string ColumnName(int column) const;
  SqlValue Column(int column) const;
  int64_t ColumnInt(int column) const;
  double ColumnDouble(int column) const;
  std::string ColumnText(int column) const;
  bool ColumnIsNull(int column) const;

 private:
  friend class Database;
  Statement(sqlite3* db, sqlite3_stmt* stmt, std::string sql) : db_(db), stmt_(stmt), sql_(std::move(sql)) {}
  Status Error(std::string_view what) const;
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  std::string sql_;
};

// BEGIN IMMEDIATE on construction; ROLLBACK in the destructor unless Commit() succeeded.
class Transaction {
 public:
  static Result<Transaction> Begin(Database& db);
  Transaction(Transaction&& other) noexcept : db_(other.db_) { other.db_ = nullptr; }
  Transaction& operator=(Transaction&&) = delete;
  ~Transaction();
  Status Commit();

 private:
  explicit Transaction(Database* db) : db_(db) {}
  Database* db_;
};

}  // namespace envforge
