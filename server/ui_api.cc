// The viewer's page and JSON endpoints.
#include "server/ui_api.h"

#include <map>

#include "agents/pass_at_k.h"
#include "agents/replay.h"
#include "agents/trajectory_store.h"
#include "base/percent_decode.h"
#include "base/json.h"
#include "server/generated/ui_assets.h"
#include "server/internal/ui_http.h"
#include "server/ui_runs.h"

namespace envforge::server {
namespace {

using internal::ErrorAnswer;
using internal::IntParameter;
using internal::JsonAnswer;
using internal::ParseQuery;

constexpr int64_t kDefaultPageSize = 50;
constexpr int64_t kMaxPageSize = 500;
constexpr std::string_view kApiPrefix = "/ui/api/";

UiResponse FromStatus(const Status& status) {
  int code = 500;
  if (status.code() == StatusCode::kNotFound) code = 404;
  if (status.code() == StatusCode::kInvalidArgument) code = 400;
  if (status.code() == StatusCode::kFailedPrecondition) code = 409;  // e.g. a replay's version drift
  return ErrorAnswer(code, status.message());
}

Result<agents::ListFilter> FilterFromQuery(std::string_view query) {
  const std::map<std::string, std::string> parameters = ParseQuery(query);
  agents::ListFilter filter;
  for (const auto& [name, value] : parameters) {
    if (name == "env")
      filter.env_id = value;
    else if (name == "task")
      filter.task_id = value;
    else if (name == "kind")
      filter.kind = value;
    else if (name == "rollout")
      filter.rollout_id = value;
    else if (name == "parent")
      filter.parent_id = value;
    else if (name == "sort")
      filter.sort_by = value.empty() ? "started" : value;
    else if (name == "order" && value != "asc" && value != "desc" && !value.empty()) {
      return InvalidArgumentError("order must be asc or desc, got '" + value.substr(0, 40) + "'");
    } else if (name == "order")
      filter.ascending = value == "asc";
    else if (name == "outcome" && !value.empty()) {
      filter.outcome = agents::EpisodeOutcomeFromName(value);
      if (!filter.outcome)
        return InvalidArgumentError("outcome '" + value.substr(0, 40) + "' is not an episode outcome");
    } else if (name != "limit" && name != "offset" && name != "outcome") {
      return InvalidArgumentError("unknown parameter '" + name.substr(0, 40) +
                                  "' (env, task, outcome, kind, rollout, parent, sort, order, limit, offset)");
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
  if (path == "/ui/runs.js") {
    *content_type = "text/javascript; charset=utf-8";
    return ui_assets::kRunsJs;
  }
  if (path == "/ui/style.css") {
    *content_type = "text/css; charset=utf-8";
    return ui_assets::kStyleCss;
  }
  return nullptr;
}

}  // namespace

Result<std::unique_ptr<UiApi>> UiApi::Open(const std::string& trajectories_path, const UiApiOptions& options) {
  ENVFORGE_ASSIGN_OR_RETURN(std::unique_ptr<agents::TrajectoryReader> reader,
                            agents::TrajectoryReader::Open(trajectories_path));
  ENVFORGE_ASSIGN_OR_RETURN(std::unique_ptr<UiRuns> runs, UiRuns::Open(options.runs_dir));
  return std::unique_ptr<UiApi>(new UiApi(std::move(reader), std::move(runs)));
}

UiApi::UiApi(std::unique_ptr<agents::TrajectoryReader> reader, std::unique_ptr<UiRuns> runs)
    : reader_(std::move(reader)), runs_(std::move(runs)) {}
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
    if (body == nullptr)
      return UiResponse{404, "text/plain; charset=utf-8", "no page " + std::string(path.substr(0, 200)) + "\n"};
    return UiResponse{200, content_type, body};
  }
  const std::string_view route = path.substr(kApiPrefix.size());
  if (route == "episodes") return Episodes(query);
  if (route.starts_with("episodes/") && route.size() > 9) return OneEpisode(PercentDecode(route.substr(9)));
  if (route == "counts") return Counts();
  if (route == "task") return Task(query);
  if (UiRuns::IsRunsRoute(route)) return runs_->Handle(route, query);
  return ErrorAnswer(404, "no API route " + std::string(path.substr(0, 200)) +
                              " (episodes, episodes/ID, episodes/ID/replay, counts, task, runs, runs/NAME)");
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
  return JsonAnswer(
      200,
      Json{
          {"episodes", std::move(list)}, {"limit", filter->limit}, {"offset", filter->offset}, {"has_more", has_more}});
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
  return JsonAnswer(200, Json{{"episodes", counts->episodes},
                              {"steps", counts->steps},
                              {"open_episodes", counts->open_episodes},
                              {"model_turns", counts->model_turns}});
}

namespace {

constexpr int64_t kMaxTaskEpisodes = 20'000;

struct PassCounts {
  std::string model;
  int64_t n = 0, passed = 0;
  Json ToJson() const {
    Json curve = Json::array();
    for (int64_t k : agents::PassAtKPoints(n)) curve.push_back(Json::array({k, agents::PassAtK(n, passed, k).value()}));
    return Json{{"model", model}, {"n", n}, {"passed", passed}, {"pass_at_k", std::move(curve)}};
  }
};

}  // namespace

UiResponse UiApi::Task(std::string_view query) const {
  const std::map<std::string, std::string> parameters = ParseQuery(query);
  agents::ListFilter filter;
  filter.env_id = parameters.contains("env") ? parameters.at("env") : "";
  filter.task_id = parameters.contains("task") ? parameters.at("task") : "";
  if (filter.env_id.empty() || filter.task_id.empty()) return ErrorAnswer(400, "env and task are both required");
  filter.limit = kMaxTaskEpisodes + 1;
  Result<std::vector<agents::EpisodeSummary>> episodes = [&] {
    std::lock_guard lock(mu_);
    return reader_->List(filter);
  }();
  if (!episodes.ok()) return FromStatus(episodes.status());
  const bool truncated = static_cast<int64_t>(episodes->size()) > kMaxTaskEpisodes;
  if (truncated) episodes->pop_back();
  Json outcomes = Json::object();
  PassCounts all;
  std::map<std::string, PassCounts> rollouts;
  for (const agents::EpisodeSummary& episode : *episodes) {
    const std::string outcome = episode.outcome ? std::string(agents::EpisodeOutcomeName(*episode.outcome)) : "open";
    outcomes[outcome] = outcomes.value(outcome, 0) + 1;
    if (!episode.outcome || *episode.outcome == agents::EpisodeOutcome::kInfraError) continue;
    const bool passed = episode.verdict && episode.verdict->value("passed", false);
    for (PassCounts* counts :
         {&all, episode.start.rollout_id.empty() ? nullptr : &rollouts[episode.start.rollout_id]}) {
      if (counts == nullptr) continue;
      counts->model = episode.start.model;
      counts->n += 1;
      counts->passed += passed ? 1 : 0;
    }
  }
  Json per_rollout = Json::array();
  for (const auto& [id, counts] : rollouts) {
    Json row = counts.ToJson();
    row["rollout_id"] = id;
    per_rollout.push_back(std::move(row));
  }
  return JsonAnswer(200, Json{{"env", filter.env_id},
                              {"task", filter.task_id},
                              {"episodes", episodes->size()},
                              {"truncated", truncated},
                              {"outcomes", std::move(outcomes)},
                              {"all", all.ToJson()},
                              {"rollouts", std::move(per_rollout)}});
}

void UiApi::EnableReplay(sandbox::SessionManager* manager, std::string envs) {
  replay_manager_ = manager;
  replay_envs_ = std::move(envs);
}

bool UiApi::IsReplayPath(std::string_view path) {
  constexpr std::string_view kPrefix = "/ui/api/episodes/", kSuffix = "/replay";
  return path.starts_with(kPrefix) && path.ends_with(kSuffix) && path.size() > kPrefix.size() + kSuffix.size();
}

void UiApi::ReplayAsync(std::string_view target, std::function<void(UiResponse)> done) const {
  const size_t question = target.find('?');
  const std::string_view path = target.substr(0, question);
  const std::map<std::string, std::string> parameters =
      ParseQuery(question == std::string_view::npos ? std::string_view() : target.substr(question + 1));
  const std::string id = PercentDecode(path.substr(17, path.size() - 17 - 7));
  auto drift = parameters.find("allow_version_drift");
  const bool allow_drift = drift != parameters.end() && (drift->second == "1" || drift->second == "true");
  if (replay_manager_ == nullptr) {
    return done(
        ErrorAnswer(503, "replay needs the environments: envforge serve --envs DIR, or envforge view F --envs DIR"));
  }
  replays_.Post([this, id, allow_drift, done = std::move(done)] {
    auto load = [this](const std::string& episode_id) {
      std::lock_guard lock(mu_);
      return reader_->Get(episode_id);
    };
    Result<agents::Episode> episode = load(id);
    if (!episode.ok()) return done(FromStatus(episode.status()));
    agents::ReplayOptions options;
    options.envs = replay_envs_;
    options.allow_version_drift = allow_drift;
    options.load_episode = load;
    Result<agents::ReplayReport> report = agents::Replay(*episode, *replay_manager_, options);
    done(report.ok() ? JsonAnswer(200, agents::ReplayReportToJson(*report)) : FromStatus(report.status()));
  });
}

}  // namespace envforge::server
