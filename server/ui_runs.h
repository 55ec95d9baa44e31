// The viewer's synthesis runs (issue 17): the run databases `envforge synth` writes (RUN.sqlite,
// envsynth/run_store.h), found in one directory (`envforge serve --runs DIR`, `envforge view F
// --runs DIR`) and read-only, each shown as the funnel `envforge synth report RUN --json` prints
// (envsynth/funnel.h): the same rows, the same dropped candidates, the same costs.
//
// Routes, under /ui/api/ (UiApi::Handle passes them here; behind the token like the rest):
//   runs                 {"runs": [...], "dir"}: one entry per *.sqlite file directly in DIR (or a
//                        link there to one: DIR is the operator's choice), by name:
//                        {"name", "categories", "environments", "candidates", "kept", "dropped",
//                         "started", "modified"}, or {"name", "error"} for a file that is not a
//                        readable run database. "started" is the file's creation time (seconds
//                        since the epoch; a run database holds no start time of its own), else its
//                        first event's, else null; "modified" its last write. Without a runs
//                        directory: {"runs": [], "note": "..."}.
//   runs/NAME?limit=&offset=
//                        Funnel::ToJson() with "run" = NAME and "dropped" one page of the dropped
//                        candidates (limit 1..1000, default 200; offset from 0), plus "name",
//                        "dropped_total", "limit", "offset", "has_more", "started", "modified".
// NAME is a file name as `runs` lists it. It is percent-decoded first and then must be a plain
// name ending in .sqlite: a '/', a '\', a NUL, a leading '.' ("..", ".hidden") is refused with 400,
// so no request reaches a file outside DIR. A name with no such file in DIR is 404, as is a file
// that is not a run database; a run database that cannot be read is 500. Errors are
// {"error": "..."}.
//
// Cost: every request opens the run database afresh and reads all its candidates (a run of a few
// thousand candidates is a few milliseconds), so a run still being written is shown as it stands.
// Thread safety: Handle may be called from many threads at once (nothing is shared between calls).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "server/ui_api.h"

namespace envforge::server {

class UiRuns {
 public:
  // `runs_dir` "" serves no runs (the list says why). NotFound when runs_dir does not exist,
  // InvalidArgument when it is not a directory.
  static Result<std::unique_ptr<UiRuns>> Open(const std::string& runs_dir);

  // Whether `route` (the path after /ui/api/) is one of this class's: "runs" or "runs/...".
  static bool IsRunsRoute(std::string_view route);
  // Answers a GET of `route` with its query string (without the '?').
  UiResponse Handle(std::string_view route, std::string_view query) const;

 private:
  explicit UiRuns(std::string runs_dir) : runs_dir_(std::move(runs_dir)) {}
  UiResponse List() const;
  UiResponse OneRun(const std::string& name, std::string_view query) const;

  const std::string runs_dir_;  // "" when there is none
};

}  // namespace envforge::server
