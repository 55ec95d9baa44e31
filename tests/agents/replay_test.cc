// Replay with real sandbox sessions of the trip_planning environment: an episode recorded the
// way the server records it (SessionManager calls + the trajectory store) replays identically; a
// result tampered with in the SQLite file is found at its step with both sides; a re-packed
// environment with an edited verifier re-scores the answer; a missing environment version is
// NotFound naming it; forked episodes replay their parent's prefix; a rollout (conversation, model
// turns, context events recorded beside its tool steps) replays exactly as a served episode; and
// the envforge binary's traj and replay commands give the documented output and exit codes.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "agents/replay.h"
#include "agents/trajectory_store.h"
#include "base/fd.h"
#include "base/sqlite.h"
#include "base/subprocess.h"
#include "sandbox/env_bundle.h"
#include "sandbox/env_pack.h"
#include "sandbox/session_manager.h"
#include "tests/agents/agents_test_util.h"
#include "tests/run_envforge.h"

namespace envforge::agents {
namespace {

namespace fs = std::filesystem;
using testing::OpenStore;
using testing::SourceDir;
using testing::TempDir;

constexpr const char* kTask = "cheapest_rated_hotel";
constexpr const char* kCity = "Suzhou";

// The trip environment packed twice, once as shipped and once with cheapest_rated_hotel's
// verifier relaxed to rating >= 3.0 (a cheaper 3.9-rated Suzhou hotel then beats the gold answer).
struct Bundles {
  TempDir dir;
  std::string original_dir;  // holds trip.envdb only
  std::string original;
  std::string relaxed_dir;  // holds trip_relaxed.envdb only
  std::string relaxed;

  Bundles() {
    original_dir = dir / "envs";
    relaxed_dir = dir / "relaxed_envs";
    fs::create_directories(original_dir);
    fs::create_directories(relaxed_dir);
    original = original_dir + "/trip.envdb";
    relaxed = relaxed_dir + "/trip_relaxed.envdb";
    Status packed = sandbox::PackEnvironment(SourceDir() + "/data/envs/trip_planning", original);
    REQUIRE_MESSAGE(packed.ok(), packed.ToString());

    std::string copy = dir / "trip_relaxed_src";
    fs::copy(SourceDir() + "/data/envs/trip_planning", copy, fs::copy_options::recursive);
    std::string verifier_path = copy + "/tasks/" + kTask + "/verifier.py";
    std::ifstream in(verifier_path);
    std::stringstream text;
    text << in.rdbuf();
    std::string verifier = text.str();
    auto at = verifier.find("MIN_RATING = 4.0");
    REQUIRE(at != std::string::npos);
    verifier.replace(at, 16, "MIN_RATING = 3.0");
    std::ofstream(verifier_path, std::ios::trunc) << verifier;
    packed = sandbox::PackEnvironment(copy, relaxed);
    REQUIRE_MESSAGE(packed.ok(), packed.ToString());
  }
};

const Bundles& TripBundles() {
  static Bundles bundles;
  return bundles;
}

std::unique_ptr<sandbox::SessionManager> NewManager() {
  auto manager = sandbox::SessionManager::Create({});
  REQUIRE_MESSAGE(manager.ok(), manager.status().ToString());
  return std::move(manager).value();
}

toolsets::ToolCall Call(const std::string& name, Json arguments) {
  toolsets::ToolCall call;
  call.name = name;
  call.arguments = std::move(arguments);
  return call;
}

// Records like the server: each call's result goes to the store as the next step.
struct Recorder {
  sandbox::SessionManager& manager;
  TrajectoryStore& store;
  std::string episode_id;
  sandbox::SessionManager::SessionId session = 0;
  int64_t next_step = 0;

