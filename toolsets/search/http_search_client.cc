// The live backends' HTTP layer: libcurl exchanges, the retry loop, the token bucket.
#include "toolsets/search/http_search_client.h"

#include <sys/socket.h>

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <ctime>
#include <random>
#include <thread>

#include "toolsets/search/public_address.h"

namespace envforge::search {
namespace {

using std::chrono::milliseconds;

void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

bool StartsWith(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

std::string_view Trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

bool HeaderIs(std::string_view line, std::string_view name) {
  if (line.size() <= name.size() || line[name.size()] != ':') return false;
  return std::equal(name.begin(), name.end(), line.begin(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
  });
}

// Retry-After as delta-seconds or an HTTP-date (RFC 9110 section 10.2.3).
std::optional<milliseconds> ParseRetryAfter(std::string_view value) {
  value = Trim(value);
  if (value.empty()) return std::nullopt;
  std::string text(value);
  if (std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c); })) {
    if (text.size() > 9) return milliseconds::max();
    return milliseconds(std::stoll(text) * 1000);
  }
  time_t when = curl_getdate(text.c_str(), nullptr);
  if (when < 0) return std::nullopt;
  time_t now = std::time(nullptr);
  return milliseconds(when > now ? static_cast<int64_t>(when - now) * 1000 : 0);
}

// A short human message from an error body: the usual JSON error fields of the search APIs
// (Brave {"error": {"detail"}}, Tavily {"detail": {"error"}}, Serper {"message"}, OpenAI-like
// {"error": {"message"}}), else the start of the body.
std::string ServerMessage(const std::string& body) {
  Result<Json> parsed = ParseJson(body, "error body");
  if (parsed.ok() && parsed->is_object()) {
    auto text_of = [](const Json& value) -> std::optional<std::string> {
      if (value.is_string()) return value.get<std::string>();
      if (value.is_object()) {
        for (const char* field : {"detail", "message", "error"}) {
          auto found = value.find(field);
          if (found != value.end() && found->is_string()) return found->get<std::string>();
        }
      }
      return std::nullopt;
    };
    for (const char* field : {"error", "detail", "message"}) {
      auto found = parsed->find(field);
      if (found == parsed->end()) continue;
      if (std::optional<std::string> text = text_of(*found)) return *text;
    }
  }
  std::string start;
  for (char c : body.substr(0, 200)) start += std::isprint(static_cast<unsigned char>(c)) ? c : ' ';
  if (start.empty()) return "(empty body)";
  return body.size() > 200 ? start + "..." : start;
}

// RFC 3986 section 5.2.4.
std::string RemoveDotSegments(std::string input) {
  std::string output;
  auto pop_segment = [&output] {
    size_t slash = output.rfind('/');
    output.erase(slash == std::string::npos ? 0 : slash);
  };
  while (!input.empty()) {
    if (StartsWith(input, "../")) {
      input.erase(0, 3);
    } else if (StartsWith(input, "./")) {
      input.erase(0, 2);
    } else if (StartsWith(input, "/./")) {
      input.replace(0, 3, "/");
    } else if (input == "/.") {
      input = "/";
    } else if (StartsWith(input, "/../")) {
      input.replace(0, 4, "/");
      pop_segment();
    } else if (input == "/..") {
      input = "/";
      pop_segment();
    } else if (input == "." || input == "..") {
      input.clear();
    } else {
      size_t end = input.find('/', input[0] == '/' ? 1 : 0);
      if (end == std::string::npos) end = input.size();
      output += input.substr(0, end);
      input.erase(0, end);
    }
  }
  return output.empty() ? "/" : output;
}

bool RetryableStatus(long status) {
  return status == 408 || status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

// Where one attempt's bytes go.
struct Sink {
  size_t max_bytes = 0;
  bool truncate = false;
  bool overflowed = false;  // more than max_bytes arrived (the transfer was stopped)
  std::string body;
  std::optional<milliseconds> retry_after;
};

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* sink = static_cast<Sink*>(user);
  size_t bytes = size * count;
  if (sink->body.size() + bytes > sink->max_bytes) {
    if (sink->truncate) sink->body.append(data, sink->max_bytes - sink->body.size());
    sink->overflowed = true;
    return 0;  // stops the transfer: CURLE_WRITE_ERROR
  }
  sink->body.append(data, bytes);
  return bytes;
}

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* sink = static_cast<Sink*>(user);
  std::string_view line(data, size * count);
  if (StartsWith(line, "HTTP/")) sink->retry_after.reset();  // a new response (redirect, 100)
  if (HeaderIs(line, "retry-after")) sink->retry_after = ParseRetryAfter(line.substr(12));
  return size * count;
}

