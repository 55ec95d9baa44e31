// The live search backends (Brave, Serper, Tavily, SearxNG) against a local HTTP server
// (tests/fixtures/search_api/search_api_server.py, run with /usr/bin/python3) that answers in each
// API's documented shape from recorded examples: the requests as the server received them, the
// mapping to hits, 429 with Retry-After, 5xx, slow answers, malformed bodies, missing keys, the
// cache, the rate limit, Open of served pages, and the JSON configuration.
#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/fd.h"
#include "base/json.h"
#include "tests/python_test_server.h"
#include "tests/temp_dir.h"
#include "toolsets/search/http_search_client.h"
#include "toolsets/search/public_address.h"
#include "toolsets/search/search_config.h"
#include "toolsets/search/web_search_backend.h"

extern char** environ;

namespace envforge::search {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

double SecondsSince(steady_clock::time_point start) {
  return std::chrono::duration<double>(steady_clock::now() - start).count();
}

const std::vector<std::string> kApis = {"brave", "serper", "tavily", "searxng"};

// The variables the tests name as api_key_env, set to the keys the server expects.
void SetTestKeys() {
  ::setenv("ENVFORGE_TEST_BRAVE_KEY", "brave-test-key", 1);
  ::setenv("ENVFORGE_TEST_SERPER_KEY", "serper-test-key", 1);
  ::setenv("ENVFORGE_TEST_TAVILY_KEY", "tavily-test-key", 1);
  ::setenv("ENVFORGE_TEST_WRONG_KEY", "not-the-key", 1);
  ::unsetenv("ENVFORGE_TEST_UNSET_KEY");
}

std::string KeyVariable(const std::string& api) {
  if (api == "brave") return "ENVFORGE_TEST_BRAVE_KEY";
  if (api == "serper") return "ENVFORGE_TEST_SERPER_KEY";
  if (api == "tavily") return "ENVFORGE_TEST_TAVILY_KEY";
  return "";
}

// The Python server, started once per test binary; killed when the binary exits.
// The keys are set before the server (and the backends under test) start.
std::string ServerScriptWithKeysSet() {
  SetTestKeys();
  return std::string(ENVFORGE_TEST_SOURCE_DIR) + "/tests/fixtures/search_api/search_api_server.py";
}

class TestServer {
 public:
  TestServer() : server_(ServerScriptWithKeysSet()) {}

  std::string root() const { return "http://127.0.0.1:" + std::to_string(server_.port()); }
  int port() const { return server_.port(); }

  // GET path over a plain socket (not through the code under test); the body parsed as JSON.
  Json Get(const std::string& path) const { return server_.GetJson(path); }

  // How many requests the server received for this API and query text.
  int Attempts(const std::string& api, const std::string& text) const {
    Json stats = Get("/stats");
    return stats.value(api + "|" + text, 0);
  }