  toolsets::ToolResult Step(const std::string& tool, Json arguments) {
    StepRecord step;
    step.step = next_step++;
    step.tool = tool;
    step.arguments = arguments;
    step.started_at_us = 1;
    step.result = manager.CallTool(session, Call(tool, std::move(arguments)));
    step.duration_us = static_cast<int64_t>(step.result.duration_us);
    store.RecordStep(episode_id, step);
    return step.result;
  }
};

EpisodeStart StartFor(sandbox::SessionManager& manager, const std::string& env_id) {
  const sandbox::EnvBundle* bundle = manager.FindEnvironment(env_id);
  REQUIRE(bundle != nullptr);
  const sandbox::TaskRecord* task = bundle->FindTask(kTask);
  REQUIRE(task != nullptr);
  EpisodeStart start;
  start.env_id = env_id;
  start.env_name = bundle->manifest.name;
  start.task_id = kTask;
  start.task_version = task->version;
  start.verifier_version = task->version;
  start.client = "replay_test";
  return start;
}

// The gold answer, from the task's solution in a session of its own.
std::string GoldAnswer(sandbox::SessionManager& manager, const std::string& env_id) {
  auto session = manager.CreateSession(env_id, kTask);
  REQUIRE_MESSAGE(session.ok(), session.status().ToString());
  auto solved = manager.Solve(*session);
  REQUIRE_MESSAGE(solved.ok(), solved.status().ToString());
  (void)manager.CloseSession(*session);
  return solved->answer_text;
}

// An episode of cheapest_rated_hotel: list Suzhou's hotels, look up three, fail one lookup, then
// submit the gold answer. Returns the episode id (flushed).
std::string RecordEpisode(sandbox::SessionManager& manager, TrajectoryStore& store, const std::string& env_id) {
  std::string answer = GoldAnswer(manager, env_id);
  Recorder recorder{manager, store, store.BeginEpisode(StartFor(manager, env_id))};
  auto session = manager.CreateSession(env_id, kTask);
  REQUIRE_MESSAGE(session.ok(), session.status().ToString());
  recorder.session = *session;
  toolsets::ToolResult hotels = recorder.Step("get_all_hotels_by_city", Json{{"city", kCity}});
  REQUIRE(hotels.ok());
  REQUIRE(hotels.content.is_array());
  REQUIRE(hotels.content.size() >= 3);
  for (int i = 0; i < 3; ++i) {
    recorder.Step("get_infos_by_hotel", Json{{"info_keywords", {"price", "rating"}}, {"hotel", hotels.content[i]}});
  }
  toolsets::ToolResult unknown = recorder.Step("get_city_by_hotel", Json{{"hotel", "No Such Hotel"}});
  CHECK(unknown.outcome == toolsets::Outcome::kToolError);
  toolsets::ToolResult submitted = recorder.Step("submit_result", Json{{"answer_text", answer}});
  REQUIRE(submitted.ok());
  CHECK(submitted.content["passed"] == true);
  store.RecordSubmit(recorder.episode_id, answer, submitted.content);
  store.EndEpisode(recorder.episode_id, EpisodeOutcome::kSubmitted);
  (void)manager.CloseSession(*session);
  REQUIRE(store.Flush().ok());
  return recorder.episode_id;
}

// The same episode as RecordEpisode, recorded the way the rollout loop records it: the start
// names the backend and the rollout, every message the model saw is recorded with the model side
// of each assistant message, each tool call is also an ordinary step (what replay re-runs), a
// context event sits between the turns, and the submit is a step plus RecordSubmit.
std::string RecordRolloutEpisode(sandbox::SessionManager& manager, TrajectoryStore& store, const std::string& env_id) {
  std::string answer = GoldAnswer(manager, env_id);
  EpisodeStart start = StartFor(manager, env_id);
  start.client = "rollout";
  start.kind = "rollout";
  start.backend = "scripted:/fixtures/trip.jsonl";
  start.model = "tiny-dsv32";
  start.sampling = Json{{"temperature", 1.0}, {"top_p", 0.9}, {"seed", 5}, {"max_tokens", 256}};
  start.rollout_id = "r-replay";
  start.sample_index = 0;
  Recorder recorder{manager, store, store.BeginEpisode(start)};
  auto session = manager.CreateSession(env_id, kTask);
  REQUIRE_MESSAGE(session.ok(), session.status().ToString());
  recorder.session = *session;
  int64_t message = 0;
  int64_t turn = 0;
  int64_t context = 0;  // tokens in the model's context so far
  auto say = [&](const std::string& role, const std::string& content) {
    store.RecordMessage(recorder.episode_id, MessageRecord{.index = message++, .role = role, .content = content});
  };
  // One model turn that calls `tool`, then its result as a step and a tool message.
  auto call = [&](const std::string& tool, Json arguments, const std::string& reasoning) {
    std::string call_id = "call_" + std::to_string(turn);
    MessageRecord assistant{
        .index = message++,
        .role = "assistant",
        .reasoning_content = reasoning,
        .tool_calls = Json::array({Json{{"id", call_id}, {"name", tool}, {"arguments", arguments}}})};
    ModelTurnRecord model{.turn = turn++,
                          .message_index = assistant.index,
                          .input_tokens = {1, 2, 3},
                          .reused_tokens = context,
                          .output_tokens = {7, 8},
                          .logprobs = {-0.1, -0.2},
                          .kept_counts = {4, 2},
                          .finish_reason = "tool_calls",
                          .raw_text = reasoning};
    model.prompt_tokens = context + 3;
    context += 5;
    store.RecordMessage(recorder.episode_id, assistant);
    store.RecordModelTurn(recorder.episode_id, model);
    int64_t step = recorder.next_step;
    toolsets::ToolResult result = recorder.Step(tool, std::move(arguments));
    store.RecordMessage(recorder.episode_id,
                        MessageRecord{.index = message++,
                                      .role = "tool",
                                      .content = result.ok() ? DumpJson(result.content) : result.message,
                                      .tool_call_id = call_id,
                                      .tool_outcome = std::string(toolsets::OutcomeName(result.outcome)),
                                      .step = step});
    return result;
  };
  say("system", "You are a travel agent. Use the tools.");
  say("user", "Find the cheapest hotel in Suzhou rated 4.0 or better.");
  toolsets::ToolResult hotels = call("get_all_hotels_by_city", Json{{"city", kCity}}, "List the city's hotels first.");
  REQUIRE(hotels.ok());
  REQUIRE(hotels.content.size() >= 3);
  for (int i = 0; i < 3; ++i) {
    call("get_infos_by_hotel", Json{{"info_keywords", {"price", "rating"}}, {"hotel", hotels.content[i]}},
         "Check hotel " + std::to_string(i) + ".");
  }
  store.RecordContextEvent(recorder.episode_id, ContextEventRecord{.seq = 0,
                                                                   .turn = turn - 1,
                                                                   .strategy = "discard-all",
                                                                   .tokens_before = context,
                                                                   .tokens_after = 0,
                                                                   .messages_dropped = 6});
  context = 0;  // a fresh context: the next turn reuses nothing
  toolsets::ToolResult unknown = call("get_city_by_hotel", Json{{"hotel", "No Such Hotel"}}, "Where is it?");
  CHECK(unknown.outcome == toolsets::Outcome::kToolError);
  toolsets::ToolResult submitted = call("submit_result", Json{{"answer_text", answer}}, "Submit the cheapest.");
  REQUIRE(submitted.ok());
  store.RecordSubmit(recorder.episode_id, answer, submitted.content);
  store.EndEpisode(recorder.episode_id, EpisodeOutcome::kSubmitted);
  (void)manager.CloseSession(*session);
  REQUIRE(store.Flush().ok());
  return recorder.episode_id;
}

// Rewrites the content of one recorded result, as a person editing the file would.
void TamperWithStep(const std::string& store_path, const std::string& episode_id, int64_t step, const Json& content) {
  auto db = Database::Open(store_path, Database::Mode::kReadWrite);
  REQUIRE(db.ok());
  auto read = db->Prepare("SELECT result FROM steps WHERE episode_id = ? AND step = ?");
  REQUIRE(read.ok());
  REQUIRE(read->BindAll({episode_id, step}).ok());
  REQUIRE(read->Step().value());
  Json result = ParseJson(read->ColumnText(0)).value();
  REQUIRE(read->Reset().ok());
  result["content"] = content;
  auto write = db->Prepare("UPDATE steps SET result = ? WHERE episode_id = ? AND step = ?");
  REQUIRE(write.ok());
  REQUIRE(write->BindAll({DumpJson(result), episode_id, step}).ok());
  REQUIRE(write->Run().ok());
  REQUIRE(db->Changes() == 1);
}

ReplayOptions OptionsFor(const std::string& envs, const TrajectoryStore& store) {
  ReplayOptions options;
  options.envs = envs;
  options.load_episode = [&store](const std::string& id) { return store.Get(id); };
  return options;
}

TEST_SUITE("agents.replay") {
  TEST_CASE("a recorded episode replays identically: every step matches and the verdict is the same") {
    const Bundles& bundles = TripBundles();
    TempDir dir;
    auto manager = NewManager();
    auto env_id = manager->OpenEnvironment(bundles.original);
    REQUIRE(env_id.ok());
    auto store = OpenStore(dir / "traj.sqlite");
    std::string id = RecordEpisode(*manager, *store, *env_id);
    auto episode = store->Get(id);
    REQUIRE(episode.ok());
    REQUIRE(episode->steps.size() == 6);

    // A fresh manager: nothing from the recording is reused.
    auto replay_manager = NewManager();
    auto report = Replay(*episode, *replay_manager, OptionsFor(bundles.original_dir, *store));
    REQUIRE_MESSAGE(report.ok(), report.status().ToString());
    CHECK(report->env_path == bundles.original);
    CHECK(report->replay_env_id == *env_id);
    CHECK(!report->version_drift);
    REQUIRE(report->steps.size() == 6);
    for (const auto& step : report->steps) {
      INFO("step ", step.step, " ", step.tool, " ", DumpJson(toolsets::ToJson(step.replayed)));
      CHECK(step.status == StepStatus::kMatch);
      CHECK(step.differences.empty());
    }
    CHECK(report->steps[4].replayed.outcome == toolsets::Outcome::kToolError);
    CHECK(!report->first_divergence.has_value());
    CHECK(report->verdict.status == VerdictStatus::kSame);
    CHECK(report->verdict.replayed["passed"] == true);
    CHECK(report->verdict.recorded_verifier_version == report->verdict.replayed_verifier_version);
    CHECK(report->matches());
    CHECK(!report->infra_error());

    Json json = ReplayReportToJson(*report);
    CHECK(json["matches"] == true);
    CHECK(json["first_divergence"].is_null());
    CHECK(json["steps"].size() == 6);
    CHECK(json["verdict"]["status"] == "same");

    SUBCASE("the bundle can be named directly too") {
      auto direct = Replay(*episode, *replay_manager, OptionsFor(bundles.original, *store));
      REQUIRE_MESSAGE(direct.ok(), direct.status().ToString());
      CHECK(direct->matches());
    }
  }

  TEST_CASE("a result tampered with in the file is the first divergent step, with both sides") {
    const Bundles& bundles = TripBundles();
    TempDir dir;
    auto manager = NewManager();
    auto env_id = manager->OpenEnvironment(bundles.original);
    REQUIRE(env_id.ok());
    const std::string path = dir / "traj.sqlite";
    auto store = OpenStore(path);
    std::string id = RecordEpisode(*manager, *store, *env_id);
    Json genuine = store->Get(id)->steps[2].result.content;
    TamperWithStep(path, id, 2, Json{{"price", 1}, {"rating", 5.0}});

    auto episode = store->Get(id);
    REQUIRE(episode.ok());
    auto report = Replay(*episode, *manager, OptionsFor(bundles.original_dir, *store));
    REQUIRE_MESSAGE(report.ok(), report.status().ToString());
    REQUIRE(report->first_divergence.has_value());
    const StepComparison& diverged = report->steps[*report->first_divergence];
    CHECK(diverged.step == 2);
    CHECK(diverged.tool == "get_infos_by_hotel");
    CHECK(diverged.status == StepStatus::kDiverged);
    CHECK(diverged.differences == std::vector<std::string>{"content"});
    CHECK(diverged.recorded.content == Json{{"price", 1}, {"rating", 5.0}});
    CHECK(diverged.replayed.content == genuine);
    for (const auto& step : report->steps) {
      if (step.step != 2) {
        CHECK(step.status == StepStatus::kMatch);
      }
    }
    CHECK(report->verdict.status == VerdictStatus::kSame);
    CHECK(!report->matches());
    CHECK(ReplayReportToJson(*report)["first_divergence"] == 2);
  }

  TEST_CASE("--verifier-of re-scores the recorded answer under an edited verifier and reports both versions") {
    const Bundles& bundles = TripBundles();
    TempDir dir;
    auto manager = NewManager();
    auto env_id = manager->OpenEnvironment(bundles.original);
    REQUIRE(env_id.ok());
    auto store = OpenStore(dir / "traj.sqlite");
    std::string id = RecordEpisode(*manager, *store, *env_id);
    auto episode = store->Get(id);
    REQUIRE(episode.ok());

    ReplayOptions options = OptionsFor(bundles.original_dir, *store);
    options.verifier_of = bundles.relaxed;
    auto report = Replay(*episode, *manager, options);
    REQUIRE_MESSAGE(report.ok(), report.status().ToString());
    CHECK(!report->first_divergence.has_value());  // the steps ran on the recorded version
    const VerdictComparison& verdict = report->verdict;
    CHECK(verdict.status == VerdictStatus::kChanged);
    CHECK(verdict.recorded["passed"] == true);
    CHECK(verdict.replayed["passed"] == false);
    CHECK(verdict.scored_with == bundles.relaxed);
    auto relaxed = sandbox::EnvBundle::Load(bundles.relaxed);
    REQUIRE(relaxed.ok());
    CHECK(verdict.replayed_verifier_version == relaxed->FindTask(kTask)->version);
    CHECK(verdict.recorded_verifier_version == episode->summary.start.task_version);
    CHECK(verdict.recorded_verifier_version != verdict.replayed_verifier_version);
    CHECK(verdict.reasons_differ);
    CHECK(!report->matches());
  }

  TEST_CASE("a missing environment version is NotFound naming it; drift is allowed only on request") {
    const Bundles& bundles = TripBundles();
    TempDir dir;
    auto manager = NewManager();
    auto env_id = manager->OpenEnvironment(bundles.original);
    REQUIRE(env_id.ok());
    auto store = OpenStore(dir / "traj.sqlite");
    std::string id = RecordEpisode(*manager, *store, *env_id);
    auto episode = store->Get(id);
    REQUIRE(episode.ok());

    auto missing = Replay(*episode, *manager, OptionsFor(bundles.relaxed_dir, *store));
    CHECK(missing.status().code() == StatusCode::kNotFound);
    CHECK(missing.status().message().find(*env_id) != std::string::npos);
    CHECK(missing.status().message().find("trip_planning") != std::string::npos);
    CHECK(FindEnvBundle(bundles.relaxed, *env_id).status().code() == StatusCode::kNotFound);
    CHECK(FindEnvBundle(dir / "nowhere", *env_id).status().code() == StatusCode::kNotFound);

    ReplayOptions drifting = OptionsFor(bundles.relaxed_dir, *store);
    drifting.allow_version_drift = true;
    auto report = Replay(*episode, *manager, drifting);
    REQUIRE_MESSAGE(report.ok(), report.status().ToString());
    CHECK(report->version_drift);
    CHECK(report->env_path == bundles.relaxed);
    // The data and tools are the same; the submit step's verdict is not.
    REQUIRE(report->first_divergence.has_value());
    CHECK(report->steps[*report->first_divergence].tool == "submit_result");
    CHECK(report->verdict.status == VerdictStatus::kChanged);

    SUBCASE("a task version that differs from the recording is refused without drift") {
      Episode edited = *episode;
      edited.summary.start.task_version = "0000";
      auto refused = Replay(edited, *manager, OptionsFor(bundles.original_dir, *store));
      CHECK(refused.status().code() == StatusCode::kFailedPrecondition);
      CHECK(refused.status().message().find("0000") != std::string::npos);
    }
  }

  TEST_CASE("a forked episode replays its parent's steps below fork_step, then its own") {
    const Bundles& bundles = TripBundles();
    TempDir dir;
    auto manager = NewManager();
    auto env_id = manager->OpenEnvironment(bundles.original);
    REQUIRE(env_id.ok());
    auto store = OpenStore(dir / "traj.sqlite");
    std::string answer = GoldAnswer(*manager, *env_id);

    Recorder parent{*manager, *store, store->BeginEpisode(StartFor(*manager, *env_id))};
    parent.session = manager->CreateSession(*env_id, kTask).value();
    Json hotels = parent.Step("get_all_hotels_by_city", Json{{"city", kCity}}).content;
    parent.Step("get_infos_by_hotel", Json{{"info_keywords", {"price"}}, {"hotel", hotels[0]}});
    // The fork, as the server does it: a copy of the live session, the child episode continuing at 2.
    auto child_session = manager->ForkSession(parent.session);
    REQUIRE_MESSAGE(child_session.ok(), child_session.status().ToString());
    EpisodeStart child_start = StartFor(*manager, *env_id);
    child_start.parent_id = parent.episode_id;
    child_start.fork_step = 2;
    Recorder child{*manager, *store, store->BeginEpisode(child_start), *child_session, 2};
    // The parent goes on differently after the fork: never part of the child's replay.
    parent.Step("get_weather_by_city_date", Json{{"city", kCity}, {"date", "2025-10-01"}});
    child.Step("get_infos_by_hotel", Json{{"info_keywords", {"rating"}}, {"hotel", hotels[1]}});
    toolsets::ToolResult submitted = child.Step("submit_result", Json{{"answer_text", answer}});
    REQUIRE(submitted.ok());
    store->RecordSubmit(child.episode_id, answer, submitted.content);
    store->EndEpisode(child.episode_id, EpisodeOutcome::kSubmitted);
    store->EndEpisode(parent.episode_id, EpisodeOutcome::kClosed);
    REQUIRE(store->Flush().ok());

    auto episode = store->Get(child.episode_id);
    REQUIRE(episode.ok());
    auto report = Replay(*episode, *manager, OptionsFor(bundles.original_dir, *store));
    REQUIRE_MESSAGE(report.ok(), report.status().ToString());
    REQUIRE(report->steps.size() == 4);
    std::vector<std::string> tools;
    for (const auto& step : report->steps) {
      tools.push_back(step.tool);
      CHECK(step.status == StepStatus::kMatch);
    }
    CHECK(tools == std::vector<std::string>{"get_all_hotels_by_city", "get_infos_by_hotel", "get_infos_by_hotel",
                                            "submit_result"});
    CHECK(report->steps[0].episode_id == parent.episode_id);
    CHECK(report->steps[1].episode_id == parent.episode_id);
    CHECK(report->steps[2].episode_id == child.episode_id);
    CHECK(report->verdict.status == VerdictStatus::kSame);
    CHECK(report->matches());

    SUBCASE("without a loader, or with the parent gone, the fork cannot replay") {
      ReplayOptions no_loader = OptionsFor(bundles.original_dir, *store);
      no_loader.load_episode = nullptr;
      CHECK(Replay(*episode, *manager, no_loader).status().code() == StatusCode::kFailedPrecondition);
      Episode orphan = *episode;
      orphan.summary.start.parent_id = "t-000000000000000000000000";
      auto missing = Replay(orphan, *manager, OptionsFor(bundles.original_dir, *store));
      CHECK(missing.status().code() == StatusCode::kNotFound);
      CHECK(missing.status().message().find("t-000000000000000000000000") != std::string::npos);
    }
  }

  TEST_CASE("a rollout replays like a served episode: its conversation and model turns change nothing in the report") {
    const Bundles& bundles = TripBundles();
    TempDir dir;
    auto manager = NewManager();
    auto env_id = manager->OpenEnvironment(bundles.original);
    REQUIRE(env_id.ok());
    auto store = OpenStore(dir / "traj.sqlite");
    std::string id = RecordRolloutEpisode(*manager, *store, *env_id);
    auto episode = store->Get(id);
    REQUIRE_MESSAGE(episode.ok(), episode.status().ToString());
    REQUIRE(episode->steps.size() == 6);
    CHECK(episode->messages.size() == 2 + 6 * 2);
    CHECK(episode->model_turns.size() == 6);
    CHECK(episode->context_events.size() == 1);
    Json tokens = EpisodeToJson(*episode)["tokens"];
    REQUIRE(tokens.size() == 2);  // the discard-all reset starts a second context
    CHECK(tokens[0]["consistent"] == true);
    CHECK(tokens[0]["turns"] == Json::array({0, 1, 2, 3}));
    CHECK(tokens[1]["turns"] == Json::array({4, 5}));

    auto replay_manager = NewManager();
    auto report = Replay(*episode, *replay_manager, OptionsFor(bundles.original_dir, *store));
    REQUIRE_MESSAGE(report.ok(), report.status().ToString());
    for (const auto& step : report->steps) {
      INFO("step ", step.step, " ", step.tool, " ", DumpJson(toolsets::ToJson(step.replayed)));
      CHECK(step.status == StepStatus::kMatch);
    }
    CHECK(report->verdict.status == VerdictStatus::kSame);
    CHECK(report->matches());

    // The same episode with the model side stripped (as a served episode) gives the same report,
    // up to what differs between any two runs (the replayed results' timing and call ids).
    Episode served = *episode;
    served.messages.clear();
    served.model_turns.clear();
    served.context_events.clear();
    served.summary.start = StartFor(*manager, *env_id);
    auto served_report = Replay(served, *replay_manager, OptionsFor(bundles.original_dir, *store));
    REQUIRE_MESSAGE(served_report.ok(), served_report.status().ToString());
    auto comparable = [](const ReplayReport& r) {
      Json json = ReplayReportToJson(r);
      for (Json& step : json["steps"]) {
        step["replayed"] = Json{{"outcome", step["replayed"]["outcome"]},
                                {"content", step["replayed"]["content"]},
                                {"message", step["replayed"].value("message", Json())}};
      }
      return json;
    };
    CHECK(comparable(*report) == comparable(*served_report));
  }

  // --- The real binary ---------------------------------------------------------------------------

  using ::envforge::testing::Envforge;

  TEST_CASE("envforge traj ls|show|export and envforge replay: output and exit codes") {
    const Bundles& bundles = TripBundles();
    TempDir dir;
    const std::string path = dir / "traj.sqlite";
    std::string id;
    std::string tampered_id;
    {
      auto manager = NewManager();
      auto env_id = manager->OpenEnvironment(bundles.original);
      REQUIRE(env_id.ok());
      auto store = OpenStore(path);
      id = RecordEpisode(*manager, *store, *env_id);
      tampered_id = RecordEpisode(*manager, *store, *env_id);
    }
    TamperWithStep(path, tampered_id, 0, Json::array({"Phantom Hotel"}));

    auto ls = Envforge({"traj", "ls", path});
    INFO(ls.stdout_text, ls.stderr_text);
    CHECK(ls.exit_code == 0);
    CHECK(ls.stdout_text.find(id) != std::string::npos);
    CHECK(ls.stdout_text.find("trip_planning") != std::string::npos);
    CHECK(ls.stdout_text.find("submitted") != std::string::npos);
    CHECK(ls.stdout_text.find("pass 1") != std::string::npos);
    auto ls_json = Envforge({"traj", "ls", path, "--json", "--task", kTask, "--limit", "1"});
    REQUIRE(ls_json.exit_code == 0);
    Json listed = ParseJson(ls_json.stdout_text).value();
    REQUIRE(listed.size() == 1);
    CHECK(listed[0]["steps"] == 6);
    CHECK(Envforge({"traj", "ls", path, "--outcome", "won"}).exit_code == 2);
    CHECK(Envforge({"traj", "ls", path, "--env", "other"}).stdout_text.find(id) == std::string::npos);

    auto show = Envforge({"traj", "show", path, id.substr(0, 10)});
    INFO(show.stdout_text, show.stderr_text);
    CHECK(show.exit_code == 0);
    CHECK(show.stdout_text.find("get_all_hotels_by_city") != std::string::npos);
    CHECK(show.stdout_text.find("tool_error") != std::string::npos);
    CHECK(show.stdout_text.find("Suzhou") != std::string::npos);
    auto show_json = Envforge({"traj", "show", path, id, "--json"});
    REQUIRE(show_json.exit_code == 0);
    CHECK(ParseJson(show_json.stdout_text).value()["steps"].size() == 6);
    CHECK(Envforge({"traj", "show", path, "t-000000000000000000000000"}).exit_code == 2);
    CHECK(Envforge({"traj", "show", dir / "missing.sqlite", id}).exit_code == 2);
    CHECK(Envforge({"traj", "show", bundles.original, id}).exit_code == 2);  // not a store

    auto exported = Envforge({"traj", "export", path, "--jsonl"});
    REQUIRE(exported.exit_code == 0);
    std::istringstream lines(exported.stdout_text);
    std::string line;
    std::vector<std::string> exported_ids;
    while (std::getline(lines, line)) exported_ids.push_back(ParseJson(line).value()["id"].get<std::string>());
    CHECK(exported_ids == std::vector<std::string>{id, tampered_id});
    auto to_file = Envforge({"traj", "export", path, "-o", dir / "out.jsonl"});
    REQUIRE(to_file.exit_code == 0);
    CHECK(to_file.stdout_text.empty());
    auto file_text = ReadFileToString(dir / "out.jsonl");
    REQUIRE(file_text.ok());
    CHECK(*file_text == exported.stdout_text);

    auto same = Envforge({"replay", path, id, "--envs", bundles.original_dir});
    INFO(same.stdout_text, same.stderr_text);
    CHECK(same.exit_code == 0);
    CHECK(same.stdout_text.find("6 of 6 steps match; verdict same: the episode replays identically") !=
          std::string::npos);
    CHECK(same.stdout_text.find("verdict: same") != std::string::npos);

    auto diverged = Envforge({"replay", path, tampered_id, "--envs", bundles.original});
    INFO(diverged.stdout_text, diverged.stderr_text);
    CHECK(diverged.exit_code == 1);
    CHECK(diverged.stdout_text.find("first divergent step: 0, get_all_hotels_by_city") != std::string::npos);
    CHECK(diverged.stdout_text.find("Phantom Hotel") != std::string::npos);
    auto diverged_json = Envforge({"replay", path, tampered_id, "--envs", bundles.original, "--json"});
    CHECK(diverged_json.exit_code == 1);
    CHECK(ParseJson(diverged_json.stdout_text).value()["first_divergence"] == 0);

    auto rescored = Envforge({"replay", path, id, "--envs", bundles.original_dir, "--verifier-of", bundles.relaxed});
    INFO(rescored.stdout_text, rescored.stderr_text);
    CHECK(rescored.exit_code == 1);
    CHECK(rescored.stdout_text.find("verdict: changed") != std::string::npos);

    auto missing = Envforge({"replay", path, id, "--envs", bundles.relaxed_dir});
    CHECK(missing.exit_code == 2);
    CHECK(missing.stderr_text.find("is not in") != std::string::npos);
    CHECK(Envforge({"replay", path, id}).exit_code == 2);  // --envs is required
    CHECK(Envforge({"replay", path, "t-000000000000000000000000", "--envs", bundles.original}).exit_code == 2);
    CHECK(Envforge({"traj", "frobnicate", path}).exit_code == 2);
  }

  TEST_CASE("envforge traj show prints a rollout's whole conversation; ls and export carry the rollout; replay works") {
    const Bundles& bundles = TripBundles();
    TempDir dir;
    const std::string path = dir / "traj.sqlite";
    std::string rollout_id;
    std::string served_id;
    {
      auto manager = NewManager();
      auto env_id = manager->OpenEnvironment(bundles.original);
      REQUIRE(env_id.ok());
      auto store = OpenStore(path);
      served_id = RecordEpisode(*manager, *store, *env_id);
      rollout_id = RecordRolloutEpisode(*manager, *store, *env_id);
    }

    auto show = Envforge({"traj", "show", path, rollout_id.substr(0, 12)});
    INFO(show.stdout_text, show.stderr_text);
    REQUIRE(show.exit_code == 0);
    const std::string& text = show.stdout_text;
    // The header names what produced the episode.
    CHECK(text.find("  kind     rollout (rollout r-replay, sample 0)") != std::string::npos);
    CHECK(text.find("  backend  scripted:/fixtures/trip.jsonl") != std::string::npos);
    CHECK(text.find("  model    tiny-dsv32") != std::string::npos);
    CHECK(text.find("\"top_p\":0.9") != std::string::npos);
    CHECK(text.find("conversation (14 messages, 6 model turns, 1 context event):") != std::string::npos);
    // Every message in order: role, content, reasoning (indented; no color codes when piped), the
    // tool calls with their arguments, the tool results with their typed outcome and step.
    std::vector<std::string> in_order = {
        "[0] system\n    You are a travel agent. Use the tools.",
        "[1] user\n    Find the cheapest hotel in Suzhou rated 4.0 or better.",
        "[2] assistant  (turn 0, finish tool_calls, prompt 3 tokens (reused 0, fed 3), 2 generated, 0.0 ms)",
        "    reasoning:\n    | List the city's hotels first.",
        "    -> call get_all_hotels_by_city {\"city\":\"Suzhou\"}  [call_0]",
        "[3] tool get_all_hotels_by_city [call_0] -> ok (step 0)",
        "[4] assistant  (turn 1, finish tool_calls, prompt 8 tokens (reused 5, fed 3), 2 generated",
        "-- context event 0 after turn 3: discard-all, 20 -> 0 tokens, 6 messages dropped",
        "[10] assistant  (turn 4, finish tool_calls, prompt 3 tokens (reused 0, fed 3)",
        "    -> call get_city_by_hotel {\"hotel\":\"No Such Hotel\"}  [call_4]",
        "[11] tool get_city_by_hotel [call_4] -> tool_error (step 4)",
        "[13] tool submit_result [call_5] -> ok (step 5)",
        "6 tool steps recorded",
        "verdict:\n  outcome  submitted",
        "  verdict  pass 1",
    };
    size_t at = 0;
    for (const std::string& expected : in_order) {
      size_t found = text.find(expected, at);
      CHECK_MESSAGE(found != std::string::npos, "missing, or out of order: " << expected);
      if (found != std::string::npos) at = found + expected.size();
    }
    CHECK(text.find("\033[") == std::string::npos);
    CHECK(text.find("Suzhou") != std::string::npos);

    // A served episode in the same (format 2) store still shows its steps as before.
    auto served_show = Envforge({"traj", "show", path, served_id});
    REQUIRE(served_show.exit_code == 0);
    CHECK(served_show.stdout_text.find("steps (6):") != std::string::npos);
    CHECK(served_show.stdout_text.find("conversation") == std::string::npos);
    CHECK(served_show.stdout_text.find("  kind ") == std::string::npos);

    auto show_json = Envforge({"traj", "show", path, rollout_id, "--json"});
    REQUIRE(show_json.exit_code == 0);
    Json json = ParseJson(show_json.stdout_text).value();
    CHECK(json["kind"] == "rollout");
    CHECK(json["messages"].size() == 14);
    CHECK(json["model_turns"][0]["output_tokens"] == Json::array({7, 8}));
    CHECK(json["tokens"].size() == 2);

    auto ls = Envforge({"traj", "ls", path});
    INFO(ls.stdout_text, ls.stderr_text);
    REQUIRE(ls.exit_code == 0);
    CHECK(ls.stdout_text.find("KIND") != std::string::npos);
    CHECK(ls.stdout_text.find("BACKEND") != std::string::npos);
    CHECK(ls.stdout_text.find("scripted:/fixtures/trip.jsonl") != std::string::npos);
    auto by_rollout = Envforge({"traj", "ls", path, "--rollout", "r-replay", "--json"});
    REQUIRE(by_rollout.exit_code == 0);
    Json listed = ParseJson(by_rollout.stdout_text).value();
    REQUIRE(listed.size() == 1);
    CHECK(listed[0]["id"] == rollout_id);
    CHECK(listed[0]["sample_index"] == 0);
    auto served_only = Envforge({"traj", "ls", path, "--kind", "served", "--json"});
    REQUIRE(served_only.exit_code == 0);
    CHECK(ParseJson(served_only.stdout_text).value().size() == 1);
    auto bad_kind = Envforge({"traj", "ls", path, "--kind", "robot"});
    CHECK(bad_kind.exit_code == 2);
    CHECK(bad_kind.stderr_text.find("--kind must be served or rollout; got 'robot'") != std::string::npos);

    auto exported = Envforge({"traj", "export", path, "--rollout", "r-replay"});
    REQUIRE(exported.exit_code == 0);
    Json line = ParseJson(exported.stdout_text).value();
    CHECK(line["id"] == rollout_id);
    CHECK(line["backend"] == "scripted:/fixtures/trip.jsonl");
    CHECK(line["model_turns"].size() == 6);
    CHECK(line["context_events"][0]["strategy"] == "discard-all");
    CHECK(line["tokens"][0]["mask"].is_array());

    auto replayed = Envforge({"replay", path, rollout_id, "--envs", bundles.original_dir});
    INFO(replayed.stdout_text, replayed.stderr_text);
    CHECK(replayed.exit_code == 0);
    CHECK(replayed.stdout_text.find("6 of 6 steps match; verdict same: the episode replays identically") !=
          std::string::npos);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::agents
