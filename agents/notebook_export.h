// Exporting an interpreter episode as a Jupyter notebook (nbformat 4.5), so that a person can open
// what an agent did in a Python interpreter environment (sandbox/jupyter/) in Jupyter, nbviewer or
// VS Code: `envforge traj export FILE.sqlite --ipynb -o DIR`.
//
// An interpreter environment's tools are `execute` {"code"}, `interrupt` {}, `restart` {} and the
// runtime's `submit_result` {"answer_text"}. An `execute` result's content is
//   {"status": "ok"|"error"|"timeout"|"crashed", "execution_count": n,
//    "outputs": [nbformat 4 output dicts], "truncated": bool, "restarted": bool}
// (for outcome ok, tool_error and timeout; a crash may leave no content). See
// sandbox/jupyter/kernel_session.h.
//
// The notebook, cell by cell, in the order things happened:
//   * the task prompt (a rollout's first user message), when recorded: a markdown cell;
//   * the model's text between calls (assistant message content; not its reasoning), and later
//     user messages (the harness's notes), when recorded: markdown cells;
//   * each `execute` call: a code cell whose source is the code, whose execution_count is the
//     content's (null when absent) and whose outputs are the content's outputs, reduced to what
//     nbformat allows (see below), plus:
//       - a crash (outcome crashed or status "crashed"): an error output with ename
//         "KernelCrashed", evalue the result's message and limit;
//       - a timeout without an error output: one with ename "ExecutionTimeout", same evalue; a
//         timeout whose kernel was replaced (content "restarted": true) is followed by a markdown
//         cell saying so;
//       - a call that never ran (invalid_call, infra_error) or another failure without outputs:
//         an error output named after its outcome ("InvalidCall", "InfraError", "ToolError")
//         carrying the result's message;
//   * `restart`: a markdown cell "*kernel restarted*"; `interrupt`: "*kernel interrupted*" (or
//     "*interrupt: nothing was running*" for content {"interrupted": false}; the message when
//     the call failed); any other tool: a markdown cell with the call and its result;
//   * a context-management event (rollouts): a markdown cell with its strategy and summary; the
//     conversation the rollout loop records again after it is not repeated;
//   * `submit_result`: a markdown cell with the answer and the verdict (passed, score, reasons)
//     or why it was not scored; an episode whose answer is stored without a submit step ends with
//     that cell built from the episode's answer and verdict.
//
// Outputs are copied field by field: `stream` {name, text} (text a string: a list of lines is
// joined; name stdout unless it is stderr), `execute_result` {execution_count (the cell's when
// missing), data, metadata}, `display_data` {data, metadata}, `error` {ename, evalue, traceback}.
// `data` keeps the MIME entries whose value is a string (a list of strings is joined), any value
// for JSON types (application/json, application/*+json); `metadata` is the output's when it is an
// object, else {}. Other members (transient, ...) and other output types are dropped.
//
// Every cell has a unique "id" (step-N, step-N-restart, message-N, context-N, answer) and a
// "metadata" object holding {"envforge": {...}}: which step (tool, outcome) or message it came
// from. The notebook's
// metadata holds kernelspec python3, language_info {"name": "python"} and
// "envforge": {"episode_id", "env", "env_id", "task_id", "task_version", "kind", "model",
// "outcome" (null while open), "reward" (the verdict's score, null when unscored), "passed"}.
//
// Thread safety: pure functions of their argument.
#pragma once

#include <string>

#include "agents/trajectory_store.h"
#include "base/json.h"
#include "base/status.h"

namespace envforge::agents {

// The episode as an nbformat 4.5 notebook (a JSON object, as described above).
// Errors: InvalidArgument "episode <id> has no execute call: not an interpreter episode" when no
// step calls `execute`; Internal if building the JSON failed (a bug; nothing throws out).
Result<Json> EpisodeToNotebook(const Episode& episode);

// EpisodeToNotebook as the text of an .ipynb file: indented by one space, as Jupyter writes it,
// UTF-8 (invalid bytes in recorded strings replaced), ending with a newline. Same errors.
Result<std::string> EpisodeToNotebookText(const Episode& episode);

}  // namespace envforge::agents
