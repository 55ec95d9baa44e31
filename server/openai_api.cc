// OpenAiApi: routing of /v1 requests, the worker pool running Backend::Complete, and the
// streaming of one completion as server-sent events. Request reading and response shapes live in
// server/internal/openai_{request,response,stream,error}.
#include "server/openai_api.h"

#include <chrono>
#include <exception>
#include <mutex>
#include <variant>

#include "base/log.h"
#include "server/internal/openai_error.h"
#include "server/internal/openai_request.h"
#include "server/internal/openai_response.h"
#include "server/internal/openai_stream.h"
#include "server/internal/worker_pool.h"

namespace envforge::server {
namespace {

using internal::ApiError;
using internal::DeltaSplitter;
using internal::ResponseMeta;
using internal::TextDelta;
using internal::V1Request;

void ReplyJson(V1Responder& responder, int status, const Json& body, V1Responder::Headers headers = {}) {
  responder.Reply(status, DumpJson(body), std::move(headers));
}

void ReplyError(V1Responder& responder, const ApiError& error, V1Responder::Headers headers = {}) {
  if (error.retry_after_seconds > 0) headers.emplace_back("Retry-After", std::to_string(error.retry_after_seconds));
  ReplyJson(responder, error.status, internal::ErrorJson(error), std::move(headers));
}

ApiError Error(int status, std::string message, std::string type, std::string code = {}) {
  ApiError error;
  error.status = status;
  error.message = std::move(message);
  error.type = std::move(type);
  error.code = std::move(code);
  return error;
}

// A raw completion's text as the client sees it: the stop string that ended it and a final EOS
// are not part of it (whether the backend kept them or not).
void TrimRawText(inference::CompletionResult& result, const std::vector<std::string>& stops) {
  auto ends_with = [](const std::string& text, std::string_view tail) {
    return text.size() >= tail.size() && text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
  };
  for (auto& choice : result.choices) {
    if (ends_with(choice.text, inference::kEosToken))
      choice.text.resize(choice.text.size() - inference::kEosToken.size());
    for (const auto& stop : stops) {
      if (choice.finish_reason == "stop" && ends_with(choice.text, stop)) {
        choice.text.resize(choice.text.size() - stop.size());
        break;
      }
    }
  }
}

// The events of one streamed completion. on_text (the backend's thread) and Finish (the pool
// thread, after Complete returned) are serialised by the mutex; the 200 header goes out with the
// first event, so a request that fails before producing any text still gets a plain error status.
class EventStream {
 public:
  EventStream(std::shared_ptr<V1Responder> responder, ResponseMeta meta, const V1Request& request)
      : responder_(std::move(responder)),
        meta_(std::move(meta)),
        chat_(request.chat),
        thinking_(request.completion.thinking),
        include_usage_(request.include_usage) {
    for (int64_t i = 0; i < request.completion.n; ++i) {
      splitters_.emplace_back(thinking_, !chat_, request.completion.stop);
    }
    role_sent_.assign(splitters_.size(), false);
  }

  void OnText(int64_t choice, std::string_view piece) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (choice < 0 || static_cast<size_t>(choice) >= splitters_.size()) return;
    SendDelta(choice, splitters_[choice].Feed(piece));
  }

