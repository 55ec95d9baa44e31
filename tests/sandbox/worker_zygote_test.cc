// The zygote and its sessions, against the real envforge-worker binary: tool outcomes, every
// fault with its typed outcome and limit, verifiers, solutions, fork, reset, reaping.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "tests/sandbox/worker_test_util.h"

namespace envforge::worker_test {
namespace {

bool Contains(const Json& value, const std::string& fragment) {
  return value.is_string() && value.get<std::string>().find(fragment) != std::string::npos;
}

TEST_SUITE("sandbox.worker.zygote") {
  TEST_CASE("the zygote reports every isolation layer and, as root on this host, has them all on" *
            doctest::timeout(60)) {
    Zygote zygote(FixtureBundle());
    const Json& ready = zygote.ready();
    CHECK(ready["pid"] == zygote.pid());
    CHECK(Contains(ready["python"], "3."));
    CHECK(ready["tasks"] == FixtureTasks().size());
    for (const char* layer : {"network", "landlock", "seccomp", "cgroup", "uid"}) {
      INFO(layer << ": " << ready["isolation"][layer]);
      REQUIRE(ready["isolation"][layer].is_string());
      std::string state = ready["isolation"][layer];
      CHECK((state == "on" || state.rfind("off: ", 0) == 0));
      if (geteuid() == 0) CHECK(state == "on");
    }
    CHECK(zygote.Shutdown() == 0);
  }

  TEST_CASE("a bad bundle is a fatal frame naming the file" * doctest::timeout(60)) {
    std::string path = ExecutableDirectory() + "/worker_test_not_a_bundle.envdb";
    REQUIRE(WriteFileAtomically(path, "this is not sqlite").ok());
    auto pair = MakeSocketPair().value();
    pid_t pid = fork();
    if (pid == 0) {
      dup2(pair.second.get(), 3);
      std::string worker = ExecutableDirectory() + "/envforge-worker";
      execl(worker.c_str(), worker.c_str(), "zygote", "--bundle", path.c_str(), "--control-fd", "3",
            static_cast<char*>(nullptr));
      _exit(127);
    }
    pair.second.Reset();
    auto frame = wire::ReadFrame(pair.first.get());
    REQUIRE(frame.ok());
    Json fatal = Json::parse(*frame);
    CHECK(fatal["op"] == "fatal");
    CHECK(Contains(fatal["error"], path));
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 1);
    std::filesystem::remove(path);
  }

  TEST_CASE("tools answer with typed outcomes" * doctest::timeout(60)) {
    Zygote zygote(FixtureBundle());
    Session s = zygote.Spawn();
    Json reply = s.Call("get_hotel", {{"name", "Alpha"}});
    CHECK(reply["outcome"] == "ok");
    CHECK(reply["content"] == Json({{"name", "Alpha"}, {"city", "Paris"}, {"price", 100}}));

    reply = s.Call("list_hotels", {{"city", "Paris"}});
    CHECK(reply["content"] == Json::array({"Alpha", "Beta"}));
    CHECK(reply["stdout"] == "listing Paris\n");

    reply = s.Call("get_hotel", {{"name", "Zed"}});
    CHECK(reply["outcome"] == "tool_error");
    CHECK(reply["message"] == "ValueError: unknown hotel 'Zed'");

    reply = s.Call("no_such_tool");
    CHECK(reply["outcome"] == "invalid_call");
    CHECK(Contains(reply["message"], "no_such_tool"));

    reply = s.Call("bad_sql");
    CHECK(reply["outcome"] == "tool_error");
    CHECK(reply["message"] == "OperationalError: no such table: nope");

    reply = s.Call("not_json");
    CHECK(reply["outcome"] == "tool_error");
    CHECK(Contains(reply["message"], "not JSON-serialisable"));

    reply = s.Call("big", {{"n", 100000}});
    CHECK(reply["outcome"] == "tool_error");
    CHECK(reply["limit"] == "output_size");
    CHECK(Contains(reply["message"], "100002 bytes"));
    CHECK(Contains(reply["message"], "65536"));

    // The reserved tables (verifiers, solutions, prompts) are gone from the tools' database.
    reply = s.Call("tables");
    CHECK(reply["content"] == Json::array({"hotels"}));

    // Each fork family runs as its own unprivileged uid, in its scratch directory.
    reply = s.Call("whoami");
    CHECK(reply["content"]["pid"] == s.pid);
    CHECK(reply["content"]["cwd"] == s.scratch_dir);
    if (geteuid() == 0) CHECK(reply["content"]["uid"].get<int>() >= 200000);
    CHECK(zygote.Shutdown() == 0);
  }

