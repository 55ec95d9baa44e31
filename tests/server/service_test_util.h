// Helpers of the service suites: an RpcService over a directory holding the session-manager
// fixture environment (tests/sandbox/manager_test_util.h: tools echo, add, incr, segfault, ...;
// task "sum_task" whose answer is 5) plus a task "broken_verifier_task" whose verifier raises (an
// infra error on every submit), recording into a trajectory store in the same directory, and
// synchronous wrappers around HandleAsync / HandleJsonAsync.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <optional>
#include <string>

#include "agents/trajectory_store.h"
#include "base/json.h"
#include "server/rpc_service.h"
#include "tests/sandbox/manager_test_util.h"

namespace envforge::server::testing {

using sandbox::testing::TempDir;
using sandbox::testing::WaitFor;

inline constexpr const char* kBrokenVerifierTask = "broken_verifier_task";

// The manager fixture bundle plus kBrokenVerifierTask; the content hash and task versions are
// recomputed so that the bundle loads.
inline std::string WriteServiceFixtureBundle(const std::string& path) {
  sandbox::testing::WriteFixtureBundle(path);
  struct TaskSources {
    std::string id, prompt, solution, verifier;
  };
  const std::vector<TaskSources> tasks = {
      {"sum_task", "What is 2 + 3? Answer with the integer.", "def solve(tools):\n    return tools.add(2, 3)\n",
       "def verify(answer, db):\n    return answer == 5\n"},
      {kBrokenVerifierTask, "What is 1 + 1?", "def solve(tools):\n    return tools.add(1, 1)\n",
       "def verify(answer, db):\n    raise RuntimeError('the verifier is broken')\n"},
  };
  auto db = Database::Open(path, Database::Mode::kReadWrite);
  REQUIRE_MESSAGE(db.ok(), db.status().ToString());
  const TaskSources& broken = tasks[1];
  sandbox::testing::Exec(
      *db, "INSERT INTO _tasks VALUES (?, ?, '{\"type\":\"integer\"}', ?, ?, NULL, 1, '{}', 'pending', NULL, NULL)",
      {broken.id, broken.prompt, broken.solution, broken.verifier});
  auto hash = sandbox::ComputeContentHash(path);
  REQUIRE_MESSAGE(hash.ok(), hash.status().ToString());
  sandbox::testing::Exec(*db, "UPDATE _env SET value = ? WHERE key = 'content_hash'", {*hash});
  for (const TaskSources& sources : tasks) {
    sandbox::TaskRecord task;
    task.id = sources.id;
    task.prompt = sources.prompt;
    task.solution_source = sources.solution;
    task.verifier_source = sources.verifier;
    sandbox::testing::Exec(*db, "UPDATE _tasks SET version = ? WHERE id = ?",
                           {sandbox::TaskVersion(*hash, task), task.id});
  }
  return path;
}

struct ServiceFixtureOptions {
  size_t max_sessions = 64;
  std::chrono::milliseconds session_ttl{60'000};
  bool record = true;
  size_t mcp_page_size = 100;
};

class ServiceFixture {
 public:
  explicit ServiceFixture(ServiceFixtureOptions fixture = {}) {
    std::filesystem::create_directories(dir / "envs");
    WriteServiceFixtureBundle(dir / "envs/fixture.envdb");
    RpcServiceOptions options;
    options.envs_dir = dir / "envs";
    options.manager.limits = sandbox::testing::FastLimits();
    options.max_sessions = fixture.max_sessions;
    options.session_ttl = fixture.session_ttl;
    options.mcp_page_size = fixture.mcp_page_size;
    if (fixture.record) options.trajectories_path = dir / "trajectories.sqlite";
    auto created = RpcService::Create(std::move(options));
    REQUIRE_MESSAGE(created.ok(), created.status().ToString());
    service = std::move(created).value();
  }

  // The whole response object of one message (nullopt when nothing is answered).
  std::optional<Json> Send(Json message, Dialect dialect = Dialect::kNative) {
    std::promise<std::optional<Json>> answer;
    auto future = answer.get_future();
    RequestContext context;
    context.dialect = dialect;
    context.peer = "test";
    context.transport = "test";
    service->HandleJsonAsync(std::move(message), context,
                             [&answer](std::optional<Json> response) { answer.set_value(std::move(response)); });
    REQUIRE(future.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
    return future.get();
  }

  std::optional<std::string> SendText(std::string payload, Dialect dialect = Dialect::kNative) {
    std::promise<std::optional<std::string>> answer;
    auto future = answer.get_future();
    RequestContext context;
    context.dialect = dialect;
    context.transport = "test";
    service->HandleAsync(std::move(payload), context,
                         [&answer](std::optional<std::string> response) { answer.set_value(std::move(response)); });
    REQUIRE(future.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
    return future.get();
  }

  // A request with id 1; the response object.
  Json Request(const std::string& method, Json params = Json::object(), Dialect dialect = Dialect::kNative) {
    auto response =
        Send(Json{{"jsonrpc", "2.0"}, {"id", 1}, {"method", method}, {"params", std::move(params)}}, dialect);
    REQUIRE(response.has_value());
    return *response;
  }

  // The result of a request that must succeed.
  Json Ok(const std::string& method, Json params = Json::object(), Dialect dialect = Dialect::kNative) {
    Json response = Request(method, std::move(params), dialect);
    INFO(method << " -> " << response.dump());
    REQUIRE(response.contains("result"));
    return response["result"];
  }

  // The error object of a request that must fail.
  Json Error(const std::string& method, Json params = Json::object(), Dialect dialect = Dialect::kNative) {
    Json response = Request(method, std::move(params), dialect);
    INFO(method << " -> " << response.dump());
    REQUIRE(response.contains("error"));
    return response["error"];
  }

  Json Create(const std::string& task = "sum_task") {
    return Ok("session/create", Json{{"env", "manager_fixture"}, {"task", task}});
  }

  Json CallTool(const std::string& session, const std::string& name, Json arguments = Json::object()) {
    return Ok("tools/call", Json{{"session", session}, {"name", name}, {"arguments", std::move(arguments)}});
  }

  agents::Episode Episode(const std::string& id) {
    REQUIRE(service->trajectories() != nullptr);
    REQUIRE(service->trajectories()->Flush().ok());
    auto episode = service->trajectories()->Get(id);
    REQUIRE_MESSAGE(episode.ok(), episode.status().ToString());
    return *episode;
  }

  TempDir dir;
  std::unique_ptr<RpcService> service;
};

inline bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace envforge::server::testing