  void Finish(const V1Request& request, const inference::CompletionResult& result) {
    std::lock_guard<std::mutex> lock(mutex_);
    Start();
    for (size_t i = 0; i < result.choices.size(); ++i) {
      const auto& choice = result.choices[i];
      if (i >= splitters_.size()) {
        splitters_.emplace_back(thinking_, !chat_, request.completion.stop);
        role_sent_.push_back(false);
      }
      SendRole(i);
      if (chat_) {
        // Reasoning is part of the answer only in thinking mode (as in MessageJson).
        SendDelta(i, splitters_[i].Finish(thinking_ ? choice.message.reasoning_content : "", choice.message.content));
        if (!choice.message.tool_calls.empty())
          Send(ChunkJson(i, Json{{"tool_calls", internal::ToolCallsJson(choice, true)}}));
        Json logprobs = request.completion.logprobs
                            ? internal::ChatLogprobsJson(choice, request.completion.top_logprobs)
                            : Json(nullptr);
        Send(ChunkJson(i, Json::object(), internal::FinishReason(choice), std::move(logprobs)));
      } else {
        SendDelta(i, splitters_[i].Finish("", choice.text));
        Json logprobs = request.legacy_logprobs >= 0 ? internal::LegacyLogprobsJson(choice, request.legacy_logprobs)
                                                     : Json(nullptr);
        Send(ChunkJson(i, Json{{"text", ""}}, choice.finish_reason.empty() ? "stop" : choice.finish_reason,
                       std::move(logprobs)));
      }
    }
    if (include_usage_) Send(internal::UsageChunkJson(meta_, chat_, result));
    End();
  }

  // The backend failed. False when nothing was sent yet: the caller answers with an error status.
  bool Fail(const ApiError& error) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!started_) return false;
    Send(internal::ErrorJson(error));
    End();
    return true;
  }

 private:
  Json ChunkJson(int64_t index, Json delta, Json finish_reason = nullptr, Json logprobs = nullptr) {
    return internal::ChunkJson(meta_, chat_, index, std::move(delta), std::move(finish_reason), std::move(logprobs));
  }

  void Start() {
    if (started_) return;
    started_ = true;
    responder_->BeginStream();
  }

  void Send(const Json& event) { responder_->Event(DumpJson(event)); }

  void SendRole(size_t index) {
    if (!chat_ || role_sent_[index]) return;
    role_sent_[index] = true;
    Send(ChunkJson(static_cast<int64_t>(index), Json{{"role", "assistant"}, {"content", ""}}));
  }

  void SendDelta(size_t index, const TextDelta& delta) {
    if (delta.empty()) return;
    Start();
    SendRole(index);
    if (!delta.reasoning.empty())
      Send(ChunkJson(static_cast<int64_t>(index), Json{{"reasoning_content", delta.reasoning}}));
    if (!delta.content.empty()) {
      Send(ChunkJson(static_cast<int64_t>(index),
                     chat_ ? Json{{"content", delta.content}} : Json{{"text", delta.content}}));
    }
  }

  void End() {
    responder_->Event("[DONE]");
    responder_->EndStream();
  }

  std::mutex mutex_;
  std::shared_ptr<V1Responder> responder_;
  ResponseMeta meta_;
  const bool chat_;
  const bool thinking_;
  const bool include_usage_;
  bool started_ = false;
  std::vector<DeltaSplitter> splitters_;
  std::vector<bool> role_sent_;
};

}  // namespace

struct OpenAiApi::Call {
  V1Request request;
  std::shared_ptr<V1Responder> responder;
  std::chrono::steady_clock::time_point received;
};

OpenAiApi::OpenAiApi(inference::Backend* backend, OpenAiApiOptions options)
    : backend_(backend), options_(std::move(options)), created_(internal::UnixSeconds()) {
  model_name_ = options_.model_name;
  if (model_name_.empty() && backend_ != nullptr) model_name_ = backend_->info().model;
  if (model_name_.empty() && backend_ != nullptr)
    model_name_ = backend_->info().kind;  // an openai backend without --model-name
  std::string kind = backend_ != nullptr ? backend_->info().kind : "";
  text_layout_ = kind == "embedded" ? TextLayout::kDsv32
                 : kind == "openai" ? TextLayout::kContentOnly
                                    : TextLayout::kUnknown;
  if (backend_ != nullptr)
    pool_ = std::make_unique<internal::WorkerPool>(std::max<size_t>(options_.workers, 1), options_.max_queued);
}

// The pool goes first: its threads may still be using the backend and the metrics.
OpenAiApi::~OpenAiApi() { pool_.reset(); }

