// Proposers: what writes an environment's artefacts for the synthesis loop (issue 13). The loop
// (synth_run.h) asks for an environment (database + tool catalogue) and then, lineage by lineage
// and level by level, for tasks; it validates, audits and filters what it gets, and asks again
// (a higher attempt number) when a repair is needed.
//
//   procedural  one seeded generator per category (envsynth/procedural/cat_<id>.py, run by
//               procedural_proposer.h); offline and deterministic: the same request gives the
//               same artefacts, which is what lets a stopped run resume by re-proposing.
//   llm         any inference backend writing the artefacts through the prompts of
//               data/prompts/ (llm_proposer.h).
//
// Thread safety: a Proposer is used by one thread at a time.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/json.h"
#include "base/status.h"

namespace envforge::envsynth {

struct EnvironmentDraft {
  std::string category;
  uint64_t seed = 0;
  std::string name;  // [A-Za-z0-9_.-]+, unique per (category, seed)
  std::string description;
  std::string schema_sql;                                  // the data tables and their rows
  std::string preamble;                                    // the head of tools.py (docstring, imports, private helpers)
  std::vector<std::pair<std::string, std::string>> tools;  // the catalogue: name -> source, in order
  std::vector<std::string> base_tools;                     // the level-1 toolset
  int64_t attempt = 0;                                     // repairs of the environment so far
  Json ToJson() const;
  static Result<EnvironmentDraft> FromJson(const Json& json);  // DataLoss naming what is missing
};

struct TaskDraft {
  std::string id;
  int64_t lineage = 0;
  int64_t level = 0;
  int64_t difficulty = 1;  // task.json's difficulty (1..5)
  int64_t attempt = 0;
  std::string prompt;
  Json answer_schema;
  Json knobs;
  std::string solution;
  std::string verifier;
  std::string oracle;
  std::vector<std::string> tools;  // the tools its solution calls
  // Tools the task brings that the catalogue lacks (name -> source; the llm proposer writes
  // them): the loop adds them to the environment's catalogue, then to the toolset (augmentation).
  std::vector<std::pair<std::string, std::string>> new_tools;
  // SHA-256 (hex) over the id, prompt, schema, knobs, sources and new tools.
  std::string ArtifactHash() const;
  Json ToJson() const;
  static Result<TaskDraft> FromJson(const Json& json);  // DataLoss naming what is missing
};

// Model calls and tokens a proposer spent (zero for the procedural one).
struct ProposalCost {
  int64_t model_calls = 0;
  int64_t tokens = 0;
};

// What the loop tells a proposer when it asks for a repair.
struct RepairRequest {
  std::string attribution;  // task | solution | verifier | oracle | toolset | database
  std::vector<std::string> reasons;
  const TaskDraft* previous = nullptr;  // the version that failed (task repairs)
  std::string stage;                    // the stage it failed: validation | audit
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  virtual std::string name() const = 0;  // "procedural", "llm:<backend>"
  // The categories it can propose and their highest level; empty: any category id
  // ([a-z][a-z0-9_]*, the llm proposer), with levels up to the run's --max-levels.
  virtual Result<std::vector<std::pair<std::string, int64_t>>> Categories() = 0;
  // Errors: NotFound for an unknown category; Internal when the proposer itself failed.
  virtual Result<EnvironmentDraft> ProposeEnvironment(const std::string& category, uint64_t seed) = 0;
  // The task of `lineage` at `level`; attempt > 0 with `repair` asks for another version after a
  // failure. Errors: InvalidArgument for a level the category does not have; Internal.
  virtual Result<TaskDraft> ProposeTask(const EnvironmentDraft& environment, int64_t lineage, int64_t level,
                                        int64_t attempt, const RepairRequest* repair) = 0;
  // Another version of an environment whose database or toolset failed (repair.attribution
  // "database" or "toolset"). FailedPrecondition when the proposer cannot repair environments
  // (the procedural generators are fixed code: their failure is a bug, recorded as such).
  virtual Result<EnvironmentDraft> RepairEnvironment(const EnvironmentDraft& environment,
                                                     const RepairRequest& repair) = 0;
  // What the calls since the last TakeCost spent, and resets it.
  virtual ProposalCost TakeCost() { return {}; }
};

}  // namespace envforge::envsynth
