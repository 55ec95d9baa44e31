// The viewer's page and JSON endpoints.
#include "server/ui_api.h"

#include <charconv>
#include <map>

#include "agents/trajectory_store.h"
#include "base/json.h"
#include "server/generated/ui_assets.h"

namespace envforge::server {
namespace {

constexpr int64_t kDefaultPageSize = 50;
constexpr int64_t kMaxPageSize = 500;
constexpr std::string_view kApiPrefix = "/ui/api/";

UiResponse JsonAnswer(int status, const Json& body) {
  return UiResponse{status, "application/json", body.dump(-1, ' ', false, Json::error_handler_t::replace)};
}

UiResponse ErrorAnswer(int status, std::string message) { return JsonAnswer(status, Json{{"error", std::move(message)}}); }

UiResponse FromStatus(const Status& status) {
  const int code = status.code() == StatusCode::kNotFound ? 404 : status.code() == StatusCode::kInvalidArgument ? 400 : 500;
  return ErrorAnswer(code, status.message());
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// application/x-www-form-urlencoded: '+' is a space, %XX a byte; a malformed escape stays as it is.
std::string DecodeComponent(std::string_view text) {
  std::string decoded;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      decoded += ' ';
    } else if (text[i] == '%' && i + 2 < text.size() && HexValue(text[i + 1]) >= 0 &&
               HexValue(text[i + 2]) >= 0) {
      decoded += static_cast<char>(HexValue(text[i + 1]) * 16 + HexValue(text[i + 2]));
      i += 2;
    } else {
      decoded += text[i];
    }
  }
  return decoded;
}

std::map<std::string, std::string> ParseQuery(std::string_view query) {
  std::map<std::string, std::string> parameters;
  while (!query.empty()) {
    const size_t end = query.find('&');
    const std::string_view pair = query.substr(0, end);
    const size_t equals = pair.find('=');
    if (!pair.empty()) {
      parameters[DecodeComponent(pair.substr(0, equals))] =
          equals == std::string_view::npos ? "" : DecodeComponent(pair.substr(equals + 1));
    }
    query = end == std::string_view::npos ? std::string_view() : query.substr(end + 1);
  }
  return parameters;
}

Result<int64_t> IntParameter(const std::map<std::string, std::string>& parameters, const std::string& name, int64_t fallback,
                             int64_t low, int64_t high) {
  auto it = parameters.find(name);
  if (it == parameters.end() || it->second.empty()) return fallback;
  int64_t value = 0;
  const auto [end, error] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), value);
  if (error != std::errc() || end != it->second.data() + it->second.size() || value < low || value > high) {
    return InvalidArgumentError(name + " must be an integer from " + std::to_string(low) + " to " + std::to_string(high) +
                                ", got '" + it->second.substr(0, 40) + "'");
  }
  return value;
}

Result<agents::ListFilter> FilterFromQuery(std::string_view query) {
  const std::map<std::string, std::string> parameters = ParseQuery(query);
  agents::ListFilter filter;
  for (const auto& [name, value] : parameters) {
    if (name == "env") filter.env_id = value;
    else if (name == "task") filter.task_id = value;
    else if (name == "kind") filter.kind = value;
    else if (name == "rollout") filter.rollout_id = value;
    else if (name == "outcome" && !value.empty()) {
      filter.outcome = agents::EpisodeOutcomeFromName(value);
      if (!filter.outcome) return InvalidArgumentError("outcome '" + value.substr(0, 40) + "' is not an episode outcome");
    } else if (name != "limit" && name != "offset" && name != "outcome") {
      return InvalidArgumentError("unknown parameter '" + name.substr(0, 40) +
                                  "' (env, task, outcome, kind, rollout, limit, offset)");
    }
  }
  ENVFORGE_ASSIGN_OR_RETURN(filter.limit, IntParameter(parameters, "limit", kDefaultPageSize, 1, kMaxPageSize));
  ENVFORGE_ASSIGN_OR_RETURN(filter.offset, IntParameter(parameters, "offset", 0, 0, int64_t{1} << 40));
  return filter;
}

