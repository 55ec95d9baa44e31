// The HTTP layer under the live search backends (web_search_backend.h): requests over libcurl
// with a per-attempt timeout, retries with jittered exponential backoff that honour Retry-After,
// a client-side rate limit (token bucket), bounded response bodies parsed with base/json.h's
// bounded ParseJson, an expiring LRU cache for answers, and the API key read from an environment
// variable whose NAME the configuration holds (the key itself is never in a config or a message).
//
// What is retried: HTTP 408, 429, 500, 502, 503, 504, connection failures and attempts that run
// past their timeout, up to HttpClientOptions::retries more attempts. The wait before a retry is
// the server's Retry-After (delta-seconds or an HTTP-date) when it sent one, else a jittered
// exponential backoff (initial_backoff * 2^n, times a factor in [0.5, 1.5), at most max_backoff).
// A Retry-After longer than max_retry_after is not waited for: the request fails at once.
//
// Errors of HttpSearchClient::Send, each naming the backend (or HttpRequest::label) and the URL,
// never the key:
//   Unauthenticated   401 (the message names the key variable when there is one)
//   PermissionDenied  403
//   NotFound          404, 410
//   ResourceExhausted 429 after the retries, or with a Retry-After past max_retry_after
//   InvalidArgument   any other 4xx, with the server's message
//   Unavailable       5xx or a connection failure after the retries
//   DeadlineExceeded  the last attempt ran past its timeout
//   DataLoss          a body larger than its bound (HttpRequest::max_bytes) when not truncating
//   PermissionDenied  with public_addresses_only, a connection (any redirect hop included) to a
//                     non-public address, naming it; never retried
// SendJson adds DataLoss "<backend> response from <url>: ..." for a 2xx body that is not JSON
// (or nests deeper than kMaxJsonDepth) or is not a JSON object.
//
// Thread safety: HttpSearchClient, TokenBucket and ExpiringLruCache are thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/json.h"
#include "base/status.h"

namespace envforge::search {

// The value of the environment variable `variable`, the API key of `backend`. FailedPrecondition
// "<backend> backend: the API key variable <variable> is not set" when it is unset or empty;
// InvalidArgument when `variable` is not a variable name ([A-Za-z_][A-Za-z0-9_]*; the message
// does not repeat it, in case a key was put there by mistake).
Result<std::string> ReadApiKey(std::string_view backend, const std::string& variable);

// True for [A-Za-z_][A-Za-z0-9_]*, at most 128 bytes.
bool IsEnvironmentVariableName(std::string_view name);

// Percent-encoding of a query-string value (RFC 3986 unreserved bytes stay; space is %20).
std::string UrlEncode(std::string_view text);

// True for "http://X" and "https://X" with a non-empty rest.
bool IsHttpUrl(std::string_view url);

// `href` resolved against the absolute URL `base` (RFC 3986 section 5.2, without the dot-segment
// removal corner cases: "." and ".." segments of relative paths are removed). The fragment is
// dropped. Empty for an href that is fragment-only or not http(s) after resolution (mailto:,
// javascript:, ...).
std::string ResolveUrl(std::string_view base, std::string_view href);

// A token bucket: `rate_per_s` tokens a second, at most `burst` stored; it starts full.
// Acquire() takes one token, sleeping until there is one. rate_per_s <= 0: no limit.
class TokenBucket {
 public:
  TokenBucket(double rate_per_s, double burst);
  void Acquire();
  double rate_per_s() const { return rate_per_s_; }

 private:
  const double rate_per_s_;
  const double burst_;
  std::mutex mutex_;
  double tokens_;
  std::chrono::steady_clock::time_point refilled_;
};

// An LRU map of at most `capacity` entries, each valid for `ttl` after it was put. capacity 0 or
// ttl <= 0 disables it (Get always misses, Put keeps nothing). Values are copied out.
template <typename Value>
class ExpiringLruCache {
 public:
  ExpiringLruCache(size_t capacity, std::chrono::milliseconds ttl) : capacity_(capacity), ttl_(ttl) {}

  std::optional<Value> Get(const std::string& key) {
    std::lock_guard lock(mutex_);
    auto found = index_.find(key);
    if (found == index_.end()) return std::nullopt;
    if (Now() >= found->second->expires) {
      entries_.erase(found->second);
      index_.erase(found);
      return std::nullopt;
    }
    entries_.splice(entries_.begin(), entries_, found->second);
    return found->second->value;
  }

  void Put(const std::string& key, Value value) {
    if (!enabled()) return;
    std::lock_guard lock(mutex_);
    auto found = index_.find(key);
    if (found != index_.end()) {
      entries_.erase(found->second);
      index_.erase(found);
    }
    entries_.push_front(Entry{key, std::move(value), Now() + ttl_});
    index_[key] = entries_.begin();
    while (entries_.size() > capacity_) {
      index_.erase(entries_.back().key);
      entries_.pop_back();
    }
  }

