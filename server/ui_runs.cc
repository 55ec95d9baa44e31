// The viewer's synthesis runs: run databases in a directory, each as its funnel.
#include "server/ui_runs.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <system_error>
#include <vector>

#include "base/percent_decode.h"
#include "base/json.h"
#include "envsynth/funnel.h"
#include "envsynth/run_store.h"
#include "server/internal/ui_http.h"

namespace envforge::server {
namespace {

using internal::ErrorAnswer;
using internal::IntParameter;
using internal::JsonAnswer;
using internal::ParseQuery;

namespace fs = std::filesystem;

constexpr int64_t kDefaultDroppedPage = 200;
constexpr int64_t kMaxDroppedPage = 1000;
constexpr std::string_view kRunSuffix = ".sqlite";
constexpr const char* kNoRunsNote =
    "this server was started without --runs DIR: start it with the directory of your `envforge synth` run databases";

// limit and offset, the only parameters of runs/NAME.
Result<std::pair<int64_t, int64_t>> PageFromQuery(std::string_view query) {
  const std::map<std::string, std::string> parameters = ParseQuery(query);
  for (const auto& [name, value] : parameters) {
    if (name != "limit" && name != "offset")
      return InvalidArgumentError("unknown parameter '" + name.substr(0, 40) + "' (limit, offset)");
  }
  ENVFORGE_ASSIGN_OR_RETURN(int64_t limit, IntParameter(parameters, "limit", kDefaultDroppedPage, 1, kMaxDroppedPage));
  ENVFORGE_ASSIGN_OR_RETURN(int64_t offset, IntParameter(parameters, "offset", 0, 0, int64_t{1} << 40));
  return std::make_pair(limit, offset);
}

// A name the API may open: a plain file name in the runs directory, never a path.
Status CheckRunName(const std::string& name) {
  const bool plain =
      !name.empty() && name.front() != '.' && name.find_first_of(std::string("/\\\0", 3)) == std::string::npos;
  if (!plain || name.size() <= kRunSuffix.size() || !name.ends_with(kRunSuffix)) {
    return InvalidArgumentError("a run is named by its file name in the runs directory (NAME.sqlite), got '" +
                                name.substr(0, 80) + "'");
  }
  return Status::Ok();
}

// The file's creation time where the file system records one (statx), else nullopt.
std::optional<double> BirthTime(const fs::path& path) {
  struct statx info {};
  if (::statx(AT_FDCWD, path.c_str(), 0, STATX_BTIME, &info) != 0 || (info.stx_mask & STATX_BTIME) == 0)
    return std::nullopt;
  return static_cast<double>(info.stx_btime.tv_sec) + info.stx_btime.tv_nsec / 1e9;
}

// The last write: a run being written in WAL mode writes its -wal file first.
double ModifiedTime(const fs::path& path) {
  double latest = 0;
  for (const std::string& file : {path.string(), path.string() + "-wal"}) {
    struct stat info {};
    if (::stat(file.c_str(), &info) != 0) continue;
    latest = std::max(latest, static_cast<double>(info.st_mtim.tv_sec) + info.st_mtim.tv_nsec / 1e9);
  }
  return latest;
}

// When the run started, as well as it can be told (see the header): null when it cannot.
Json StartedTime(const fs::path& path, envsynth::RunStore& store) {
  if (std::optional<double> born = BirthTime(path)) return *born;
  Result<std::vector<envsynth::RunEvent>> events = store.Events();
  if (events.ok() && !events->empty()) return events->front().at;
  return nullptr;
}

struct OpenedRun {
  envsynth::Funnel funnel;
  Json started, modified;
};

Result<OpenedRun> ReadRun(const fs::path& path) {
  ENVFORGE_ASSIGN_OR_RETURN(envsynth::RunStore store, envsynth::RunStore::OpenReadOnly(path.string()));
  // The funnel reads the run's stored JSON with typed getters, which throw on a damaged file; the
  // server's thread must not.
  try {
    ENVFORGE_ASSIGN_OR_RETURN(envsynth::Funnel funnel, envsynth::BuildFunnel(store));
    if (!funnel.config.is_object()) return DataLossError(path.string() + ": the run's config is not an object");
    return OpenedRun{std::move(funnel), StartedTime(path, store), ModifiedTime(path)};
  } catch (const Json::exception& error) {
    return DataLossError(path.string() + ": a damaged run database: " + error.what());
  }
}

Json RunSummary(const std::string& name, const OpenedRun& run) {
  const envsynth::FunnelRow& totals = run.funnel.totals();
  return {{"name", name},
          {"categories", run.funnel.config.value("categories", Json::array())},
          {"environments",
           {{"planned", run.funnel.envs_planned}, {"done", run.funnel.envs_done}, {"failed", run.funnel.envs_failed}}},
          {"candidates", totals.candidates},
          {"kept", totals.kept},
          {"dropped", static_cast<int64_t>(run.funnel.dropped.size())},
          {"started", run.started},
          {"modified", run.modified}};
}

}  // namespace

Result<std::unique_ptr<UiRuns>> UiRuns::Open(const std::string& runs_dir) {
  if (!runs_dir.empty()) {
    std::error_code error;
    const fs::file_status status = fs::status(runs_dir, error);
    if (!fs::exists(status)) return NotFoundError("runs directory " + runs_dir + " does not exist");
    if (!fs::is_directory(status)) return InvalidArgumentError("runs directory " + runs_dir + " is not a directory");
  }
  return std::unique_ptr<UiRuns>(new UiRuns(runs_dir));
}

bool UiRuns::IsRunsRoute(std::string_view route) { return route == "runs" || route.starts_with("runs/"); }

UiResponse UiRuns::Handle(std::string_view route, std::string_view query) const {
  if (route == "runs") return List();
  return OneRun(PercentDecode(route.substr(5)), query);
}

UiResponse UiRuns::List() const {
  if (runs_dir_.empty()) return JsonAnswer(200, Json{{"runs", Json::array()}, {"note", kNoRunsNote}});
  std::vector<std::string> names;
  std::error_code error;
  // With error codes throughout: a directory that fails mid-listing must not throw on this thread.
  for (fs::directory_iterator it(runs_dir_, error); !error && it != fs::directory_iterator(); it.increment(error)) {
    const std::string name = it->path().filename().string();
    std::error_code type_error;
    if (CheckRunName(name).ok() && it->is_regular_file(type_error)) names.push_back(name);
  }
  if (error) return ErrorAnswer(500, "runs directory " + runs_dir_ + ": " + error.message());
  std::sort(names.begin(), names.end());
  Json runs = Json::array();
  for (const std::string& name : names) {
    Result<OpenedRun> run = ReadRun(fs::path(runs_dir_) / name);
    runs.push_back(run.ok() ? RunSummary(name, *run) : Json{{"name", name}, {"error", run.status().message()}});
  }
  return JsonAnswer(200, Json{{"runs", std::move(runs)}, {"dir", runs_dir_}});
}

UiResponse UiRuns::OneRun(const std::string& name, std::string_view query) const {
  if (runs_dir_.empty()) return ErrorAnswer(404, kNoRunsNote);
  if (Status checked = CheckRunName(name); !checked.ok()) return ErrorAnswer(400, checked.message());
  Result<std::pair<int64_t, int64_t>> page = PageFromQuery(query);
  if (!page.ok()) return ErrorAnswer(400, page.status().message());
  const fs::path path = fs::path(runs_dir_) / name;
  std::error_code error;
  if (!fs::is_regular_file(path, error)) return ErrorAnswer(404, "no run " + name + " in the runs directory");
  Result<OpenedRun> run = ReadRun(path);
  if (!run.ok()) {
    const StatusCode code = run.status().code();
    // A file that is not a run database (or of another format version) is no run to show.
    const bool not_a_run = code == StatusCode::kInvalidArgument || code == StatusCode::kFailedPrecondition ||
                           code == StatusCode::kNotFound;
    return ErrorAnswer(not_a_run ? 404 : 500, run.status().message());
  }
  const auto [limit, offset] = *page;
  const std::vector<envsynth::DroppedCandidate>& dropped = run->funnel.dropped;
  const int64_t total = static_cast<int64_t>(dropped.size());
  const int64_t first = std::min(offset, total), last = std::min(offset + limit, total);
  Json page_of_dropped = Json::array();
  for (int64_t index = first; index < last; ++index)
    page_of_dropped.push_back(dropped[static_cast<size_t>(index)].ToJson());
  Json body = run->funnel.ToJson();
  body["run"] = name;  // the server's own path stays on the server
  body["name"] = name;
  body["dropped"] = std::move(page_of_dropped);
  body["dropped_total"] = total;
  body["limit"] = limit;
  body["offset"] = offset;
  body["has_more"] = last < total;
  body["started"] = run->started;
  body["modified"] = run->modified;
  return JsonAnswer(200, body);
}

}  // namespace envforge::server
