// Bundle internals shared by loading (env_bundle.cc) and packing (env_pack.cc): the reserved
// tables' DDL and the content hash of an open database. Owned by the bundle work.
#pragma once

#include <string>
#include <string_view>

#include "base/sqlite.h"
#include "base/status.h"

namespace envforge::sandbox::internal {

// The reserved tables exactly as sandbox/env_bundle.h describes them.
inline constexpr std::string_view kReservedTablesSql =
    "CREATE TABLE _env(key TEXT PRIMARY KEY, value TEXT NOT NULL);\n"
    "CREATE TABLE _tools(position INTEGER NOT NULL, name TEXT PRIMARY KEY, description TEXT NOT NULL,"
    " input_schema TEXT NOT NULL, source TEXT NOT NULL, builtin INTEGER NOT NULL);\n"
    "CREATE TABLE _tasks(id TEXT PRIMARY KEY, prompt TEXT NOT NULL, answer_schema TEXT NOT NULL,"
    " solution_source TEXT NOT NULL, verifier_source TEXT NOT NULL, oracle_source TEXT,"
    " difficulty INTEGER NOT NULL, knobs TEXT NOT NULL, version TEXT NOT NULL, passk TEXT,"
    " audit TEXT);\n"
    "CREATE TABLE _files(path TEXT PRIMARY KEY, data BLOB NOT NULL);\n";

// The content hash (lower-case hex SHA-256) of a database holding the reserved tables, over the
// canonical dump described in env_bundle.cc. Errors: DataLoss when a table cannot be read or
// _env.provenance is not JSON; the message does not name the file (callers add it).
Result<std::string> ContentHashOf(Database& db);

}  // namespace envforge::sandbox::internal