  size_t size() const {
    std::lock_guard lock(mutex_);
    return entries_.size();
  }
  bool enabled() const { return capacity_ > 0 && ttl_.count() > 0; }

  // Moves this cache's clock forward (entries expire as if `by` had passed).
  void TEST_AdvanceClock(std::chrono::milliseconds by) {
    std::lock_guard lock(mutex_);
    offset_ += by;
  }

 private:
  struct Entry {
    std::string key;
    Value value;
    std::chrono::steady_clock::time_point expires;
  };
  std::chrono::steady_clock::time_point Now() const { return std::chrono::steady_clock::now() + offset_; }

  const size_t capacity_;
  const std::chrono::milliseconds ttl_;
  mutable std::mutex mutex_;
  std::list<Entry> entries_;  // most recently used first
  std::unordered_map<std::string, typename std::list<Entry>::iterator> index_;
  std::chrono::milliseconds offset_{0};
};

// The cache key of one search: backend, query text and top_k, separated by bytes that cannot be
// confused with text.
std::string SearchCacheKey(std::string_view backend, std::string_view query, int top_k);

struct HttpClientOptions {
  std::string backend;                        // names every error: "brave", "serper", ...
  std::string api_key_env;                    // for messages only (401 names it); may be empty
  std::chrono::milliseconds timeout{10'000};  // per attempt, connecting included
  int retries = 2;                            // extra attempts after the first; >= 0
  double rate_per_s = 0;                      // rate-limited requests a second; 0: no limit
  double rate_burst = 1;                      // tokens the bucket holds (requests at once)
  std::chrono::milliseconds initial_backoff{250};
  std::chrono::milliseconds max_backoff{8'000};
  std::chrono::milliseconds max_retry_after{30'000};  // longer Retry-After: fail, do not wait
  size_t max_response_bytes = 4 << 20;                // default bound of a body
  std::string user_agent = "envforge-search/1";
};

enum class HttpMethod { kGet, kPost };

struct HttpRequest {
  HttpMethod method = HttpMethod::kGet;
  std::string url;                     // absolute, query string already encoded (UrlEncode)
  std::vector<std::string> headers;    // "Name: value"; carry the key only to the API's own host
  std::string body;                    // POST only, sent as is
  size_t max_bytes = 0;                // body bound; 0: HttpClientOptions::max_response_bytes
  bool truncate = false;               // past max_bytes: keep the first max_bytes, not an error
  bool rate_limited = true;            // takes a token from the bucket per attempt
  bool follow_redirects = false;       // at most 5, http and https only
  bool public_addresses_only = false;  // refuse to connect to a non-public address (public_address.h)
  std::string label;                   // names the peer in messages; empty: "<backend> server"
};

struct HttpResponse {
  long status = 0;
  std::string content_type;   // as sent, e.g. "text/html; charset=utf-8"; may be empty
  std::string effective_url;  // after redirects
  std::string body;
  bool truncated = false;  // the body was cut at max_bytes (HttpRequest::truncate)
};

struct HttpClientStats {
  int64_t requests = 0;  // Send calls
  int64_t attempts = 0;  // HTTP exchanges tried
  int64_t retries = 0;
  int64_t failures = 0;  // Send calls that returned an error
};

class HttpSearchClient {
 public:
  // Errors (InvalidArgument, naming the backend): retries < 0, timeout <= 0, rate_per_s < 0,
  // rate_burst < 1, max_response_bytes == 0.
  static Result<std::unique_ptr<HttpSearchClient>> Create(HttpClientOptions options);
  ~HttpSearchClient();
  HttpSearchClient(const HttpSearchClient&) = delete;
  HttpSearchClient& operator=(const HttpSearchClient&) = delete;

  // The request under the retry policy; the final 2xx response, or the error (file comment).
  Result<HttpResponse> Send(const HttpRequest& request);
  // Send, then the body parsed as a JSON object (file comment).
  Result<Json> SendJson(const HttpRequest& request);

  HttpClientStats stats() const;
  const HttpClientOptions& options() const { return options_; }

 private:
  struct Attempt;
  explicit HttpSearchClient(HttpClientOptions options);
  Attempt Exchange(const HttpRequest& request);
  Status Judge(const HttpRequest& request, const Attempt& attempt) const;
  void* TakeHandle();
  void ReturnHandle(void* handle);

  const HttpClientOptions options_;
  TokenBucket bucket_;
  mutable std::mutex mutex_;
  std::vector<void*> idle_handles_;  // CURL*, kept so connections are reused
  HttpClientStats stats_;
};

}  // namespace envforge::search
