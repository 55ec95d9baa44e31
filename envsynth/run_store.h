// The run database of `envforge synth` (RUN.sqlite): the run's configuration and, per
// environment and per candidate task, what each stage did. A run resumes from it after any stop
// (kill -9 included) and `envforge synth report` computes the funnel from it alone.
//
// Keys. An environment is "<category>/<index>" (index: its number in the run, 0-based); a
// candidate is "<environment key>/<lineage>/<level>": lineage j of an environment is one task
// escalated level by level, and each level's version is its own candidate.
//
// Drafts. Every proposal is stored (environments.draft, candidates.draft), so a resumed run never
// asks a proposer again for what it already answered: model proposals are not reproducible.
//
// Durability. The file is in WAL mode with synchronous=FULL; every Put is one transaction, so a
// stop loses at most the stage that was running. Puts replace the row of the same key (no
// duplicates however often a stage is redone).
//
// Versions. run_meta.format_version is kRunFormatVersion; Open refuses any other version with
// FailedPrecondition naming both, and a file that is not a run database (no run_meta) with
// InvalidArgument.
//
// Thread safety: one thread at a time (one SQLite connection).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/json.h"
#include "base/sqlite.h"
#include "base/status.h"

namespace envforge::envsynth {

inline constexpr int kRunFormatVersion = 1;

// Where a candidate stopped: the furthest stage it passed, or the stage that dropped it.
namespace stage {
inline constexpr const char* kProposed = "proposed";  // artefacts written, not validated yet
inline constexpr const char* kVerified = "verified";  // gold solution passes verifier and oracle
inline constexpr const char* kAudited = "audited";    // audit verdict sound
inline constexpr const char* kInBand = "in_band";     // pass rate inside the band (or no filter)
inline constexpr const char* kKept = "kept";          // packed into the output bundle
}  // namespace stage

struct EnvironmentRecord {
  std::string key;  // "<category>/<index>"
  std::string category;
  int64_t index = 0;
  uint64_t seed = 0;
  std::string name;    // the environment's name ("" until proposed)
  std::string status;  // pending | done | failed
  std::string reason;  // why it failed, or ""
  std::string output;  // the kept bundle's path ("" when nothing was kept)
  int64_t kept_tasks = 0;
  double seconds = 0;                  // wall time spent on it, all attempts together
  Json augmentations = Json::array();  // [{"level", "task", "tools": [...]}]
  Json draft;                          // the proposer's EnvironmentDraft (proposer.h, ToJson), null until proposed
  int64_t model_calls = 0;             // spent proposing (and repairing) the environment itself
  int64_t tokens = 0;
};

struct CandidateRecord {
  std::string key;  // "<environment key>/<lineage>/<level>"
  std::string env_key;
  std::string category;
  int64_t lineage = 0;
  int64_t level = 0;
  std::string task_id;
  std::string artifact_hash;  // SHA-256 of the task's sources (prompt, schema, solution, verifier, oracle)
  int64_t attempt = 0;        // the proposal attempt that was validated (repairs = attempt)
  std::string stage;          // the furthest stage passed (namespace stage)
  std::string dropped_at;     // "" when not dropped, else the stage that dropped it:
                              // validation, audit, filter, revalidation, keep
  std::string reason;         // why it was dropped
  Json knobs = Json::object();
  Json validation;          // {"passed", "attribution", "reasons", "repairs": [...]} or null
  Json audit;               // {"verdict", "reasons", "probes", "accepted", "space_size", ...} or null
  Json filter;              // {"decision", "early", "episodes", "passed", "pass_at_k", ...} or null
  double seconds = 0;       // proposal + validation + audit + filter
  int64_t model_calls = 0;  // backend calls spent on it (filter, llm proposer)
  int64_t tokens = 0;       // prompt + generated tokens of those calls
  Json draft;               // the TaskDraft that was validated (proposer.h, ToJson): a resumed
                            // run uses it instead of asking the proposer again
};

struct RunEvent {
  int64_t id = 0;
  double at = 0;  // seconds since the epoch
  std::string env_key;
  std::string candidate_key;  // "" for environment-level events
  std::string kind;           // augment, repair, revalidate, resume, ...
  Json detail;
};

class RunStore {
 public:
  // Creates `path` with `config` (the run's options as JSON). AlreadyExists when the file exists
  // (a run is resumed with Open, never overwritten).
  static Result<RunStore> Create(const std::string& path, const Json& config);
  // Opens an existing run database (errors in the file comment).
  static Result<RunStore> Open(const std::string& path);
  // The same, read-only (the viewer, server/ui_runs.h): the file is never changed, not even its
  // journal mode, and every Put, Delete and AddEvent fails. A run being written may be read.
  static Result<RunStore> OpenReadOnly(const std::string& path);

  const Json& config() const { return config_; }
  const std::string& path() const { return path_; }

  Status PutEnvironment(const EnvironmentRecord& record);
  Result<std::optional<EnvironmentRecord>> GetEnvironment(const std::string& key);
  Result<std::vector<EnvironmentRecord>> Environments();  // by category, then index

  Status PutCandidate(const CandidateRecord& record);
  Result<std::optional<CandidateRecord>> GetCandidate(const std::string& key);
  Result<std::vector<CandidateRecord>> Candidates();  // by environment key, lineage, level

  // Removes an environment's candidates (an environment re-proposed after a repair starts over).
  Status DeleteCandidates(const std::string& env_key);

  Status AddEvent(const RunEvent& event);  // id and at are assigned
  Result<std::vector<RunEvent>> Events();

 private:
  static Result<RunStore> OpenExisting(const std::string& path, bool read_only);
  RunStore(Database db, std::string path, Json config)
      : db_(std::move(db)), path_(std::move(path)), config_(std::move(config)) {}
  Database db_;
  std::string path_;
  Json config_;
};

}  // namespace envforge::envsynth
