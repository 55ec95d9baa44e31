// A SearxNG instance's search API: GET /search?q=...&format=json, results[]; no key by default.
#include <memory>
#include <string>
#include <utility>

#include "toolsets/search/web_search_backend.h"

namespace envforge::search {
namespace {

class SearxngBackend : public WebSearchBackend {
 public:
  static constexpr int kMaxTopK = 50;  // one result page; SearxNG has no count parameter
  static Result<std::unique_ptr<WebSearchBackend>> Create(const WebBackendOptions& options) {
    ENVFORGE_ASSIGN_OR_RETURN(Parts parts, Prepare("searxng", options, "", ""));
    return std::unique_ptr<WebSearchBackend>(std::make_unique<SearxngBackend>(std::move(parts), options));
  }
  SearxngBackend(Parts parts, const WebBackendOptions& options)
      : WebSearchBackend("searxng", kMaxTopK, std::move(parts), options) {}

  Result<SearchPage> Search(const SearchQuery& query) override {
    Result<SearchPage> page = WebSearchBackend::Search(query);
    if (page.status().code() == StatusCode::kPermissionDenied) {
      return PermissionDeniedError(page.status().message() +
                                   " (a SearxNG instance answers 403 when format json is not enabled in the search "
                                   "section of its settings.yml)");
    }
    return page;
  }

 protected:
  HttpRequest BuildRequest(const SearchQuery& query) const override {
    HttpRequest request;
    request.url = base_url() + "/search?q=" + UrlEncode(query.text) + "&format=json";
    request.headers = {"Accept: application/json"};
    if (!api_key().empty()) request.headers.push_back("Authorization: Bearer " + api_key());
    return request;
  }

  Result<SearchPage> ParsePage(const Json& answer, const SearchQuery& query, const std::string& url) const override {
    ResultShape shape;
    shape.list_path = {"results"};
    shape.snippet = "content";
    shape.score = "score";
    return ParseResults(answer, query, url, shape);
  }
};

}  // namespace

Result<std::unique_ptr<WebSearchBackend>> OpenSearxngBackend(const WebBackendOptions& options) {
  return SearxngBackend::Create(options);
}

}  // namespace envforge::search
