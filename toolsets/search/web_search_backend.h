// The live web search backends: Brave, Serper, Tavily and SearxNG behind SearchBackend, over the
// HTTP layer of http_search_client.h (timeouts, retries, Retry-After, rate limit, bounded bodies).
//
// Each API, as its public documentation describes it (request -> the fields read):
//   brave    GET  {base}/res/v1/web/search?q=TEXT&count=K, headers X-Subscription-Token: KEY,
//            Accept: application/json -> web.results[] {title, url, description}; no "web": none.
//            Default base https://api.search.brave.com, key variable BRAVE_API_KEY; top_k 1..20.
//   serper   POST {base}/search {"q": TEXT, "num": K}, header X-API-KEY: KEY -> organic[] {title,
//            link, snippet, position}. Default base https://google.serper.dev, SERPER_API_KEY;
//            top_k 1..100.
//   tavily   POST {base}/search {"query": TEXT, "max_results": K, "search_depth": "basic"},
//            header Authorization: Bearer KEY -> results[] {title, url, content, score}. Default
//            base https://api.tavily.com, TAVILY_API_KEY; top_k 1..20.
//   searxng  GET  {base}/search?q=TEXT&format=json -> results[] {title, url, content, score}. No
//            default base (self-hosted) and no key (with api_key_env set: Authorization: Bearer).
//            One result page, cut to top_k; top_k 1..50. An instance without the JSON format
//            enabled answers 403 (PermissionDenied, the message says so).
//
// Hits: doc_id and url are the result's URL; titles and snippets lose their HTML markup (Brave
// marks matches with <strong>, which becomes **like this**, the SearchHit convention) and their
// character references; results without a URL are skipped. score is the API's own score when it
// has one (Tavily, SearxNG), else 1 / rank (rank from 1). At most top_k hits, in the API's order.
//
// Cache: a page is kept in an expiring LRU keyed by backend, query text and top_k (cache_ttl,
// cache_entries); a hit costs no request and no rate-limit token. Errors are never cached.
//
// Open(url): GET the page itself (redirects followed, at most 5, http and https only; no key
// headers, no rate-limit token; the same timeout and retries), the body cut at max_page_bytes.
// The URL is the agent's choice, so by default every connection of the fetch, each redirect hop
// included, must go to a public address (public_address.h): loopback, private, link-local (the
// cloud metadata endpoint) and reserved addresses are PermissionDenied, naming the address, and
// are not retried. open_private_addresses lifts that (a lab's intranet, a local test server).
// text/html and application/xhtml+xml become text and links through html_text.h (links resolved
// against the final URL; http and https links only); text/plain, JSON and XML stay as they are;
// an ISO-8859-1 or windows-1252 body is converted to UTF-8. A cut page's text ends with the line
// "[page cut at N bytes]". Document: doc_id the URL asked for, url the final URL, title the HTML
// title (else the URL), source the backend's name.
//
// Errors of Search: InvalidArgument for an empty query or top_k outside the backend's bounds
// (naming them); those of HttpSearchClient::Send and SendJson (http_search_client.h); DataLoss
// "<backend> response from URL: ..." for a JSON object that is not the API's documented shape
// (its result list not an array, a result not an object).
// Errors of Open: InvalidArgument for an empty argument; NotFound naming it for a doc id that is
// not an http(s) URL and for 404/410;
// InvalidArgument for a page that is neither text nor HTML (naming its content type); the
// others of Send.
//
// Thread safety: as SearchBackend (one thread at a time); the client and cache are thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/json.h"
#include "base/status.h"
#include "toolsets/search/http_search_client.h"
#include "toolsets/search/search_backend.h"

