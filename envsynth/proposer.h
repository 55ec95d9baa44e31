// Proposers: what writes an environment's artefacts for the synthesis loop (issue 13). The loop
// (synth_run.h) asks for an environment (database + tool catalogue) and then, lineage by lineage
// and level by level, for tasks; it validates, audits and filters what it gets, and asks again
// (a higher attempt number) when a repair is needed.
//
//   procedural  one seeded generator per category (envsynth/procedural/cat_<id>.py, run by
//               procedural_proposer.h); offline and deterministic: the same request gives the
//               same artefacts, which is what lets a stopped run resume by re-proposing.
//   llm         a backend writing the artefacts through data/prompts/ (not built yet).
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
  std::string name;          // [A-Za-z0-9_.-]+, unique per (category, seed)
  std::string description;
  std::string schema_sql;    // the data tables and their rows
  std::string preamble;      // the head of tools.py (docstring, imports, private helpers)
  std::vector<std::pair<std::string, std::string>> tools;  // the catalogue: name -> source, in order
  std::vector<std::string> base_tools;                      // the level-1 toolset
};

struct TaskDraft {
  std::string id;
  int64_t lineage = 0;
  int64_t level = 0;
  int64_t difficulty = 1;    // task.json's difficulty (1..5)
  int64_t attempt = 0;
  std::string prompt;
  Json answer_schema;
  Json knobs;
  std::string solution;
  std::string verifier;
  std::string oracle;
  std::vector<std::string> tools;  // the tools its solution calls
  // SHA-256 (hex) over the id, prompt, schema, knobs and sources: what a resumed run compares.
  std::string ArtifactHash() const;
};

// What the loop tells a proposer when it asks for a repair.
struct RepairRequest {
  std::string attribution;   // task | solution | verifier | oracle | toolset | database
  std::vector<std::string> reasons;
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  virtual std::string name() const = 0;  // "procedural", "llm:<backend>"
  // The categories it can propose and their highest level.
  virtual Result<std::vector<std::pair<std::string, int64_t>>> Categories() = 0;
  // Errors: NotFound for an unknown category; Internal when the proposer itself failed.
  virtual Result<EnvironmentDraft> ProposeEnvironment(const std::string& category, uint64_t seed) = 0;
  // The task of `lineage` at `level`; attempt > 0 with `repair` asks for another version after a
  // failure. Errors: InvalidArgument for a level the category does not have; Internal.
  virtual Result<TaskDraft> ProposeTask(const EnvironmentDraft& environment, int64_t lineage, int64_t level, int64_t attempt,
                                        const RepairRequest* repair) = 0;
};

}  // namespace envforge::envsynth
