// The Serper Google search API: POST /search {"q", "num"}, X-API-KEY, organic[].
#include <memory>
#include <string>
#include <utility>

#include "toolsets/search/web_search_backend.h"

namespace envforge::search {
namespace {

class SerperBackend : public WebSearchBackend {
 public:
  static constexpr int kMaxTopK = 100;
  static Result<std::unique_ptr<WebSearchBackend>> Create(const WebBackendOptions& options) {
    ENVFORGE_ASSIGN_OR_RETURN(Parts parts, Prepare("serper", options, "https://google.serper.dev", "SERPER_API_KEY"));
    return std::unique_ptr<WebSearchBackend>(std::make_unique<SerperBackend>(std::move(parts), options));
  }
  SerperBackend(Parts parts, const WebBackendOptions& options)
      : WebSearchBackend("serper", kMaxTopK, std::move(parts), options) {}

 protected:
  HttpRequest BuildRequest(const SearchQuery& query) const override {
    HttpRequest request;
    request.method = HttpMethod::kPost;
    request.url = base_url() + "/search";
    request.headers = {"Content-Type: application/json", "Accept: application/json", "X-API-KEY: " + api_key()};
    request.body = DumpJson(Json{{"q", query.text}, {"num", query.top_k}});
    return request;
  }

  Result<SearchPage> ParsePage(const Json& answer, const SearchQuery& query, const std::string& url) const override {
    ResultShape shape;
    shape.list_path = {"organic"};
    shape.url = "link";
    shape.snippet = "snippet";
    return ParseResults(answer, query, url, shape);
  }
};

}  // namespace

Result<std::unique_ptr<WebSearchBackend>> OpenSerperBackend(const WebBackendOptions& options) {
  return SerperBackend::Create(options);
}

}  // namespace envforge::search