  TEST_CASE("every fault has its exact outcome and limit, and the sessions keep answering" * doctest::timeout(120)) {
    Zygote zygote(FixtureBundle());
    Session s = zygote.Spawn();
    Session neighbour = zygote.Spawn();
    auto still_fine = [&](Session& session) {
      Json reply = session.Call("bump");
      CHECK(reply["outcome"] == "ok");
    };

    SUBCASE("wall time: a Python loop and a runaway query are interrupted, the session lives on") {
      Json reply = s.Call("spin");
      CHECK(reply["outcome"] == "timeout");
      CHECK(reply["limit"] == "wall_time");
      reply = s.Call("slow_sql");
      CHECK(reply["outcome"] == "timeout");
      CHECK(reply["limit"] == "wall_time");
      still_fine(s);
    }
    // The memory cases get a wall time far past what filling the limit takes, so that the memory
    // limit, not the clock, stops them even where page faults are slow (seen: 256 MiB in 1.3 s).
    SUBCASE("memory: unbounded allocation is a MemoryError with limit memory") {
      s = zygote.Spawn("", Limits(20000));
      Json reply = s.Call("hog");
      CHECK(reply["outcome"] == "tool_error");
      CHECK(reply["limit"] == "memory");
      CHECK(Contains(reply["message"], "MemoryError"));
      CHECK(Contains(reply["message"], "268435456"));
      still_fine(s);
    }
    // Forking a Python process 16 times can take longer than the default 400 ms clock on a loaded
    // machine (seen in CI), so the process cases get the same generous wall time.
    SUBCASE("processes: a fork loop stops at max_processes; leftovers die with the session") {
      s = zygote.Spawn("", Limits(20000));
      Json reply = s.Call("forker");
      CHECK(reply["outcome"] == "tool_error");
      CHECK(reply["limit"] == "processes");
      CHECK(Contains(reply["message"], "BlockingIOError"));
      still_fine(s);
    }
    SUBCASE("network: no TCP connection, even to the host's loopback") {
      Json reply = s.Call("connect");
      CHECK(reply["outcome"] == "tool_error");
      CHECK((Contains(reply["message"], "PermissionError") || Contains(reply["message"], "unreachable")));
      still_fine(s);
    }
    SUBCASE("files: nothing outside the scratch directory") {
      Json reply = s.Call("passwd");
      CHECK(reply["outcome"] == "tool_error");
      CHECK(Contains(reply["message"], "PermissionError"));
      reply = s.Call("write_outside");
      CHECK(reply["outcome"] == "tool_error");
      CHECK(Contains(reply["message"], "PermissionError"));
      CHECK_FALSE(std::filesystem::exists("/tmp/envforge_worker_test_escape.txt"));
      reply = s.Call("write_scratch", {{"text", "hello"}});
      CHECK(reply["outcome"] == "ok");
      CHECK(s.Call("read_scratch")["content"] == "hello");
    }
    SUBCASE("a segfault kills only that session: exited with signal 11") {
      REQUIRE(wire::WriteFrame(s.fd.get(),
                               Json{{"op", "call"}, {"id", 1}, {"name", "segv"}, {"arguments", Json::object()}}.dump())
                  .ok());
      CHECK(s.AtEnd());
      Json exited = zygote.Exited(s.pid);
      CHECK(exited["signal"] == 11);
      CHECK(exited["exit_code"].is_null());
      CHECK(exited["limit"].is_null());
    }
    SUBCASE("cgroup memory: shared memory the rlimit does not see is stopped by an OOM kill") {
      s = zygote.Spawn("", Limits(20000));
      REQUIRE(
          wire::WriteFrame(s.fd.get(),
                           Json{{"op", "call"}, {"id", 1}, {"name", "shm_hog"}, {"arguments", Json::object()}}.dump())
              .ok());
      CHECK(s.AtEnd());
      Json exited = zygote.Exited(s.pid);
      CHECK(exited["signal"] == 9);
      if (zygote.ready()["isolation"]["cgroup"] == "on") CHECK(exited["limit"] == "memory");
    }
    still_fine(neighbour);
    CHECK(neighbour.Call("get_hotel", {{"name", "Gamma"}})["content"]["price"] == 150);
  }

