// The llm proposer (`envforge synth --proposer llm --backend SPEC`): any inference backend
// (embedded, openai, scripted) writes an environment's artefacts through the prompts of
// data/prompts/, one per stage, and envforge validates them and feeds every error back for repair
// (synth_run.h). With a real model behind an OpenAI-compatible URL this is the paper's loop.
//
// PROMPTS (data/prompts/, compiled into the library; ENVFORGE_SYNTH_PROMPTS=DIR reads DIR's
// copies): synth_environment.md, synth_task.md, synth_repair_task.md,
// synth_repair_environment.md. Each is a template whose {{name}} fields the proposer fills:
// category, seed, env_name, schema_sql, tools_py, level, lineage, previous_task (the lineage's
// previous level, for escalation), stage, attribution, reasons, task_files, environment_files.
//
// RESPONSES carry files as fenced blocks whose info string ends with the file name
// ("```sql schema.sql" ... "```"), or as one JSON object {"files": {name: text}}:
//   environment   env.json ({"name", "description"}), schema.sql, tools.py
//   task          task.json ({"id"?, "prompt", "answer_schema", "knobs"?}), solution.py,
//                 verifier.py, oracle.py (optional), tools/<name>.py (a tool the task adds: one
//                 function named <name>; it joins the catalogue and the toolset)
// A response that lacks a file or holds an unreadable env.json/task.json is answered in the same
// conversation with what was wrong, at most format_retries times; then the proposal fails
// (InvalidArgument naming what was missing). Everything else -- SQL that does not run, a
// solution that reads the database, a verifier the audit rejects -- is found by the loop and
// comes back as a repair.
//
// Names: an environment is "<name from env.json>_<seed>" (sanitized to [a-z0-9_]); a task's id is
// its task.json id (sanitized) ending in "_l<level>_<lineage>", which is appended when absent.
// Sampling seeds derive from the environment seed, lineage, level and attempt.
//
// Thread safety: one thread at a time (as every Proposer).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "envsynth/proposer.h"
#include "inference/backend.h"

namespace envforge::envsynth {

struct LlmProposerOptions {
  int64_t max_tokens = 8192;  // per response
  double temperature = 0.7;
  int64_t format_retries = 2;
  std::string prompts_dir;   // empty: $ENVFORGE_SYNTH_PROMPTS, else the compiled-in prompts
  std::string backend_spec;  // for name() and provenance
};

// `backend` must outlive the proposer. Errors: NotFound when prompts_dir lacks a prompt.
Result<std::unique_ptr<Proposer>> OpenLlmProposer(inference::Backend& backend, const LlmProposerOptions& options);

// The files of a response (rules above): name -> text. InvalidArgument when it holds none, or a
// block is never closed.
Result<std::map<std::string, std::string>> ParseResponseFiles(const std::string& text);

}  // namespace envforge::envsynth
