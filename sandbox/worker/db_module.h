// The `_envforge` Python module (C++): the `db` object tools and verifiers use.
//
//   db.query(sql, params=()) -> list[dict]   one statement; params: tuple/list (?) or dict (:name)
//   db.execute(sql, params=()) -> int        rows changed; PermissionError on a read-only db
//   db.last_insert_rowid() -> int
// SQLite errors become Python exceptions carrying SQLite's message: _envforge.OperationalError
// (bad SQL, missing table), IntegrityError (constraints), ProgrammingError (misuse: several
// statements, wrong bindings), PermissionError (writes to a read-only db), MemoryError. A
// pending Python signal (the session's wall-time alarm) interrupts a running statement and its
// exception propagates.
#pragma once

#include <pybind11/pybind11.h>
#include <sqlite3.h>

namespace envforge::sandbox::worker {

// A new `_envforge.Db` over `db` (not owned; must outlive the object). Every Db refuses ATTACH
// and DETACH. read_only (the verifiers' view) allows reads only: execute() raises
// PermissionError without touching SQLite, and query() refuses, when the statement is prepared
// (PermissionError "not authorized"), anything but SELECT/WITH reads and the schema pragmas
// (table_info, table_xinfo, table_list, index_list, index_info, index_xinfo, foreign_key_list):
// no write, no CREATE (TEMP tables and views included), no transaction, no other PRAGMA
// (query_only=0), so a judgement cannot change what the next one reads.
pybind11::object NewDbObject(sqlite3* db, bool read_only);

}  // namespace envforge::sandbox::worker
