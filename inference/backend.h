// inference::Backend: the one seam between the rollout loop (agents/), the /v1 endpoint (server/)
// and whatever produces completions (ARCHITECTURE.md, "Inference"). Three implementations:
//
//   embedded:MODEL_DIR   the DSA engine in this process (inference/embedded_backend.h): DSV32
//                        chat encoding, DSML parsing, continuous batching of every caller's
//                        sequences, KV caches kept across the turns of an episode;
//   openai:URL           any OpenAI-compatible server over HTTP (inference/openai_backend.h);
//   scripted:FILE.jsonl  recorded responses replayed in order (inference/scripted_backend.h).
//
// A request is chat messages + tool specs + sampling parameters + n; the answer is n choices,
// each a parsed assistant message (content, reasoning, tool calls) with what the backend knows
// of its tokens. Complete() blocks the calling thread and is safe to call from many threads at
// once: that is how callers get batched (the embedded engine folds every pending request into
// its decode steps).
//
// Errors (the Status of Complete): InvalidArgument for a request the backend refuses (bad
// sampling parameters, messages the chat encoding rejects, a prompt longer than the context
// window: ResourceExhausted, its message starting "context length exceeded"); every failure
// that is not the request's fault (server unreachable, 5xx after retries, a response that is
// not the documented shape, the script ran out) is Unavailable, DataLoss or DeadlineExceeded. Callers (the rollout
// loop) turn any of those into the episode outcome `infra_error`, never into a reward.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/json.h"
#include "base/status.h"
#include "inference/chat_format.h"
#include "inference/sampler.h"

