// RpcService under concurrent load: many threads, each driving its own session through
// HandleAsync without waiting for answers; every call must be answered and recorded.
#include <doctest/doctest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/server/service_test_util.h"

namespace envforge::server::testing {
namespace {

TEST_SUITE("server.concurrency") {
  TEST_CASE("32 threads x 50 pipelined calls on separate sessions: all answered, all recorded" *
            doctest::timeout(120)) {
    constexpr int kThreads = 32;
    constexpr int kCalls = 50;
    ServiceFixture f;
    std::vector<Json> sessions;
    for (int i = 0; i < kThreads; ++i) sessions.push_back(f.Create());

    std::mutex mutex;
    std::condition_variable all_answered;
    int answered = 0;
    int wrong = 0;
    std::vector<std::string> problems;
    std::vector<std::thread> threads;
    for (int thread = 0; thread < kThreads; ++thread) {
      threads.emplace_back([&, thread] {
        std::string session = sessions[thread]["session"];
        RequestContext context;
        context.transport = "test";
        for (int call = 0; call < kCalls; ++call) {
          Json request = {
              {"jsonrpc", "2.0"},
              {"id", thread * 1000 + call},
              {"method", "tools/call"},
              {"params", {{"session", session}, {"name", "add"}, {"arguments", {{"a", thread}, {"b", call}}}}}};
          f.service->HandleAsync(DumpJson(request), context, [&, thread, call](std::optional<std::string> text) {
            bool good = false;
            std::string problem;
            if (text) {
              auto response = ParseJson(*text);
              good = response.ok() && (*response)["id"] == thread * 1000 + call &&
                     (*response)["result"]["outcome"] == "ok" && (*response)["result"]["content"] == thread + call;
              if (!good) problem = *text;
            }
            std::lock_guard lock(mutex);
            ++answered;
            if (!good) {
              ++wrong;
              if (problems.size() < 5) problems.push_back(problem);
            }
            all_answered.notify_all();
          });
        }
      });
    }
    for (auto& thread : threads) thread.join();
    {
      std::unique_lock lock(mutex);
      REQUIRE(all_answered.wait_for(lock, std::chrono::seconds(60), [&] { return answered == kThreads * kCalls; }));
      for (const auto& problem : problems) INFO(problem);
      CHECK(wrong == 0);
    }

    REQUIRE(f.service->trajectories()->Flush().ok());
    auto counts = f.service->trajectories()->Count();
    REQUIRE(counts.ok());
    CHECK(counts->episodes == kThreads);
    CHECK(counts->steps == kThreads * kCalls);
    for (const auto& session : sessions) {
      agents::Episode episode = f.Episode(session["trajectory"]);
      REQUIRE(episode.steps.size() == kCalls);
      for (int step = 0; step < kCalls; ++step) {
        CHECK(episode.steps[step].step == step);
        // Calls on one session are answered (and numbered) in the order they were sent.
        CHECK(episode.steps[step].arguments["b"] == step);
      }
    }
    CHECK(f.service->metrics().CounterTotal("envforge_tool_calls_total") == kThreads * kCalls);
    REQUIRE(f.service->Shutdown().ok());
    counts = f.service->trajectories()->Count();
    REQUIRE(counts.ok());
    CHECK(counts->open_episodes == 0);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::server::testing
