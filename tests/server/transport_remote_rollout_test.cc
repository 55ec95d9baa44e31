// The rollout loop on a server's sessions (server/remote_session_host.h): a real RpcService behind
// a real HttpServer on 127.0.0.1, the scripted backend and the shipped policy model playing tasks
// over HTTP and WebSocket. The same seed gives the same episodes as on a local SessionManager:
// verdicts, tool steps, tokens and recorded versions. A session the server loses (expired, the
// server stopped) ends its episode infra_error, never a hang or an exception.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agents/rollout.h"
#include "agents/session_host.h"
#include "agents/trajectory_store.h"
#include "inference/backend.h"
#include "sandbox/env_pack.h"
#include "sandbox/session_manager.h"
#include "server/http_server.h"
#include "server/remote_session_host.h"
#include "server/rpc_service.h"
#include "tests/temp_dir.h"

namespace envforge::server {
namespace {

using agents::EpisodeResult;
using agents::RolloutOptions;
using agents::RolloutOutcome;
using agents::TaskRollout;
using envforge::testing::TempDir;

std::string SourceDir() {
  const char* dir = std::getenv("ENVFORGE_SOURCE_DIR");
  return dir != nullptr ? dir : ENVFORGE_TEST_SOURCE_DIR;
}

// rollout_lab (lookup, self_destruct; task vault_code) and shop_eval_a, packed once.
const std::string& EnvsDir() {
  static TempDir dir;
  static std::string path = [] {
    std::filesystem::create_directories(dir / "envs");
    for (const auto& [source, name] :
         {std::pair{"/tests/fixtures/envs/rollout_lab", "rollout_lab"}, std::pair{"/data/envs/shop_eval_a", "shop"}}) {
      Status packed = sandbox::PackEnvironment(SourceDir() + source, dir / ("envs/" + std::string(name) + ".envdb"));
      INFO(packed.ToString());
      REQUIRE(packed.ok());
    }
    return dir / "envs";
  }();
  return path;
}

// `envforge serve` in process: the service over EnvsDir(), recording, behind HTTP + WebSocket.
struct Served {
  explicit Served(std::chrono::milliseconds ttl = std::chrono::seconds(60), std::string token = "") {
    RpcServiceOptions options;
    options.envs_dir = EnvsDir();
    options.session_ttl = ttl;
    options.trajectories_path = scratch / "server.sqlite";
    auto created = RpcService::Create(std::move(options));
    REQUIRE_MESSAGE(created.ok(), created.status().ToString());
    service = std::move(*created);
    HttpServerOptions http;
    http.token = std::move(token);
    auto bound = HttpServer::Create(*service, http);
    REQUIRE_MESSAGE(bound.ok(), bound.status().ToString());
    server = std::move(*bound);
    server->Start();
  }
  ~Served() { server->Stop(); }

  std::string Url(bool websocket = false) const {
    const std::string base = (websocket ? "ws://127.0.0.1:" : "http://127.0.0.1:") + std::to_string(server->port());
    return websocket ? base + "/ws" : base;
  }
  std::unique_ptr<RemoteSessionHost> Host(bool websocket = false, const std::string& token = "") const {
    RemoteSessionHostOptions options;
    options.client.token = token;
    options.client.timeout = std::chrono::seconds(30);
    auto host = RemoteSessionHost::Connect(Url(websocket), options);
    REQUIRE_MESSAGE(host.ok(), host.status().ToString());
    return std::move(*host);
  }

  TempDir scratch;
  std::unique_ptr<RpcService> service;  // declared before the server: destroyed after it
  std::unique_ptr<HttpServer> server;
};

// The same bundles in a SessionManager of this process.
struct Local {
  Local() {
    auto created = sandbox::SessionManager::Create({});
    REQUIRE(created.ok());
    manager = std::move(*created);
  }
  std::string Open(const std::string& file) {
    auto id = manager->OpenEnvironment(EnvsDir() + "/" + file);
    REQUIRE_MESSAGE(id.ok(), id.status().ToString());
    return *id;
  }
  std::unique_ptr<sandbox::SessionManager> manager;
};

std::unique_ptr<inference::Backend> OpenBackend(const std::string& spec) {
  auto backend = inference::OpenBackend(spec, {});
  REQUIRE_MESSAGE(backend.ok(), backend.status().ToString());
  return std::move(*backend);
}

// A scripted backend over `lines` (one response each, "script" members included).
struct Script {
  explicit Script(const std::vector<std::string>& lines) {
    std::ofstream out(path);
    for (const std::string& line : lines) out << line << "\n";
  }
  std::string Spec() const { return "scripted:" + path; }
  TempDir dir;
  std::string path = dir / "script.jsonl";
};

constexpr const char* kLookup = R"({"script": 0, "tool_calls": [{"name": "lookup", "arguments": {"name": "alpha"}}]})";
constexpr const char* kRight =
    R"({"script": 0, "tool_calls": [{"name": "submit_result", "arguments": {"answer_text": "{\"code\": 4211}"}}]})";
