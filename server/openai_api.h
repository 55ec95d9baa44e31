// The OpenAI-compatible /v1 endpoint of `envforge serve` (ARCHITECTURE.md, "Serving"), in front of
// one inference::Backend (embedded engine, another OpenAI server, or a script):
//
//   GET  /v1/models             {"object": "list", "data": [{"id": <served name>, "object": "model", ...}]}
//   GET  /v1/models/{id}        the served model, or 404 model_not_found
//   POST /v1/chat/completions   chat.completion (server/internal/openai_request.h lists the fields read)
//   POST /v1/completions        text_completion of a raw prompt (CompletionRequest::raw)
//
// Responses have the shapes of agents-and-rollouts.md section 3. With "stream": true the answer
// is server-sent events: chunks as the backend generates (delta.role first, then
// delta.reasoning_content / delta.content pieces, the tool calls whole at the end; chat pieces
// arrive as generated from the embedded engine, whose text is DSV32, and from the openai backend
// outside thinking mode; otherwise once the message is complete), a chunk with
// finish_reason (and the choice's logprobs when asked), a usage chunk with
// stream_options.include_usage, then "data: [DONE]". The concatenated deltas equal the message of
// the same request without streaming.
//
// Batching and back-pressure: Backend::Complete blocks, so it never runs on an io thread. Each
// completion runs on a pool of `workers` threads (the embedded backend folds every concurrent
// caller into its decode steps, so the pool size bounds the batch); up to `max_queued` more wait.
// Past that a request is answered 429 with Retry-After at once.
//
// Errors: {"error": {"message", "type", "param", "code"}} with 400 (malformed JSON, a missing or
// wrongly typed field: param names it; code context_length_exceeded for a prompt past the
// window), 404 (unknown model name, code model_not_found; an unknown /v1 path), 405 (wrong
// method, with Allow), 429 (queue full), 500 (internal), 503 (no backend configured, or the
// backend is unavailable; with Retry-After). A request naming no model is served by the one
// model. Auth (401) and Origin (403) are the HTTP server's (server/http_server.h), which answers
// them in this shape on /v1 paths. A streamed request whose backend fails after the first chunk
// gets an {"error": ...} event, then [DONE].
//
// Thread safety: Handle may be called from any thread; it never blocks on the backend. The
// destructor waits for the completions running on the pool (queued ones are answered 503).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/json.h"
#include "inference/backend.h"
#include "server/metrics.h"

namespace envforge::server {

namespace internal {
class WorkerPool;
}

// Where the answer to one /v1 request goes; the HTTP connection implements it. Methods may be
// called from any thread, in one of two sequences: Reply once; or BeginStream, Event..., EndStream.
// None may block (the backend's thread calls Event while it generates).
class V1Responder {
 public:
  using Headers = std::vector<std::pair<std::string, std::string>>;
  virtual ~V1Responder() = default;
  // A whole response with a JSON body.
  virtual void Reply(int status, std::string body, Headers headers) = 0;
  // 200 with Content-Type: text/event-stream.
  virtual void BeginStream() = 0;
  // One event, sent as "data: <data>\n\n".
  virtual void Event(std::string data) = 0;
  virtual void EndStream() = 0;
};

struct OpenAiApiOptions {
  size_t workers = 64;         // completions running at once (>= 1)
  size_t max_queued = 256;     // completions waiting beyond those
  std::string model_name;      // the served name; empty: the backend's info().model
  Metrics* metrics = nullptr;  // envforge_v1_* series go there when set
};

class OpenAiApi {
 public:
  // `backend` may be null (every /v1 request is then 503 "no backend configured"); it must
  // outlive this object, as must options.metrics.
  OpenAiApi(inference::Backend* backend, OpenAiApiOptions options);
  ~OpenAiApi();
  OpenAiApi(const OpenAiApi&) = delete;
  OpenAiApi& operator=(const OpenAiApi&) = delete;

  // Serves one request whose path starts with /v1 (`path` without the query). Answers through
  // `responder`, at once (errors, the model list) or later from a pool thread.
  void Handle(std::string_view method, std::string_view path, std::string body, std::shared_ptr<V1Responder> responder);

  const std::string& model_name() const { return model_name_; }
  bool has_backend() const { return backend_ != nullptr; }
  // {"running", "queued", "workers", "model"}.
  Json Stats() const;

 private:
  struct Call;
  void Submit(bool chat, std::string body, std::shared_ptr<V1Responder> responder);
  void Complete(const std::shared_ptr<Call>& call);
  void Count(const char* endpoint, int status);

  inference::Backend* backend_;
  OpenAiApiOptions options_;
  std::string model_name_;
  // What the backend's CompletionRequest::on_text pieces hold: DSV32 text (embedded), content
  // only (openai), or text not to be split (the rest).
  enum class TextLayout { kDsv32, kContentOnly, kUnknown };
  TextLayout text_layout_ = TextLayout::kUnknown;
  int64_t created_;
  std::unique_ptr<internal::WorkerPool> pool_;
};

// The body of an error in OpenAI's shape, for the transport's own refusals on /v1 paths (401,
// 403, 413, 415): {"error": {"message", "type", "param": null, "code"}}.
std::string V1ErrorBody(std::string_view message, std::string_view type, std::string_view code = {});

}  // namespace envforge::server