// CURLOPT_OPENSOCKETFUNCTION: the socket for a connection curl is about to make, or none when the
// address is not public (curl then fails the transfer with CURLE_COULDNT_CONNECT).
curl_socket_t OpenPublicSocket(void* refused, curlsocktype, curl_sockaddr* address) {
  if (!IsPublicAddress(&address->addr)) {
    *static_cast<std::string*>(refused) = AddressText(&address->addr);
    return CURL_SOCKET_BAD;
  }
  return socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);  // not into forked children
}

#if LIBCURL_VERSION_NUM >= 0x075000
// CURLOPT_PREREQFUNCTION: runs before every request, on a reused connection too (which opens no
// socket), with the address the connection is made to.
int CheckConnectedAddress(void* refused, char* primary_ip, char*, int, int) {
  if (IsPublicAddressText(primary_ip)) return CURL_PREREQFUNC_OK;
  *static_cast<std::string*>(refused) = primary_ip;
  return CURL_PREREQFUNC_ABORT;
}
#endif

// Every connection of the transfer (each redirect hop) must go to a public address; `refused`
// receives the first address that did not.
void GuardAddresses(CURL* handle, std::string* refused) {
  curl_easy_setopt(handle, CURLOPT_OPENSOCKETFUNCTION, OpenPublicSocket);
  curl_easy_setopt(handle, CURLOPT_OPENSOCKETDATA, refused);
#if LIBCURL_VERSION_NUM >= 0x075000
  curl_easy_setopt(handle, CURLOPT_PREREQFUNCTION, CheckConnectedAddress);
  curl_easy_setopt(handle, CURLOPT_PREREQDATA, refused);
#else
  curl_easy_setopt(handle, CURLOPT_FRESH_CONNECT, 1L);  // no reused connection skips the socket check
#endif
}

}  // namespace

Result<std::string> ReadApiKey(std::string_view backend, const std::string& variable) {
  if (!IsEnvironmentVariableName(variable)) {
    return InvalidArgumentError(std::string(backend) +
                                " backend: api_key_env must name an environment variable ([A-Za-z_][A-Za-z0-9_]*); "
                                "the key itself never goes in the configuration");
  }
  const char* value = std::getenv(variable.c_str());
  if (value == nullptr || *value == '\0') {
    return FailedPreconditionError(std::string(backend) + " backend: the API key variable " + variable + " is not set");
  }
  return std::string(value);
}

bool IsEnvironmentVariableName(std::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  if (std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(),
                     [](unsigned char c) { return c == '_' || (c < 0x80 && std::isalnum(c)); });
}