  TEST_CASE("CPU time: a session past cpu_seconds is killed and reported with limit cpu_time" * doctest::timeout(60)) {
    Zygote zygote(FixtureBundle());
    Json limits = Limits(20000);
    limits["cpu_seconds"] = 1;
    Session s = zygote.Spawn("", limits);
    REQUIRE(wire::WriteFrame(s.fd.get(),
                             Json{{"op", "call"}, {"id", 1}, {"name", "spin"}, {"arguments", Json::object()}}.dump())
                .ok());
    CHECK(s.AtEnd());
    Json exited = zygote.Exited(s.pid);
    CHECK(exited["limit"] == "cpu_time");
    CHECK(exited["signal"] == SIGXCPU);
  }

  TEST_CASE("judge runs the task's verifier on the pristine data, in a session that ran nothing else" *
            doctest::timeout(60)) {
    Zygote zygote(FixtureBundle());
    Session s = zygote.Spawn("cheapest");
    // The episode's session changes its data, then may not judge, nor run submit_result: verdicts
    // come from a fresh session (the manager's judge process).
    CHECK(s.Call("set_price", {{"name", "Beta"}, {"price", 1}})["content"] == 1);
    Json refused = s.Judge({R"({"cheapest": "Alpha"})"});
    CHECK(refused["outcome"] == "invalid_call");
    CHECK(Contains(refused["message"], "already ran episode code"));
    refused = s.Call("submit_result", {{"answer_text", R"({"cheapest": "Alpha"})"}});
    CHECK(refused["outcome"] == "invalid_call");
    CHECK(Contains(refused["message"], "judged by the manager"));

    Session judge = zygote.Spawn("cheapest");
    Json reply = judge.Judge({R"({"cheapest": "Alpha"})", "Beta"});  // "Beta" is not JSON: judged as a string
    REQUIRE(reply["outcome"] == "ok");
    CHECK(
        reply["verdicts"] ==
        Json::array({Json{{"passed", true}, {"score", 1.0}, {"reasons", Json::array()}},
                     Json{{"passed", false}, {"score", 0.0}, {"reasons", {"expected the cheapest hotel in Paris"}}}}));

    SUBCASE("a verifier that raises is a defect naming the task's verifier") {
      Session t = zygote.Spawn("raising_verifier");
      Json v = t.Judge({"1"})["verdicts"][0];
      CHECK(Contains(v["defect"], "verifier of task 'raising_verifier'"));
      CHECK(Contains(v["defect"], "KeyError"));
    }
    SUBCASE("a verifier's database refuses writes") {
      Session t = zygote.Spawn("writing_verifier");
      CHECK(Contains(t.Judge({"1"})["verdicts"][0]["defect"], "PermissionError"));
    }
    SUBCASE("a verifier that runs past the wall time is a defect, and the judge answers on") {
      Session t = zygote.Spawn("slow_verifier");
      Json v = t.Judge({"1"})["verdicts"][0];
      CHECK(Contains(v["defect"], "verifier of task 'slow_verifier' exceeded the wall-time limit"));
      CHECK(v["limit"] == "wall_time");
      CHECK(t.Judge({"2"})["outcome"] == "ok");
    }
    SUBCASE("a verdict that is neither a bool nor a verdict object is a defect") {
      Session t = zygote.Spawn("bad_verdict");
      CHECK(Contains(t.Judge({"1"})["verdicts"][0]["defect"], "returned str"));
    }
    SUBCASE("no task, no judge") {
      Session t = zygote.Spawn();
      CHECK(t.Judge({"1"})["outcome"] == "invalid_call");
    }
    SUBCASE("an unknown task is refused at spawn") {
      Json failed = zygote.SpawnExpectingFailure("no_such_task");
      CHECK(failed["op"] == "spawn_failed");
      CHECK(Contains(failed["error"], "no_such_task"));
    }
  }

