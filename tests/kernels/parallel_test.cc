// ParallelFor: exact coverage, grain, nesting, thread count changes.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "kernels/cpu/parallel.h"

namespace envforge::kernels {
namespace {

TEST_SUITE("kernels.parallel") {
  TEST_CASE("ParallelFor covers [0, n) exactly once in chunks of at least the grain") {
    for (int threads : {1, 2, 3}) {
      SetThreadCount(threads);
      CHECK(ThreadCount() == threads);
      for (int64_t n : {0, 1, 7, 100, 1001, 4096}) {
        for (int64_t grain : {1, 3, 64}) {
          CAPTURE(threads);
          CAPTURE(n);
          CAPTURE(grain);
          std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
          std::atomic<bool> small_chunk{false};
          ParallelFor(n, grain, [&](int64_t begin, int64_t end) {
            if (end - begin < grain && end - begin != n) small_chunk = true;
            for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
          });
          bool all_once = true;
          for (auto& h : hits) all_once = all_once && h.load() == 1;
          CHECK(all_once);
          CHECK_FALSE(small_chunk.load());
        }
      }
    }
    SetThreadCount(2);
  }

  TEST_CASE("nested ParallelFor calls run inline on the calling thread") {
    SetThreadCount(2);
    std::atomic<int> nested_total{0};
    std::atomic<bool> nested_on_other_thread{false};
    ParallelFor(8, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const std::thread::id outer = std::this_thread::get_id();
        ParallelFor(100, 1, [&](int64_t b, int64_t e) {
          if (std::this_thread::get_id() != outer) nested_on_other_thread = true;
          nested_total.fetch_add(static_cast<int>(e - b));
        });
      }
    });
    CHECK(nested_total.load() == 800);
    CHECK_FALSE(nested_on_other_thread.load());
  }

  TEST_CASE("ThreadCount can be called from inside a ParallelFor body") {
    SetThreadCount(2);
    std::atomic<int> seen{0};
    ParallelFor(16, 1, [&](int64_t, int64_t) { seen.store(ThreadCount()); });
    CHECK(seen.load() == 2);
  }

  TEST_CASE("with two threads the chunks run on two different threads") {
    SetThreadCount(2);
    std::atomic<int> arrived{0};
    std::mutex ids_mu;
    std::set<std::thread::id> ids;
    ParallelFor(2, 1, [&](int64_t, int64_t) {
      {
        std::lock_guard<std::mutex> lock(ids_mu);
        ids.insert(std::this_thread::get_id());
      }
      // Hold this chunk until the other one started, so one thread cannot take both.
      arrived.fetch_add(1);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (arrived.load() < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    });
    CHECK(ids.size() == 2);
  }

  TEST_CASE("a forked child gets a working pool of the same size") {
    SetThreadCount(2);
    ParallelFor(100, 1, [](int64_t, int64_t) {});  // the parent's workers exist now
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      std::atomic<int64_t> total{0};
      ParallelFor(1000, 1, [&](int64_t begin, int64_t end) { total.fetch_add(end - begin); });
      _exit(total.load() == 1000 && ThreadCount() == 2 ? 0 : 1);
    }
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    pid_t done = 0;
    while ((done = waitpid(child, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (done == 0) {  // hung: do not leave it behind
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
    }
    REQUIRE(done == child);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }

  TEST_CASE("the pool serves concurrent callers") {
    SetThreadCount(2);
    std::atomic<int> total{0};
    std::vector<std::thread> callers;
    for (int c = 0; c < 3; ++c) {
      callers.emplace_back([&] {
        for (int round = 0; round < 50; ++round) {
          ParallelFor(1000, 10, [&](int64_t begin, int64_t end) { total.fetch_add(static_cast<int>(end - begin)); });
        }
      });
    }
    for (std::thread& t : callers) t.join();
    CHECK(total.load() == 3 * 50 * 1000);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::kernels