std::string UrlEncode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size() * 3);
  for (unsigned char c : text) {
    if ((c < 0x80 && std::isalnum(c)) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

bool IsHttpUrl(std::string_view url) {
  return (StartsWith(url, "http://") && url.size() > 7) || (StartsWith(url, "https://") && url.size() > 8);
}

std::string ResolveUrl(std::string_view base, std::string_view href) {
  href = Trim(href);
  if (size_t hash = href.find('#'); hash != std::string_view::npos) href = href.substr(0, hash);
  if (href.empty()) return "";
  // An href with a scheme is absolute.
  size_t colon = href.find(':');
  size_t first_delimiter = href.find_first_of("/?#");
  if (colon != std::string_view::npos && colon > 0 &&
      (first_delimiter == std::string_view::npos || colon < first_delimiter) &&
      std::isalpha(static_cast<unsigned char>(href[0]))) {
    std::string url(href);
    return IsHttpUrl(url) ? url : "";
  }
  if (!IsHttpUrl(base)) return "";
  size_t scheme_end = base.find("://") + 3;
  std::string_view scheme = base.substr(0, scheme_end - 3);
  size_t authority_end = base.find_first_of("/?#", scheme_end);
  if (authority_end == std::string_view::npos) authority_end = base.size();
  std::string_view authority = base.substr(scheme_end, authority_end - scheme_end);
  if (StartsWith(href, "//")) return std::string(scheme) + ":" + std::string(href);

  std::string_view base_path = base.substr(authority_end);
  if (size_t cut = base_path.find_first_of("?#"); cut != std::string_view::npos) base_path = base_path.substr(0, cut);
  std::string path;
  std::string query;
  if (href[0] == '?') {
    path = std::string(base_path.empty() ? "/" : base_path);
    query = std::string(href);
  } else {
    std::string_view href_path = href;
    if (size_t q = href.find('?'); q != std::string_view::npos) {
      href_path = href.substr(0, q);
      query = std::string(href.substr(q));
    }
    if (!href_path.empty() && href_path[0] == '/') {
      path = std::string(href_path);
    } else {
      size_t slash = base_path.rfind('/');
      path = (slash == std::string_view::npos ? std::string("/") : std::string(base_path.substr(0, slash + 1))) +
             std::string(href_path);
    }
  }
  return std::string(scheme) + "://" + std::string(authority) + RemoveDotSegments(path) + query;
}

std::string SearchCacheKey(std::string_view backend, std::string_view query, int top_k) {
  std::string key(backend);
  key += '\x1f';
  key += query;
  key += '\x1f';
  key += std::to_string(top_k);
  return key;
}

TokenBucket::TokenBucket(double rate_per_s, double burst)
    : rate_per_s_(rate_per_s),
      burst_(std::max(1.0, burst)),
      tokens_(std::max(1.0, burst)),
      refilled_(std::chrono::steady_clock::now()) {}

void TokenBucket::Acquire() {
  if (rate_per_s_ <= 0) return;
  std::chrono::steady_clock::time_point ready;
  {
    std::lock_guard lock(mutex_);
    auto now = std::chrono::steady_clock::now();
    tokens_ = std::min(burst_, tokens_ + std::chrono::duration<double>(now - refilled_).count() * rate_per_s_);
    refilled_ = now;
    // Take the token now (tokens_ may go negative): callers queue in the order they arrived.
    tokens_ -= 1;
    double wait_s = tokens_ >= 0 ? 0 : -tokens_ / rate_per_s_;
    ready =
        now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(wait_s));
  }
  std::this_thread::sleep_until(ready);
}

struct HttpSearchClient::Attempt {
  CURLcode code = CURLE_OK;
  std::string refused_address;  // a non-public address a public_addresses_only request met
  std::string curl_message;
  long status = 0;
  std::string content_type;
  std::string effective_url;
  Sink sink;
};

Result<std::unique_ptr<HttpSearchClient>> HttpSearchClient::Create(HttpClientOptions options) {
  const std::string& name = options.backend;
  if (options.retries < 0)
    return InvalidArgumentError(name + " backend: retries must be >= 0, got " + std::to_string(options.retries));
  if (options.timeout.count() <= 0) return InvalidArgumentError(name + " backend: the timeout must be positive");
  if (!(options.rate_per_s >= 0)) return InvalidArgumentError(name + " backend: rate_per_s must be >= 0");
  if (!(options.rate_burst >= 1)) return InvalidArgumentError(name + " backend: rate_burst must be >= 1");
  if (options.max_response_bytes == 0)
    return InvalidArgumentError(name + " backend: max_response_bytes must be positive");
  InitCurlOnce();
  return std::unique_ptr<HttpSearchClient>(new HttpSearchClient(std::move(options)));
}

HttpSearchClient::HttpSearchClient(HttpClientOptions options)
    : options_(std::move(options)), bucket_(options_.rate_per_s, options_.rate_burst) {}

HttpSearchClient::~HttpSearchClient() {
  for (void* handle : idle_handles_) curl_easy_cleanup(static_cast<CURL*>(handle));
}

HttpClientStats HttpSearchClient::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void* HttpSearchClient::TakeHandle() {
  {
    std::lock_guard lock(mutex_);
    if (!idle_handles_.empty()) {
      void* handle = idle_handles_.back();
      idle_handles_.pop_back();
      curl_easy_reset(static_cast<CURL*>(handle));
      return handle;
    }
  }
  return curl_easy_init();
}

void HttpSearchClient::ReturnHandle(void* handle) {
  std::lock_guard lock(mutex_);
  idle_handles_.push_back(handle);
}

HttpSearchClient::Attempt HttpSearchClient::Exchange(const HttpRequest& request) {
  Attempt attempt;
  attempt.sink.max_bytes = request.max_bytes > 0 ? request.max_bytes : options_.max_response_bytes;
  attempt.sink.truncate = request.truncate;
  CURL* handle = static_cast<CURL*>(TakeHandle());
  if (handle == nullptr) {
    attempt.code = CURLE_FAILED_INIT;
    attempt.curl_message = "curl_easy_init failed";
    return attempt;
  }
  char curl_error[CURL_ERROR_SIZE] = {0};
  curl_slist* headers = nullptr;
  for (const std::string& header : request.headers) headers = curl_slist_append(headers, header.c_str());
  if (request.method == HttpMethod::kPost) headers = curl_slist_append(headers, "Expect:");

  curl_easy_setopt(handle, CURLOPT_URL, request.url.c_str());
  if (request.method == HttpMethod::kPost) {
    curl_easy_setopt(handle, CURLOPT_POST, 1L);
    curl_easy_setopt(handle, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  } else {
    curl_easy_setopt(handle, CURLOPT_HTTPGET, 1L);
  }
  curl_easy_setopt(handle, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(handle, CURLOPT_USERAGENT, options_.user_agent.c_str());
  curl_easy_setopt(handle, CURLOPT_ACCEPT_ENCODING, "");  // every encoding curl decodes
  curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(handle, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.timeout.count()));
  curl_easy_setopt(handle, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options_.timeout.count()));
#if LIBCURL_VERSION_NUM >= 0x075500
  curl_easy_setopt(handle, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(handle, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
  curl_easy_setopt(handle, CURLOPT_PROTOCOLS, static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS));
  curl_easy_setopt(handle, CURLOPT_REDIR_PROTOCOLS, static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
  if (request.public_addresses_only) GuardAddresses(handle, &attempt.refused_address);
  curl_easy_setopt(handle, CURLOPT_FOLLOWLOCATION, request.follow_redirects ? 1L : 0L);
  curl_easy_setopt(handle, CURLOPT_MAXREDIRS, 5L);
  curl_easy_setopt(handle, CURLOPT_ERRORBUFFER, curl_error);
  curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(handle, CURLOPT_WRITEDATA, &attempt.sink);
  curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(handle, CURLOPT_HEADERDATA, &attempt.sink);

  attempt.code = curl_easy_perform(handle);
  // A body cut on purpose (HttpRequest::truncate) is a complete exchange; its status still counts.
  if (attempt.code == CURLE_WRITE_ERROR && attempt.sink.overflowed && request.truncate) attempt.code = CURLE_OK;
  curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &attempt.status);
  char* content_type = nullptr;
  if (curl_easy_getinfo(handle, CURLINFO_CONTENT_TYPE, &content_type) == CURLE_OK && content_type) {
    attempt.content_type = content_type;
  }
  char* effective_url = nullptr;
  if (curl_easy_getinfo(handle, CURLINFO_EFFECTIVE_URL, &effective_url) == CURLE_OK && effective_url) {
    attempt.effective_url = effective_url;
  }
  attempt.curl_message = curl_error[0] ? curl_error : curl_easy_strerror(attempt.code);
  curl_slist_free_all(headers);
  curl_easy_setopt(handle, CURLOPT_ERRORBUFFER, nullptr);
  ReturnHandle(handle);
  return attempt;
}

// The error of an attempt that did not give a usable 2xx answer (OK when it did).
Status HttpSearchClient::Judge(const HttpRequest& request, const Attempt& attempt) const {
  const std::string peer = (request.label.empty() ? options_.backend + " server" : request.label) + " " + request.url;
  if (!attempt.refused_address.empty() && attempt.code != CURLE_OK) {
    return PermissionDeniedError(peer + ": refused to connect to " + attempt.refused_address +
                                 ", which is not a public address (this request may reach public addresses only)");
  }
  if (attempt.code == CURLE_WRITE_ERROR && attempt.sink.overflowed) {
    return DataLossError(options_.backend + " response from " + request.url + " is larger than " +
                         std::to_string(attempt.sink.max_bytes) + " bytes");
  }
  if (attempt.code == CURLE_OPERATION_TIMEDOUT) {
    return DeadlineExceededError(peer + " did not answer within the timeout of " +
                                 std::to_string(options_.timeout.count()) + " ms");
  }
  if (attempt.code == CURLE_TOO_MANY_REDIRECTS) return UnavailableError(peer + ": more than 5 redirects");
  if (attempt.code != CURLE_OK) return UnavailableError(peer + " unreachable: " + attempt.curl_message);
  long status = attempt.status;
  if (status / 100 == 2) return Status();
  std::string answered = peer + " answered HTTP " + std::to_string(status) + ": " + ServerMessage(attempt.sink.body);
  if (status == 401) {
    std::string hint = options_.api_key_env.empty() ? "" : " (check the key in " + options_.api_key_env + ")";
    return UnauthenticatedError(answered + hint);
  }
  if (status == 403) return PermissionDeniedError(answered);
  if (status == 404 || status == 410) return NotFoundError(answered);
  if (status == 429) return ResourceExhaustedError(answered);
  if (status / 100 == 4) return InvalidArgumentError(answered);
  return UnavailableError(answered);
}

Result<HttpResponse> HttpSearchClient::Send(const HttpRequest& request) {
  thread_local std::mt19937_64 random{std::random_device{}()};
  {
    std::lock_guard lock(mutex_);
    ++stats_.requests;
  }
  for (int tries = 0;; ++tries) {
    if (request.rate_limited) bucket_.Acquire();
    Attempt attempt = Exchange(request);
    Status error = Judge(request, attempt);
    {
      std::lock_guard lock(mutex_);
      ++stats_.attempts;
    }
    if (error.ok()) {
      HttpResponse response;
      response.status = attempt.status;
      response.content_type = std::move(attempt.content_type);
      response.effective_url = attempt.effective_url.empty() ? request.url : std::move(attempt.effective_url);
      response.body = std::move(attempt.sink.body);
      response.truncated = attempt.sink.overflowed;
      return response;
    }
    bool retryable =
        attempt.refused_address.empty() &&
        (attempt.code == CURLE_OPERATION_TIMEDOUT || attempt.code == CURLE_COULDNT_CONNECT ||
         attempt.code == CURLE_COULDNT_RESOLVE_HOST || attempt.code == CURLE_SEND_ERROR ||
         attempt.code == CURLE_RECV_ERROR || attempt.code == CURLE_GOT_NOTHING || attempt.code == CURLE_PARTIAL_FILE ||
         (attempt.code == CURLE_OK && RetryableStatus(attempt.status)));
    std::optional<milliseconds> retry_after = attempt.sink.retry_after;
    if (retryable && retry_after && *retry_after > options_.max_retry_after) {
      std::lock_guard lock(mutex_);
      ++stats_.failures;
      return ResourceExhaustedError(error.message() + " (Retry-After " + std::to_string(retry_after->count() / 1000) +
                                    " s is longer than the " + std::to_string(options_.max_retry_after.count() / 1000) +
                                    " s this client waits)");
    }
    if (!retryable || tries >= options_.retries) {
      std::lock_guard lock(mutex_);
      ++stats_.failures;
      if (tries == 0) return error;
      return Status(error.code(), error.message() + " (after " + std::to_string(tries + 1) + " attempts)");
    }
    milliseconds wait;
    if (retry_after) {
      wait = *retry_after;
    } else {
      double base =
          static_cast<double>(options_.initial_backoff.count()) * static_cast<double>(1LL << std::min(tries, 20));
      base = std::min(base, static_cast<double>(options_.max_backoff.count()));
      wait = milliseconds(static_cast<int64_t>(base * std::uniform_real_distribution<double>(0.5, 1.5)(random)));
    }
    {
      std::lock_guard lock(mutex_);
      ++stats_.retries;
    }
    std::this_thread::sleep_for(wait);
  }
}

Result<Json> HttpSearchClient::SendJson(const HttpRequest& request) {
  ENVFORGE_ASSIGN_OR_RETURN(HttpResponse response, Send(request));
  std::string what = options_.backend + " response from " + request.url;
  Result<Json> parsed = ParseJson(response.body, what);
  if (!parsed.ok()) return DataLossError(parsed.status().message());
  if (!parsed->is_object())
    return DataLossError(what + ": the body is " + std::string(parsed->type_name()) + ", not a JSON object");
  return std::move(*parsed);
}

}  // namespace envforge::search
