// The Tavily search API: POST /search {"query", "max_results", "search_depth"}, Authorization:
// Bearer, results[] with scores.
#include <memory>
#include <string>
#include <utility>

#include "toolsets/search/web_search_backend.h"

namespace envforge::search {
namespace {

class TavilyBackend : public WebSearchBackend {
 public:
  static constexpr int kMaxTopK = 20;  // the API's largest max_results
  static Result<std::unique_ptr<WebSearchBackend>> Create(const WebBackendOptions& options) {
    ENVFORGE_ASSIGN_OR_RETURN(Parts parts, Prepare("tavily", options, "https://api.tavily.com", "TAVILY_API_KEY"));
    return std::unique_ptr<WebSearchBackend>(std::make_unique<TavilyBackend>(std::move(parts), options));
  }
  TavilyBackend(Parts parts, const WebBackendOptions& options)
      : WebSearchBackend("tavily", kMaxTopK, std::move(parts), options) {}

 protected:
  HttpRequest BuildRequest(const SearchQuery& query) const override {
    HttpRequest request;
    request.method = HttpMethod::kPost;
    request.url = base_url() + "/search";
    request.headers = {"Content-Type: application/json", "Accept: application/json",
                       "Authorization: Bearer " + api_key()};
    request.body = DumpJson(Json{{"query", query.text}, {"max_results", query.top_k}, {"search_depth", "basic"}});
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

Result<std::unique_ptr<WebSearchBackend>> OpenTavilyBackend(const WebBackendOptions& options) {
  return TavilyBackend::Create(options);
}

}  // namespace envforge::search
