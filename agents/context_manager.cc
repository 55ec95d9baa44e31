// Context strategies: summary, discard75, discard-all.
#include "agents/context_manager.h"

#include <algorithm>

#include "base/json.h"

namespace envforge::agents {
namespace {

using inference::ChatMessage;

// Index of the first message of each turn after the task (an assistant message starts a turn).
std::vector<size_t> TurnStarts(const std::vector<ChatMessage>& messages) {
  std::vector<size_t> starts;
  for (size_t i = 2; i < messages.size(); ++i) {
    if (messages[i].role == "assistant") starts.push_back(i);
  }
  return starts;
}

Result<std::string> Summarize(std::vector<ChatMessage> messages, inference::Backend& backend,
                              const inference::CompletionRequest& base) {
  inference::CompletionRequest request;
  request.model = base.model;
  request.tools = base.tools;
  request.tool_choice = "none";
  request.thinking = false;
  request.sampling = base.sampling;
  request.max_tokens = base.max_tokens;
  request.timeout = base.timeout;
  ChatMessage ask;
  ask.role = "user";
  ask.content = std::string(kSummaryRequest);
  // The conversation is past 80% of the window; with the request for a summary it may no longer
  // fit. Then the oldest turns are left out of what is summarised, one at a time.
  while (true) {
    request.messages = messages;
    request.messages.push_back(ask);
    Result<inference::CompletionResult> result = backend.Complete(request);
    std::vector<size_t> starts = TurnStarts(messages);
    const bool too_long = !result.ok() && result.status().code() == StatusCode::kResourceExhausted &&
                          result.status().message().rfind("context length exceeded", 0) == 0;
    if (too_long && !starts.empty()) {
      const size_t end = starts.size() > 1 ? starts[1] : messages.size();
      messages.erase(messages.begin() + static_cast<std::ptrdiff_t>(starts[0]),
                     messages.begin() + static_cast<std::ptrdiff_t>(end));
      continue;
    }
    if (!result.ok()) return result.status();
    if (result->choices.empty()) return DataLossError("the summary request returned no choice");
    const inference::Completion& choice = result->choices[0];
    return choice.message.content.empty() ? choice.text : choice.message.content;
  }
}

}  // namespace

int64_t EstimateTokens(const inference::Backend& backend, const std::vector<ChatMessage>& messages) {
  int64_t tokens = 0;
  for (const ChatMessage& message : messages) {
    tokens += 4 + backend.CountTokens(message.content) + backend.CountTokens(message.reasoning_content);
    for (const inference::ChatToolCall& call : message.tool_calls) {
      tokens += 8 + backend.CountTokens(call.name) + backend.CountTokens(DumpJson(call.arguments));
    }
  }
  return tokens;
}

Result<ContextEvent> ApplyContextStrategy(ContextStrategy strategy, std::vector<ChatMessage>& messages,
                                          inference::Backend& backend,
                                          const inference::CompletionRequest& summary_base) {
  if (strategy == ContextStrategy::kNone) return FailedPreconditionError("no context strategy to apply");
  if (messages.size() < 2 || messages[0].role != "system" || messages[1].role != "user") {
    return FailedPreconditionError("context management needs a conversation starting with [system, user]");
  }
  ContextEvent event;
  event.strategy = strategy;
  event.tokens_before = EstimateTokens(backend, messages);
  const size_t before = messages.size();
  if (strategy == ContextStrategy::kSummary) {
    ENVFORGE_ASSIGN_OR_RETURN(event.summary, Summarize(messages, backend, summary_base));
    messages.resize(2);
    messages[1].content += std::string(kSummaryHeader) + event.summary;
  } else if (strategy == ContextStrategy::kDiscardAll) {
    messages.resize(2);
  } else {
    std::vector<size_t> starts = TurnStarts(messages);
    const size_t drop = std::max<size_t>(starts.size() * 3 / 4, 1);  // 75%, at least one turn
    const size_t cut = drop < starts.size() ? starts[drop] : messages.size();
    messages.erase(messages.begin() + 2, messages.begin() + static_cast<std::ptrdiff_t>(cut));
  }
  event.messages_dropped = static_cast<int64_t>(before) - static_cast<int64_t>(messages.size());
  event.tokens_after = EstimateTokens(backend, messages);
  return event;
}

}  // namespace envforge::agents
