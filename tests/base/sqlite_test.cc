#include <doctest/doctest.h>

#include <cstdio>
#include <string>

#include "base/fd.h"
#include "base/sqlite.h"

namespace envforge {
namespace {

TEST_CASE("prepared statements bind, step and read every SQLite type") {
  auto db = Database::OpenInMemory().value();
  REQUIRE(db.Exec("CREATE TABLE t(i INTEGER, r REAL, s TEXT, b BLOB, n)").ok());
  auto insert = db.Prepare("INSERT INTO t VALUES(?, ?, ?, ?, ?)").value();
  REQUIRE(
      insert.BindAll({int64_t{7}, 2.5, std::string("héllo"), std::vector<uint8_t>{1, 0, 2}, std::monostate{}}).ok());
  REQUIRE(insert.Run().ok());
  auto select = db.Prepare("SELECT i, r, s, b, n FROM t").value();
  REQUIRE(select.Step().value());
  CHECK(std::get<int64_t>(select.Column(0)) == 7);
  CHECK(std::get<double>(select.Column(1)) == 2.5);
  CHECK(std::get<std::string>(select.Column(2)) == "héllo");
  CHECK(std::get<std::vector<uint8_t>>(select.Column(3)) == std::vector<uint8_t>{1, 0, 2});
  CHECK(select.ColumnIsNull(4));
  CHECK(select.ColumnName(2) == "s");
  CHECK_FALSE(select.Step().value());
}

TEST_CASE("errors name the SQL and the parameter count") {
  auto db = Database::OpenInMemory().value();
  auto bad = db.Prepare("SELEC 1");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("SELEC 1") != std::string::npos);
  auto stmt = db.Prepare("SELECT ?").value();
  auto wrong = stmt.BindAll({});
  CHECK(wrong.message().find("takes 1 parameters, 0 given") != std::string::npos);
}

TEST_CASE("a transaction rolls back unless committed") {
  auto db = Database::OpenInMemory().value();
  REQUIRE(db.Exec("CREATE TABLE t(x)").ok());
  {
    auto tx = Transaction::Begin(db).value();
    REQUIRE(db.Exec("INSERT INTO t VALUES(1)").ok());
  }
  {
    auto tx = Transaction::Begin(db).value();
    REQUIRE(db.Exec("INSERT INTO t VALUES(2)").ok());
    REQUIRE(tx.Commit().ok());
  }
  auto count = db.Prepare("SELECT group_concat(x) FROM t").value();
  REQUIRE(count.Step().value());
  CHECK(count.ColumnText(0) == "2");
}

TEST_CASE("serialize and deserialize round-trip; read-only images refuse writes; junk is DataLoss") {
  auto db = Database::OpenInMemory().value();
  REQUIRE(db.Exec("CREATE TABLE t(x); INSERT INTO t VALUES('kept')").ok());
  std::string image = db.Serialize().value();
  auto copy = Database::Deserialize(image, /*read_only=*/true).value();
  auto read = copy.Prepare("SELECT x FROM t").value();
  REQUIRE(read.Step().value());
  CHECK(read.ColumnText(0) == "kept");
  CHECK_FALSE(copy.Exec("INSERT INTO t VALUES('no')").ok());

  auto junk = Database::Deserialize(std::string(4096, 'x'), true);
  REQUIRE_FALSE(junk.ok());
  CHECK(junk.status().code() == StatusCode::kDataLoss);
  auto truncated = Database::Deserialize(image.substr(0, 100), true);
  CHECK_FALSE(truncated.ok());
}

TEST_CASE("backup writes a file another connection can open") {
  auto db = Database::OpenInMemory().value();
  REQUIRE(db.Exec("CREATE TABLE t(x); INSERT INTO t VALUES(42)").ok());
  std::string path = "/tmp/envforge_backup_test_" + std::to_string(::getpid()) + ".db";
  REQUIRE(db.BackupTo(path).ok());
  auto reopened = Database::Open(path, Database::Mode::kReadOnly).value();
  auto q = reopened.Prepare("SELECT x FROM t").value();
  REQUIRE(q.Step().value());
  CHECK(q.ColumnInt(0) == 42);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace envforge
