// One rollout episode: a backend plays one task in a fresh session of a SessionHost (a local
// SessionManager, or a server: agents/session_host.h).
//
// The loop (agents-and-rollouts.md; the DeepSeek-V3.2 rules of section 1):
//   messages = [system prompt, user: the task's prompt]; tools = the environment's specs
//   repeat:
//     ask the backend for one completion (continuing the previous turn's cache handle, so the
//     embedded engine only appends the new tokens); the turn's reasoning stays in the
//     conversation while only tool results follow it (a new user message drops it: the chat
//     encoding applies that rule);
//     a completion that does not parse (bad DSML, arguments that are not a JSON object), or that
//     calls no tool, is a malformed call: it stays in the conversation, a user message says what
//     was wrong, and it counts towards max_invalid_calls in a row;
//     otherwise every tool call goes to the session (arguments checked against the tool's schema
//     there: an unknown tool or bad arguments answer invalid_call, which also counts); each typed
//     result goes back as a tool message; submit_result ends the episode with its verdict;
//     when the context passes context_threshold of the window, the context strategy frees room
//     (agents/context_manager.h) and the next turn starts a fresh context;
//   until submitted, max_turns, max_tokens, context_exhausted, invalid_calls, timeout (the wall
//   clock, checked between steps and bounding every backend call), crashed (the session died) or
//   infra_error (the backend or the runtime failed, or a verifier broke).
// Every message, model turn (tokens, logprobs, kept-set sizes), tool step, context event and the
// verdict are recorded in options.store when set.
#pragma once

#include <cstdint>
#include <string>

#include "agents/rollout.h"
#include "agents/session_host.h"
#include "inference/backend.h"
#include "sandbox/session_manager.h"
#include "toolsets/tool_protocol.h"

namespace envforge::agents {

// What one episode plays; the pointers outlive the episode (the runner's description of the
// environment, agents/session_host.h).
struct EpisodeSpec {
  const HostedEnv* env = nullptr;
  const HostedTask* task = nullptr;  // one of env->tasks
  int64_t sample_index = 0;
  std::string rollout_id;
  int64_t context_window = 0;  // resolved by the runner; 0: unknown (no context management)
};

// The text of the tool message the loop appends for a tool result: an ok result's content (a JSON
// string as is, any other value as compact JSON text), otherwise the typed failure as compact JSON
// {"limit"?, "message", "outcome"} (keys in that sorted order). The Python module's
// ToolResult.message_text calls this, so transcripts built there match rollouts byte for byte.
std::string ToolMessageText(const toolsets::ToolResult& result);

// The seed of one model turn: a hash of (run seed, task id, sample index, turn).
uint64_t TurnSeed(uint64_t run_seed, const std::string& task_id, int64_t sample_index, int64_t turn);

// Plays one episode in a fresh session of `host` (the host's sessions: local or on a server).
// Never fails as a call: every failure is the episode's outcome (infra_error when the session
// cannot start or the host fails a tool call).
EpisodeResult RunEpisode(SessionHost& host, inference::Backend& backend, const RolloutOptions& options,
                         const EpisodeSpec& spec);
// The same on sessions of a SessionManager in this process (a LocalSessionHost over it).
EpisodeResult RunEpisode(sandbox::SessionManager& manager, inference::Backend& backend, const RolloutOptions& options,
                         const EpisodeSpec& spec);

}  // namespace envforge::agents
