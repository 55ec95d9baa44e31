// The viewer's synthesis runs (`envforge serve --runs DIR`, `envforge view F --runs DIR`): a run
// database made by the real `envforge synth` (a generator that fails on one lineage, so that
// candidates are dropped), its funnel and dropped candidates over /ui/api/runs equal to what
// `envforge synth report --json` prints, names outside the directory refused, and the runs page
// in headless Chromium (the funnel chart and the dropped table; screenshots under
// build/ui-screenshots/).
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "base/sqlite.h"
#include "base/subprocess.h"
#include "tests/server/ui_test_util.h"

namespace envforge::server::testing {
namespace {

namespace fs = std::filesystem;

RawResponse Get(uint16_t port, const std::string& path, const std::string& token = "tok") {
  return UiRequest(port, "GET", path, token);
}

Json GetJson(uint16_t port, const std::string& path, const std::string& token = "tok") {
  return UiJson(port, "GET", path, token);
}

CommandOutput MustRun(const std::vector<std::string>& argv) {
  CommandOptions options;
  options.timeout = std::chrono::seconds(180);
  auto output = RunCommand(argv, options);
  REQUIRE(output.ok());
  INFO(output->stderr_text.substr(output->stderr_text.size() > 3000 ? output->stderr_text.size() - 3000 : 0));
  REQUIRE(output->exit_code == 0);
  return *output;
}

// One calendar environment, two lineages, two levels, no filter: lineage 0 is kept at both
// levels, the generator raises for lineage 1 (with markup in its message), so its two candidates
// are dropped at proposal.
// Returns `envforge synth report RUN --json`.
Json MakeRun(const fs::path& work, const fs::path& run) {
  const fs::path source = ENVFORGE_TEST_SOURCE_DIR;
  const fs::path generators = work / "generators";
  fs::copy(source / "envsynth/procedural", generators, fs::copy_options::recursive);
  fs::copy_file(source / "scripts/policy_envs.py", generators / "policy_envs.py");
  std::ofstream(generators / "cat_calendar.py", std::ios::app) << R"(

_original_task = task


def task(seed, lineage, level, attempt):
    if lineage == 1:
        raise RuntimeError("generator bug for lineage 1 <img src=x onerror=alert(1)>")
    return _original_task(seed, lineage, level, attempt)
)";
  MustRun({"/usr/bin/env", "ENVFORGE_SYNTH_PROCEDURAL=" + generators.string(), Envforge(), "synth", "--categories",
           "calendar", "--envs", "1", "--tasks-per-env", "2", "--max-levels", "2", "--no-filter", "--repairs", "0",
           "--out", work / "out", "--run", run});
  return ParseJson(MustRun({Envforge(), "synth", "report", run, "--json"}).stdout_text).value();
}

TEST_SUITE("server.transport") {
  TEST_CASE(
      "the viewer's synthesis runs: the funnel and dropped candidates of a real run, names outside the directory "
      "refused") {
    TempDir work;
    fs::create_directories(work / "runs");
    const Json report = MakeRun(work.path(), work / "runs/first.sqlite");
    REQUIRE(report["dropped"].size() == 2);
    std::ofstream(work / "runs/notes.sqlite") << "not a run database";
    std::ofstream(work / "secret.sqlite") << "outside the runs directory";
    // A run whose stored config is damaged: named as such, never a crash.
    fs::copy_file(work / "runs/first.sqlite", work / "runs/damaged.sqlite");
    {
      auto damaged = Database::Open(work / "runs/damaged.sqlite", Database::Mode::kReadWrite);
      REQUIRE(damaged.ok());
      REQUIRE(damaged->Exec("UPDATE run_meta SET value = '[1]' WHERE key = 'config'").ok());
    }

    ServeProcess serve({"--token", "tok", "--runs", work / "runs"});
    CHECK(Get(serve.port, "/ui/api/runs", "").status == 401);
    CHECK(Get(serve.port, "/ui/runs.js", "").Header("content-type: text/javascript"));

    // The list: every *.sqlite file by name; one that is not a run says why.
    Json runs = GetJson(serve.port, "/ui/api/runs")["runs"];
    REQUIRE(runs.size() == 3);
    CHECK(runs[0]["name"] == "damaged.sqlite");
    CHECK(runs[0]["error"].get<std::string>().find("damaged") != std::string::npos);
    CHECK(runs[1]["name"] == "first.sqlite");
    CHECK(runs[1]["categories"] == Json::array({"calendar"}));
    CHECK(runs[1]["candidates"] == 4);
    CHECK(runs[1]["kept"] == 2);
    CHECK(runs[1]["dropped"] == 2);
    CHECK(runs[1]["environments"]["done"] == 1);
    CHECK(runs[1]["started"].is_number());
    CHECK(runs[2]["name"] == "notes.sqlite");
    CHECK(runs[2]["error"].get<std::string>().find("not an envforge synth run database") != std::string::npos);

    // One run: the numbers `envforge synth report --json` prints, the server's paths kept to itself.
    Json run = GetJson(serve.port, "/ui/api/runs/first.sqlite");
    CHECK(run["funnel"] == report["funnel"]);
    CHECK(run["drop_reasons"] == report["drop_reasons"]);
    CHECK(run["dropped"] == report["dropped"]);
    CHECK(run["environments"] == report["environments"]);
    CHECK(run["cost"]["model_calls"] == report["cost"]["model_calls"]);
    CHECK(run["dropped_total"] == 2);
    CHECK(run["has_more"] == false);
    CHECK(run["run"] == "first.sqlite");
    CHECK(run["dropped"][0]["stage"] == "proposal");
    CHECK(run["dropped"][0]["reason"].get<std::string>().find("generator bug for lineage 1") != std::string::npos);
    // The dropped candidates come in pages.
    Json first_page = GetJson(serve.port, "/ui/api/runs/first.sqlite?limit=1");
    REQUIRE(first_page["dropped"].size() == 1);
    CHECK(first_page["dropped"][0] == report["dropped"][0]);
    CHECK(first_page["has_more"] == true);
    Json second_page = GetJson(serve.port, "/ui/api/runs/first.sqlite?limit=1&offset=1");
    REQUIRE(second_page["dropped"].size() == 1);
    CHECK(second_page["dropped"][0] == report["dropped"][1]);
    CHECK(second_page["has_more"] == false);
    CHECK(GetJson(serve.port, "/ui/api/runs/first.sqlite?offset=5")["dropped"].empty());

    // Only plain names of files in the directory: a path, plain or encoded, is 400.
    for (const char* outside : {"../secret.sqlite", "..%2Fsecret.sqlite", "%2e%2e%2fsecret.sqlite", "%2E%2E", "..",
                                ".%2e", "%2Ftmp%2Fx.sqlite", "sub%5Cx.sqlite", "first", ".hidden.sqlite", ""}) {
      RawResponse refused = Get(serve.port, std::string("/ui/api/runs/") + outside);
      INFO(outside << " -> " << refused.status << " " << refused.body);
      CHECK(refused.status == 400);
      CHECK(refused.body.find("\"error\"") != std::string::npos);
      CHECK(refused.body.find("outside the runs directory") == std::string::npos);
    }
    CHECK(Get(serve.port, "/ui/api/runs/nope.sqlite").status == 404);
    CHECK(Get(serve.port, "/ui/api/runs/notes.sqlite").status == 404);
    CHECK(Get(serve.port, "/ui/api/runs/damaged.sqlite").status == 500);
    CHECK(Get(serve.port, "/ui/api/runs/first.sqlite?limit=0").status == 400);
    CHECK(Get(serve.port, "/ui/api/runs/first.sqlite?colour=red").status == 400);

    // envforge view reads the same directory (here beside the running server).
    ChildProcess view({Envforge(), "view", serve.trajectories, "--runs", work / "runs", "--port", "0", "--port-file",
                       work / "view-port"},
                      work / "view.stderr");
    REQUIRE(WaitFor([&] { return ReadFileToString(work / "view-port").ok(); }, std::chrono::seconds(60)));
    const auto view_port = static_cast<uint16_t>(std::stoi(*ReadFileToString(work / "view-port")));
    CHECK(GetJson(view_port, "/ui/api/runs/first.sqlite", "")["funnel"] == report["funnel"]);
    view.Signal(SIGTERM);
    CHECK(view.Wait(std::chrono::seconds(30)).value_or(-1) == 0);

    // The run database was only read: the viewer changed nothing in it.
    CHECK(ParseJson(MustRun({Envforge(), "synth", "report", work / "runs/first.sqlite", "--json"}).stdout_text)
              .value()["funnel"] == report["funnel"]);

    // The page in a real browser: the runs list, then one run's chart and dropped candidates.
    const fs::path shots = ScreenshotDirectory();
    auto list = BrowserPage(serve.Url() + "/ui/#/runs&token=tok", (shots / "synthesis-runs.png").string());
    if (!list) {
      MESSAGE("skipped: /usr/bin/chromium is not installed (scripts/setup.sh installs it)");
      return;
    }
    CHECK(list->find("data-run=\"first.sqlite\"") != std::string::npos);
    CHECK(list->find("not an envforge synth run database") != std::string::npos);
    CHECK(list->find("id=\"list-view\" hidden") != std::string::npos);  // the episodes stay out of view

    auto page = BrowserPage(serve.Url() + "/ui/#/runs/first.sqlite&token=tok", (shots / "synthesis-run.png").string());
    CHECK(page->find("<svg class=\"funnel-chart\"") != std::string::npos);
    CHECK(page->find("data-category=\"calendar\" data-level=\"1\"") != std::string::npos);
    CHECK(page->find("data-category=\"calendar\" data-level=\"2\"") != std::string::npos);
    CHECK(page->find("class=\"bar bar-kept\"") != std::string::npos);
    CHECK(page->find(">calendar \xC2\xB7 level 1</text>") != std::string::npos);
    CHECK(page->find("<table id=\"dropped\">") != std::string::npos);
    CHECK(page->find(">calendar/0/1/1<") != std::string::npos);
    CHECK(page->find(">proposal<") != std::string::npos);
    CHECK(page->find("generator bug for lineage 1") != std::string::npos);
    // A reason is text in the page, however it reads: escaped, no element made of it.
    CHECK(page->find("&lt;img src=x onerror=alert(1)&gt;") != std::string::npos);
    CHECK(page->find("<img src=\"x\"") == std::string::npos);
    CHECK(page->find("id=\"error\" role=\"alert\" hidden") != std::string::npos);
  }

  TEST_CASE("without --runs the viewer lists no runs and says why; --runs is refused where it cannot be shown") {
    ServeProcess serve;
    Json runs = GetJson(serve.port, "/ui/api/runs", "");
    CHECK(runs["runs"].empty());
    CHECK(runs["note"].get<std::string>().find("--runs DIR") != std::string::npos);
    CHECK(Get(serve.port, "/ui/api/runs/first.sqlite", "").status == 404);

    TempDir dir;
    fs::create_directories(dir / "envs");
    auto missing = RunCommand({Envforge(), "serve", "--envs", dir / "envs", "--trajectories", dir / "t.sqlite",
                               "--runs", dir / "no-such-dir", "--port", "0"});
    REQUIRE(missing.ok());
    CHECK(missing->exit_code == 2);
    CHECK(missing->stderr_text.find("no-such-dir") != std::string::npos);
    auto without_store =
        RunCommand({Envforge(), "serve", "--envs", dir / "envs", "--runs", dir.path().string(), "--port", "0"});
    REQUIRE(without_store.ok());
    CHECK(without_store->exit_code == 2);
    CHECK(without_store->stderr_text.find("--trajectories") != std::string::npos);
  }

}  // TEST_SUITE
}  // namespace
}  // namespace envforge::server::testing
