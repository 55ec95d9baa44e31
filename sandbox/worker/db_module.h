// The `_envforge` Python module (C++): the `db` object tools and verifiers use.
//
//   db.query(sql, params=()) -> list[dict]   one statement; params: tuple/list (?) or dict (:name)
//   db.execute(sql, params=()) -> int        rows changed; PermissionError on a read-only db
//   db.last_insert_rowid() -> int
//   db._restore_from(pristine) -> None       the session runtime's, between episodes (below)
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
//
// _restore_from(pristine) (a writable Db; `pristine` the read-only view of the untouched data)
// puts the main database back to the pristine image: cached statements finalized, an open
// transaction rolled back, the image copied into a buffer of SessionDatabaseCapacity and
// deserialized, last_insert_rowid 0. It refuses (RuntimeError) when a statement since the
// connection opened set a PRAGMA (other than reading one or the schema pragmas) or created a
// TEMP object: those outlive the main database, so the next episode would see them.
pybind11::object NewDbObject(sqlite3* db, bool read_only);

// The buffer size of a session database over an image of `image_bytes`: the image and room for
// the session's writes (at least 256 MiB, untouched until written: address space only), fixed,
// so SQLite serves pages by pointer from a buffer that never moves.
size_t SessionDatabaseCapacity(size_t image_bytes);

}  // namespace envforge::sandbox::worker
