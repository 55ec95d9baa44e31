// The trajectory viewer's server side: the page (static HTML, CSS and JavaScript from server/ui/,
// compiled into the binary: no CDN, no network) and its JSON endpoints over a trajectory store,
// read-only. `envforge serve --trajectories F` and `envforge view F` serve it under /ui/.
//
// Routes (GET or HEAD only):
//   /ui/, /ui/index.html, /ui/app.js, /ui/style.css   the page; no token needed (it holds no
//                                   data: the page asks for the token and sends it on API calls)
//   /ui/runs.js                     the page's synthesis-runs view (likewise)
//   /ui/api/episodes?env=&task=&outcome=&kind=&rollout=&parent=&sort=&order=&limit=&offset=
//                                   {"episodes": [EpisodeSummaryToJson...], "limit", "offset",
//                                    "has_more"}: filtered, sorted (started, steps, duration,
//                                   outcome, env, task; asc or desc; newest first by default) and
//                                   paged in SQL (limit 1..500, default 50)
//   /ui/api/episodes/ID             EpisodeToJson (agents/trajectory_store.h); ID or a unique
//                                   prefix
//   /ui/api/counts                  {"episodes", "steps", "open_episodes", "model_turns"}
//   /ui/api/task?env=&task=         one task's episodes (at most 20,000, newest): "outcomes" by
//                                   kind, and pass@k (agents/pass_at_k.h) over every ended episode
//                                   but infra errors ("all") and per rollout ("rollouts": id, model,
//                                   n, passed, pass_at_k [[k, value]...]), "truncated"
//   /ui/api/runs, /ui/api/runs/NAME synthesis runs (server/ui_runs.h), from options.runs_dir
// API routes sit behind the server's bearer token like /rpc (the caller checks it). Errors are
// {"error": "..."} with 400 (a bad parameter, named), 404 (no such episode or route) or 500 (the
// store could not be read). Every answer carries a Content-Security-Policy that allows only the
// page's own files: untrusted text (tool results, model text) is also only ever put into the page
// as text by app.js, never as HTML.
//
// Thread safety: Handle may be called from any thread (reads are serialised on one connection).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "base/serial_worker.h"
#include "base/status.h"

namespace envforge::agents {
class TrajectoryReader;
}
namespace envforge::sandbox {
class SessionManager;
}

namespace envforge::server {

struct UiResponse {
  int status = 200;
  std::string content_type;
  std::string body;
};

class UiRuns;

struct UiApiOptions {
  std::string runs_dir;  // the directory of `envforge synth` run databases (--runs); "": none
};

class UiApi {
 public:
  // Opens the store read-only (it may be written by this process's recorder or another).
  // NotFound for a missing file or runs directory; the store's own errors otherwise.
  static Result<std::unique_ptr<UiApi>> Open(const std::string& trajectories_path, const UiApiOptions& options = {});
  ~UiApi();

  static bool IsUiPath(std::string_view path);   // /ui or under /ui/
  static bool IsApiPath(std::string_view path);  // under /ui/api/
  // Answers a GET of `target` (path and query) under /ui/.
  UiResponse Handle(std::string_view target) const;
  // The Content-Security-Policy header value every /ui answer carries.
  static const char* ContentSecurityPolicy();

  // Replay from the page: POST /ui/api/episodes/ID/replay[?allow_version_drift=1] runs the
  // episode's calls again in fresh sessions of `manager` against the bundles in `envs` (a
  // directory or one *.envdb; agents/replay.h) and answers ReplayReportToJson: every step
  // recorded beside replayed, the first divergence, both verdicts. Replays run one at a time on a
  // thread of the viewer's (they take as long as the episode's tools); without EnableReplay the
  // route answers 503. `manager` must outlive the viewer.
  void EnableReplay(sandbox::SessionManager* manager, std::string envs);
  static bool IsReplayPath(std::string_view path);  // POST, under the token like the API
  // `done` is called once, on the replay thread (or at once for a bad request).
  void ReplayAsync(std::string_view target, std::function<void(UiResponse)> done) const;

 private:
  UiApi(std::unique_ptr<agents::TrajectoryReader> reader, std::unique_ptr<UiRuns> runs);
  UiResponse Episodes(std::string_view query) const;
  UiResponse OneEpisode(const std::string& id) const;
  UiResponse Counts() const;
  UiResponse Task(std::string_view query) const;

  mutable std::mutex mu_;
  std::unique_ptr<agents::TrajectoryReader> reader_;
  std::unique_ptr<UiRuns> runs_;  // never null; it reads its own files and needs no lock
  sandbox::SessionManager* replay_manager_ = nullptr;
  std::string replay_envs_;
  mutable SerialWorker replays_;  // last: its thread uses the members above
};

}  // namespace envforge::server
