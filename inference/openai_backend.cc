// The openai backend: HTTP through libcurl, retries, the concurrency cap.
#include "inference/openai_backend.h"

#include <curl/curl.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "inference/internal/openai_wire.h"

namespace envforge::inference {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kMaxRetryAfter{60'000};
constexpr milliseconds kFirstBackoff{250};
constexpr milliseconds kMaxBackoff{20'000};
constexpr size_t kMaxResponseBytes = 256 << 20;

void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// At most `limit` holders at once; Acquire blocks until a slot is free.
class ConcurrencyCap {
 public:
  explicit ConcurrencyCap(int limit) : limit_(limit) {}
  void Acquire() {
    std::unique_lock lock(mutex_);
    freed_.wait(lock, [&] { return in_flight_ < limit_; });
    ++in_flight_;
  }
  void Release() {
    {
      std::lock_guard lock(mutex_);
      --in_flight_;
    }
    freed_.notify_one();
  }
  int in_flight() const {
    std::lock_guard lock(mutex_);
    return in_flight_;
  }

 private:
  const int limit_;
  mutable std::mutex mutex_;
  std::condition_variable freed_;
  int in_flight_ = 0;
};

// Where the bytes of one attempt go: the stream assembler for a 2xx event stream, else `body`.
struct ReplySink {
  CURL* handle = nullptr;
  openai_wire::StreamAssembler* assembler = nullptr;
  bool decided = false;
  bool streamed = false;
  std::string body;
  Status error;  // why the transfer was stopped from here (curl then says CURLE_WRITE_ERROR)
  std::optional<milliseconds> retry_after;
};

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* sink = static_cast<ReplySink*>(user);
  size_t bytes = size * count;
  if (!sink->decided) {
    sink->decided = true;
    long status = 0;
    char* content_type = nullptr;
    curl_easy_getinfo(sink->handle, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(sink->handle, CURLINFO_CONTENT_TYPE, &content_type);
    sink->streamed = sink->assembler != nullptr && status / 100 == 2 && content_type != nullptr &&
                     std::string_view(content_type).find("text/event-stream") != std::string_view::npos;
  }
  if (sink->streamed) {
    sink->error = sink->assembler->Feed(std::string_view(data, bytes));
    return sink->error.ok() ? bytes : 0;
  }
  if (sink->body.size() + bytes > kMaxResponseBytes) {
    sink->error = DataLossError("response larger than 256 MiB");
    return 0;
  }
  sink->body.append(data, bytes);
  return bytes;
}

// Retry-After in seconds (the HTTP-date form is left to the backoff).
std::optional<milliseconds> ParseRetryAfter(std::string_view value) {
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back()))) value.remove_suffix(1);
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.front()))) value.remove_prefix(1);
  std::string text(value);
  char* end = nullptr;
  double seconds = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !(seconds >= 0)) return std::nullopt;
  return std::min(kMaxRetryAfter, milliseconds(static_cast<int64_t>(std::min(seconds, 1e6) * 1000)));
}

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* sink = static_cast<ReplySink*>(user);
  std::string_view line(data, size * count);
  if (line.substr(0, 5) == "HTTP/") sink->retry_after.reset();  // a new response (after 100 Continue)
  constexpr std::string_view kName = "retry-after:";
  if (line.size() > kName.size()) {
    bool match = std::equal(kName.begin(), kName.end(), line.begin(),
                            [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); });
    if (match) sink->retry_after = ParseRetryAfter(line.substr(kName.size()));
  }
  return size * count;
}

// The message of an OpenAI error body ({"error": {"message": ...}}; `parsed` is the body parsed,
// or an error), or the start of the body.
std::string ServerMessage(const std::string& body, const Result<Json>& parsed) {
  if (parsed.ok() && parsed->is_object()) {
    const Json& error = parsed->value("error", Json());
    if (error.is_object() && error.contains("message") && error["message"].is_string()) return error["message"];
    if (error.is_string()) return error.get<std::string>();
    if (parsed->contains("message") && (*parsed)["message"].is_string()) return (*parsed)["message"];
  }
  if (body.empty()) return "(empty body)";
  return body.size() <= 300 ? body : body.substr(0, 300) + "...";
}

// OpenAI's error code, or the message vLLM, SGLang and DeepSeek give a prompt past the window.
bool ContextLengthExceeded(const Result<Json>& parsed, const std::string& message) {
  if (parsed.ok() && parsed->is_object()) {
    const Json& error = parsed->value("error", Json());
    if (error.is_object() && error.value("code", Json()) == "context_length_exceeded") return true;
  }
  std::string lower = message;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  return lower.find("context length") != std::string::npos;
}

milliseconds Backoff(int attempt) {
  thread_local std::mt19937_64 random{std::random_device{}()};
  double base = static_cast<double>(kFirstBackoff.count()) * static_cast<double>(1LL << std::min(attempt, 16));
  base = std::min(base, static_cast<double>(kMaxBackoff.count()));
  double jitter = std::uniform_real_distribution<double>(0.5, 1.5)(random);
  return milliseconds(static_cast<int64_t>(base * jitter));
}

