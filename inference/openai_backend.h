// The openai backend ("openai:URL"): any OpenAI-compatible server over HTTP (vLLM, SGLang,
// DeepSeek's API, envforge's own /v1), through libcurl.
//
// URL is the API base, e.g. "http://127.0.0.1:8000/v1": chat requests POST {URL}/chat/completions,
// raw requests (CompletionRequest::raw) POST {URL}/completions. The wire format is
// agents-and-rollouts.md section 3; inference/internal/openai_wire.h builds and reads it:
//   - assistant tool calls go out with OpenAI ids ("call_<n>" for calls without one; tool messages
//     without a tool_call_id answer the earliest unanswered call before them), arguments as JSON
//     text; reasoning_content goes back only for assistant messages after the last user message,
//     in thinking mode (DeepSeek-V3.2's rule), which also sends {"thinking": {"type": "enabled"}};
//   - tools in OpenAI's function form (ToOpenAiTools), not sent when tool_choice is "none";
//   - tool-call arguments that are not a JSON object keep their choice: the raw text stays as the
//     arguments (a Json string) and Completion::parse_error names the tool and the JSON error.
//
// Key: the environment variable BackendOptions::api_key_env names (read when the backend opens),
// else OPENAI_API_KEY when set, sent as "Authorization: Bearer KEY".
//
// Each attempt is bounded by request.timeout (0: BackendOptions::request_timeout), connecting
// included. 429, 500, 502, 503, 504 and connection failures are retried up to max_retries times
// after a jittered exponential backoff, or after the server's Retry-After (seconds, at most 60).
// A stream that already handed text to on_text is not retried (the text would repeat).
// At most max_concurrency requests are in flight at once across all threads; the others wait
// for a slot (waiting does not count against the timeout).
//
// Streaming: with request.on_text set the request asks for server-sent events; content pieces go
// to on_text as they arrive and Complete returns what the non-streaming call would have.
//
// Errors of Complete: InvalidArgument for a request the backend refuses before sending (naming
// the message or field) and for a 4xx answer other than 429 (with the server's error message and
// the status); ResourceExhausted "context length exceeded: ..." for a 400 saying the prompt is
// longer than the model's context (code context_length_exceeded, or "context length" in the
// message, as vLLM, SGLang and DeepSeek word it); Unavailable for a server that stays unreachable or failing after the
// retries (naming the URL and the curl error or HTTP status); DeadlineExceeded when an attempt runs past its timeout;
// DataLoss "openai response from URL: <what is wrong>" for a body that is not the documented shape. CountTokens
// estimates one token per 4 bytes. Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "inference/backend.h"

namespace envforge::inference {

// Does not contact the server. Errors (InvalidArgument): an empty URL or one that is not http://
// or https://, naming it; an api_key_env variable that is not set, naming the variable;
// max_concurrency < 1, max_retries < 0 or a request_timeout <= 0.
Result<std::unique_ptr<Backend>> OpenOpenAiBackend(const std::string& base_url, const BackendOptions& options);

}  // namespace envforge::inference