Json OpenAiApi::Stats() const {
  return Json{{"model", model_name_},
              {"workers", pool_ ? pool_->threads() : 0},
              {"running", pool_ ? pool_->running() : 0},
              {"queued", pool_ ? pool_->queued() : 0}};
}

void OpenAiApi::Count(const char* endpoint, int status) {
  if (options_.metrics == nullptr) return;
  options_.metrics->Increment("envforge_v1_requests_total", {{"endpoint", endpoint}, {"code", std::to_string(status)}},
                              1, "Requests to the OpenAI-compatible /v1 endpoint, by endpoint and HTTP status");
}

void OpenAiApi::Handle(std::string_view method, std::string_view path, std::string body,
                       std::shared_ptr<V1Responder> responder) {
  try {
    auto refuse = [&](const ApiError& error, V1Responder::Headers headers = {}) {
      Count("other", error.status);
      ReplyError(*responder, error, std::move(headers));
    };
    bool chat = path == "/v1/chat/completions";
    bool models = path == "/v1/models" || path.rfind("/v1/models/", 0) == 0;
    if (!chat && !models && path != "/v1/completions") {
      return refuse(
          Error(404,
                "Invalid URL (" + std::string(method) + " " + std::string(path) +
                    "): this server offers GET /v1/models, POST /v1/chat/completions and POST /v1/completions",
                "invalid_request_error", "unknown_url"));
    }
    const char* wanted = models ? "GET" : "POST";
    if (method != wanted) {
      return refuse(Error(405, "use " + std::string(wanted) + " " + std::string(path), "invalid_request_error",
                          "method_not_allowed"),
                    {{"Allow", wanted}});
    }
    if (backend_ == nullptr) {
      return refuse(Error(503,
                          "no model is served: start envforge serve with --model MODEL_DIR or --backend "
                          "embedded:DIR|openai:URL|scripted:FILE",
                          "server_error", "no_backend"));
    }
    if (path == "/v1/models") {
      Count("models", 200);
      return ReplyJson(*responder, 200, internal::ModelListJson(model_name_, created_));
    }
    if (models) {
      std::string id(path.substr(std::string_view("/v1/models/").size()));
      if (id != model_name_) {
        return refuse(Error(404, "The model '" + id + "' does not exist; this server serves '" + model_name_ + "'",
                            "invalid_request_error", "model_not_found"));
      }
      Count("models", 200);
      return ReplyJson(*responder, 200, internal::ModelJson(model_name_, created_));
    }
    Submit(chat, std::move(body), std::move(responder));
  } catch (const std::exception& e) {
    ENVFORGE_LOG(kError) << "/v1 request failed: " << e.what();
    Count("other", 500);
    ReplyError(*responder, Error(500, std::string("internal error: ") + e.what(), "server_error"));
  }
}

void OpenAiApi::Submit(bool chat, std::string body, std::shared_ptr<V1Responder> responder) {
  const char* endpoint = chat ? "chat" : "completions";
  auto refuse = [&](const ApiError& error) {
    Count(endpoint, error.status);
    ReplyError(*responder, error);
  };
  auto json = ParseOrderedJson(body, "request body");
  if (!json.ok()) return refuse(internal::InvalidField("", "malformed JSON: " + json.status().message()));
  auto parsed = chat ? internal::ParseChatRequest(*json) : internal::ParseCompletionRequest(Json(*json));
  if (auto* error = std::get_if<ApiError>(&parsed)) return refuse(*error);
  auto call = std::make_shared<Call>();
  call->request = std::move(std::get<V1Request>(parsed));
  call->responder = responder;
  call->received = std::chrono::steady_clock::now();
  if (!call->request.model.empty() && call->request.model != model_name_) {
    ApiError error =
        Error(404, "The model '" + call->request.model + "' does not exist; this server serves '" + model_name_ + "'",
              "invalid_request_error", "model_not_found");
    error.param = "model";
    return refuse(error);
  }
  bool submitted = pool_->TrySubmit(
      [this, call] { Complete(call); },
      [this, call, endpoint] {
        Count(endpoint, 503);
        ReplyError(*call->responder, Error(503, "the server is shutting down", "server_error", "shutting_down"));
      });
  if (!submitted) {
    ApiError error = Error(429,
                           "the server is at capacity (" + std::to_string(pool_->threads()) + " completions running, " +
                               std::to_string(options_.max_queued) + " waiting); retry later",
                           "server_error", "server_overloaded");
    error.retry_after_seconds = 1;
    refuse(error);
  }
}