namespace envforge::inference {

struct CompletionRequest {
  std::string model;  // openai: the "model" field sent; others: reported back only
  std::vector<ChatMessage> messages;
  // Raw completion (/v1/completions): when raw is set, prompt_text is completed as it is (no chat
  // rendering; embedded: BOS prepended unless present) and choices carry only text (no parsing);
  // messages and tools are ignored.
  bool raw = false;
  std::string prompt_text;
  // MCP-style ({name, description, inputSchema}) or OpenAI-style tool specs, or JSON text of one.
  // OrderedJson: the prompt (and a model server's request) shows them in the order given.
  OrderedJson tools = OrderedJson::array();
  // "auto", "none" (tools are not offered), "required" (a completion without a tool call is a
  // failed choice: finish_reason stays, parse_error says so), or a function name. The embedded
  // backend decodes "required" and a name under the tool-call grammar (embedded_backend.h), and
  // "auto" too when a tool says `strict: true` (OpenAI's strict function calling; the completion
  // then either calls nothing or makes calls that parse).
  std::string tool_choice = "auto";
  // envforge's episodes: the task's answer schema (null: none). The embedded backend, decoding
  // under the tool-call grammar, writes submit_result's answer_text as one JSON value of it when
  // the schema admits no string (tool_call_grammar.h's answer_schema); other backends ignore it.
  Json answer_schema;
  // false: at most one tool call per choice (OpenAI's parallel_tool_calls). The embedded backend
  // decodes so under the tool-call grammar and marks a freely decoded choice with more calls
  // (parse_error); openai sends it on.
  bool parallel_tool_calls = true;
  // Every tool strict (OpenAI's `strict: true`) without changing the specs the prompt renders:
  // the embedded backend decodes "auto" under the tool-call grammar as for a strict spec; the
  // openai backend sends each function with strict true.
  bool strict_tools = false;
  int64_t n = 1;
  int64_t max_tokens = 512;       // per choice
  SamplingParams sampling;        // temperature, top_p, top_k, seed
  bool thinking = false;          // DSV32 thinking mode / DeepSeek's {"thinking": {"type": "enabled"}}
  std::vector<std::string> stop;  // stop strings; the matched text is not part of the content
  bool logprobs = false;          // fill Completion::logprobs (embedded: always filled)
  int64_t top_logprobs = 0;       // 0..20 alternatives per token (needs logprobs)
  // The DeepSeek-V3.2 paper's (3.1) "keep routing" and "keep sampling mask", for a trainer that
  // replays the experts and the truncation the sampler used: fill Completion::routing* and
  // Completion::kept_*. Embedded only (other backends leave them empty). Off: nothing is recorded
  // and nothing costs.
  bool record_routing = false;
  bool record_kept_sets = false;
  // Continue the conversation of an earlier choice (its Completion::cache_handle): when
  // `messages` are that choice's conversation plus its assistant message plus new tool/user
  // messages, the embedded engine appends only the new messages' tokens to the choice's KV
  // cache instead of prefilling again. A handle is consumed by the request that continues it.
  // Backends without caches ignore it; an unknown or unusable handle only costs a prefill.
  std::string continue_from;
  // Streaming: called with each new piece of a choice's generated text (whole UTF-8 sequences),
  // from the backend's thread, before Complete returns. Must not block.
  std::function<void(int64_t choice, std::string_view piece)> on_text;
  std::chrono::milliseconds timeout{0};  // 0: the backend's default
};

// One alternative of top_logprobs.
struct TokenAlternative {
  int32_t token = -1;  // -1 when the backend only has text (openai)
  std::string text;
  double logprob = 0;
};

struct Completion {
  ChatMessage message;        // role "assistant": content, reasoning_content, tool_calls
  std::string text;           // the generated text as produced (before parsing)
  std::string parse_error;    // non-empty: the tool-call block (or its JSON arguments) is malformed
  std::string finish_reason;  // "stop", "length", "tool_calls"
  // Tokens of the generated text, when the backend has them (embedded always; openai only with
  // logprobs and ids). logprobs[i] is log p(tokens[i]) under the distribution sampled from;
  // kept_counts[i] the size of the top-k/top-p set it was drawn from (0 when unknown).
  std::vector<int32_t> tokens;
  std::vector<std::string> token_texts;  // openai logprobs: the token strings
  std::vector<double> logprobs;
  std::vector<int64_t> kept_counts;
  std::vector<std::vector<TokenAlternative>> top_logprobs;
  // The prompt this choice was generated from, as token ids (embedded only): prompt_tokens are
  // its length; the first reused_tokens of them were already in the continued cache (the rest,
  // new_prompt_tokens, were fed this turn; of those, prefilled_tokens ran through the model --
  // less than new_prompt_tokens when a shared prompt prefill served several choices).
  int64_t prompt_tokens = 0;
  int64_t reused_tokens = 0;
  std::vector<int32_t> new_prompt_tokens;
  int64_t prefilled_tokens = 0;
  int64_t completion_tokens = 0;
  // Embedded: pass as CompletionRequest::continue_from to continue this conversation; release
  // with Backend::Release when the conversation ends. Empty for other backends.
  std::string cache_handle;
  // Keep routing (record_routing; embedded): the routed experts of every token position the
  // engine ran through the model for this choice in this request -- one contiguous range of the
  // context's positions, starting at routing_start:
  //   1. the prompt tokens fed this turn: a fresh prompt from position 0 (also when a shared
  //      prefill or the prompt cache served it: that prefill's routing is copied); a continued
  //      conversation from reused_tokens - 1, which is the previous turn's last generated token
  //      (a turn never feeds its own last token: the next turn does, first), then
  //      new_prompt_tokens;
  //   2. every generated token but the last, each fed for the next decode step.
  // The reused cached prefix is not run again, so it has no routing here: the turns that fed it
  // recorded it. routing holds prompt_tokens - routing_start + completion_tokens - 1 positions
  // (none without generated tokens), routing_width ids each (MoE layers x num_experts_per_tok:
  // [position][MoE layer][k], each layer's ids in the router's order, descending biased score;
  // dense layers have none). routing_width 0: not recorded (or a model without MoE layers).
  int64_t routing_start = 0;
  int64_t routing_width = 0;
  std::vector<int16_t> routing;
  // Keep sampling mask (record_kept_sets; embedded): kept_vocab is the vocabulary size (0: not
  // recorded). For every token i with kept_counts[i] < kept_vocab (its draw was truncated by
  // top-k/top-p, or greedy), in token order, its kept_counts[i] kept token ids are appended to
  // kept_ids, most probable first (ties towards the lower id: sampler.h's order). Tokens drawn
  // from the whole vocabulary add nothing.
  int64_t kept_vocab = 0;
  std::vector<int32_t> kept_ids;
};

struct CompletionResult {
  std::string model;  // as reported by the backend
  std::vector<Completion> choices;
  int64_t prompt_tokens = 0;      // usage: the prompt once
  int64_t completion_tokens = 0;  // usage: every choice's generated tokens
};

struct BackendInfo {
  std::string kind;            // "embedded", "openai", "scripted"
  std::string spec;            // as opened ("embedded:/path")
  std::string model;           // model name (embedded: the directory's base name unless --model names it)
  int64_t context_window = 0;  // tokens; 0 when unknown
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendInfo info() const = 0;
  // Which weights answer: embedded, Checkpoint::ContentSha256 (the spec names only a directory,
  // whose contents change when a model is retrained in place), computed on the first call -- a
  // pass over the checkpoint, so nothing pays it at start-up -- and kept; empty for other kinds.
  virtual std::string WeightsSha256() const { return ""; }
  // See the file comment. Thread-safe.
  virtual Result<CompletionResult> Complete(const CompletionRequest& request) = 0;
  // Tokens `text` occupies for this backend's model (embedded: exact; others: an estimate of
  // one token per 4 bytes). Used to decide when the context passes its window's threshold.
  virtual int64_t CountTokens(std::string_view text) const = 0;
  // Drops the KV cache kept for a handle (no-op for unknown handles and cacheless backends).
  virtual void Release(const std::string& cache_handle) { (void)cache_handle; }
  // Backend-specific counters as a JSON object (embedded: prefill/decode tokens, batch sizes,
  // live caches); {} when there are none.
  virtual Json Stats() const { return Json::object(); }
};

struct BackendOptions {
  std::string model_name;  // --model: sent to openai servers, reported by the others
  // openai: the environment variable holding the API key (sent as "Authorization: Bearer");
  // empty: OPENAI_API_KEY when set, else no key.
  std::string api_key_env;
  std::chrono::milliseconds request_timeout{120'000};
  int max_retries = 4;       // openai: retries on 429/5xx/connection errors
  int max_concurrency = 64;  // openai: requests in flight at once
  // embedded: where the forward runs ("cpu", "cuda", "auto") and the context window (0: the
  // model's max_position_embeddings).
  std::string device = "cpu";
  int64_t context_window = 0;
  // embedded: attend to every previous token instead of the indexer's top-k (the DeepseekV3
  // path), to measure what DSA costs at equal weights.
  bool dense_attention = false;
};

// Opens "embedded:DIR", "openai:URL" or "scripted:FILE". Errors: InvalidArgument for an unknown
// scheme or a malformed spec (naming it); the implementation's open errors (a model directory that
// does not load, a script that does not parse: InvalidArgument/NotFound naming the file; an openai
// URL is not contacted here).
Result<std::unique_ptr<Backend>> OpenBackend(std::string_view spec, const BackendOptions& options);

// The JSON object a model was asked to reply with: the whole content, or the span from its first
// '{' to its last '}' (prose or a code fence around it). InvalidArgument when there is none, it
// does not parse (depth-limited, base/json.h) or it is not an object.
Result<Json> ReplyJsonObject(std::string_view content);

// A JSON object asked of a model until a check accepts it (CompleteForObject).
struct ObjectReply {
  std::optional<Json> object;  // the accepted object; empty when no reply was accepted
  std::string problem;         // what was wrong with the last reply, when there is no object
};

// Sends `request` and reads choice 0's JSON object (ReplyJsonObject); `check` says what is wrong
// with one ("" when it is acceptable). A reply without an acceptable object is answered in the
// same conversation (the reply, then a user message `retry_message(problem)`) and asked again
// with the next sampling seed, at most `retries` more times. *requests (when set) counts every
// request sent, failed ones included. Errors: Complete's, and DataLoss for an answer with no choice.
Result<ObjectReply> CompleteForObject(Backend& backend, CompletionRequest request, int64_t retries,
                                      const std::function<std::string(const Json&)>& check,
                                      const std::function<std::string(const std::string&)>& retry_message,
                                      int64_t* requests = nullptr);

// The OpenAI Chat Completions function-tool form ({"type": "function", "function": {...}}) of
// specs in any of the three forms: that one (kept as it is), MCP's ({"name", "inputSchema"}) and
// the Responses API's flat one ({"type": "function", "name", "parameters"}). A flat spec's
// top-level `strict: true` becomes the function's.
OrderedJson ToOpenAiTools(const OrderedJson& tools);

// `tools` (CompletionRequest::tools: spec objects, or JSON text of one) with every text entry
// parsed, at most kMaxJsonValueDepth deep. Errors: InvalidArgument naming `what`[i] for text that
// does not parse.
Result<OrderedJson> ParseToolSpecs(const OrderedJson& tools, std::string_view what);

}  // namespace envforge::inference