bool RetryableStatus(long status) {
  return status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

// What one attempt came to: a body to parse, or an error, retryable or not.
struct Attempt {
  std::optional<std::string> body;  // set on success
  Status error;
  bool retryable = false;
  std::optional<milliseconds> retry_after;
  bool streamed = false;  // the body was assembled from events (on_text already saw the text)
};

class OpenAiBackend : public Backend {
 public:
  OpenAiBackend(std::string base_url, std::string api_key, BackendOptions options)
      : base_url_(std::move(base_url)),
        api_key_(std::move(api_key)),
        options_(std::move(options)),
        cap_(options_.max_concurrency) {}

  ~OpenAiBackend() override {
    for (CURL* handle : idle_handles_) curl_easy_cleanup(handle);
  }

  BackendInfo info() const override {
    return BackendInfo{"openai", "openai:" + base_url_, options_.model_name, options_.context_window};
  }

  int64_t CountTokens(std::string_view text) const override { return static_cast<int64_t>((text.size() + 3) / 4); }

  Json Stats() const override {
    return Json{{"requests", requests_.load()},
                {"attempts", attempts_.load()},
                {"retries", retries_.load()},
                {"failures", failures_.load()},
                {"in_flight", cap_.in_flight()}};
  }

  Result<CompletionResult> Complete(const CompletionRequest& request) override {
    ++requests_;
    Result<CompletionResult> result = CompleteOnce(request);
    if (!result.ok()) ++failures_;
    return result;
  }

 private:
  Result<CompletionResult> CompleteOnce(const CompletionRequest& request) {
    std::string model = request.model.empty() ? options_.model_name : request.model;
    bool stream = static_cast<bool>(request.on_text);
    ENVFORGE_ASSIGN_OR_RETURN(OrderedJson body, openai_wire::BuildRequestBody(request, model, stream));
    std::string url = base_url_ + (request.raw ? "/completions" : "/chat/completions");
    milliseconds timeout = request.timeout.count() > 0 ? request.timeout : options_.request_timeout;
    std::string body_text = DumpOrderedJson(body);

    Attempt attempt;
    for (int tries = 0;; ++tries) {
      std::optional<openai_wire::StreamAssembler> assembler;
      if (stream) assembler.emplace(request.raw, request.on_text, url);
      attempt = Post(url, body_text, timeout, assembler ? &*assembler : nullptr);
      if (attempt.body) break;
      bool text_seen = assembler && assembler->delivered_text();
      if (!attempt.retryable || text_seen || tries >= options_.max_retries) {
        if (attempt.retryable) {
          return Status(attempt.error.code(),
                        attempt.error.message() + " (after " + std::to_string(tries + 1) + " attempts)");
        }
        return attempt.error;
      }
      ++retries_;
      std::this_thread::sleep_for(attempt.retry_after ? *attempt.retry_after : Backoff(tries));
    }

    ENVFORGE_ASSIGN_OR_RETURN(CompletionResult result, openai_wire::ParseResponse(*attempt.body, request, url));
    if (result.model.empty()) result.model = model;
    // A server that ignored "stream": the caller still sees every choice's text once.
    if (stream && !attempt.streamed) {
      for (size_t k = 0; k < result.choices.size(); ++k) {
        if (!result.choices[k].message.content.empty())
          request.on_text(static_cast<int64_t>(k), result.choices[k].message.content);
      }
    }
    return result;
  }

  // One HTTP attempt, holding a concurrency slot while it runs.
  Attempt Post(const std::string& url, const std::string& body, milliseconds timeout,
               openai_wire::StreamAssembler* assembler) {
    cap_.Acquire();
    ++attempts_;
    CURL* handle = TakeHandle();
    ReplySink sink;
    sink.handle = handle;
    sink.assembler = assembler;
    char curl_error[CURL_ERROR_SIZE] = {0};
    curl_slist* headers = nullptr;
    headers = curl_slist_append(headers, "Content-Type: application/json");
    headers = curl_slist_append(headers, assembler ? "Accept: text/event-stream" : "Accept: application/json");
    headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip for large bodies
    std::string authorization = "Authorization: Bearer " + api_key_;
    if (!api_key_.empty()) headers = curl_slist_append(headers, authorization.c_str());

    curl_easy_setopt(handle, CURLOPT_URL, url.c_str());
    curl_easy_setopt(handle, CURLOPT_POST, 1L);
    curl_easy_setopt(handle, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(handle, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM for timeouts
    curl_easy_setopt(handle, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
    curl_easy_setopt(handle, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(timeout.count()));
    curl_easy_setopt(handle, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(handle, CURLOPT_ERRORBUFFER, curl_error);
    curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, OnBody);
    curl_easy_setopt(handle, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, OnHeader);
    curl_easy_setopt(handle, CURLOPT_HEADERDATA, &sink);
    CURLcode code = curl_easy_perform(handle);
    long status = 0;
    curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(headers);
    curl_easy_setopt(handle, CURLOPT_ERRORBUFFER, nullptr);
    ReturnHandle(handle);
    cap_.Release();

    std::string curl_message = curl_error[0] ? curl_error : curl_easy_strerror(code);
    return Judge(url, code, curl_message, status, timeout, sink);
  }

  static Attempt Judge(const std::string& url, CURLcode code, const std::string& curl_message, long status,
                       milliseconds timeout, ReplySink& sink) {
    Attempt attempt;
    attempt.retry_after = sink.retry_after;
    attempt.streamed = sink.streamed;
    if (code == CURLE_WRITE_ERROR && !sink.error.ok()) {
      attempt.error = sink.error.code() == StatusCode::kDataLoss && !sink.streamed
                          ? DataLossError("openai response from " + url + ": " + sink.error.message())
                          : sink.error;
      return attempt;
    }
    if (code == CURLE_OPERATION_TIMEDOUT) {
      attempt.error = DeadlineExceededError("openai request to " + url + " ran past its timeout of " +
                                            std::to_string(timeout.count()) + " ms (" + curl_message + ")");
      return attempt;
    }
    if (code != CURLE_OK) {
      attempt.error = UnavailableError("openai server " + url + " unreachable: " + curl_message);
      attempt.retryable = true;
      return attempt;
    }
    if (status / 100 == 2) {
      if (!sink.streamed) {
        attempt.body = std::move(sink.body);
        return attempt;
      }
      Result<std::string> assembled = sink.assembler->Finish();
      if (!assembled.ok()) {
        attempt.error = assembled.status();
        return attempt;
      }
      attempt.body = std::move(*assembled);
      return attempt;
    }
    const Result<Json> error_body = ParseJson(sink.body, "error body");
    std::string message = ServerMessage(sink.body, error_body);
    std::string answered = "HTTP " + std::to_string(status) + ": " + message;
    if (status == 400 && ContextLengthExceeded(error_body, message)) {
      // backend.h: the rollout loop frees context on this prefix.
      attempt.error = ResourceExhaustedError("context length exceeded: openai server " + url + " answered " + answered);
      return attempt;
    }
    if (status / 100 == 4 && status != 429) {
      attempt.error = InvalidArgumentError("openai server " + url + " refused the request with " + answered);
      return attempt;
    }
    attempt.error = UnavailableError("openai server " + url + " answered " + answered);
    attempt.retryable = RetryableStatus(status);
    return attempt;
  }

  // Easy handles are kept so that their connections are reused across requests.
  CURL* TakeHandle() {
    {
      std::lock_guard lock(handles_mutex_);
      if (!idle_handles_.empty()) {
        CURL* handle = idle_handles_.back();
        idle_handles_.pop_back();
        curl_easy_reset(handle);
        return handle;
      }
    }
    return curl_easy_init();
  }
  void ReturnHandle(CURL* handle) {
    std::lock_guard lock(handles_mutex_);
    idle_handles_.push_back(handle);
  }

  const std::string base_url_;
  const std::string api_key_;
  const BackendOptions options_;
  ConcurrencyCap cap_;
  std::mutex handles_mutex_;
  std::vector<CURL*> idle_handles_;
  std::atomic<int64_t> requests_{0}, attempts_{0}, retries_{0}, failures_{0};
};

Result<std::string> ApiKey(const BackendOptions& options) {
  if (!options.api_key_env.empty()) {
    const char* value = std::getenv(options.api_key_env.c_str());
    if (value == nullptr) {
      return InvalidArgumentError("openai backend: the API key variable " + options.api_key_env + " is not set");
    }
    return std::string(value);
  }
  const char* value = std::getenv("OPENAI_API_KEY");
  return std::string(value ? value : "");
}

}  // namespace

Result<std::unique_ptr<Backend>> OpenOpenAiBackend(const std::string& base_url, const BackendOptions& options) {
  if (base_url.empty()) return InvalidArgumentError("openai backend: empty URL (expected openai:http://HOST:PORT/v1)");
  bool http = base_url.rfind("http://", 0) == 0 && base_url.size() > 7;
  bool https = base_url.rfind("https://", 0) == 0 && base_url.size() > 8;
  if (!http && !https) {
    return InvalidArgumentError("openai backend: '" + base_url + "' is not an http:// or https:// URL");
  }
  if (options.max_concurrency < 1) {
    return InvalidArgumentError("openai backend: max_concurrency must be at least 1, got " +
                                std::to_string(options.max_concurrency));
  }
  if (options.max_retries < 0) {
    return InvalidArgumentError("openai backend: max_retries must be >= 0, got " + std::to_string(options.max_retries));
  }
  if (options.request_timeout.count() <= 0)
    return InvalidArgumentError("openai backend: request_timeout must be positive");
  ENVFORGE_ASSIGN_OR_RETURN(std::string api_key, ApiKey(options));
  InitCurlOnce();
  std::string base = base_url;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  return std::unique_ptr<Backend>(std::make_unique<OpenAiBackend>(std::move(base), std::move(api_key), options));
}

}  // namespace envforge::inference
