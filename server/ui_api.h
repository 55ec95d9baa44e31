// The trajectory viewer's server side: the page (static HTML, CSS and JavaScript from server/ui/,
// compiled into the binary: no CDN, no network) and its JSON endpoints over a trajectory store,
// read-only. `envforge serve --trajectories F` and `envforge view F` serve it under /ui/.
//
// Routes (GET or HEAD only):
//   /ui/, /ui/index.html, /ui/app.js, /ui/style.css   the page; no token needed (it holds no
//                                   data: the page asks for the token and sends it on API calls)
//   /ui/api/episodes?env=&task=&outcome=&kind=&rollout=&limit=&offset=
//                                   {"episodes": [EpisodeSummaryToJson...], "limit", "offset",
//                                    "has_more"}: newest first, filtered and paged in SQL (limit
//                                   1..500, default 50), so a store of any size answers alike
//   /ui/api/episodes/ID             EpisodeToJson (agents/trajectory_store.h); ID or a unique
//                                   prefix
//   /ui/api/counts                  {"episodes", "steps", "open_episodes", "model_turns"}
// API routes sit behind the server's bearer token like /rpc (the caller checks it). Errors are
// {"error": "..."} with 400 (a bad parameter, named), 404 (no such episode or route) or 500 (the
// store could not be read). Every answer carries a Content-Security-Policy that allows only the
// page's own files: untrusted text (tool results, model text) is also only ever put into the page
// as text by app.js, never as HTML.
//
// Thread safety: Handle may be called from any thread (reads are serialised on one connection).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "base/status.h"

namespace envforge::agents {
class TrajectoryReader;
}

namespace envforge::server {

struct UiResponse {
  int status = 200;
  std::string content_type;
  std::string body;
};

class UiApi {
 public:
  // Opens the store read-only (it may be written by this process's recorder or another).
  // NotFound for a missing file; the store's own errors otherwise.
  static Result<std::unique_ptr<UiApi>> Open(const std::string& trajectories_path);
  ~UiApi();

  static bool IsUiPath(std::string_view path);     // /ui or under /ui/
  static bool IsApiPath(std::string_view path);    // under /ui/api/
  // Answers a GET of `target` (path and query) under /ui/.
  UiResponse Handle(std::string_view target) const;
  // The Content-Security-Policy header value every /ui answer carries.
  static const char* ContentSecurityPolicy();

 private:
  explicit UiApi(std::unique_ptr<agents::TrajectoryReader> reader);
  UiResponse Episodes(std::string_view query) const;
  UiResponse OneEpisode(const std::string& id) const;
  UiResponse Counts() const;

  mutable std::mutex mu_;
  std::unique_ptr<agents::TrajectoryReader> reader_;
};

}  // namespace envforge::server
