// `envforge bench viewer` from the command line (the real binary), on a small store: the --json
// figures' shape, every page holding the rows the generator wrote (first page, deep pages,
// filtered pages, a filter matching nothing), the long episode whole, a kept store reused, and
// a store of other numbers refused. No timing is asserted: timing targets never go in tests.
#include <doctest/doctest.h>

#include <unistd.h>

#include <string>

#include "base/json.h"
#include "tests/run_envforge.h"
#include "tests/temp_dir.h"

namespace envforge {
namespace {

using testing::Envforge;
using testing::TempDir;

const Json* FindRequest(const Json& figures, const std::string& name) {
  for (const Json& request : figures["requests"]) {
    if (request["name"] == name) return &request;
  }
  return nullptr;
}

TEST_CASE("bench viewer: the figures' shape, and every page holds the rows the store has") {
  TempDir dir;
  const std::string store = dir / "viewer.sqlite";
  auto run = Envforge({"bench", "viewer", "--episodes", "2000", "--steps", "50", "--store", store, "--repeat", "2",
                       "--browser-runs", "1", "--json"});
  INFO(run.stderr_text);
  REQUIRE(run.exit_code == 0);
  CHECK(run.stderr_text.find("writing episodes") != std::string::npos);  // progress on stderr
  Json figures = ParseJson(run.stdout_text).value();
  CHECK(figures["all_right"] == true);
  CHECK(figures["store"]["episodes"] == 2001);
  CHECK(figures["store"]["reused"] == false);
  CHECK(figures["store"]["write_s"].is_number());
  CHECK(figures["long_episode_steps"] == 50);
  CHECK(figures["page_size"] == 50);

  // Pages: a full first page, full pages at 1%, 10%, 50% and 99% of the store, filtered ones.
  for (const char* name : {"page at offset 0", "page at offset 20", "page at offset 200", "page at offset 1000",
                           "page at offset 1980", "env=bench_env_3", "env=bench_env_3 last page", "task=env3_task7",
                           "outcome=submitted", "outcome=crashed", "kind=served"}) {
    CAPTURE(name);
    const Json* page = FindRequest(figures, name);
    REQUIRE(page != nullptr);
    CHECK((*page)["rows"] == (*page)["expected_rows"]);
    CHECK((*page)["rows_match_filter"] == true);
    CHECK((*page)["right"] == true);
    for (const char* quantile : {"p50", "p99", "max"}) CHECK((*page)["ms"][quantile].is_number());
    CHECK((*page)["ms"]["n"] == 2);
    CHECK((*page)["bytes"].get<long long>() > 0);
  }
  CHECK((*FindRequest(figures, "page at offset 0"))["rows"] == 50);
  CHECK((*FindRequest(figures, "page at offset 1980"))["rows"] == 21);  // 2001 episodes: the last 21
  CHECK((*FindRequest(figures, "env=bench_env_3"))["rows"] == 50);
  CHECK((*FindRequest(figures, "task=env3_task7"))["rows"] == 7);  // 2000 / (8 environments x 40 tasks), rounded up
  CHECK((*FindRequest(figures, "env=no_such_env (none)"))["rows"] == 0);
  const Json* episode = FindRequest(figures, "episode 50 steps");
  REQUIRE(episode != nullptr);
  CHECK((*episode)["steps"] == 50);
  CHECK((*episode)["messages"] == 2 + 2 * 50 + 1);  // system, user, a call and a result per step, the answer
  CHECK(FindRequest(figures, "counts") != nullptr);

  // The browser's figures where Chromium is installed: the DOM held the rows and the steps.
  if (access("/usr/bin/chromium", X_OK) == 0) {
    const Json& browser = figures["browser"];
    REQUIRE(browser.is_object());
    CHECK(browser["list_rows_in_dom"] == 50);
    CHECK(browser["episode_steps_in_dom"] == 50);
    CHECK(browser["list_render_ms"].is_number());
    CHECK(browser["episode_render_ms"].is_number());
  } else {
    CHECK(figures["browser"].is_null());
  }

  // The kept store is reused (no write), and a store of other numbers is refused, named.
  auto again = Envforge({"bench", "viewer", "--episodes", "2000", "--steps", "50", "--store", store, "--repeat", "1",
                         "--no-browser", "--json"});
  REQUIRE(again.exit_code == 0);
  Json reused = ParseJson(again.stdout_text).value();
  CHECK(reused["store"]["reused"] == true);
  CHECK(reused["all_right"] == true);
  CHECK(reused["browser_skipped"] == "skipped (--no-browser)");
  auto other = Envforge({"bench", "viewer", "--episodes", "3000", "--store", store, "--no-browser"});
  CHECK(other.exit_code == 2);
  CHECK(other.stderr_text.find("--episodes 3000") != std::string::npos);

  auto help = Envforge({"bench", "viewer", "--help"});
  CHECK(help.exit_code == 0);
  CHECK(help.stdout_text.find("envforge bench viewer") != std::string::npos);
  auto bad = Envforge({"bench", "viewer", "--episodes", "5"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.stderr_text.find("--episodes") != std::string::npos);
}

}  // namespace
}  // namespace envforge