// The page's files, by path.
const char* AssetBody(std::string_view path, const char** content_type) {
  if (path == "/ui" || path == "/ui/" || path == "/ui/index.html") {
    *content_type = "text/html; charset=utf-8";
    return ui_assets::kIndexHtml;
  }
  if (path == "/ui/app.js") {
    *content_type = "text/javascript; charset=utf-8";
    return ui_assets::kAppJs;
  }
  if (path == "/ui/style.css") {
    *content_type = "text/css; charset=utf-8";
    return ui_assets::kStyleCss;
  }
  return nullptr;
}

}  // namespace

Result<std::unique_ptr<UiApi>> UiApi::Open(const std::string& trajectories_path) {
  ENVFORGE_ASSIGN_OR_RETURN(std::unique_ptr<agents::TrajectoryReader> reader, agents::TrajectoryReader::Open(trajectories_path));
  return std::unique_ptr<UiApi>(new UiApi(std::move(reader)));
}

UiApi::UiApi(std::unique_ptr<agents::TrajectoryReader> reader) : reader_(std::move(reader)) {}
UiApi::~UiApi() = default;

bool UiApi::IsUiPath(std::string_view path) { return path == "/ui" || path.starts_with("/ui/"); }
bool UiApi::IsApiPath(std::string_view path) { return path.starts_with(kApiPrefix); }

const char* UiApi::ContentSecurityPolicy() {
  return "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; "
         "base-uri 'none'; frame-ancestors 'none'";
}

UiResponse UiApi::Handle(std::string_view target) const {
  const size_t question = target.find('?');
  const std::string_view path = target.substr(0, question);
  const std::string_view query = question == std::string_view::npos ? std::string_view() : target.substr(question + 1);
  if (!IsApiPath(path)) {
    const char* content_type = nullptr;
    const char* body = AssetBody(path, &content_type);
    if (body == nullptr) return UiResponse{404, "text/plain; charset=utf-8", "no page " + std::string(path.substr(0, 200)) + "\n"};
    return UiResponse{200, content_type, body};
  }
  const std::string_view route = path.substr(kApiPrefix.size());
  if (route == "episodes") return Episodes(query);
  if (route.starts_with("episodes/") && route.size() > 9) return OneEpisode(DecodeComponent(route.substr(9)));
  if (route == "counts") return Counts();
  return ErrorAnswer(404, "no API route " + std::string(path.substr(0, 200)) + " (episodes, episodes/ID, counts)");
}

UiResponse UiApi::Episodes(std::string_view query) const {
  Result<agents::ListFilter> filter = FilterFromQuery(query);
  if (!filter.ok()) return FromStatus(filter.status());
  agents::ListFilter one_more = *filter;
  ++one_more.limit;  // tells whether a next page exists without counting the whole table
  Result<std::vector<agents::EpisodeSummary>> episodes = [&] {
    std::lock_guard lock(mu_);
    return reader_->List(one_more);
  }();
  if (!episodes.ok()) return FromStatus(episodes.status());
  const bool has_more = static_cast<int64_t>(episodes->size()) > filter->limit;
  if (has_more) episodes->pop_back();
  Json list = Json::array();
  for (const agents::EpisodeSummary& summary : *episodes) list.push_back(agents::EpisodeSummaryToJson(summary));
  return JsonAnswer(200, Json{{"episodes", std::move(list)}, {"limit", filter->limit}, {"offset", filter->offset},
                              {"has_more", has_more}});
}

UiResponse UiApi::OneEpisode(const std::string& id) const {
  Result<agents::Episode> episode = [&] {
    std::lock_guard lock(mu_);
    return reader_->Get(id);
  }();
  if (!episode.ok()) return FromStatus(episode.status());
  return JsonAnswer(200, agents::EpisodeToJson(*episode));
}

UiResponse UiApi::Counts() const {
  Result<agents::TrajectoryStore::Counts> counts = [&] {
    std::lock_guard lock(mu_);
    return reader_->Count();
  }();
  if (!counts.ok()) return FromStatus(counts.status());
  return JsonAnswer(200, Json{{"episodes", counts->episodes}, {"steps", counts->steps},
                              {"open_episodes", counts->open_episodes}, {"model_turns", counts->model_turns}});
}

}  // namespace envforge::server