// Script 1 submits a wrong answer after an unknown tool; script 2 kills its own session.
const std::vector<std::string> kThreeScripts = {
    kLookup,
    kRight,
    R"({"script": 1, "tool_calls": [{"name": "no_such_tool", "arguments": {}}]})",
    R"({"script": 1, "tool_calls": [{"name": "submit_result", "arguments": {"answer_text": "{\"code\": 7}"}}]})",
    R"({"script": 2, "tool_calls": [{"name": "self_destruct", "arguments": {}}]})",
};

TaskRollout Play(agents::RolloutRunner& runner, const std::string& env, const std::string& task) {
  auto rollouts = runner.Run(env, {task});
  INFO(rollouts.status().ToString());
  REQUIRE(rollouts.ok());
  REQUIRE(rollouts->size() == 1);
  return std::move((*rollouts)[0]);
}

std::unique_ptr<agents::TrajectoryStore> OpenStore(const std::string& path) {
  auto store = agents::TrajectoryStore::Open(path);
  REQUIRE_MESSAGE(store.ok(), store.status().ToString());
  return std::move(*store);
}

agents::Episode Recorded(agents::TrajectoryStore& store, const std::string& id) {
  REQUIRE(store.Flush().ok());
  auto episode = store.Get(id);
  REQUIRE_MESSAGE(episode.ok(), episode.status().ToString());
  return *episode;
}

// Two episodes played with the same seed: the same outcome, verdict, turns, tokens; recorded with
// the same versions, tool steps and generated tokens.
void CheckSameEpisode(const EpisodeResult& local, agents::TrajectoryStore& local_store, const EpisodeResult& remote,
                      agents::TrajectoryStore& remote_store) {
  CAPTURE(remote.detail);
  CHECK(remote.outcome == local.outcome);
  CHECK(remote.passed == local.passed);
  CHECK(remote.verdict == local.verdict);
  CHECK(remote.turns == local.turns);
  CHECK(remote.tool_calls == local.tool_calls);
  CHECK(remote.generated_tokens == local.generated_tokens);
  agents::Episode a = Recorded(local_store, local.episode_id);
  agents::Episode b = Recorded(remote_store, remote.episode_id);
  CHECK(b.summary.start.env_id == a.summary.start.env_id);
  CHECK(b.summary.start.env_name == a.summary.start.env_name);
  CHECK(b.summary.start.task_version == a.summary.start.task_version);
  CHECK(b.summary.start.verifier_version == a.summary.start.verifier_version);
  CHECK(b.summary.outcome == a.summary.outcome);
  REQUIRE(b.steps.size() == a.steps.size());
  for (size_t i = 0; i < a.steps.size(); ++i) {
    CAPTURE(i);
    CHECK(b.steps[i].tool == a.steps[i].tool);
    CHECK(b.steps[i].arguments == a.steps[i].arguments);
    CHECK(b.steps[i].result.outcome == a.steps[i].result.outcome);
    CHECK(b.steps[i].result.content == a.steps[i].result.content);
    CHECK(b.steps[i].result.session_alive == a.steps[i].result.session_alive);
  }
  REQUIRE(b.model_turns.size() == a.model_turns.size());
  for (size_t i = 0; i < a.model_turns.size(); ++i)
    CHECK(b.model_turns[i].output_tokens == a.model_turns[i].output_tokens);
}

// Delegates to a backend, running `hook` before the turn-th Complete (1-based) of the whole run.
class HookedBackend final : public inference::Backend {
 public:
  HookedBackend(inference::Backend& inner, int turn, std::function<void()> hook)
      : inner_(inner), turn_(turn), hook_(std::move(hook)) {}
  inference::BackendInfo info() const override { return inner_.info(); }
  Result<inference::CompletionResult> Complete(const inference::CompletionRequest& request) override {
    if (++calls_ == turn_) hook_();
    return inner_.Complete(request);
  }
  int64_t CountTokens(std::string_view text) const override { return inner_.CountTokens(text); }
  void Release(const std::string& handle) override { inner_.Release(handle); }

