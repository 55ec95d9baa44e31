// The warm kernel pool and kernel sessions on the tool protocol, with real sandboxed ipykernels.
#include <doctest/doctest.h>

#include <algorithm>
#include <thread>

#include "sandbox/jupyter/kernel_pool.h"
#include "sandbox/jupyter/kernel_session.h"

namespace envforge::sandbox::jupyter {
namespace {

using std::chrono::milliseconds;
using toolsets::Outcome;
using toolsets::ToolCall;
using toolsets::ToolResult;

KernelPoolOptions PoolOptions(size_t size) {
  KernelPoolOptions options;
  options.size = size;
  options.launch.scratch_root = "/tmp/envforge-jupyter-test";
  return options;
}

ToolCall Execute(const std::string& code) { return {"c1", std::string(toolsets::kExecuteTool), {{"code", code}}}; }

std::string Text(const ToolResult& result) {
  std::string text;
  for (const Json& output : result.content["outputs"]) {
    if (output.contains("text")) text += output["text"].get<std::string>();
    if (output.contains("data")) text += output["data"].value("text/plain", "");
  }
  return text;
}

bool WaitForReady(const KernelPool& pool, size_t count) {
  for (int i = 0; i < 600 && pool.Stats().ready < count; ++i) std::this_thread::sleep_for(milliseconds(50));
  return pool.Stats().ready >= count;
}

TEST_SUITE("sandbox.jupyter.pool") {
  TEST_CASE("a warm pool hands out ready kernels at once and refills in the background" * doctest::timeout(180)) {
    std::unique_ptr<KernelPool> pool = KernelPool::Create(PoolOptions(2));
    REQUIRE(WaitForReady(*pool, 2));
    const auto start = std::chrono::steady_clock::now();
    Result<ReadyKernel> first = pool->Acquire(milliseconds(1000));
    const double acquire_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    REQUIRE(first.ok());
    CHECK(acquire_ms < 500);  // a hand-over, not a start (which takes about a second)
    CHECK(first->process->Alive());
    CHECK(first->client->Heartbeat(milliseconds(2000)));
    REQUIRE(WaitForReady(*pool, 2));  // refilled
    KernelPoolStats stats = pool->Stats();
    CHECK(stats.acquired_warm == 1);
    CHECK(stats.launched >= 3);
    CHECK(stats.failed == 0);
    CHECK(stats.start_ms.size() == stats.launched);
  }

  TEST_CASE("a kernel that died in the pool is never handed out" * doctest::timeout(180)) {
    std::unique_ptr<KernelPool> pool = KernelPool::Create(PoolOptions(1));
    REQUIRE(WaitForReady(*pool, 1));
    Result<ReadyKernel> taken = pool->Acquire(milliseconds(1000));
    REQUIRE(taken.ok());
    REQUIRE(WaitForReady(*pool, 1));
    // Kill the pooled one behind the pool's back: the next acquire must wait for a fresh kernel.
    pid_t victim = -1;
    {
      Result<ReadyKernel> probe = pool->Acquire(milliseconds(1000));
      REQUIRE(probe.ok());
      victim = probe->process->pid();
    }  // destroyed: killed
    Result<ReadyKernel> next = pool->Acquire(milliseconds(30000));
    REQUIRE(next.ok());
    CHECK(next->process->pid() != victim);
    CHECK(next->process->Alive());
  }

  TEST_CASE("a burst of 50 creates is served: warm first, the rest as kernels start" * doctest::timeout(300)) {
    KernelPoolOptions options = PoolOptions(4);
    options.launch.limits.memory_bytes = 256 << 20;
    std::unique_ptr<KernelPool> pool = KernelPool::Create(options);
    REQUIRE(WaitForReady(*pool, 4));
    std::vector<std::thread> clients;
    std::vector<Result<ReadyKernel>> kernels;
    for (int i = 0; i < 50; ++i) kernels.emplace_back(UnavailableError("not run"));
    for (size_t i = 0; i < kernels.size(); ++i) {
      clients.emplace_back([&, i] { kernels[i] = pool->Acquire(milliseconds(240000)); });
    }
    for (std::thread& client : clients) client.join();
    std::vector<pid_t> pids;
    for (Result<ReadyKernel>& kernel : kernels) {
      REQUIRE_MESSAGE(kernel.ok(), kernel.status().ToString());
      CHECK(kernel->process->Alive());
      pids.push_back(kernel->process->pid());
    }
    std::sort(pids.begin(), pids.end());
    CHECK(std::unique(pids.begin(), pids.end()) == pids.end());
    KernelPoolStats stats = pool->Stats();
    CHECK(stats.acquired_warm + stats.acquired_cold == 50);
    CHECK(stats.acquired_warm >= 4);
    CHECK(stats.failed == 0);
    // Every one of them answers.
    for (Result<ReadyKernel>& kernel : kernels) CHECK(kernel->client->Heartbeat(milliseconds(5000)));
  }

  TEST_CASE("a pool whose kernels cannot start says why" * doctest::timeout(120)) {
    KernelPoolOptions options = PoolOptions(1);
    options.launch.python = "/usr/bin/false";  // exits at once: never answers
    std::unique_ptr<KernelPool> pool = KernelPool::Create(options);
    Result<ReadyKernel> kernel = pool->Acquire(milliseconds(60000));
    REQUIRE_FALSE(kernel.ok());
    CHECK(kernel.status().code() == StatusCode::kUnavailable);
    CHECK(kernel.status().message().find("died while starting") != std::string::npos);
  }

  TEST_CASE("kernel sessions: execute, errors, interrupt, restart, timeouts and crashes as tool results" *
            doctest::timeout(180)) {
    std::unique_ptr<KernelPool> pool = KernelPool::Create(PoolOptions(2));
    KernelSessionOptions options;
    options.execute.wall = milliseconds(3000);  // a loaded machine (ctest -j2) must not time out the plain executes
    Result<std::unique_ptr<KernelSession>> started = KernelSession::Start(*pool, options);
    REQUIRE(started.ok());
    KernelSession& session = **started;

    ToolResult ok = session.Call(Execute("a = 6\nprint('hi')\na * 7"));
    CHECK(ok.outcome == Outcome::kOk);
    CHECK(ok.content["status"] == "ok");
    CHECK(ok.content["execution_count"] == 1);
    CHECK(Text(ok) == "hi\n42");

    ToolResult raised = session.Call(Execute("int('x')"));
    CHECK(raised.outcome == Outcome::kToolError);
    CHECK(raised.message == "ValueError: invalid literal for int() with base 10: 'x'");
    CHECK(raised.content["outputs"][0]["output_type"] == "error");

    CHECK(session.Call({"c", "execute", {{"code", 3}}}).outcome == Outcome::kInvalidCall);
    CHECK(session.Call({"c", "execute", Json::object()}).outcome == Outcome::kInvalidCall);
    CHECK(session.Call({"c", "interrupt", {{"x", 1}}}).outcome == Outcome::kInvalidCall);
    ToolResult interrupted = session.Call({"c", "interrupt", Json::object()});
    CHECK(interrupted.outcome == Outcome::kOk);
    CHECK(interrupted.content["interrupted"] == true);

    ToolResult loop = session.Call(Execute("while True: pass"));
    CHECK(loop.outcome == Outcome::kTimeout);
    CHECK(loop.limit == "wall_time");
    CHECK(loop.content["restarted"] == false);
    CHECK(Text(session.Call(Execute("a"))) == "6");

    ToolResult stubborn =
        session.Call(Execute("import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass"));
    CHECK(stubborn.outcome == Outcome::kTimeout);
    CHECK(stubborn.content["restarted"] == true);
    CHECK(session.Call(Execute("a")).outcome == Outcome::kToolError);  // NameError: a fresh kernel
    CHECK(session.Info()["restarts"] == 1);

    session.Call(Execute("b = 1"));
    CHECK(session.Call({"c", "restart", Json::object()}).content["restarted"] == true);
    CHECK(session.Call(Execute("b")).message.rfind("NameError", 0) == 0);
    ToolResult after_restart = session.Call(Execute("1"));
    INFO(after_restart.message);
    CHECK(after_restart.content["execution_count"] == 2);

    ToolResult crashed = session.Call(Execute("import os\nos._exit(9)"));
    CHECK(crashed.outcome == Outcome::kCrashed);
    CHECK_FALSE(crashed.session_alive);
    CHECK(crashed.message.find("exit code 9") != std::string::npos);
    CHECK(session.crashed());
    CHECK(session.Call(Execute("1")).outcome == Outcome::kCrashed);

    // The pool and other sessions go on.
    Result<std::unique_ptr<KernelSession>> other = KernelSession::Start(*pool, options);
    REQUIRE(other.ok());
    CHECK(Text((*other)->Call(Execute("2 + 2"))) == "4");
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::sandbox::jupyter
