// The zygote's in-memory image of an environment bundle (sandbox/env_bundle.h schema).
//
// The data tables are loaded into two in-memory SQLite databases that every session inherits
// through fork() (copy-on-write: no per-session copy is ever made):
//   session_db   writable; the tools' `db`. Its buffer reserves room to grow without a realloc,
//                so SQLite reads pages straight from it (memory-mapped fetch) instead of filling
//                a private page cache in every session.
//   verifier_db  read-only (PRAGMA query_only) view of the same pristine data, for verifiers.
// The reserved tables (_env, _tools, _tasks, _files) are dropped and the image vacuumed before
// either database exists, so no tool can read a verifier, a solution or a prompt.
#pragma once

#include <string>

#include "base/sqlite.h"
#include "base/status.h"
#include "sandbox/worker/python_host.h"

namespace envforge::sandbox::worker {

struct BundleImage {
  RuntimeEnvironment environment;
  Database session_db;
  Database verifier_db;
  size_t data_bytes = 0;  // size of the pristine data image
};

// InvalidArgument/DataLoss/NotFound naming `path` and what is wrong: not SQLite, a reserved table
// or column missing, an unknown format_version, no tools_module, an input_schema that is not a
// JSON object.
Result<BundleImage> LoadBundleImage(const std::string& path);

}  // namespace envforge::sandbox::worker
