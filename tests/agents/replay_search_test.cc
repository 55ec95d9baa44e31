// Search episodes: recorded the way the server records them (SessionManager calls into the
// trajectory store), then replayed -- on the same environment, and after the corpus changed (the
// environment re-packed with a corpus that says other things about neon), where the recorded
// search/open/find responses are served and the observations stay the same, while --live-search
// shows the differences. Also `envforge env check` and `envforge session solve` on the fixture.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "agents/replay.h"
#include "agents/trajectory_store.h"
#include "sandbox/env_bundle.h"
#include "sandbox/session_manager.h"
#include "tests/agents/agents_test_util.h"
#include "tests/run_envforge.h"
#include "tests/sandbox/search_env_fixture.h"

namespace envforge::agents {
namespace {

namespace fs = std::filesystem;
using testing::OpenStore;
using testing::TempDir;

constexpr const char* kTask = "neon-atomic-number";

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The fixture packed from the fixtures' corpus (envs/) and from a changed one (changed_envs/),
// both named search_fixture.
struct SearchBundles {
  TempDir dir;
  std::string envs = dir / "envs";
  std::string changed_envs = dir / "changed_envs";
  std::string original;
  std::string changed;
  SearchBundles() {
    fs::create_directories(envs);
    fs::create_directories(changed_envs);
    original =
        sandbox::testing::PackSearchEnv(dir, sandbox::testing::MakeSearchEnvSource(dir), "envs/search_fixture.envdb");
    changed = sandbox::testing::PackSearchEnv(dir, sandbox::testing::MakeChangedSearchEnvSource(dir, "changed_src"),
                                              "changed_envs/search_fixture.envdb");
  }
};

std::unique_ptr<sandbox::SessionManager> NewManager() {
  auto manager = sandbox::SessionManager::Create({});
  REQUIRE_MESSAGE(manager.ok(), manager.status().ToString());
  return std::move(manager).value();
}

// Runs a short search episode on `envdb` (search, open, find, submit "10") and records it in `store`
// as the server does (submit_result as a step too unless !submit_step); returns the episode id.
std::string RecordEpisode(sandbox::SessionManager& manager, const std::string& envdb, TrajectoryStore& store,
                          bool submit_step = true) {
  auto env_id = manager.OpenEnvironment(envdb);
  REQUIRE_MESSAGE(env_id.ok(), env_id.status().ToString());
  const sandbox::EnvBundle* bundle = manager.FindEnvironment(*env_id);
  const sandbox::TaskRecord* task = bundle->FindTask(kTask);
  REQUIRE(task != nullptr);
  EpisodeStart start;
  start.env_id = *env_id;
  start.env_name = bundle->manifest.name;
  start.task_id = kTask;
  start.task_version = task->version;
  start.verifier_version = task->version;
  start.client = "test";
  const std::string id = store.BeginEpisode(start);
  auto session = manager.CreateSession(*env_id, kTask);
  REQUIRE_MESSAGE(session.ok(), session.status().ToString());
  const std::vector<std::pair<std::string, Json>> calls = {
      {"search", {{"query", "red glow discharge tubes"}, {"top_k", 3}}},
      {"open", {{"doc_id_or_url", "elements:neon"}}},
      {"find", {{"doc_id", "elements:neon"}, {"pattern", "atomic number"}}},
      {"open", {{"doc_id_or_url", "elements:unobtainium"}}},
  };
  int64_t step = 0;
  for (const auto& [tool, arguments] : calls) {
    toolsets::ToolResult result = manager.CallTool(*session, {"c" + std::to_string(step), tool, arguments});
    StepRecord record;
    record.step = step++;
    record.tool = tool;
    record.arguments = arguments;
    record.result = result;
    store.RecordStep(id, std::move(record));
  }
  toolsets::ToolResult submitted = manager.CallTool(*session, {"submit", "submit_result", {{"answer_text", "10"}}});
  REQUIRE(submitted.ok());
  CHECK(submitted.content["passed"] == true);
  if (submit_step) {
    StepRecord record;
    record.step = step;
    record.tool = "submit_result";
    record.arguments = {{"answer_text", "10"}};
    record.result = submitted;
    store.RecordStep(id, std::move(record));
  }
  store.RecordSubmit(id, "10", submitted.content);
  store.EndEpisode(id, EpisodeOutcome::kSubmitted);
  (void)manager.CloseSession(*session);
  REQUIRE(store.Flush().ok());
  return id;
}

TEST_SUITE("agents.replay_search") {
  TEST_CASE("a search episode replays with its recorded responses, also after the corpus changed") {
    SearchBundles bundles;
    TempDir dir;
    const std::string store_path = dir / "trajectories.sqlite";
    auto manager = NewManager();
    std::string id;
    {
      auto store = OpenStore(store_path);
      id = RecordEpisode(*manager, bundles.original, *store);
    }
    auto reader = TrajectoryReader::Open(store_path);
    REQUIRE(reader.ok());
    Result<Episode> episode = (*reader)->Get(id);
    REQUIRE_MESSAGE(episode.ok(), episode.status().ToString());
    REQUIRE(episode->steps.size() == 5);
    // The responses are in the trajectory: the backend that answered and what it said.
    CHECK(episode->steps[0].result.content["backend"] == "offline");
    CHECK(episode->steps[0].result.content["hits"][0]["doc_id"] == "elements:neon");
    CHECK(Contains(episode->steps[1].result.content["text"].get<std::string>(), "Atomic number: 10"));

    SUBCASE("same environment: every step matches") {
      ReplayOptions options;
      options.envs = bundles.envs;
      Result<ReplayReport> report = Replay(*episode, *manager, options);
      REQUIRE_MESSAGE(report.ok(), report.status().ToString());
      CHECK(report->matches());
      CHECK_FALSE(report->version_drift);
      CHECK(report->verdict.status == VerdictStatus::kSame);
    }
    SUBCASE("changed corpus: the recorded responses are served, the observations are the same") {
      ReplayOptions options;
      options.envs = bundles.changed_envs;
      options.allow_version_drift = true;
      Result<ReplayReport> report = Replay(*episode, *manager, options);
      REQUIRE_MESSAGE(report.ok(), report.status().ToString());
      CHECK(report->version_drift);
      CHECK(report->replay_env_id != report->env_id);
      REQUIRE(report->steps.size() == 5);
      for (size_t i = 0; i < 4; ++i) {
        CAPTURE(i);
        CHECK(report->steps[i].status == StepStatus::kMatch);
      }
      // The verdict is the same; only the task version it names moved with the environment's.
      const StepComparison& submit = report->steps[4];
      CHECK(submit.differences == std::vector<std::string>{"content"});
      Json recorded = submit.recorded.content;
      Json replayed = submit.replayed.content;
      CHECK(recorded["verifier_version"] != replayed["verifier_version"]);
      recorded.erase("verifier_version");
      replayed.erase("verifier_version");
      CHECK(recorded == replayed);
      CHECK(report->verdict.status == VerdictStatus::kSame);
    }
    SUBCASE("changed corpus, live: the backend's answers of today differ") {
      ReplayOptions options;
      options.envs = bundles.changed_envs;
      options.allow_version_drift = true;
      options.live_search = true;
      Result<ReplayReport> report = Replay(*episode, *manager, options);
      REQUIRE_MESSAGE(report.ok(), report.status().ToString());
      REQUIRE(report->steps.size() == 5);
      CHECK(report->steps[0].status == StepStatus::kDiverged);  // neon no longer glows red
      CHECK(report->steps[1].status == StepStatus::kDiverged);  // its text says 99
      CHECK(Contains(DumpJson(report->steps[1].replayed.content), "Atomic number: 99"));
      CHECK(report->steps[2].status == StepStatus::kDiverged);
      CHECK(report->steps[3].status == StepStatus::kMatch);  // still no unobtainium
      REQUIRE(report->first_divergence.has_value());
      CHECK(*report->first_divergence == 0);
      CHECK_FALSE(report->matches());
    }
  }

  TEST_CASE("envforge replay serves recorded search responses; --live-search diffs; env check and session solve pass") {
    SearchBundles bundles;
    TempDir dir;
    const std::string store_path = dir / "trajectories.sqlite";
    std::string id;
    {
      auto manager = NewManager();
      auto store = OpenStore(store_path);
      id = RecordEpisode(*manager, bundles.original, *store, /*submit_step=*/false);
    }
    auto recorded = ::envforge::testing::Envforge(
        {"replay", store_path, id, "--envs", bundles.changed_envs, "--allow-version-drift"});
    CHECK_MESSAGE(recorded.exit_code == 0, (recorded.stdout_text + recorded.stderr_text));
    auto live = ::envforge::testing::Envforge(
        {"replay", store_path, id, "--envs", bundles.changed_envs, "--allow-version-drift", "--live-search", "--json"});
    CHECK_MESSAGE(live.exit_code == 1, (live.stdout_text + live.stderr_text));
    Result<Json> report = ParseJson(live.stdout_text, "replay --json");
    REQUIRE_MESSAGE(report.ok(), live.stdout_text);
    CHECK((*report)["first_divergence"] == 0);

    auto check = ::envforge::testing::Envforge({"env", "check", bundles.original, "--json"});
    CHECK_MESSAGE(check.exit_code == 0, (check.stdout_text + check.stderr_text));
    Result<Json> checked = ParseJson(check.stdout_text, "env check --json");
    REQUIRE_MESSAGE(checked.ok(), check.stdout_text);
    CHECK((*checked)["ok"] == true);
    size_t tasks = 0;
    for (const Json& item : (*checked)["checks"]) {
      if (item["check"].get<std::string>().rfind("task ", 0) == 0) {
        ++tasks;
        CHECK_MESSAGE(item["ok"] == true, DumpJson(item));
      }
    }
    CHECK(tasks == 4);

    auto solve =
        ::envforge::testing::Envforge({"session", "solve", bundles.original, "--task", "lead-symbol", "--json"});
    CHECK_MESSAGE(solve.exit_code == 0, (solve.stdout_text + solve.stderr_text));
    Result<Json> verdict = ParseJson(solve.stdout_text, "session solve --json");
    REQUIRE_MESSAGE(verdict.ok(), solve.stdout_text);
    CHECK((*verdict)["passed"] == true);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::agents