  TEST_CASE("a verifier cannot change the read-only view: no pragma, temp table, write, attach or transaction" *
            doctest::timeout(60)) {
    Zygote zygote(FixtureBundle());
    Session judge = zygote.Spawn("shadowing_verifier");
    // One batch: the attack first, then two judgements that must still see the pristine data.
    Json reply = judge.Judge({"attack", "check", "check"});
    REQUIRE(reply["outcome"] == "ok");
    INFO(reply.dump());
    CHECK(reply["verdicts"][0]["reasons"] == Json::array());  // no statement of the attack worked
    CHECK(reply["verdicts"][1]["passed"] == true);
    CHECK(reply["verdicts"][2]["passed"] == true);
    // And the next batch of the same process.
    CHECK(judge.Judge({"check"})["verdicts"][0]["passed"] == true);
  }

  TEST_CASE("solutions get read-only proxies of the allowed modules and formatters that refuse underscore fields" *
            doctest::timeout(60)) {
    Zygote zygote(FixtureBundle());
    SUBCASE("modules the allowed ones imported are not reachable through them") {
      Session s = zygote.Spawn("module_attribute");
      Json reply = s.Solve();
      CHECK(reply["outcome"] == "tool_error");
      CHECK(Contains(reply["message"], "AttributeError"));
      CHECK(Contains(reply["message"], "'sys'"));
    }
    for (const char* task : {"runtime_format", "runtime_format_map", "unbound_format"}) {
      INFO(task);
      Session s = zygote.Spawn(task);
      Json reply = s.Solve();
      CHECK(reply["outcome"] == "tool_error");
      CHECK(Contains(reply["message"], "broke a rule: a format field reaching '__class__'"));
    }
    SUBCASE("the allowed modules' public API and plain format strings still work") {
      Session s = zygote.Spawn("allowed_modules");
      Json reply = s.Solve();
      REQUIRE(reply["outcome"] == "ok");
      CHECK(reply["answer"] == Json{{"counter", "a"},
                                    {"mapping", true},
                                    {"date", "2024-01-02"},
                                    {"reduce", 6},
                                    {"heap", 1},
                                    {"chain", {1, 2}},
                                    {"floor", 3},
                                    {"match", "12"},
                                    {"mean", 2},
                                    {"insort", 1},
                                    {"decoded", "JSONDecodeError"},
                                    {"format", "x:7:1"},
                                    {"format_map", "1-  2"},
                                    {"unbound", "1+2"},
                                    {"json", R"({"k": [1]})"}});
    }
  }

  TEST_CASE("solve runs the gold solution through the tools, and only through them" * doctest::timeout(60)) {
    Zygote zygote(FixtureBundle());
    Session s = zygote.Spawn("cheapest");
    Json reply = s.Solve();
    CHECK(reply["outcome"] == "ok");
    CHECK(reply["answer"] == Json({{"cheapest", "Alpha"}}));
    CHECK(reply["answer_text"] == R"({"cheapest":"Alpha"})");
    CHECK(zygote.Spawn("cheapest").Judge({reply["answer_text"].get<std::string>()})["verdicts"][0]["passed"] == true);

    Session db = zygote.Spawn("reaches_for_db");
    reply = db.Solve();
    CHECK(reply["outcome"] == "tool_error");
    CHECK(Contains(reply["message"], "sqlite3"));

    Session files = zygote.Spawn("opens_files");
    reply = files.Solve();
    CHECK(reply["outcome"] == "tool_error");
    CHECK(Contains(reply["message"], "'open'"));

    Session slow = zygote.Spawn("slow_solution");
    reply = slow.Solve();
    CHECK(reply["outcome"] == "timeout");
    CHECK(reply["limit"] == "wall_time");

    Session badly = zygote.Spawn("calls_badly");
    reply = badly.Solve();
    CHECK(reply["outcome"] == "tool_error");
    CHECK(Contains(reply["message"], "expected string, got integer"));
  }