 private:
  inference::Backend& inner_;
  const int turn_;
  std::function<void()> hook_;
  std::atomic<int> calls_{0};
};

TEST_CASE("scripted episodes on a server's sessions match local ones step for step, over HTTP and WebSocket" *
          doctest::timeout(180)) {
  Served served;
  Local local;
  const std::string env_id = local.Open("rollout_lab.envdb");
  Script script(kThreeScripts);
  TempDir dir;
  RolloutOptions options;
  options.n = 6;
  options.concurrency = 1;  // conversation c of the scripted backend plays script c mod 3: in order
  options.sampling.seed = 11;

  auto local_store = OpenStore(dir / "local.sqlite");
  auto local_backend = OpenBackend(script.Spec());
  options.store = local_store.get();
  agents::RolloutRunner local_runner(*local.manager, *local_backend, options);
  TaskRollout expected = Play(local_runner, env_id, "vault_code");
  CHECK(expected.outcomes == std::map<std::string, int64_t>{{"submitted", 4}, {"crashed", 2}});
  CHECK(expected.passed == 2);

  for (bool websocket : {false, true}) {
    CAPTURE(websocket);
    auto host = served.Host(websocket);
    auto store = OpenStore(dir / (websocket ? "ws.sqlite" : "http.sqlite"));
    auto backend = OpenBackend(script.Spec());
    options.store = store.get();
    agents::RolloutRunner runner(*host, *backend, options);
    // The server's environment by name: its id, tasks and tools come from envs/get.
    TaskRollout remote = Play(runner, "rollout_lab", "vault_code");
    CHECK(remote.env_id == env_id);
    CHECK(remote.env_name == "rollout_lab");
    CHECK(remote.outcomes == expected.outcomes);
    CHECK(remote.pass_at_k == expected.pass_at_k);
    REQUIRE(remote.episodes.size() == expected.episodes.size());
    for (size_t i = 0; i < expected.episodes.size(); ++i) {
      CAPTURE(i);
      CheckSameEpisode(expected.episodes[i], *local_store, remote.episodes[i], *store);
    }
  }
  // Every session the rollouts created on the server was closed again.
  CHECK(served.service->manager().Stats().live_sessions == 0);
}

TEST_CASE("the shipped policy plays a shop task on the server as it does locally, with the same seed" *
          doctest::timeout(300)) {
  Served served;
  Local local;
  const std::string env_id = local.Open("shop.envdb");
  const std::string model = "embedded:" + SourceDir() + "/data/models/policy-small";
  TempDir dir;
  RolloutOptions options;
  options.n = 3;
  options.sampling.seed = 2;
  options.max_turns = 3;
  options.max_tokens_per_turn = 96;
  options.record_kept_sets = true;

  auto local_store = OpenStore(dir / "local.sqlite");
  auto local_backend = OpenBackend(model);
  options.store = local_store.get();
  agents::RolloutRunner local_runner(*local.manager, *local_backend, options);
  TaskRollout expected = Play(local_runner, env_id, "price_lookup_00");

  auto host = served.Host();
  auto store = OpenStore(dir / "remote.sqlite");
  auto backend = OpenBackend(model);
  options.store = store.get();
  agents::RolloutRunner runner(*host, *backend, options);
  TaskRollout remote = Play(runner, "shop_eval_a", "price_lookup_00");
  CHECK(remote.scored == 3);
  CHECK(remote.outcomes == expected.outcomes);
  for (size_t i = 0; i < expected.episodes.size(); ++i) {
    CAPTURE(i);
    CHECK(remote.episodes[i].generated_tokens > 0);
    CheckSameEpisode(expected.episodes[i], *local_store, remote.episodes[i], *store);
  }
}

TEST_CASE("many episodes at once share the host's connections safely" * doctest::timeout(180)) {
  Served served;
  Script script({kLookup, kRight});
  auto host = served.Host();
  auto backend = OpenBackend(script.Spec());
  RolloutOptions options;
  options.n = 24;
  options.concurrency = 12;
  agents::RolloutRunner runner(*host, *backend, options);
  TaskRollout rollout = Play(runner, "rollout_lab", "vault_code");
  CHECK(rollout.outcomes == std::map<std::string, int64_t>{{"submitted", 24}});
  CHECK(rollout.passed == 24);
  CHECK(served.service->manager().Stats().live_sessions == 0);
}