namespace envforge::search {

struct WebBackendOptions {
  std::string base_url;                       // empty: the API's public endpoint (SearxNG: required); no trailing '/'
  std::string api_key_env;                    // empty: the API's conventional variable (SearxNG: none)
  std::chrono::milliseconds timeout{10'000};  // per attempt
  int retries = 2;                            // extra attempts after the first
  double rate_per_s = 0;                      // API requests a second (attempts); 0: no limit
  double rate_burst = 1;                      // requests the bucket lets through at once
  std::chrono::milliseconds cache_ttl{300'000};       // 0: no cache
  size_t cache_entries = 1024;                        // 0: no cache
  size_t max_response_bytes = 4 << 20;                // an API answer larger than this is DataLoss
  size_t max_page_bytes = 2 << 20;                    // Open cuts pages here
  bool open_private_addresses = false;                // let Open reach non-public addresses (see Open)
  std::chrono::milliseconds initial_backoff{250};     // first retry's wait without Retry-After
  std::chrono::milliseconds max_retry_after{30'000};  // longer Retry-After: fail at once
};

// What the per-API classes share: validation, the cache, Open. Created by the Open*Backend
// functions below.
class WebSearchBackend : public SearchBackend {
 public:
  ~WebSearchBackend() override;

  Result<SearchPage> Search(const SearchQuery& query) override;
  Result<Document> Open(std::string_view doc_id_or_url) override;
  std::string name() const override { return name_; }

  // The largest top_k this backend accepts.
  int max_top_k() const { return max_top_k_; }
  // {"requests", "attempts", "retries", "failures", "cache_hits", "cache_entries"}.
  Json Stats() const;

  void TEST_AdvanceCacheClock(std::chrono::milliseconds by) { cache_.TEST_AdvanceClock(by); }

 protected:
  // What every backend opens with: the base URL (the default when options have none, without a
  // trailing '/'), the key (read from options.api_key_env, else default_key_env; none when both
  // are empty) and the HTTP client. Errors: those of the Open*Backend functions.
  struct Parts {
    std::string base_url;
    std::string api_key;
    std::unique_ptr<HttpSearchClient> client;
  };
  static Result<Parts> Prepare(const std::string& name, const WebBackendOptions& options,
                               std::string_view default_base_url, std::string_view default_key_env);

  WebSearchBackend(std::string name, int max_top_k, Parts parts, const WebBackendOptions& options);

  // Where an API's result list is and which fields of a result are read. score == nullptr (or a
  // result without a numeric score): 1 / rank.
  struct ResultShape {
    std::vector<std::string> list_path;  // {"web", "results"}: answer["web"]["results"]
    const char* title = "title";
    const char* url = "url";
    const char* snippet = "content";
    const char* score = nullptr;
  };
  // The hits of `answer` in `shape`: a list absent (or null) anywhere on its path is an empty
  // page; a path step that is not an object, a list that is not an array or a result that is not
  // an object is DataLoss "<name> response from <url>: ...".
  Result<SearchPage> ParseResults(const Json& answer, const SearchQuery& query, const std::string& url,
                                  const ResultShape& shape) const;

  // The API request for one validated query.
  virtual HttpRequest BuildRequest(const SearchQuery& query) const = 0;
  // The page from the API's answer (a JSON object), at most query.top_k hits.
  virtual Result<SearchPage> ParsePage(const Json& answer, const SearchQuery& query, const std::string& url) const = 0;

  const std::string& base_url() const { return base_url_; }
  const std::string& api_key() const { return api_key_; }

 private:
  const std::string name_;
  const int max_top_k_;
  const std::string base_url_;
  const std::string api_key_;  // never logged, never in a message
  const size_t max_page_bytes_;
  const bool open_private_addresses_;
  std::unique_ptr<HttpSearchClient> client_;
  ExpiringLruCache<SearchPage> cache_;
  int64_t cache_hits_ = 0;
};

// The backends. None contacts its server when it opens. Errors: FailedPrecondition naming the
// key variable when it is not set (ReadApiKey); InvalidArgument for a base_url that is not
// http(s) (SearxNG: also for none), for options HttpSearchClient::Create refuses, and for
// max_page_bytes == 0.
Result<std::unique_ptr<WebSearchBackend>> OpenBraveBackend(const WebBackendOptions& options);
Result<std::unique_ptr<WebSearchBackend>> OpenSerperBackend(const WebBackendOptions& options);
Result<std::unique_ptr<WebSearchBackend>> OpenTavilyBackend(const WebBackendOptions& options);
Result<std::unique_ptr<WebSearchBackend>> OpenSearxngBackend(const WebBackendOptions& options);

// Shared by the per-API parsers: `html` (a title or snippet an API returned) as plain text;
// <strong> and <b> become **...**, other tags go, character references are decoded, whitespace
// is collapsed. Text without markup comes back trimmed and collapsed.
std::string PlainSnippet(std::string_view html);

}  // namespace envforge::search
