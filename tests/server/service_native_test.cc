// The native dialect of RpcService over real worker sessions: every method's happy path, a full
// recorded episode, the session errors, limits, TTL expiry, draining, shutdown and crashes.
#include <doctest/doctest.h>
#include <unistd.h>

#include <set>
#include <string>

#include "tests/server/service_test_util.h"

namespace envforge::server::testing {
namespace {

using agents::EpisodeOutcome;

TEST_SUITE("server.service") {
  TEST_CASE("a full episode: create, tool calls, submit with the gold answer, close; all recorded" *
            doctest::timeout(60)) {
    ServiceFixture f;
    Json created = f.Create();
    std::string session = created["session"];
    CHECK(session.size() == 26);
    CHECK(session.rfind("s-", 0) == 0);
    CHECK(Contains(created["prompt"], "2 + 3"));
    std::set<std::string> tools;
    for (const auto& tool : created["tools"]) tools.insert(tool["name"].get<std::string>());
    CHECK(tools.count("add") == 1);
    CHECK(tools.count("submit_result") == 1);
    const auto* bundle = f.service->manager().FindEnvironment(created["versions"]["env"]);
    REQUIRE(bundle != nullptr);
    CHECK(created["versions"]["task"] ==
          sandbox::TaskVersion(bundle->manifest.content_hash, *bundle->FindTask("sum_task")));
    CHECK(created["versions"]["verifier"] == bundle->FindTask("sum_task")->version);
    std::string trajectory = created["trajectory"];
    CHECK(trajectory.rfind("t-", 0) == 0);

    CHECK(f.Ok("tools/list", {{"session", session}})["tools"].size() == bundle->tools.size());
    Json sum = f.CallTool(session, "add", {{"a", 2}, {"b", 3}});
    CHECK(sum["outcome"] == "ok");
    CHECK(sum["content"] == 5);
    Json echoed = f.CallTool(session, "echo", {{"text", "hello"}});
    CHECK(echoed["content"] == "hello");
    Json bad = f.CallTool(session, "add", {{"a", "two"}});
    CHECK(bad["outcome"] == "invalid_call");
    Json raised = f.CallTool(session, "fail", {{"message", "nope"}});
    CHECK(raised["outcome"] == "tool_error");
    CHECK(Contains(raised["message"], "nope"));

    Json verdict = f.Ok("session/submit", {{"session", session}, {"answer", "5"}});
    CHECK(verdict["passed"] == true);
    CHECK(verdict["outcome"] == "ok");
    CHECK(verdict["verifier_version"] == created["versions"]["verifier"]);
    CHECK(f.Ok("session/close", {{"session", session}})["closed"] == true);
    CHECK(f.Error("tools/call", {{"session", session}, {"name", "echo"}, {"arguments", {{"text", "x"}}}})["code"] ==
          -32001);

    agents::Episode episode = f.Episode(trajectory);
    CHECK(episode.summary.start.env_id == bundle->manifest.content_hash);
    CHECK(episode.summary.start.env_name == "manager_fixture");
    CHECK(episode.summary.start.task_id == "sum_task");
    CHECK(episode.summary.start.task_version == created["versions"]["task"]);
    CHECK(episode.summary.start.verifier_version == created["versions"]["verifier"]);
    REQUIRE(episode.summary.outcome.has_value());
    CHECK(*episode.summary.outcome == EpisodeOutcome::kSubmitted);
    REQUIRE(episode.summary.answer.has_value());
    CHECK(*episode.summary.answer == "5");
    REQUIRE(episode.summary.verdict.has_value());
    CHECK((*episode.summary.verdict)["passed"] == true);
    REQUIRE(episode.steps.size() == 5);
    CHECK(episode.steps[0].step == 0);
    CHECK(episode.steps[0].tool == "add");
    CHECK(episode.steps[0].arguments == Json{{"a", 2}, {"b", 3}});
    CHECK(episode.steps[0].result.content == 5);
    CHECK(episode.steps[2].result.outcome == toolsets::Outcome::kInvalidCall);
    CHECK(episode.steps[3].result.outcome == toolsets::Outcome::kToolError);
    CHECK(episode.steps[4].tool == "submit_result");
    CHECK(episode.steps[4].step == 4);
    CHECK(episode.steps[4].started_at_us > 0);
    CHECK(f.service->manager().Stats().sessions_open == 0);
  }

  TEST_CASE("session/create with tools false leaves the tool list out of the answer, nothing else" *
            doctest::timeout(60)) {
    ServiceFixture f;
    Json full = f.Create();
    Json lean = f.Ok("session/create", {{"env", "manager_fixture"}, {"task", "sum_task"}, {"tools", false}});
    CHECK_FALSE(lean.contains("tools"));
    CHECK(lean["versions"] == full["versions"]);
    CHECK(lean["prompt"] == full["prompt"]);
    CHECK(f.CallTool(lean["session"], "add", {{"a", 1}, {"b", 1}})["content"] == 2);
    CHECK(f.Ok("session/create", {{"env", "manager_fixture"}, {"task", "sum_task"}, {"tools", true}})["tools"] ==
          full["tools"]);
    CHECK(f.Ok("envs/get", {{"env", "manager_fixture"}})["tools"] == full["tools"]);
  }

  TEST_CASE("answers written as text splice the preserialized tool list: the same tools as the tree answers" *
            doctest::timeout(60)) {
    ServiceFixture f;
    const Json tools = f.Ok("envs/get", {{"env", "manager_fixture"}})["tools"];  // the tree path
    REQUIRE(tools.size() > 2);
    // HandleAsync writes its answers as text, so these carry the preserialized list.
    auto text_result = [&f](const std::string& method, const Json& params) {
      auto answer = f.SendText(DumpJson(Json{{"jsonrpc", "2.0"}, {"id", 7}, {"method", method}, {"params", params}}));
      REQUIRE(answer.has_value());
      auto parsed = ParseJson(*answer);
      REQUIRE_MESSAGE(parsed.ok(), *answer);
      REQUIRE_MESSAGE(parsed->contains("result"), *answer);
      CHECK((*parsed)["id"] == 7);
      return (*parsed)["result"];
    };
    Json created = text_result("session/create", {{"env", "manager_fixture"}, {"task", "sum_task"}});
    CHECK(created["tools"] == tools);
    CHECK(created["prompt"] == f.Create()["prompt"]);
    CHECK(f.CallTool(created["session"], "add", {{"a", 2}, {"b", 3}})["content"] == 5);
    Json reset = text_result("session/reset", {{"session", created["session"]}});
    CHECK(reset["tools"] == tools);
    CHECK(text_result("tools/list", {{"session", reset["session"]}})["tools"] == tools);
    CHECK(text_result("envs/get", {{"env", "manager_fixture"}})["tools"] == tools);
    CHECK_FALSE(text_result("session/create", {{"env", "manager_fixture"}, {"tools", false}}).contains("tools"));
  }

  TEST_CASE("a wrong answer is a verdict, not an error; submitting through tools/call records it too" *
            doctest::timeout(60)) {
    ServiceFixture f;
    Json first = f.Create();
    Json verdict = f.Ok("session/submit", {{"session", first["session"]}, {"answer", 4}});
    CHECK(verdict["passed"] == false);
    Json second = f.Create();
    Json result = f.CallTool(second["session"], "submit_result", {{"answer_text", "5"}});
    CHECK(result["outcome"] == "ok");
    CHECK(result["content"]["passed"] == true);
    agents::Episode episode = f.Episode(second["trajectory"]);
    CHECK(episode.summary.outcome == EpisodeOutcome::kSubmitted);
    CHECK(episode.summary.answer == std::optional<std::string>("5"));
    CHECK(f.Episode(first["trajectory"]).summary.answer == std::optional<std::string>("4"));

    // A session without a task cannot submit: the invalid call names why.
    Json plain = f.Ok("session/create", {{"env", "manager_fixture"}});
    CHECK(plain["prompt"].is_null());
    Json error = f.Error("session/submit", {{"session", plain["session"]}, {"answer", "5"}});
    CHECK(error["code"] == -32602);
    CHECK(Contains(error["message"], "no task"));
  }

  TEST_CASE("envs/list, envs/get and tasks/list describe the environments; env accepts id, prefix or name" *
            doctest::timeout(30)) {
    ServiceFixture f;
    Json envs = f.Ok("envs/list")["envs"];
    REQUIRE(envs.size() == 1);
    CHECK(envs[0]["name"] == "manager_fixture");
    CHECK(envs[0]["tasks"] == 2);
    std::string id = envs[0]["id"];
    CHECK(envs[0]["version"] == id);
    for (const std::string& key : {id, id.substr(0, 8), std::string("manager_fixture")}) {
      Json env = f.Ok("envs/get", {{"env", key}});
      CHECK(env["id"] == id);
      CHECK(env["tools"].size() == f.service->manager().FindEnvironment(id)->tools.size());
      REQUIRE(env["tasks"].size() == 2);
      CHECK(env["tasks"][1]["id"] == "sum_task");
    }
    Json tasks = f.Ok("tasks/list", {{"env", "manager_fixture"}})["tasks"];
    REQUIRE(tasks.size() == 2);
    CHECK(tasks[0]["id"] == kBrokenVerifierTask);
    CHECK(tasks[1]["id"] == "sum_task");
    // Each task names its own version beside the verifier's, as session/create's "versions" do
    // (a remote rollout records them: server/remote_session_host.h).
    const sandbox::EnvBundle* bundle = f.service->manager().FindEnvironment(id);
    Json versions = f.Create()["versions"];
    CHECK(tasks[1]["task_version"] == sandbox::TaskVersion(id, *bundle->FindTask("sum_task")));
    CHECK(tasks[1]["task_version"] == versions["task"]);
    CHECK(tasks[1]["version"] == versions["verifier"]);
    CHECK(f.Ok("envs/get", {{"env", id}})["tasks"] == tasks);
    CHECK(f.Ok("tools/list", {{"env", "manager_fixture"}})["tools"].size() > 2);
    Json stats = f.Ok("server/stats");
    CHECK(stats["envs"] == 1);
    CHECK(stats["trajectories"]["enabled"] == true);
    CHECK(f.Ok("ping") == Json::object());
  }

  TEST_CASE("unknown sessions, environments and tasks, and bad params name what is wrong" * doctest::timeout(30)) {
    ServiceFixture f;
    const std::string ghost = "s-000000000000000000000000";
    for (const char* method : {"tools/list", "session/submit", "session/reset", "session/fork", "session/close"}) {
      Json error = f.Error(method, {{"session", ghost}, {"answer", "5"}});
      CHECK_MESSAGE(error["code"] == -32001, method);
      CHECK(error["data"]["kind"] == "unknown_session");
      CHECK(error["data"]["retryable"] == false);
    }
    CHECK(f.Error("tools/call", {{"session", ghost}, {"name", "echo"}})["code"] == -32001);

    Json unknown_env = f.Error("session/create", {{"env", "no_such_env"}, {"task", "sum_task"}});
    CHECK(unknown_env["code"] == -32002);
    CHECK(Contains(unknown_env["message"], "no_such_env"));
    CHECK(Contains(unknown_env["message"], "manager_fixture"));
    Json unknown_task = f.Error("session/create", {{"env", "manager_fixture"}, {"task", "no_such_task"}});
    CHECK(unknown_task["code"] == -32002);
    CHECK(Contains(unknown_task["message"], "no_such_task"));
    CHECK(Contains(unknown_task["message"], "sum_task"));
    CHECK(f.Error("envs/get", {{"env", "nope"}})["code"] == -32002);

    struct Case {
      const char* method;
      Json params;
      const char* field;
    };
    const Case cases[] = {
        {"session/create", Json::object(), "params.env"},
        {"session/create", {{"env", 7}}, "params.env"},
        {"session/create", {{"env", "manager_fixture"}, {"task", true}}, "params.task"},
        {"session/create", {{"env", "manager_fixture"}, {"seed", "x"}}, "params.seed"},
        {"session/create", {{"env", "manager_fixture"}, {"tools", "no"}}, "params.tools"},
        {"session/create", {{"env", "manager_fixture"}, {"limits", {{"wall_time_ms", -5}}}}, "params.limits"},
        {"tools/call", {{"name", "echo"}}, "params.session"},
        {"tools/call", {{"session", ghost}}, "params.name"},
        {"tools/call", {{"session", ghost}, {"name", "echo"}, {"arguments", Json::array()}}, "params.arguments"},
        {"session/submit", {{"session", ghost}}, "params.answer"},
        {"session/close", {{"session", 1}}, "params.session"},
        {"envs/get", Json::object(), "params.env"},
        {"tasks/list", {{"env", nullptr}}, "params.env"},
    };
    for (const Case& c : cases) {
      Json error = f.Error(c.method, c.params);
      INFO(c.method << " " << c.params.dump() << " -> " << error.dump());
      CHECK(error["code"] == -32602);
      CHECK(error["data"]["field"] == c.field);
      CHECK(Contains(error["message"], c.field));
    }
    CHECK(f.Error("envs/list", Json::array({1}))["code"] == -32602);
    CHECK(f.Ok("envs/list", Json::array())["envs"].size() == 1);
  }

  TEST_CASE("a failing verifier is an infra error: -32007 on submit, a typed result on tools/call; never a 0 reward" *
            doctest::timeout(60)) {
    ServiceFixture f;
    Json first = f.Create(kBrokenVerifierTask);
    Json error = f.Error("session/submit", {{"session", first["session"]}, {"answer", "2"}});
    CHECK(error["code"] == -32007);
    CHECK(error["data"]["retryable"] == true);
    CHECK(error["data"]["outcome"] == "infra_error");
    CHECK(Contains(error["message"], "the verifier is broken"));
    agents::Episode episode = f.Episode(first["trajectory"]);
    CHECK(episode.summary.outcome == EpisodeOutcome::kInfraError);
    CHECK_FALSE(episode.summary.verdict.has_value());

    Json second = f.Create(kBrokenVerifierTask);
    Json result = f.CallTool(second["session"], "submit_result", {{"answer_text", "2"}});
    CHECK(result["outcome"] == "infra_error");
    CHECK(f.Episode(second["trajectory"]).summary.outcome == EpisodeOutcome::kInfraError);
    // The session itself is fine.
    CHECK(f.CallTool(second["session"], "add", {{"a", 1}, {"b", 1}})["content"] == 2);
  }

  TEST_CASE("fork continues the parent's state and episode; reset starts over under a new handle" *
            doctest::timeout(60)) {
    ServiceFixture f;
    Json parent = f.Create();
    std::string session = parent["session"];
    CHECK(f.CallTool(session, "incr")["content"] == 1);
    CHECK(f.CallTool(session, "incr")["content"] == 2);
    Json fork = f.Ok("session/fork", {{"session", session}});
    std::string child = fork["session"];
    CHECK(child != session);
    CHECK(fork["fork_step"] == 2);
    CHECK(f.CallTool(child, "incr")["content"] == 3);
    CHECK(f.CallTool(session, "incr")["content"] == 3);
    CHECK(f.Ok("session/submit", {{"session", child}, {"answer", "5"}})["passed"] == true);

    agents::Episode forked = f.Episode(fork["trajectory"]);
    CHECK(forked.summary.start.parent_id == parent["trajectory"]);
    CHECK(forked.summary.start.fork_step == 2);
    REQUIRE(forked.steps.size() == 2);
    CHECK(forked.steps[0].step == 2);
    CHECK(forked.summary.outcome == EpisodeOutcome::kSubmitted);

    Json reset = f.Ok("session/reset", {{"session", session}});
    std::string fresh = reset["session"];
    CHECK(fresh != session);
    CHECK(reset["prompt"] == parent["prompt"]);
    CHECK(reset["trajectory"] != parent["trajectory"]);
    CHECK(f.CallTool(fresh, "incr")["content"] == 1);
    CHECK(f.Error("tools/call", {{"session", session}, {"name", "incr"}})["code"] == -32001);
    CHECK(f.Episode(parent["trajectory"]).summary.outcome == EpisodeOutcome::kReset);
    CHECK(f.Episode(parent["trajectory"]).steps.size() == 3);

    f.Ok("session/close", {{"session", fresh}});
    f.Ok("session/close", {{"session", child}});
    CHECK(f.Episode(reset["trajectory"]).summary.outcome == EpisodeOutcome::kClosed);
    CHECK(f.service->manager().Stats().sessions_open == 0);
  }

  TEST_CASE("a crashed session answers its typed death, ends its episode as crashed, and spares the others" *
            doctest::timeout(60)) {
    ServiceFixture f;
    Json victim = f.Create();
    Json bystander = f.Create();
    Json crashed = f.CallTool(victim["session"], "segfault");
    CHECK(crashed["outcome"] == "crashed");
    CHECK(crashed["session_alive"] == false);
    Json again = f.CallTool(victim["session"], "echo", {{"text", "still there?"}});
    CHECK(again["outcome"] == "crashed");
    Json submit = f.Error("session/submit", {{"session", victim["session"]}, {"answer", "5"}});
    CHECK(submit["code"] == -32004);
    CHECK(submit["data"]["outcome"] == "crashed");
    CHECK(f.Error("session/fork", {{"session", victim["session"]}})["code"] == -32004);

    CHECK(f.CallTool(bystander["session"], "add", {{"a", 1}, {"b", 1}})["content"] == 2);
    CHECK(f.Ok("session/submit", {{"session", bystander["session"]}, {"answer", "5"}})["passed"] == true);

    agents::Episode episode = f.Episode(victim["trajectory"]);
    CHECK(episode.summary.outcome == EpisodeOutcome::kCrashed);
    CHECK(episode.steps.front().result.outcome == toolsets::Outcome::kCrashed);
    f.Ok("session/close", {{"session", victim["session"]}});
    CHECK(f.Episode(victim["trajectory"]).summary.outcome == EpisodeOutcome::kCrashed);
    CHECK(f.Episode(bystander["trajectory"]).summary.outcome == EpisodeOutcome::kSubmitted);
  }

  TEST_CASE("a full server answers -32003 at once with retry_after_ms; closing frees the slot" * doctest::timeout(60)) {
    ServiceFixture f(ServiceFixtureOptions{2});
    Json a = f.Create();
    Json b = f.Create();
    Json full = f.Error("session/create", {{"env", "manager_fixture"}});
    CHECK(full["code"] == -32003);
    CHECK(full["data"]["retryable"] == true);
    CHECK(full["data"]["retry_after_ms"].get<int>() > 0);
    CHECK(f.Error("session/fork", {{"session", a["session"]}})["code"] == -32003);
    f.Ok("session/close", {{"session", a["session"]}});
    Json c = f.Create();
    CHECK(f.service->manager().Stats().live_sessions == 2);
    CHECK(f.Ok("server/stats")["sessions"]["live"] == 2);
  }

  TEST_CASE("sessions idle past the TTL are closed and recorded as expired; busy ones are kept" *
            doctest::timeout(60)) {
    ServiceFixtureOptions options;
    options.session_ttl = std::chrono::milliseconds(700);
    ServiceFixture f(options);
    Json idle = f.Create();
    Json busy = f.Create();
    // A call that outlasts the TTL: the session is in use, so it must survive it.
    Json slow = f.CallTool(busy["session"], "slow_echo", {{"text", "late"}, {"seconds", 1.0}});
    CHECK(slow["content"] == "late");
    CHECK(WaitFor([&] { return f.service->manager().Stats().sessions_open == 0; }, std::chrono::milliseconds(5000)));
    CHECK(f.Error("tools/call", {{"session", idle["session"]}, {"name", "incr"}})["code"] == -32001);
    agents::Episode expired = f.Episode(idle["trajectory"]);
    CHECK(expired.summary.outcome == EpisodeOutcome::kExpired);
    CHECK(f.Episode(busy["trajectory"]).steps.size() == 1);
    CHECK(f.Episode(busy["trajectory"]).summary.outcome == EpisodeOutcome::kExpired);
    CHECK(f.Ok("server/stats")["sessions"]["expired"] == 2);
    CHECK(f.service->metrics().CounterTotal("envforge_sessions_closed_total") == 2);
  }

  TEST_CASE("draining refuses new work with -32006 but lets sessions finish; shutdown closes everything" *
            doctest::timeout(60)) {
    ServiceFixture f;
    Json a = f.Create();
    Json b = f.Create();
    Json c = f.Create();
    f.Ok("session/submit", {{"session", c["session"]}, {"answer", "5"}});
    f.service->BeginDrain();
    for (const char* method : {"session/create", "session/fork", "tools/call", "session/reset"}) {
      Json error = f.Error(method, {{"env", "manager_fixture"}, {"session", a["session"]}, {"name", "incr"}});
      CHECK_MESSAGE(error["code"] == -32006, method);
      CHECK(error["data"]["retryable"] == true);
    }
    CHECK(f.Ok("session/submit", {{"session", b["session"]}, {"answer", "5"}})["passed"] == true);
    CHECK(f.Ok("envs/list")["envs"].size() == 1);

    Status shutdown = f.service->Shutdown(std::chrono::milliseconds(5000));
    CHECK_MESSAGE(shutdown.ok(), shutdown.ToString());
    CHECK(f.service->manager().Stats().live_sessions == 0);
    CHECK(f.service->manager().Stats().sessions_open == 0);
    CHECK(f.Error("tools/list", {{"session", a["session"]}})["code"] == -32001);
    auto counts = f.service->trajectories()->Count();
    REQUIRE(counts.ok());
    CHECK(counts->episodes == 3);
    CHECK(counts->open_episodes == 0);
    CHECK(f.Episode(a["trajectory"]).summary.outcome == EpisodeOutcome::kShutdown);
    CHECK(f.Episode(b["trajectory"]).summary.outcome == EpisodeOutcome::kSubmitted);
    CHECK(f.service->Shutdown().ok());  // idempotent
  }

  TEST_CASE("shutdown waits for a call in flight, which completes and is recorded" * doctest::timeout(60)) {
    ServiceFixture f;
    Json session = f.Create();
    std::promise<std::optional<Json>> answer;
    auto future = answer.get_future();
    f.service->HandleJsonAsync(Json{{"jsonrpc", "2.0"},
                                    {"id", "slow"},
                                    {"method", "tools/call"},
                                    {"params",
                                     {{"session", session["session"]},
                                      {"name", "slow_echo"},
                                      {"arguments", {{"text", "done"}, {"seconds", 0.3}}}}}},
                               RequestContext{},
                               [&answer](std::optional<Json> response) { answer.set_value(std::move(response)); });
    CHECK(WaitFor([&] { return f.service->in_flight() == 1; }));
    REQUIRE(f.service->Shutdown(std::chrono::milliseconds(10'000)).ok());
    REQUIRE(future.wait_for(std::chrono::seconds(0)) == std::future_status::ready);
    auto response = future.get();
    REQUIRE(response.has_value());
    CHECK((*response)["id"] == "slow");
    CHECK((*response)["result"]["content"] == "done");
    agents::Episode episode = f.Episode(session["trajectory"]);
    CHECK(episode.steps.size() == 1);
    CHECK(episode.summary.outcome == EpisodeOutcome::kShutdown);
  }

  TEST_CASE("metrics count requests by method and code, tool calls by outcome, and render live gauges" *
            doctest::timeout(60)) {
    ServiceFixture f;
    Json session = f.Create();
    f.CallTool(session["session"], "echo", {{"text", "a"}});
    f.CallTool(session["session"], "fail", {{"message", "b"}});
    f.Error("tools/call", {{"session", "s-nope"}, {"name", "echo"}});
    f.Error("no/such/method");
    std::string text = f.service->metrics().RenderPrometheus();
    INFO(text);
    CHECK(Contains(text, "envforge_rpc_requests_total{method=\"tools/call\",code=\"ok\",transport=\"test\"} 2"));
    CHECK(Contains(text, "envforge_rpc_requests_total{method=\"tools/call\",code=\"-32001\",transport=\"test\"} 1"));
    CHECK(Contains(text, "envforge_rpc_requests_total{method=\"unknown\",code=\"-32601\",transport=\"test\"} 1"));
    CHECK(Contains(text, "envforge_tool_calls_total{outcome=\"ok\"} 1"));
    CHECK(Contains(text, "envforge_tool_calls_total{outcome=\"tool_error\"} 1"));
    CHECK(Contains(text, "envforge_rpc_request_seconds_count{method=\"session/create\"} 1"));
    CHECK(Contains(text, "envforge_rpc_request_seconds_bucket{method=\"session/create\",le=\"+Inf\"} 1"));
    CHECK(Contains(text, "envforge_sessions_live 1\n"));
    CHECK(Contains(text, "# TYPE envforge_trajectories_queue_depth gauge"));
    CHECK(f.service->metrics().CounterTotal("envforge_tool_calls_total") == 2);
  }

  TEST_CASE("session/create limits carry a disk budget: a write past it answers limit disk" * doctest::timeout(60)) {
    ServiceFixture f;
    Json bad = f.Error("session/create", {{"env", "manager_fixture"}, {"limits", {{"disk_bytes", 4096}}}});
    CHECK(bad["code"] == -32602);
    CHECK(bad["data"]["field"] == "params.limits");
    CHECK(Contains(bad["message"], "disk_bytes"));
    if (geteuid() != 0) return;  // budgets need the root worker's mount helper
    Json tight = f.Ok("session/create", {{"env", "manager_fixture"}, {"limits", {{"disk_bytes", 1 << 20}}}});
    std::string two_mib(2 << 20, 'x');
    Json full = f.CallTool(tight["session"], "write_file", {{"path", "big.txt"}, {"text", two_mib}});
    CHECK(full["outcome"] == "tool_error");
    CHECK(full["limit"] == "disk");
    Json roomy = f.Ok("session/create", {{"env", "manager_fixture"}});
    CHECK(f.CallTool(roomy["session"], "write_file", {{"path", "big.txt"}, {"text", two_mib}})["outcome"] == "ok");
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::server::testing
