// Context management for long agent episodes, the DeepSeek-V3.2 way (paper 4.4,
// agents-and-rollouts.md section 1): when the context passes a share of the window, free room.
//
// The conversation is [system, user (the task), then turns]: a turn is one assistant message and
// the messages that answer it (tool results, or the user note after a malformed call). Strategies:
//   summary      one backend call (tools off) summarises the conversation so far (its oldest
//                turns left out, one at a time, while the request does not fit the window); the
//                episode restarts from [system, user (task + the summary)];
//   discard75    drops the oldest 75% of the turns (rounded down, at least one), keeping the latest;
//   discard-all  drops every turn, keeping [system, user (task)].
// Tool calls and results are dropped only whole turns at a time, so what stays is a valid
// conversation. Each application is one ContextEvent with the estimated tokens before and after.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agents/rollout.h"
#include "base/status.h"
#include "inference/backend.h"

namespace envforge::agents {

struct ContextEvent {
  ContextStrategy strategy = ContextStrategy::kNone;
  int64_t tokens_before = 0;
  int64_t tokens_after = 0;
  int64_t messages_dropped = 0;
  std::string summary;  // summary only
};

// Tokens the rendered messages occupy for this backend (content, reasoning and tool-call text,
// plus a few per message for the chat template).
int64_t EstimateTokens(const inference::Backend& backend, const std::vector<inference::ChatMessage>& messages);

// The user message that asks for the summary, and the header the restarted task gets.
inline constexpr std::string_view kSummaryRequest =
    "Summarize your progress on the task so far for yourself: what you have learned from the tool "
    "results (facts, ids, values), what you have tried, and what remains to do. Be concise and "
    "keep every value you will need. Do not call tools.";
inline constexpr std::string_view kSummaryHeader = "\n\nProgress so far (your own summary of earlier work):\n";

// Applies `strategy` to messages in place (messages[0] system, messages[1] the task). summary_base
// carries the sampling parameters and tools of the episode's requests (its messages are ignored).
// Errors: the backend's Status from the summary call; FailedPrecondition for kNone or a
// conversation without [system, user] at its head.
Result<ContextEvent> ApplyContextStrategy(ContextStrategy strategy, std::vector<inference::ChatMessage>& messages,
                                          inference::Backend& backend,
                                          const inference::CompletionRequest& summary_base);

}  // namespace envforge::agents