void OpenAiApi::Complete(const std::shared_ptr<Call>& call) {
  V1Request& request = call->request;
  const char* endpoint = request.chat ? "chat" : "completions";
  ResponseMeta meta{internal::NewResponseId(request.chat ? "chatcmpl-" : "cmpl-"), internal::UnixSeconds(),
                    model_name_};
  std::shared_ptr<EventStream> stream;
  if (request.stream) {
    stream = std::make_shared<EventStream>(call->responder, meta, request);
    // Raw text is text from any backend. Chat pieces are split along the DSV32 layout from the
    // embedded engine; the openai backend's pieces are content only, which says all in
    // non-thinking mode; other chat text need not hold the reasoning (the scripted backend's does
    // not), so those messages are streamed from the parsed answer, once complete.
    bool thinking = request.completion.thinking;
    if (!request.chat || text_layout_ == TextLayout::kDsv32 ||
        (text_layout_ == TextLayout::kContentOnly && !thinking)) {
      request.completion.on_text = [stream](int64_t choice, std::string_view piece) { stream->OnText(choice, piece); };
    }
  }
  auto result = backend_->Complete(request.completion);
  request.completion.on_text = nullptr;  // the stream must not outlive this call through it
  if (!result.ok()) {
    ApiError error = internal::V1ErrorFromStatus(result.status());
    if (error.status >= 500) {
      ENVFORGE_LOG(kWarn) << "/v1 completion failed: " << result.status().ToString();
    }
    Count(endpoint, error.status);
    if (!stream || !stream->Fail(error)) ReplyError(*call->responder, error);
    return;
  }
  // /v1 has no way to continue a choice's cache: drop the caches the backend kept for them.
  for (const auto& choice : result->choices) {
    if (!choice.cache_handle.empty()) backend_->Release(choice.cache_handle);
  }
  internal::AssignToolCallIds(*result);
  if (!request.chat) TrimRawText(*result, request.completion.stop);
  if (options_.metrics != nullptr) {
    options_.metrics->Increment("envforge_v1_tokens_total", {{"kind", "prompt"}},
                                static_cast<double>(result->prompt_tokens),
                                "Tokens of /v1 completions (prompt: once per request; completion: every choice)");
    options_.metrics->Increment("envforge_v1_tokens_total", {{"kind", "completion"}},
                                static_cast<double>(result->completion_tokens));
    options_.metrics->Observe("envforge_v1_request_seconds", {{"endpoint", endpoint}},
                              std::chrono::duration<double>(std::chrono::steady_clock::now() - call->received).count(),
                              "Time from a /v1 completion's arrival to its last byte handed to the connection");
  }
  Count(endpoint, 200);
  if (stream) return stream->Finish(request, *result);
  ReplyJson(*call->responder, 200,
            request.chat ? internal::ChatCompletionJson(meta, request, *result)
                         : internal::TextCompletionJson(meta, request, *result));
}

std::string V1ErrorBody(std::string_view message, std::string_view type, std::string_view code) {
  internal::ApiError error;
  error.message = std::string(message);
  error.type = std::string(type);
  error.code = std::string(code);
  return DumpJson(internal::ErrorJson(error));
}

}  // namespace envforge::server