TEST_CASE("a session the server expires mid-episode ends it infra_error, unscored" * doctest::timeout(120)) {
  Served served(std::chrono::milliseconds(300));
  // The second turn takes longer than the server's session TTL.
  Script script(
      {kLookup,
       R"({"script": 0, "sleep_ms": 1500, "tool_calls": [{"name": "lookup", "arguments": {"name": "alpha"}}]})",
       kRight});
  auto host = served.Host();
  auto backend = OpenBackend(script.Spec());
  TempDir dir;
  auto store = OpenStore(dir / "t.sqlite");
  RolloutOptions options;
  options.store = store.get();
  agents::RolloutRunner runner(*host, *backend, options);
  TaskRollout rollout = Play(runner, "rollout_lab", "vault_code");
  const EpisodeResult& episode = rollout.episodes[0];
  CAPTURE(episode.detail);
  CHECK(episode.outcome == RolloutOutcome::kInfraError);
  CHECK(episode.detail.find("unknown session") != std::string::npos);
  CHECK(episode.tool_calls == 2);
  CHECK(rollout.scored == 0);
  agents::Episode recorded = Recorded(*store, episode.episode_id);
  REQUIRE(recorded.steps.size() == 2);
  CHECK(recorded.steps[0].result.outcome == toolsets::Outcome::kOk);
  CHECK(recorded.steps[1].result.outcome == toolsets::Outcome::kInfraError);
  CHECK(recorded.summary.outcome == agents::EpisodeOutcome::kInfraError);
}

TEST_CASE("a server stopped mid-run ends the running and the later episodes infra_error, naming the URL" *
          doctest::timeout(120)) {
  Served served;
  Script script({kLookup, kRight});
  auto host = served.Host();
  auto scripted = OpenBackend(script.Spec());
  HookedBackend backend(*scripted, 2, [&served] { served.server->Stop(); });
  RolloutOptions options;
  options.n = 3;
  options.concurrency = 1;
  agents::RolloutRunner runner(*host, backend, options);
  const auto started = std::chrono::steady_clock::now();
  TaskRollout rollout = Play(runner, "rollout_lab", "vault_code");
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(30));
  CHECK(rollout.outcomes == std::map<std::string, int64_t>{{"infra_error", 3}});
  CHECK(rollout.scored == 0);
  CHECK(rollout.episodes[0].tool_calls == 2);  // the lookup answered; the submit found no server
  CHECK(rollout.episodes[0].detail.find(served.Url()) != std::string::npos);
  CHECK(rollout.episodes[1].detail.find("the session could not start") != std::string::npos);
}

TEST_CASE("connecting and describing name what is wrong: unreachable, token, environment, task" *
          doctest::timeout(60)) {
  auto unreachable = RemoteSessionHost::Connect("http://127.0.0.1:1");
  REQUIRE_FALSE(unreachable.ok());
  CHECK(unreachable.status().code() == StatusCode::kUnavailable);
  CHECK(unreachable.status().message().find("127.0.0.1:1") != std::string::npos);

  Served served(std::chrono::seconds(60), "sesame");
  auto refused = RemoteSessionHost::Connect(served.Url());
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::kUnauthenticated);
  auto host = served.Host(false, "sesame");
  auto described = host->DescribeEnvironment("rollout_lab");
  REQUIRE(described.ok());
  CHECK(described->tools.size() >= 3);  // lookup, read_manual, self_destruct, submit_result
  REQUIRE(described->FindTask("vault_code") != nullptr);
  CHECK_FALSE(described->FindTask("vault_code")->version.empty());
  // The answer schema comes along (the embedded engine decodes a structured answer by it).
  CHECK(described->FindTask("vault_code")->answer_schema.is_object());
  CHECK(described->FindTask("vault_code")->answer_schema["required"] == Json::array({"code"}));
  auto unknown = host->DescribeEnvironment("nowhere");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.status().code() == StatusCode::kNotFound);
  CHECK(unknown.status().message().find("unknown environment 'nowhere'") != std::string::npos);

  Script script({kRight});
  auto backend = OpenBackend(script.Spec());
  agents::RolloutRunner runner(*host, *backend, {});
  auto missing = runner.Run("rollout_lab", {"missing"});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK(missing.status().message().find("no task 'missing'") != std::string::npos);
}

}  // namespace
}  // namespace envforge::server
