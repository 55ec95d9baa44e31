// Packing: turns an environment source directory into one bundle file (*.envdb), the format of
// sandbox/env_bundle.h (ARCHITECTURE.md, "The environment bundle").
//
// The source directory:
//
//   env.json                 {"name", "kind", "category", "description"} (+ optional "provenance")
//   schema.sql               the data tables and their rows (CREATE TABLE ...; INSERT ...)
//   tools.py                 public module-level functions are the tools
//   tasks/<id>/task.json     {"prompt", "answer_schema", "difficulty", "knobs"}
//   tasks/<id>/solution.py   def solve(tools) -> answer; for kind interpreter, notebook code run
//                            in the task's kernel that leaves the answer in a variable `answer`
//   tasks/<id>/verifier.py   def verify(answer, db) -> bool | {"passed", "score", "reasons"}
//   tasks/<id>/oracle.py     optional: an independent second verifier, def verify(answer, db)
//   files/**                 optional blobs, stored in _files under their path below files/
//
// A directory whose env.json says kind "search" has a layout of its own (a corpus or a backend
// configuration, and tasks that are questions with answers): sandbox/search_bundle.h packs it,
// with the temporary file, publication and self-check below.
//
// Other top-level entries (a generator script, a README) are ignored; inside tasks/ and a task
// directory every entry must be one of the above (a misspelt "orcale.py" is an error, not a
// silently missing oracle). Outside files/, entries whose names start with "." and __pycache__
// directories are ignored; files/ is packed as it is (dotfiles included).
//
// Checks, all of them before anything is written, every problem collected and reported at once:
//   * env.json: an object with the string fields name ([A-Za-z0-9_.-]+), kind (general | code |
//     search | interpreter), category (non-empty) and description, an optional provenance
//     object, and no other key (unknown keys are named).
//   * task ids match [A-Za-z0-9_.-]+; task.json has exactly prompt (non-empty string),
//     answer_schema (an object passing toolsets::CheckSchema), difficulty (integer 1..5) and
//     knobs (object); solution.py and verifier.py are present.
//   * every source is UTF-8 text; files/ holds only regular files and directories (no links).
//   * `envforge-worker analyze` (static analysis: tool specs from tools.py, forbidden imports and
//     calls in solutions, verifiers and oracles) reports no problem; tools.py defines at least
//     one tool, none named submit_result, and every tool's inputSchema passes CheckSchema.
//     Kind interpreter: tools.py may define none and may not define execute, interrupt or
//     restart (the builtin kernel tools, toolsets/interpreter_tools.h, which packing adds to
//     _tools before submit_result); its solutions run in the sandboxed kernel, not in the
//     worker, so the worker's rules for solutions do not apply to them.
//   * schema.sql runs (one transaction; BEGIN/COMMIT/END statements in it are ignored, which
//     accepts the output of sqlite3's .dump; ATTACH, DETACH, VACUUM, ROLLBACK and every PRAGMA
//     but foreign_keys are refused) and creates no object whose name starts with "_".
// A failure of these is InvalidArgument whose message lists every problem, one per line, as
// "path:line: message" (path relative to the source directory; line omitted when unknown).
//
// Budgets (PackOptions::max_time, max_bytes; `envforge env pack --max-seconds / --max-bytes`):
// packing runs the environment's SQL and reads its files, so it is bounded like any untrusted work.
//   * time: one deadline for the whole pack. SQLite's progress handler interrupts any statement
//     running past it (a recursive CTE that never ends, in schema.sql or later), and the
//     analysis run gets at most the time left. Spent in schema.sql, the problem is
//     "schema.sql:LINE: the time budget of N s (--max-seconds) was spent running this statement".
//   * size: the bundle file may not grow past max_bytes (SQLite's max_page_count): a huge INSERT
//     stops with "schema.sql:LINE: the size budget of N bytes (--max-bytes) was spent ...".
//     Sources and files/ are measured before they are read; together they must fit in it too.
// A spent budget is InvalidArgument (the environment does not fit the budgets), with the message
// format of the other problems; it stops the pack at once.
//
// Writing: the bundle is built in "<output>.tmp.<pid>.<random>" beside the output, fsynced and
// renamed over the output; the directory is fsynced after the rename. Every exit path removes the
// temporary file: failures and spent budgets (the owner's destructor, exceptions included),
// SIGINT/SIGTERM/SIGHUP (the path is in base/cleanup_registry.h's registry, whose handlers a
// command-line program installs), and SIGKILL: every pack first sweeps "*.tmp.<pid>.<n>" entries
// of the output directory (and their "-journal") whose process no longer exists, when their name
// is the output's or ends in ".envdb". A failed pack leaves the output as it was (absent, or the
// previous bundle).
//
// Provenance (_env.provenance): env.json's "provenance" object, then PackOptions::provenance
// on top (its keys win), then "source_dir": the absolute path of the source directory, unless
// PackOptions::provenance names one itself (null for a source that is not kept). The
// content hash leaves source_dir out, so packing the same sources from two checkouts gives the
// same version; every other provenance key is part of the hash.
//
// Errors: NotFound (source directory missing), InvalidArgument (the problems above, a spent
// budget, or a budget that is not positive),
// Internal (envforge-worker missing, failing, timing out or printing something that is not the
// analyze reply; the message carries its stderr), and the I/O errors of writing the output.
//
// Thread safety: PackEnvironment may run concurrently for distinct outputs. It starts one child
// process (the worker) and needs python3 only through that worker.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "base/json.h"
#include "base/status.h"

namespace envforge::sandbox {

struct PackOptions {
  // Merged over env.json's "provenance" (keys here win), e.g. {"generator": "envsynth",
  // "model": "deepseek-v3.2", "seed": 7}. Must be an object. A "source_dir" here replaces the
  // packed directory's path (null: a temporary source, gone once packed).
  Json provenance = Json::object();
  // The envforge-worker executable to run `analyze` with; empty: FindWorkerExecutable().
  std::string worker_path;
  // Wall-clock limit of the analyze run; past it the worker is killed and packing fails. The run
  // gets the smaller of this and what is left of max_time.
  std::chrono::milliseconds analyze_timeout{std::chrono::seconds(60)};
  // The budgets of the file comment: the whole pack's wall time, and the bundle's size in bytes.
  std::chrono::milliseconds max_time{std::chrono::minutes(5)};
  uint64_t max_bytes = uint64_t{1} << 30;
};

// Packs `source_dir` into the bundle file `output_path` (replacing it atomically on success).
Status PackEnvironment(const std::string& source_dir, const std::string& output_path, const PackOptions& options = {});

struct EnvBundle;

// Runs the static analysis of `envforge-worker analyze` again over a loaded bundle's stored
// sources (tools module, solutions, verifiers, oracles) and checks that the stored tool specs are
// the ones the stored module defines. Returns every problem as "path:line: message" (empty: all
// good); an error Status only when the analysis itself could not run.
Result<std::vector<std::string>> AnalyzeBundleSources(const EnvBundle& bundle, const PackOptions& options = {});

}  // namespace envforge::sandbox
