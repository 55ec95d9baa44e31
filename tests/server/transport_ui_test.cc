// The trajectory viewer served by `envforge serve --trajectories`: the page without a token, the
// JSON endpoints behind it (filters and pages in SQL, one episode, counts), bad parameters
// named, untrusted text kept as text, and the headers that keep a browser from running it.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "tests/server/ui_test_util.h"

namespace envforge::server::testing {
namespace {

constexpr const char* kProbe = "<script>document.title='pwned'</script><img src=x onerror=alert(1)>";

RawResponse Get(uint16_t port, const std::string& path, const std::string& token = "tok") {
  return UiRequest(port, "GET", path, token);
}

Json GetJson(uint16_t port, const std::string& path) { return UiJson(port, "GET", path); }

TEST_SUITE("server.transport") {
  TEST_CASE("the viewer: the page, episodes filtered and paged, one episode, and untrusted text kept as text") {
    ServeProcess serve({"--token", "tok"});
    RpcClientOptions options;
    options.token = "tok";
    auto client = RpcClient::Connect(serve.Url() + "/rpc", options);
    REQUIRE(client.ok());
    // Three episodes: two submitted (one passed), one closed with a hostile tool result.
    std::vector<std::string> trajectories;
    for (int i = 0; i < 3; ++i) {
      Json created = MustCall(**client, "session/create", Json{{"env", "manager_fixture"}, {"task", "sum_task"}});
      trajectories.push_back(created["trajectory"]);
      const std::string session = created["session"];
      MustCall(**client, "tools/call",
               Json{{"session", session}, {"name", "slow_echo"}, {"arguments", {{"text", kProbe}, {"seconds", 0}}}});
      if (i < 2) MustCall(**client, "session/submit", Json{{"session", session}, {"answer", i == 0 ? "5" : "6"}});
      MustCall(**client, "session/close", Json{{"session", session}});
    }

    // The page: no token needed, our own files only.
    RawResponse page = Get(serve.port, "/ui/", "");
    CHECK(page.status == 200);
    CHECK(page.Header("content-type: text/html"));
    CHECK(page.Header("content-security-policy: default-src 'self'; script-src 'self'"));
    CHECK(page.body.find("/ui/app.js") != std::string::npos);
    CHECK(Get(serve.port, "/ui/app.js", "").Header("content-type: text/javascript"));
    CHECK(Get(serve.port, "/ui/nothing.js", "").status == 404);
    // The data: the token, like /rpc.
    CHECK(Get(serve.port, "/ui/api/episodes", "").status == 401);
    CHECK(Get(serve.port, "/ui/api/episodes", "wrong").status == 401);

    // Episodes are recorded by the writer thread: wait until all three ended.
    REQUIRE(WaitFor(
        [&] {
          return GetJson(serve.port, "/ui/api/counts")["open_episodes"] == 0 &&
                 GetJson(serve.port, "/ui/api/counts")["episodes"] == 3;
        },
        std::chrono::seconds(20)));
    Json all = GetJson(serve.port, "/ui/api/episodes");
    REQUIRE(all["episodes"].size() == 3);
    CHECK(all["has_more"] == false);
    CHECK(all["episodes"][0]["id"] == trajectories[2]);  // newest first
    Json submitted = GetJson(serve.port, "/ui/api/episodes?outcome=submitted");
    CHECK(submitted["episodes"].size() == 2);
    Json first_page = GetJson(serve.port, "/ui/api/episodes?limit=2");
    CHECK(first_page["episodes"].size() == 2);
    CHECK(first_page["has_more"] == true);
    Json second_page = GetJson(serve.port, "/ui/api/episodes?limit=2&offset=2");
    REQUIRE(second_page["episodes"].size() == 1);
    CHECK(second_page["episodes"][0]["id"] == trajectories[0]);
    CHECK(second_page["has_more"] == false);
    CHECK(GetJson(serve.port, "/ui/api/episodes?task=no_such_task")["episodes"].empty());
    CHECK(GetJson(serve.port, "/ui/api/episodes?env=manager_fixture&task=sum_task")["episodes"].size() == 3);
    // Sorting: by steps both ways (ties newest first); unknown columns and orders are named.
    Json fewest = GetJson(serve.port, "/ui/api/episodes?sort=steps&order=asc");
    Json most = GetJson(serve.port, "/ui/api/episodes?sort=steps&order=desc");
    REQUIRE(fewest["episodes"].size() == 3);
    for (size_t i = 1; i < 3; ++i) {
      CHECK(fewest["episodes"][i - 1]["steps"].get<int>() <= fewest["episodes"][i]["steps"].get<int>());
      CHECK(most["episodes"][i - 1]["steps"].get<int>() >= most["episodes"][i]["steps"].get<int>());
    }
    CHECK(GetJson(serve.port, "/ui/api/episodes?sort=started&order=asc")["episodes"][0]["id"] == trajectories[0]);
    RawResponse bad_sort = Get(serve.port, "/ui/api/episodes?sort=colour");
    CHECK(bad_sort.status == 400);
    CHECK(bad_sort.body.find("colour") != std::string::npos);
    CHECK(Get(serve.port, "/ui/api/episodes?order=sideways").status == 400);

    // One episode: its steps and verdict; the hostile text is data in a JSON answer, never HTML.
    RawResponse one = Get(serve.port, "/ui/api/episodes/" + trajectories[0]);
    REQUIRE(one.status == 200);
    CHECK(one.Header("content-type: application/json"));
    CHECK(one.Header("x-content-type-options: nosniff"));
    Json episode = ParseJson(one.body).value();
    CHECK(episode["id"] == trajectories[0]);
    REQUIRE(episode["steps"].size() >= 1);
    CHECK(episode["steps"][0]["tool"] == "slow_echo");
    CHECK(episode["steps"][0]["result"].dump().find("<script>document.title") != std::string::npos);
    CHECK(episode["verdict"]["passed"] == true);

    // Bad input is named; unknown things are 404; only GET.
    RawResponse bad_outcome = Get(serve.port, "/ui/api/episodes?outcome=won");
    CHECK(bad_outcome.status == 400);
    CHECK(bad_outcome.body.find("won") != std::string::npos);
    RawResponse bad_limit = Get(serve.port, "/ui/api/episodes?limit=100000");
    CHECK(bad_limit.status == 400);
    CHECK(bad_limit.body.find("limit") != std::string::npos);
    CHECK(Get(serve.port, "/ui/api/episodes?colour=red").status == 400);
    CHECK(Get(serve.port, "/ui/api/episodes/ep-does-not-exist").status == 404);
    CHECK(Get(serve.port, "/ui/api/nothing").status == 404);
    RawConnection post(serve.port);
    REQUIRE(post.Send(
        HttpRequestText("POST", "/ui/api/episodes", "{}", {"Authorization: Bearer tok", "Connection: close"})));
    CHECK(post.ReadResponse()->status == 405);
  }

  TEST_CASE("a server that records no trajectories answers the viewer's API with 404, saying why") {
    TempDir dir;
    std::filesystem::create_directories(dir / "envs");
    sandbox::testing::WriteFixtureBundle(dir / "envs/fixture.envdb");
    ChildProcess child({Envforge(), "serve", "--envs", dir / "envs", "--port", "0", "--port-file", dir / "port"},
                       dir / "serve.stderr");
    REQUIRE(WaitFor([&] { return ReadFileToString(dir / "port").ok(); }, std::chrono::seconds(60)));
    const auto port = static_cast<uint16_t>(std::stoi(*ReadFileToString(dir / "port")));
    RawResponse answer = Get(port, "/ui/api/episodes", "");
    CHECK(answer.status == 404);
    CHECK(answer.body.find("--trajectories") != std::string::npos);
    child.Signal(SIGTERM);
    CHECK(child.Wait(std::chrono::seconds(30)).value_or(-1) == 0);
  }

  TEST_CASE("the viewer in a real browser: the list and an episode render, and a script in a tool result stays inert") {
    ServeProcess serve({"--token", "tok"});
    RpcClientOptions options;
    options.token = "tok";
    auto client = RpcClient::Connect(serve.Url() + "/rpc", options);
    REQUIRE(client.ok());
    Json created = MustCall(**client, "session/create", Json{{"env", "manager_fixture"}, {"task", "sum_task"}});
    const std::string session = created["session"], trajectory = created["trajectory"];
    MustCall(**client, "tools/call",
             Json{{"session", session}, {"name", "slow_echo"}, {"arguments", {{"text", kProbe}, {"seconds", 0}}}});
    // A fork after the first call, closed at once: the parent's page links it, and it the parent.
    Json fork = MustCall(**client, "session/fork", Json{{"session", session}});
    const std::string fork_trajectory = fork["trajectory"];
    MustCall(**client, "session/close", Json{{"session", fork["session"]}});
    MustCall(**client, "session/submit", Json{{"session", session}, {"answer", "5"}});
    MustCall(**client, "session/close", Json{{"session", session}});
    // A second episode, closed without an answer (newest first in the list).
    Json idle = MustCall(**client, "session/create", Json{{"env", "manager_fixture"}, {"task", "sum_task"}});
    const std::string idle_trajectory = idle["trajectory"];
    MustCall(**client, "session/close", Json{{"session", idle["session"]}});
    REQUIRE(WaitFor(
        [&] {
          return GetJson(serve.port, "/ui/api/counts")["episodes"] == 3 &&
                 GetJson(serve.port, "/ui/api/counts")["open_episodes"] == 0;
        },
        std::chrono::seconds(20)));
    // Screenshots for a person to look at, under the build directory.
    const std::filesystem::path shots = ScreenshotDirectory();
    auto list = BrowserPage(serve.Url() + "/ui/#token=tok", (shots / "episodes.png").string());
    if (!list) {
      MESSAGE("skipped: /usr/bin/chromium is not installed (scripts/setup.sh installs it)");
      return;
    }
    CHECK(list->find("data-id=\"" + trajectory + "\"") != std::string::npos);
    CHECK(list->find("data-id=\"" + idle_trajectory + "\"") != std::string::npos);
    CHECK(list->find(">3 episodes, 2 tool calls, 0 open<") != std::string::npos);  // the call and the submit
    // The token form stays hidden: the fragment's token was taken.
    CHECK(list->find("<form id=\"token-form\" hidden") != std::string::npos);
    // Filters and pages from the address: the submitted one alone; page 2 of 1-per-page.
    auto filtered =
        BrowserPage(serve.Url() + "/ui/#/?outcome=submitted&token=tok", (shots / "episodes-filtered.png").string());
    CHECK(filtered->find("data-id=\"" + trajectory + "\"") != std::string::npos);
    CHECK(filtered->find("data-id=\"" + idle_trajectory + "\"") == std::string::npos);
    auto second_page =
        BrowserPage(serve.Url() + "/ui/#/?limit=1&offset=1&token=tok", (shots / "episodes-page-2.png").string());
    CHECK(second_page->find("data-id=\"" + fork_trajectory + "\"") !=
          std::string::npos);  // newest first: idle, fork, first
    CHECK(second_page->find("data-id=\"" + idle_trajectory + "\"") == std::string::npos);
    CHECK(second_page->find("<span id=\"page\">2-2</span>") != std::string::npos);
    // Sorted by a column from the address: by steps, most first (the submitted episode has two).
    auto by_steps =
        BrowserPage(serve.Url() + "/ui/#/?sort=steps&order=desc&token=tok", (shots / "episodes-by-steps.png").string());
    const size_t most = by_steps->find("data-id=\"" + trajectory + "\""),
                 least = by_steps->find("data-id=\"" + idle_trajectory + "\"");
    REQUIRE(most != std::string::npos);
    REQUIRE(least != std::string::npos);
    CHECK(most < least);
    // Forks: the API lists them by parent; each page links the other.
    Json forks = GetJson(serve.port, "/ui/api/episodes?parent=" + trajectory);
    REQUIRE(forks["episodes"].size() == 1);
    CHECK(forks["episodes"][0]["id"] == fork_trajectory);
    auto forked = BrowserPage(serve.Url() + "/ui/#/episode/" + fork_trajectory + "&token=tok",
                              (shots / "episode-fork.png").string());
    CHECK(forked->find("href=\"#/episode/" + trajectory + "\"") != std::string::npos);

    auto episode =
        BrowserPage(serve.Url() + "/ui/#/episode/" + trajectory + "&token=tok", (shots / "episode.png").string());
    CHECK(episode->find("slow_echo") != std::string::npos);
    CHECK(episode->find("href=\"#/episode/" + fork_trajectory + "\"") != std::string::npos);
    CHECK(episode->find(">passed<") != std::string::npos);
    // The probe is text in the page: escaped in the DOM, no element made of it, the title intact.
    CHECK(episode->find("&lt;script&gt;document.title='pwned'&lt;/script&gt;") != std::string::npos);
    CHECK(episode->find("<img src=\"x\"") == std::string::npos);
    CHECK(episode->find("<title>envforge trajectories</title>") != std::string::npos);

    // Without a token the API refuses, and the page says so and shows the token form.
    auto refused = BrowserPage(serve.Url() + "/ui/#/episode/" + trajectory, (shots / "episode-no-token.png").string());
    CHECK(refused->find("this server needs a token") != std::string::npos);
    CHECK(refused->find("<form id=\"token-form\">") != std::string::npos);
  }

  TEST_CASE("envforge view serves a store read-only once its server has gone; a missing store is named") {
    ServeProcess serve;
    RpcClientOptions options;
    auto client = RpcClient::Connect(serve.Url() + "/rpc", options);
    REQUIRE(client.ok());
    Json created = MustCall(**client, "session/create", Json{{"env", "manager_fixture"}, {"task", "sum_task"}});
    MustCall(**client, "session/close", Json{{"session", created["session"]}});
    serve.child->Signal(SIGTERM);
    REQUIRE(serve.child->Wait(std::chrono::seconds(60)).value_or(-1) == 0);

    ChildProcess view({Envforge(), "view", serve.trajectories, "--port", "0", "--port-file", serve.dir / "view-port"},
                      serve.dir / "view.stderr");
    REQUIRE(WaitFor([&] { return ReadFileToString(serve.dir / "view-port").ok(); }, std::chrono::seconds(60)));
    const auto port = static_cast<uint16_t>(std::stoi(*ReadFileToString(serve.dir / "view-port")));
    Json page = ParseJson(Get(port, "/ui/api/episodes", "").body).value();
    REQUIRE(page["episodes"].size() == 1);
    CHECK(page["episodes"][0]["id"] == created["trajectory"]);
    CHECK(Get(port, "/ui/", "").status == 200);
    view.Signal(SIGTERM);
    CHECK(view.Wait(std::chrono::seconds(30)).value_or(-1) == 0);

    ChildProcess missing({Envforge(), "view", serve.dir / "no-such.sqlite", "--port", "0"},
                         serve.dir / "missing.stderr");
    CHECK(missing.Wait(std::chrono::seconds(30)).value_or(-1) == 2);
    CHECK(missing.StderrText().find("no-such.sqlite") != std::string::npos);
  }

}  // TEST_SUITE
}  // namespace
}  // namespace envforge::server::testing
