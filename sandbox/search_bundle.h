// Search environments as bundles (kind "search"): packing their source directory, and reading
// back what the runtime needs (the backend, the corpus, the answer keys).
//
// The source directory (`envforge env pack DIR` packs it when env.json says kind "search"):
//
//   env.json               {"name", "kind": "search", "category", "description"} (+ "provenance")
//   search.json            optional: the backend, as toolsets/search/search_config.h reads it.
//                          Default {"backend": "offline", "corpus": "corpus.sqlite"}; an offline
//                          corpus path is relative to DIR. A live backend ("brave", ...) names
//                          the variable holding its key, never the key.
//   corpus.sqlite          the offline corpus (toolsets/search/corpus_store.h), e.g. built by
//                          `envforge search corpus build`
//   tasks/<id>/task.json   {"prompt", "answer", "aliases": [...] (optional), "difficulty": 1..5
//                          (optional, 1), "knobs": {...} (optional)}: a question, its answer and
//                          the other forms of the answer that count as right
//   tasks/<id>/solution.json  optional: the recorded solution path (toolsets/search/solution_path.h:
//                          a search, then opens), e.g. written by `envforge search synth`
//
// A search environment's tools are the runtime's (search, open, find: toolsets/search_tools.h)
// and its verdicts normalised exact match (toolsets/search/answer_match.h), so tools.py,
// schema.sql, files/ and task files other than task.json are problems, not silently ignored.
// Other top-level entries (a README, a generator script) are ignored.
//
// The bundle, beside the reserved tables of env_bundle.h:
//   _env      tools_module "" (no Python tools)
//   _tools    search, open, find, submit_result, all builtin
//   _tasks    prompt, answer_schema toolsets::SearchAnswerSchema(), solution_source and
//             verifier_source "" (the runtime solves and judges), difficulty, knobs
//   _files    "search/backend.json": the backend configuration as packed (offline: its "corpus"
//                                     is kCorpusFilePath, the corpus inside the bundle)
//             "search/corpus.sqlite": the offline corpus, a consistent copy of the source's
//             "search/answers/<task id>.json": the task's answer key {"answer", "aliases"}
//             "search/solutions/<task id>.json": the task's solution path, when it has one
// The worker drops _files from the image its sessions see, so no session code can read an answer.
// All of it enters the content hash, so a changed corpus or answer is a new environment version.
//
// Budgets: PackOptions::max_bytes bounds the corpus; no environment SQL or Python runs (the corpus
// is only opened read-only and copied), so max_time and the analysis have nothing to bound here.
// The corpus is held in memory twice while packing and once per opening manager while extracting:
// fine for the fixture and Debian-sized corpora (hundreds of MB), not for much larger ones.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "base/json.h"
#include "base/status.h"
#include "toolsets/search/answer_match.h"
#include "toolsets/search/search_config.h"
#include "toolsets/search/solution_path.h"

namespace envforge::sandbox {

inline constexpr const char* kSearchBackendFilePath = "search/backend.json";
inline constexpr const char* kCorpusFilePath = "search/corpus.sqlite";

// True when source_dir/env.json is a JSON object whose "kind" is "search" (false for anything
// else, a missing or malformed env.json included: the general packer reports those).
bool IsSearchEnvironmentSource(const std::string& source_dir);

// Fills the empty SQLite file bundle_path (created by PackEnvironment) from a search source
// directory. provenance is laid over env.json's (its keys win); "source_dir" is added unless
// provenance has one. Checks
// everything before writing; InvalidArgument lists every problem ("cannot pack DIR: N problems"
// then one "path: message" a line): env.json's fields, search.json (ParseSearchConfig's message),
// a corpus that is missing, not a corpus, empty, or larger than max_bytes, task ids, task.json's
// fields, answers and aliases that are not valid answer keys, entries a search environment may
// not have. Other errors: the database's.
Status PackSearchEnvironmentInto(const std::string& source_dir, const std::string& bundle_path, const Json& provenance,
                                 uint64_t max_bytes);

struct SearchBundle {
  // The backend. Offline: corpus is kCorpusFilePath, which names the bundle's copy (see
  // ExtractSearchCorpus), not a file.
  search::SearchBackendConfig backend;
  std::map<std::string, search::AnswerKey> answers;       // by task id; every task has one
  std::map<std::string, search::SolutionPath> solutions;  // by task id; only tasks that have one
};

// Reads the backend, the answer keys and the solution paths of a search bundle. Errors: NotFound
// (no such file), DataLoss naming the entry (no backend.json, a malformed one, a task without its
// answer key, a malformed solution path).
Result<SearchBundle> LoadSearchBundle(const std::string& envdb_path);

// Writes the bundle's corpus to `path` (replacing it). NotFound when the bundle holds no corpus
// (a live backend); the I/O errors of writing.
Status ExtractSearchCorpus(const std::string& envdb_path, const std::string& path);

}  // namespace envforge::sandbox
