// The viewer's replay and task pages: POST /ui/api/episodes/ID/replay re-runs an episode against
// the environments (identical steps on the same bundle; the diverging step named on a tampered
// one), /ui/api/task gives a task's outcomes and pass@k, and both render in headless Chromium.
#include <doctest/doctest.h>

#include <string>

#include "tests/server/ui_test_util.h"

namespace envforge::server::testing {
namespace {

// A served episode: slow_echo("hello"), then the answer 5 (passes).
std::string RecordEpisode(const ServeProcess& serve) {
  RpcClientOptions options;
  options.token = "tok";
  auto client = RpcClient::Connect(serve.Url() + "/rpc", options);
  REQUIRE(client.ok());
  Json created = MustCall(**client, "session/create", Json{{"env", "manager_fixture"}, {"task", "sum_task"}});
  const std::string session = created["session"];
  MustCall(**client, "tools/call",
           Json{{"session", session}, {"name", "slow_echo"}, {"arguments", {{"text", "hello"}, {"seconds", 0}}}});
  MustCall(**client, "session/submit", Json{{"session", session}, {"answer", "5"}});
  MustCall(**client, "session/close", Json{{"session", session}});
  // The recorder writes on its own thread: wait until the episode is there and ended.
  REQUIRE(WaitFor(
      [&] {
        Json counts = UiJson(serve.port, "GET", "/ui/api/counts");
        return counts["episodes"] == 1 && counts["open_episodes"] == 0;
      },
      std::chrono::seconds(20)));
  return created["trajectory"];
}

TEST_SUITE("server.transport") {
  TEST_CASE("replay from the viewer: the same bundle matches step by step; only POST, under the token") {
    ServeProcess serve({"--token", "tok"});
    const std::string id = RecordEpisode(serve);
    Json report = UiJson(serve.port, "POST", "/ui/api/episodes/" + id + "/replay");
    CHECK(report["episode_id"] == id);
    CHECK(report["matches"] == true);
    CHECK(report["first_divergence"].is_null());
    REQUIRE(report["steps"].size() == 2);  // the tool call and the submit
    for (const Json& step : report["steps"]) CHECK(step["status"] == "match");
    CHECK(report["verdict"]["status"] == "same");
    CHECK(UiRequest(serve.port, "GET", "/ui/api/episodes/" + id + "/replay").status == 405);
    CHECK(UiRequest(serve.port, "POST", "/ui/api/episodes/" + id + "/replay", "").status == 401);
    CHECK(UiRequest(serve.port, "POST", "/ui/api/episodes/t-no-such/replay").status == 404);
    // The task's page: one scored episode, passed.
    Json task = UiJson(serve.port, "GET", "/ui/api/task?env=manager_fixture&task=sum_task");
    CHECK(task["episodes"] == 1);
    CHECK(task["outcomes"]["submitted"] == 1);
    CHECK(task["all"]["n"] == 1);
    CHECK(task["all"]["passed"] == 1);
    CHECK(task["all"]["pass_at_k"][0] == Json::array({1, 1.0}));
    CHECK(UiRequest(serve.port, "GET", "/ui/api/task?env=manager_fixture").status == 400);
  }

  TEST_CASE("replay against a tampered environment: the diverging step is named, in the API and in the browser") {
    ServeProcess serve({"--token", "tok"});
    const std::string id = RecordEpisode(serve);
    serve.child->Signal(SIGTERM);
    REQUIRE(serve.child->Wait(std::chrono::seconds(60)).value_or(-1) == 0);
    // The same environment, but slow_echo now shouts: a new version whose first step answers otherwise.
    std::filesystem::create_directories(serve.dir / "tampered");
    sandbox::testing::WriteFixtureBundle(serve.dir / "tampered/fixture.envdb", "tampered",
                                         "\n\ndef slow_echo(text, seconds):\n    return text.upper()\n");
    ChildProcess view({Envforge(), "view", serve.trajectories, "--envs", serve.dir / "tampered", "--token", "tok",
                       "--port", "0", "--port-file", serve.dir / "view-port"},
                      serve.dir / "view.stderr");
    REQUIRE(WaitFor([&] { return ReadFileToString(serve.dir / "view-port").ok(); }, std::chrono::seconds(60)));
    const auto port = static_cast<uint16_t>(std::stoi(*ReadFileToString(serve.dir / "view-port")));
    // Without drift allowed, the version change is refused and said.
    RawResponse refused = UiRequest(port, "POST", "/ui/api/episodes/" + id + "/replay");
    CHECK(refused.status == 404);  // no bundle of the recorded version
    CHECK(refused.body.find("manager_fixture") != std::string::npos);
    Json report = UiJson(port, "POST", "/ui/api/episodes/" + id + "/replay?allow_version_drift=1");
    CHECK(report["version_drift"] == true);
    CHECK(report["matches"] == false);
    CHECK(report["first_divergence"] == 0);
    CHECK(report["steps"][0]["status"] == "diverged");
    CHECK(report["steps"][0]["replayed"]["content"] == "HELLO");

    auto page =
        BrowserPage("http://127.0.0.1:" + std::to_string(port) + "/ui/#/episode/" + id + "/replay-drift&token=tok",
                    (ScreenshotDirectory() / "replay.png").string());
    if (!page) {
      MESSAGE("skipped the browser half: /usr/bin/chromium is not installed (scripts/setup.sh installs it)");
    } else {
      CHECK(page->find("first divergence at step 0") != std::string::npos);
      CHECK(page->find("<tr class=\"diverged\">") != std::string::npos);
      CHECK(page->find("HELLO") != std::string::npos);
    }
    auto task =
        BrowserPage("http://127.0.0.1:" + std::to_string(port) + "/ui/#/task/manager_fixture/sum_task&token=tok",
                    (ScreenshotDirectory() / "task.png").string());
    if (task) {
      CHECK(task->find("<svg") != std::string::npos);
      CHECK(task->find("class=\"series\"") != std::string::npos);
      CHECK(task->find("1 of 1 scored episodes passed") != std::string::npos);
    }
    view.Signal(SIGTERM);
    CHECK(view.Wait(std::chrono::seconds(30)).value_or(-1) == 0);
  }

}  // TEST_SUITE
}  // namespace
}  // namespace envforge::server::testing