 private:
  testing::PythonTestServer server_;
};

TestServer& Server() {
  static TestServer server;
  return server;
}

// Test defaults: short backoff, no cache (each test turns on what it checks).
WebBackendOptions TestOptions(const std::string& api) {
  WebBackendOptions options;
  options.base_url = Server().root() + "/" + api;
  options.api_key_env = KeyVariable(api);
  options.timeout = milliseconds(3000);
  options.retries = 2;
  options.initial_backoff = milliseconds(50);
  options.cache_entries = 0;
  options.open_private_addresses = true;  // the test server is on 127.0.0.1
  return options;
}

Result<std::unique_ptr<WebSearchBackend>> OpenApi(const std::string& api, const WebBackendOptions& options) {
  if (api == "brave") return OpenBraveBackend(options);
  if (api == "serper") return OpenSerperBackend(options);
  if (api == "tavily") return OpenTavilyBackend(options);
  return OpenSearxngBackend(options);
}

std::unique_ptr<WebSearchBackend> MustOpen(const std::string& api, const WebBackendOptions& options) {
  Result<std::unique_ptr<WebSearchBackend>> backend = OpenApi(api, options);
  INFO(backend.status().ToString());
  REQUIRE(backend.ok());
  return std::move(*backend);
}

std::unique_ptr<WebSearchBackend> MustOpen(const std::string& api) { return MustOpen(api, TestOptions(api)); }

TEST_SUITE("search.api") {
  TEST_CASE("helpers: URL encoding and resolution, snippets, the expiring LRU cache") {
    CHECK(UrlEncode("a b&c=d/é~") == "a%20b%26c%3Dd%2F%C3%A9~");
    CHECK(IsHttpUrl("http://x"));
    CHECK(IsHttpUrl("https://x/y"));
    CHECK_FALSE(IsHttpUrl("https://"));
    CHECK_FALSE(IsHttpUrl("file:///etc/passwd"));
    CHECK_FALSE(IsHttpUrl("doc-17"));

    const std::string base = "http://h.example:8080/a/b/page.html?x=1#frag";
    CHECK(ResolveUrl(base, "other.html") == "http://h.example:8080/a/b/other.html");
    CHECK(ResolveUrl(base, "../up.html#sec") == "http://h.example:8080/a/up.html");
    CHECK(ResolveUrl(base, "./same/") == "http://h.example:8080/a/b/same/");
    CHECK(ResolveUrl(base, "/root?q=2") == "http://h.example:8080/root?q=2");
    CHECK(ResolveUrl(base, "?q=3") == "http://h.example:8080/a/b/page.html?q=3");
    CHECK(ResolveUrl(base, "//cdn.example/x") == "http://cdn.example/x");
    CHECK(ResolveUrl(base, "https://elsewhere.example/p") == "https://elsewhere.example/p");
    CHECK(ResolveUrl(base, "../../../../too-far") == "http://h.example:8080/too-far");
    CHECK(ResolveUrl(base, "#only-fragment").empty());
    CHECK(ResolveUrl(base, "mailto:a@b.c").empty());
    CHECK(ResolveUrl(base, "javascript:void(0)").empty());
    CHECK(ResolveUrl("http://h.example", "x") == "http://h.example/x");

    CHECK(PlainSnippet("<strong>Hafnium</strong> was   found &amp; named") == "**Hafnium** was found & named");
    CHECK(PlainSnippet("a < b and <em>c</em> > d") == "a < b and c > d");
    CHECK(PlainSnippet("  plain\ntext ") == "plain text");

    ExpiringLruCache<int> cache(2, milliseconds(1000));
    cache.Put("a", 1);
    cache.Put("b", 2);
    REQUIRE(cache.Get("a") == 1);  // a is now the most recently used
    cache.Put("c", 3);             // evicts b
    CHECK(cache.Get("b") == std::nullopt);
    CHECK(cache.Get("a") == 1);
    CHECK(cache.Get("c") == 3);
    cache.TEST_AdvanceClock(milliseconds(1001));
    CHECK(cache.Get("a") == std::nullopt);
    CHECK(cache.size() == 1);
    ExpiringLruCache<int> off(0, milliseconds(1000));
    off.Put("a", 1);
    CHECK(off.Get("a") == std::nullopt);

    CHECK(SearchCacheKey("brave", "q", 5) != SearchCacheKey("brave", "q", 6));
    CHECK(SearchCacheKey("brave", "q", 5) != SearchCacheKey("serper", "q", 5));
  }

  TEST_CASE("brave: the request and the documented answer mapped to hits") {
    auto backend = MustOpen("brave");
    Result<SearchPage> page = backend->Search({"hafnium discovery", 5});
    INFO(page.status().ToString());
    REQUIRE(page.ok());
    CHECK(page->query == "hafnium discovery");
    REQUIRE(page->hits.size() == 2);  // the third result has no url
    CHECK(page->hits[0].doc_id == "https://elements.example.org/hafnium");
    CHECK(page->hits[0].url == "https://elements.example.org/hafnium");
    CHECK(page->hits[0].title == "Hafnium - Element information, properties and uses");
    CHECK(page->hits[0].snippet ==
          "**Hafnium** was **discovered** in 1923 by Dirk Coster & George de Hevesy in Copenhagen.");
    CHECK(page->hits[0].score == doctest::Approx(1.0));
    CHECK(page->hits[1].title == "History of **hafnium**");
    CHECK(page->hits[1].score == doctest::Approx(0.5));

    Json last = Server().Get("/last/brave");
    CHECK(last["method"] == "GET");
    CHECK(last["path"] == "/brave/res/v1/web/search");
    CHECK(last["query"]["q"] == "hafnium discovery");
    CHECK(last["query"]["count"] == "5");
    CHECK(last["headers"]["x-subscription-token"] == "brave-test-key");
    CHECK(last["headers"]["accept"] == "application/json");

    Result<SearchPage> one = backend->Search({"hafnium discovery", 1});
    REQUIRE(one.ok());
    CHECK(one->hits.size() == 1);
    CHECK(Server().Get("/last/brave")["query"]["count"] == "1");
  }

  TEST_CASE("serper: the request and the documented answer mapped to hits") {
    auto backend = MustOpen("serper");
    Result<SearchPage> page = backend->Search({"hafnium discovery", 10});
    INFO(page.status().ToString());
    REQUIRE(page.ok());
    REQUIRE(page->hits.size() == 2);
    CHECK(page->hits[0].doc_id == "https://wiki.example.org/Hafnium");
    CHECK(page->hits[0].title == "Hafnium - Wikipedia-like page");
    CHECK(Contains(page->hits[0].snippet, "tetravalent transition metal"));
    CHECK(page->hits[1].url == "https://history.example.net/chemistry/hafnium");
    CHECK(page->hits[0].score > page->hits[1].score);

    Json last = Server().Get("/last/serper");
    CHECK(last["method"] == "POST");
    CHECK(last["path"] == "/serper/search");
    CHECK(last["body"] == Json{{"q", "hafnium discovery"}, {"num", 10}});
    CHECK(last["headers"]["x-api-key"] == "serper-test-key");
    CHECK(last["headers"]["content-type"] == "application/json");
  }

  TEST_CASE("tavily: the request and the documented answer mapped to hits, with the API's scores") {
    auto backend = MustOpen("tavily");
    Result<SearchPage> page = backend->Search({"hafnium discovery", 3});
    INFO(page.status().ToString());
    REQUIRE(page.ok());
    REQUIRE(page->hits.size() == 2);
    CHECK(page->hits[0].doc_id == "https://chem.example.com/hafnium");
    CHECK(page->hits[0].title == "Hafnium | Chemical element");
    CHECK(page->hits[0].snippet == "Hafnium (Hf), element 72, was discovered in 1923 by Coster and Hevesy.");
    CHECK(page->hits[0].score == doctest::Approx(0.9134));
    CHECK(page->hits[1].score == doctest::Approx(0.7021));

    Json last = Server().Get("/last/tavily");
    CHECK(last["path"] == "/tavily/search");
    CHECK(last["body"]["query"] == "hafnium discovery");
    CHECK(last["body"]["max_results"] == 3);
    CHECK(last["body"]["search_depth"] == "basic");
    CHECK_FALSE(last["body"].contains("api_key"));  // the key travels in the header only
    CHECK(last["headers"]["authorization"] == "Bearer tavily-test-key");
  }

  TEST_CASE("searxng: the request and the documented answer mapped to hits, cut to top_k") {
    auto backend = MustOpen("searxng");
    Result<SearchPage> page = backend->Search({"hafnium discovery", 10});
    INFO(page.status().ToString());
    REQUIRE(page.ok());
    REQUIRE(page->hits.size() == 3);
    CHECK(page->hits[0].url == "https://elements.example.org/hafnium");
    CHECK(page->hits[0].snippet == "Hafnium was discovered in 1923 \u2013 the last stable element to be found.");
    CHECK(page->hits[0].score == doctest::Approx(3.5));
    CHECK(page->hits[2].snippet.empty());

    Json last = Server().Get("/last/searxng");
    CHECK(last["path"] == "/searxng/search");
    CHECK(last["query"]["q"] == "hafnium discovery");
    CHECK(last["query"]["format"] == "json");
    CHECK_FALSE(last["headers"].contains("authorization"));

    Result<SearchPage> two = backend->Search({"hafnium discovery", 2});
    REQUIRE(two.ok());
    CHECK(two->hits.size() == 2);

    WebBackendOptions nojson = TestOptions("searxng");
    nojson.base_url = Server().root() + "/searxng-nojson";
    Result<SearchPage> refused = MustOpen("searxng", nojson)->Search({"hafnium", 5});
    CHECK(refused.status().code() == StatusCode::kPermissionDenied);
    CHECK(Contains(refused.status().message(), "settings.yml"));
  }

  TEST_CASE("every api: empty answers, bad queries and top_k bounds") {
    for (const std::string& api : kApis) {
      CAPTURE(api);
      auto backend = MustOpen(api);
      Result<SearchPage> empty = backend->Search({"empty:" + api, 5});
      INFO(empty.status().ToString());
      REQUIRE(empty.ok());
      CHECK(empty->hits.empty());
      CHECK(backend->Search({"  ", 5}).status().code() == StatusCode::kInvalidArgument);
      CHECK(backend->Search({"x", 0}).status().code() == StatusCode::kInvalidArgument);
      Result<SearchPage> too_many = backend->Search({"x", backend->max_top_k() + 1});
      CHECK(too_many.status().code() == StatusCode::kInvalidArgument);
      CHECK(Contains(too_many.status().message(), std::to_string(backend->max_top_k())));
      CHECK(backend->Search({std::string(3000, 'a'), 5}).status().code() == StatusCode::kInvalidArgument);
    }
  }

  TEST_CASE("every api: a 429 with Retry-After is waited out, then the answer comes") {
    for (const std::string& api : kApis) {
      CAPTURE(api);
      auto backend = MustOpen(api);
      std::string text = "retry429:" + api;
      auto start = steady_clock::now();
      Result<SearchPage> page = backend->Search({text, 5});
      double seconds = SecondsSince(start);
      INFO(page.status().ToString());
      REQUIRE(page.ok());
      CHECK_FALSE(page->hits.empty());
      CHECK(Server().Attempts(api, text) == 2);
      CHECK(seconds >= 0.9);  // Retry-After: 1, not the 50 ms backoff
      CHECK(backend->Stats()["retries"] == 1);
    }
  }

  TEST_CASE("a Retry-After given as an HTTP-date is honoured too") {
    auto backend = MustOpen("brave");
    auto start = steady_clock::now();
    Result<SearchPage> page = backend->Search({"retrydate:brave", 5});
    INFO(page.status().ToString());
    REQUIRE(page.ok());
    CHECK(Server().Attempts("brave", "retrydate:brave") == 2);
    CHECK(SecondsSince(start) < 3.0);  // the date is 1 s ahead, at one-second resolution
  }

  TEST_CASE("every api: a Retry-After past the client's limit fails at once with ResourceExhausted") {
    for (const std::string& api : kApis) {
      CAPTURE(api);
      auto backend = MustOpen(api);
      std::string text = "quota429:" + api;
      auto start = steady_clock::now();
      Result<SearchPage> page = backend->Search({text, 5});
      CHECK(SecondsSince(start) < 2.0);
      CHECK(page.status().code() == StatusCode::kResourceExhausted);
      CHECK(Contains(page.status().message(), "Retry-After 3600 s"));
      CHECK(Contains(page.status().message(), api));
      CHECK(Server().Attempts(api, text) == 1);
    }
  }

  TEST_CASE("every api: a 500 is retried, then the answer comes; a server that stays down is Unavailable") {
    for (const std::string& api : kApis) {
      CAPTURE(api);
      auto backend = MustOpen(api);
      std::string text = "flaky500:" + api;
      Result<SearchPage> page = backend->Search({text, 5});
      INFO(page.status().ToString());
      REQUIRE(page.ok());
      CHECK_FALSE(page->hits.empty());
      CHECK(Server().Attempts(api, text) == 2);

      std::string down = "down503:" + api;
      Result<SearchPage> failed = backend->Search({down, 5});
      CHECK(failed.status().code() == StatusCode::kUnavailable);
      CHECK(Contains(failed.status().message(), "HTTP 503"));
      CHECK(Contains(failed.status().message(), "after 3 attempts"));
      CHECK(Server().Attempts(api, down) == 3);
    }
  }

  TEST_CASE("every api: an answer slower than the timeout is DeadlineExceeded after the retries") {
    for (const std::string& api : kApis) {
      CAPTURE(api);
      WebBackendOptions options = TestOptions(api);
      options.timeout = milliseconds(300);
      options.retries = 1;
      auto backend = MustOpen(api, options);
      std::string text = "slow:" + api;
      auto start = steady_clock::now();
      Result<SearchPage> page = backend->Search({text, 5});
      double seconds = SecondsSince(start);
      CHECK(page.status().code() == StatusCode::kDeadlineExceeded);
      CHECK(Contains(page.status().message(), "300 ms"));
      CHECK(Contains(page.status().message(), "after 2 attempts"));
      CHECK(seconds >= 0.55);
      CHECK(seconds < 1.9);  // never waited for the 2 s answer
      CHECK(Server().Attempts(api, text) == 2);
    }
  }

  TEST_CASE("every api: a malformed, misshapen or oversized body is DataLoss naming the backend") {
    for (const std::string& api : kApis) {
      CAPTURE(api);
      WebBackendOptions options = TestOptions(api);
      options.max_response_bytes = 16 << 10;
      auto backend = MustOpen(api, options);

      Result<SearchPage> garbage = backend->Search({"garbage:" + api, 5});
      CHECK(garbage.status().code() == StatusCode::kDataLoss);
      CHECK(Contains(garbage.status().message(), api + " response from"));
      CHECK(Server().Attempts(api, "garbage:" + api) == 1);  // not retried

      Result<SearchPage> misshapen = backend->Search({"badshape:" + api, 5});
      CHECK(misshapen.status().code() == StatusCode::kDataLoss);
      CHECK(Contains(misshapen.status().message(), api + " response from"));
      CHECK(Contains(misshapen.status().message(), "not an array"));

      Result<SearchPage> huge = backend->Search({"huge:" + api, 5});
      CHECK(huge.status().code() == StatusCode::kDataLoss);
      CHECK(Contains(huge.status().message(), "larger than 16384 bytes"));
    }
  }

  TEST_CASE("a missing API key variable is FailedPrecondition naming it; a wrong key is refused") {
    for (std::string api : {"brave", "serper", "tavily"}) {
      CAPTURE(api);
      WebBackendOptions options = TestOptions(api);
      options.api_key_env = "ENVFORGE_TEST_UNSET_KEY";
      Result<std::unique_ptr<WebSearchBackend>> backend = OpenApi(api, options);
      CHECK(backend.status().code() == StatusCode::kFailedPrecondition);
      CHECK(Contains(backend.status().message(), "ENVFORGE_TEST_UNSET_KEY"));

      options.api_key_env = "sk-this-looks-like-a-key";
      backend = OpenApi(api, options);
      CHECK(backend.status().code() == StatusCode::kInvalidArgument);
      CHECK_FALSE(Contains(backend.status().message(), "sk-this-looks-like-a-key"));

      options.api_key_env = "ENVFORGE_TEST_WRONG_KEY";
      Result<SearchPage> refused = MustOpen(api, options)->Search({"hafnium", 5});
      CHECK((refused.status().code() == StatusCode::kUnauthenticated ||
             refused.status().code() == StatusCode::kPermissionDenied));
      CHECK_FALSE(Contains(refused.status().message(), "not-the-key"));
    }
    // The conventional variable when the options name none.
    ::unsetenv("BRAVE_API_KEY");
    WebBackendOptions options = TestOptions("brave");
    options.api_key_env.clear();
    Result<std::unique_ptr<WebSearchBackend>> backend = OpenBraveBackend(options);
    CHECK(backend.status().code() == StatusCode::kFailedPrecondition);
    CHECK(Contains(backend.status().message(), "BRAVE_API_KEY"));
    // Brave's 401 names the variable to check.
    options.api_key_env = "ENVFORGE_TEST_WRONG_KEY";
    Result<SearchPage> refused = MustOpen("brave", options)->Search({"hafnium", 5});
    CHECK(refused.status().code() == StatusCode::kUnauthenticated);
    CHECK(Contains(refused.status().message(), "subscription token is invalid"));
    CHECK(Contains(refused.status().message(), "ENVFORGE_TEST_WRONG_KEY"));
  }

  TEST_CASE("every api: the cache answers a repeated query without a request, until its entry expires") {
    for (const std::string& api : kApis) {
      CAPTURE(api);
      WebBackendOptions options = TestOptions(api);
      options.cache_entries = 16;
      options.cache_ttl = milliseconds(60'000);
      auto backend = MustOpen(api, options);
      std::string text = "cached query " + api;
      Result<SearchPage> first = backend->Search({text, 5});
      REQUIRE(first.ok());
      Result<SearchPage> second = backend->Search({text, 5});
      REQUIRE(second.ok());
      CHECK(Server().Attempts(api, text) == 1);
      CHECK(ToJson(*first) == ToJson(*second));
      CHECK(backend->Stats()["cache_hits"] == 1);

      REQUIRE(backend->Search({text, 4}).ok());  // another top_k is another entry
      CHECK(Server().Attempts(api, text) == 2);

      backend->TEST_AdvanceCacheClock(milliseconds(60'001));
      REQUIRE(backend->Search({text, 5}).ok());
      CHECK(Server().Attempts(api, text) == 3);

      // Errors are not cached.
      options.retries = 0;
      auto uncached_errors = MustOpen(api, options);
      std::string down = "down503:cache-" + api;
      CHECK_FALSE(uncached_errors->Search({down, 5}).ok());
      CHECK_FALSE(uncached_errors->Search({down, 5}).ok());
      CHECK(Server().Attempts(api, down) == 2);
    }
  }

  TEST_CASE("the rate limit spaces requests: N requests take at least (N-1)/rate seconds") {
    for (std::string api : {"brave", "tavily"}) {
      CAPTURE(api);
      WebBackendOptions options = TestOptions(api);
      options.rate_per_s = 5;
      options.cache_entries = 16;
      auto backend = MustOpen(api, options);
      constexpr int kRequests = 6;
      auto start = steady_clock::now();
      for (int i = 0; i < kRequests; ++i) {
        REQUIRE(backend->Search({"rate " + api + " " + std::to_string(i), 5}).ok());
      }
      double seconds = SecondsSince(start);
      CHECK(seconds >= 0.9 * (kRequests - 1) / options.rate_per_s);
      CHECK(seconds < 5.0);
      // Cache hits take no token.
      start = steady_clock::now();
      for (int i = 0; i < kRequests; ++i) REQUIRE(backend->Search({"rate " + api + " 0", 5}).ok());
      CHECK(SecondsSince(start) < 0.5);
    }
  }

  TEST_CASE("an unreachable server is Unavailable") {
    // A port that was just free: bind, read its number, close.
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
    socklen_t length = sizeof(address);
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0);
    ::close(fd);
    WebBackendOptions options = TestOptions("searxng");
    options.base_url = "http://127.0.0.1:" + std::to_string(ntohs(address.sin_port));
    options.retries = 1;
    Result<SearchPage> page = MustOpen("searxng", options)->Search({"hafnium", 5});
    CHECK(page.status().code() == StatusCode::kUnavailable);
    CHECK(Contains(page.status().message(), "unreachable"));
    CHECK(Contains(page.status().message(), "after 2 attempts"));
  }

  TEST_CASE("open: a served HTML page becomes text and resolved links") {
    auto backend = MustOpen("brave");
    std::string url = Server().root() + "/pages/article.html";
    Result<Document> document = backend->Open(url);
    INFO(document.status().ToString());
    REQUIRE(document.ok());
    CHECK(document->doc_id == url);
    CHECK(document->url == url);
    CHECK(document->source == "brave");
    CHECK(document->title == "Hafnium \u2014 a history");
    CHECK(Contains(document->text, "Hafnium was discovered in 1923 by Dirk Coster & George de Hevesy."));
    CHECK_FALSE(Contains(document->text, "tracking"));
    CHECK_FALSE(Contains(document->text, "About"));  // <nav> is dropped
    std::vector<std::pair<std::string, std::string>> links;
    for (const DocumentLink& link : document->links) links.emplace_back(link.target, link.anchor);
    std::vector<std::pair<std::string, std::string>> expected = {
        {Server().root() + "/pages/zirconium.html", "zirconium"},
        {Server().root() + "/elements/index.html", "group 4 elements"},
        {"https://wiki.example.org/Hafnium", "encyclopedia article"}};
    CHECK(links == expected);  // mailto: and #top are not documents
    // The key goes to the API only, never to the pages it links to.
    Json last = Server().Get("/last/page");
    CHECK(last["path"] == "/pages/article.html");
    CHECK_FALSE(last["headers"].contains("x-subscription-token"));
  }

  TEST_CASE("open: redirects, plain text, ISO-8859-1, cut pages, retries and refusals") {
    auto backend = MustOpen("searxng");
    std::string root = Server().root();

    Result<Document> redirected = backend->Open(root + "/pages/redirect");
    REQUIRE(redirected.ok());
    CHECK(redirected->doc_id == root + "/pages/redirect");
    CHECK(redirected->url == root + "/pages/article.html");
    CHECK(redirected->links.front().target == root + "/pages/zirconium.html");  // against the final URL

    Result<Document> plain = backend->Open(root + "/pages/plain.txt");
    REQUIRE(plain.ok());
    CHECK(plain->text == "Plain text page.\nSecond line.\n");
    CHECK(plain->title == root + "/pages/plain.txt");
    CHECK(plain->links.empty());

    Result<Document> latin1 = backend->Open(root + "/pages/latin1.html");
    REQUIRE(latin1.ok());
    CHECK(latin1->title == "Caf\u00e9");
    CHECK(Contains(latin1->text, "Cr\u00e8me br\u00fbl\u00e9e"));

    WebBackendOptions small = TestOptions("searxng");
    small.max_page_bytes = 10'000;
    Result<Document> cut = MustOpen("searxng", small)->Open(root + "/pages/big.html");
    REQUIRE(cut.ok());
    CHECK(cut->title == "Big");
    CHECK(cut->text.ends_with("[page cut at 10000 bytes]"));
    CHECK(cut->text.size() < 10'100);
    small.max_page_bytes = 8;  // a cut error page is still judged by its status
    CHECK(MustOpen("searxng", small)->Open(root + "/pages/missing.html").status().code() == StatusCode::kNotFound);

    Result<Document> flaky = backend->Open(root + "/pages/flaky.html");
    INFO(flaky.status().ToString());
    REQUIRE(flaky.ok());
    CHECK(flaky->title == "Hafnium \u2014 a history");

    Result<Document> image = backend->Open(root + "/pages/image.png");
    CHECK(image.status().code() == StatusCode::kInvalidArgument);
    CHECK(Contains(image.status().message(), "image/png"));

    Result<Document> missing = backend->Open(root + "/pages/missing.html");
    CHECK(missing.status().code() == StatusCode::kNotFound);
    CHECK(Contains(missing.status().message(), "page " + root + "/pages/missing.html answered HTTP 404"));

    CHECK(backend->Open("not-a-url").status().code() == StatusCode::kNotFound);
    CHECK(backend->Open("file:///etc/passwd").status().code() == StatusCode::kNotFound);
    CHECK(backend->Open("").status().code() == StatusCode::kInvalidArgument);
  }

  TEST_CASE("public addresses: loopback, private, link-local, reserved and mapped forms are not") {
    for (const char* address :
         {"93.184.216.34", "8.8.8.8", "1.1.1.1", "172.32.0.1", "100.128.0.1", "2606:2800:220:1::1",
          "2001:4860:4860::8888", "::ffff:93.184.216.34", "64:ff9b::808:808"}) {
      INFO(address);
      CHECK(IsPublicAddressText(address));
    }
    for (const char* address : {"127.0.0.1",
                                "127.255.0.9",
                                "10.1.2.3",
                                "172.16.0.1",
                                "172.31.255.255",
                                "192.168.1.1",
                                "169.254.169.254",
                                "100.64.0.1",
                                "0.0.0.0",
                                "224.0.0.1",
                                "255.255.255.255",
                                "198.18.0.1",
                                "192.0.2.7",
                                "::",
                                "::1",
                                "fe80::1",
                                "fd00::1",
                                "fc00::2",
                                "ff02::1",
                                "2001:db8::1",
                                "::ffff:127.0.0.1",
                                "::ffff:169.254.169.254",
                                "64:ff9b::a00:1",
                                "not an address",
                                ""}) {
      INFO(address);
      CHECK_FALSE(IsPublicAddressText(address));
    }
  }

  TEST_CASE("open: a non-public address is refused by default, before any request reaches it, and not retried") {
    WebBackendOptions guarded = TestOptions("brave");
    guarded.open_private_addresses = false;
    auto backend = MustOpen("brave", guarded);
    for (const std::string& url :
         std::vector<std::string>{Server().root() + "/pages/article.html?guarded",
                                  "http://localhost:" + std::to_string(Server().port()) + "/pages/article.html?guarded",
                                  "http://[::1]:" + std::to_string(Server().port()) + "/pages/article.html?guarded",
                                  std::string("http://169.254.169.254/latest/meta-data/")}) {
      INFO(url);
      Result<Document> refused = backend->Open(url);
      CHECK(refused.status().code() == StatusCode::kPermissionDenied);
      CHECK(Contains(refused.status().message(), "not a public address"));
      CHECK_FALSE(Contains(refused.status().message(), "attempts"));  // not retried
    }
    Result<Document> named = backend->Open(Server().root() + "/pages/plain.txt");
    CHECK(Contains(named.status().message(), "refused to connect to 127.0.0.1"));
    CHECK_FALSE(Contains(Server().Get("/last/page").dump(), "guarded"));  // no request reached the server
    // Allowed, the same page opens and the server records it (so the check above could fail).
    CHECK(MustOpen("brave")->Open(Server().root() + "/pages/article.html?guarded").ok());
    CHECK(Contains(Server().Get("/last/page").dump(), "guarded"));
  }

  TEST_CASE("config: every backend from JSON; unknown keys and backends are refused by name") {
    for (const std::string& api : kApis) {
      CAPTURE(api);
      Json config = {{"backend", api},     {"base_url", Server().root() + "/" + api},
                     {"timeout_ms", 3000}, {"retries", 1},
                     {"rate_per_s", 0},    {"cache_ttl_s", 60}};
      if (api != "searxng") config["api_key_env"] = KeyVariable(api);
      Result<std::unique_ptr<SearchBackend>> backend = OpenSearchBackend(config);
      INFO(backend.status().ToString());
      REQUIRE(backend.ok());
      CHECK((*backend)->name() == api);
      Result<SearchPage> page = (*backend)->Search({"hafnium discovery", 2});
      INFO(page.status().ToString());
      REQUIRE(page.ok());
      CHECK(page->hits.size() == 2);

      Result<SearchBackendConfig> parsed = ParseSearchConfig(config);
      REQUIRE(parsed.ok());
      CHECK(parsed->web.timeout == milliseconds(3000));
      CHECK(parsed->web.retries == 1);
      CHECK(parsed->web.cache_ttl == milliseconds(60'000));
      Result<SearchBackendConfig> again = ParseSearchConfig(ToJson(*parsed));
      REQUIRE(again.ok());
      CHECK(ToJson(*again) == ToJson(*parsed));
    }

    auto refused = [](const Json& config, const std::string& part) {
      Result<SearchBackendConfig> parsed = ParseSearchConfig(config);
      CAPTURE(config.dump());
      CHECK(parsed.status().code() == StatusCode::kInvalidArgument);
      CHECK(Contains(parsed.status().message(), part));
      return parsed.status().message();
    };
    refused(Json::array(), "JSON object");
    refused(Json::object(), "backend");
    refused({{"backend", "bing"}}, "unknown backend 'bing'");
    refused({{"backend", "brave"}, {"colour", "red"}}, "unknown key 'colour'");
    refused({{"backend", "brave"}, {"corpus", "x.sqlite"}}, "'corpus' does not apply to the brave backend");
    refused({{"backend", "offline"}, {"corpus", "x.sqlite"}, {"timeout_ms", 5}},
            "'timeout_ms' does not apply to the offline");
    refused({{"backend", "offline"}}, "corpus");
    refused({{"backend", "searxng"}}, "base_url");
    refused({{"backend", "brave"}, {"base_url", "ftp://x"}}, "base_url 'ftp://x'");
    refused({{"backend", "brave"}, {"timeout_ms", 0}}, "timeout_ms");
    refused({{"backend", "brave"}, {"timeout_ms", 1.5}}, "timeout_ms must be an integer");
    refused({{"backend", "brave"}, {"retries", -1}}, "retries");
    refused({{"backend", "brave"}, {"rate_per_s", "fast"}}, "rate_per_s must be a number");
    refused({{"backend", "brave"}, {"cache_ttl_s", -1}}, "cache_ttl_s");
    std::string message = refused({{"backend", "tavily"}, {"api_key_env", "tvly-SECRET123"}}, "api_key_env");
    CHECK_FALSE(Contains(message, "tvly-SECRET123"));

    // A live backend whose key variable is not set: FailedPrecondition naming it, through the config.
    Result<std::unique_ptr<SearchBackend>> no_key =
        OpenSearchBackend(Json{{"backend", "tavily"}, {"api_key_env", "ENVFORGE_TEST_UNSET_KEY"}});
    CHECK(no_key.status().code() == StatusCode::kFailedPrecondition);
    CHECK(Contains(no_key.status().message(), "ENVFORGE_TEST_UNSET_KEY"));

    // Offline: the corpus opens through the same function (a missing file is an error of the corpus).
    testing::TempDir dir;
    Result<std::unique_ptr<SearchBackend>> offline =
        OpenSearchBackend(Json{{"backend", "offline"}, {"corpus", dir / "none.sqlite"}});
    CHECK_FALSE(offline.ok());
    Result<SearchBackendConfig> offline_config =
        ParseSearchConfig(Json{{"backend", "offline"}, {"corpus", "c.sqlite"}});
    REQUIRE(offline_config.ok());
    CHECK(ToJson(*offline_config) == Json{{"backend", "offline"}, {"corpus", "c.sqlite"}});
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::search