  TEST_CASE("fork copies the session's state; later writes diverge; a new spawn is pristine" * doctest::timeout(60)) {
    Zygote zygote(FixtureBundle());
    Session parent = zygote.Spawn();
    CHECK(parent.Call("set_price", {{"name", "Alpha"}, {"price", 999}})["content"] == 1);
    CHECK(parent.Call("bump")["content"] == 1);
    CHECK(parent.Call("write_scratch", {{"text", "before"}})["outcome"] == "ok");

    Session copy = zygote.Fork(parent);
    CHECK(copy.pid != parent.pid);
    CHECK(copy.scratch_dir != parent.scratch_dir);
    CHECK(copy.Call("get_hotel", {{"name", "Alpha"}})["content"]["price"] == 999);
    CHECK(copy.Call("bump")["content"] == 2);
    CHECK(copy.Call("read_scratch")["content"] == "before");
    CHECK(copy.Call("whoami")["content"]["cwd"] == copy.scratch_dir);

    CHECK(parent.Call("set_price", {{"name", "Alpha"}, {"price", 1}})["content"] == 1);
    CHECK(parent.Call("bump")["content"] == 2);
    CHECK(copy.Call("write_scratch", {{"text", "copy"}})["outcome"] == "ok");
    CHECK(parent.Call("get_hotel", {{"name", "Alpha"}})["content"]["price"] == 1);
    CHECK(copy.Call("get_hotel", {{"name", "Alpha"}})["content"]["price"] == 999);
    CHECK(parent.Call("read_scratch")["content"] == "before");
    CHECK(copy.Call("read_scratch")["content"] == "copy");

    // Reset = a new spawn: pristine data and module state.
    Session fresh = zygote.Spawn();
    CHECK(fresh.Call("get_hotel", {{"name", "Alpha"}})["content"]["price"] == 100);
    CHECK(fresh.Call("bump")["content"] == 1);

    // The copy is a session of its own: closing it is reported, the parent lives on.
    REQUIRE(wire::WriteFrame(copy.fd.get(), R"({"op":"close"})").ok());
    Json exited = zygote.Exited(copy.pid);
    CHECK(exited["exit_code"] == 0);
    CHECK_FALSE(std::filesystem::exists(copy.scratch_dir));
    CHECK(parent.Call("bump")["content"] == 3);
  }

  TEST_CASE("every session process is reaped: no zombie, no leftover after shutdown" * doctest::timeout(60)) {
    Zygote zygote(FixtureBundle());
    std::vector<int> pids;
    {
      Session forks = zygote.Spawn("", Limits(20000));      // forking must not race the clock
      CHECK(forks.Call("forker")["limit"] == "processes");  // leaves sleeping children behind
      pids.push_back(forks.pid);
      Session closed = zygote.Spawn();
      pids.push_back(closed.pid);
      REQUIRE(wire::WriteFrame(closed.fd.get(), R"({"op":"close"})").ok());
      Session dropped = zygote.Spawn();  // the manager just closes its end
      pids.push_back(dropped.pid);
    }
    for (int pid : pids) {
      Json exited = zygote.Exited(pid);
      CHECK(exited["exit_code"] == 0);
    }
    // Sessions and the forker's orphans are gone; what remains are prepared (warm) processes.
    for (int attempt = 0; attempt < 100; ++attempt) {
      bool zombie = false;
      for (int child : Children(zygote.pid())) zombie |= ProcessState(child) == 'Z';
      if (!zombie) break;
      usleep(10000);
    }
    for (int child : Children(zygote.pid())) {
      CHECK(ProcessState(child) != 'Z');
      for (int pid : pids) CHECK(child != pid);
    }
    int zygote_pid = zygote.pid();
    CHECK(zygote.Shutdown() == 0);
    CHECK(ProcessState(zygote_pid) == 0);
    CHECK_FALSE(std::filesystem::exists("/tmp/envforge-worker-test/z" + std::to_string(zygote_pid)));
    CHECK_FALSE(std::filesystem::exists("/sys/fs/cgroup/pids/envforge/" + std::to_string(zygote_pid)));
  }

  TEST_CASE("closing the control channel kills every session and ends the zygote" * doctest::timeout(60)) {
    auto zygote = std::make_unique<Zygote>(FixtureBundle());
    Session s = zygote->Spawn();
    int zygote_pid = zygote->pid();
    int session_pid = s.pid;
    // Close the manager's end without a shutdown frame.
    ::shutdown(zygote->control(), SHUT_RDWR);
    int status = 0;
    REQUIRE(waitpid(zygote_pid, &status, 0) == zygote_pid);
    zygote->Reaped();
    CHECK(WIFEXITED(status));
    CHECK(s.AtEnd());
    CHECK(ProcessState(session_pid) == 0);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::worker_test
