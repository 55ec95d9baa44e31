// The Brave Search web API: GET /res/v1/web/search, X-Subscription-Token, web.results[].
#include <memory>
#include <string>
#include <utility>

#include "toolsets/search/web_search_backend.h"

namespace envforge::search {
namespace {

class BraveBackend : public WebSearchBackend {
 public:
  static constexpr int kMaxTopK = 20;  // the API's largest count
  static Result<std::unique_ptr<WebSearchBackend>> Create(const WebBackendOptions& options) {
    ENVFORGE_ASSIGN_OR_RETURN(Parts parts, Prepare("brave", options, "https://api.search.brave.com", "BRAVE_API_KEY"));
    return std::unique_ptr<WebSearchBackend>(std::make_unique<BraveBackend>(std::move(parts), options));
  }
  BraveBackend(Parts parts, const WebBackendOptions& options)
      : WebSearchBackend("brave", kMaxTopK, std::move(parts), options) {}

 protected:
  HttpRequest BuildRequest(const SearchQuery& query) const override {
    HttpRequest request;
    request.url =
        base_url() + "/res/v1/web/search?q=" + UrlEncode(query.text) + "&count=" + std::to_string(query.top_k);
    request.headers = {"Accept: application/json", "X-Subscription-Token: " + api_key()};
    return request;
  }

  Result<SearchPage> ParsePage(const Json& answer, const SearchQuery& query, const std::string& url) const override {
    ResultShape shape;
    shape.list_path = {"web", "results"};
    shape.snippet = "description";
    return ParseResults(answer, query, url, shape);
  }
};

}  // namespace

Result<std::unique_ptr<WebSearchBackend>> OpenBraveBackend(const WebBackendOptions& options) {
  return BraveBackend::Create(options);
}

}  // namespace envforge::search
