// An interpreter environment served by `envforge serve` to a real WebSocket client: the session's
// Jupyter kernel runs the calls, submit_result is judged, and the recorded episode exports as a
// notebook that the tool results alone rebuild.
#include <doctest/doctest.h>

#include <csignal>
#include <algorithm>
#include <filesystem>

#include "agents/notebook_export.h"
#include "agents/trajectory_store.h"
#include "base/subprocess.h"
#include "sandbox/env_pack.h"
#include "tests/server/transport_test_util.h"

namespace envforge::server::testing {
namespace {

TEST_SUITE("server.transport.interpreter") {
  TEST_CASE("execute over WebSocket runs in the session's kernel; the episode exports as a notebook" *
            doctest::timeout(180)) {
    TempDir dir;
    std::filesystem::create_directories(dir / "envs");
    Status packed = sandbox::PackEnvironment(std::string(ENVFORGE_TEST_SOURCE_DIR) + "/tests/fixtures/envs/interp_mini",
                                             dir / "envs/interp_mini.envdb");
    REQUIRE_MESSAGE(packed.ok(), packed.ToString());
    const std::string trajectories = dir / "trajectories.sqlite";
    ChildProcess serve({ExecutableDirectory() + "/envforge", "serve", "--envs", dir / "envs", "--port", "0",
                        "--port-file", dir / "port", "--trajectories", trajectories},
                       dir / "serve.stderr");
    REQUIRE(WaitFor([&] { return ReadFileToString(dir / "port").ok(); }, std::chrono::seconds(60)));
    const std::string port = std::to_string(std::stoi(*ReadFileToString(dir / "port")));
    auto client = RpcClient::Connect("ws://127.0.0.1:" + port + "/ws");
    REQUIRE(client.ok());

    Json created = MustCall(**client, "session/create", Json{{"env", "interp_mini"}, {"task", "mean_temp"}});
    const std::string session = created["session"];
    Json listed = MustCall(**client, "tools/list", Json{{"session", session}});
    std::string names;
    for (const Json& tool : listed["tools"]) names += tool["name"].get<std::string>() + " ";
    CHECK(names == "execute interrupt restart submit_result ");

    auto call = [&](const std::string& name, Json arguments) {
      return MustCall(**client, "tools/call",
                      Json{{"session", session}, {"name", name}, {"arguments", std::move(arguments)}});
    };
    Json loaded =
        call("execute", {{"code", "import csv\nrows = list(csv.DictReader(open('readings.csv')))\nlen(rows)"}});
    CHECK(loaded["outcome"] == "ok");
    CHECK(loaded["content"]["outputs"][0]["data"]["text/plain"] == "5");
    Json raised = call("execute", {{"code", "rows[99]"}});
    CHECK(raised["outcome"] == "tool_error");
    CHECK(raised["message"] == "IndexError: list index out of range");
    Json mean = call("execute", {{"code",
                                  "t = [float(r['temp']) for r in rows if r['city'] == 'Oslo']\n"
                                  "print(round(sum(t) / len(t), 2))"}});
    CHECK(mean["content"]["outputs"][0]["text"] == "2.25\n");
    Json verdict = call("submit_result", {{"answer_text", R"({"mean": 2.25})"}});
    CHECK(verdict["content"]["passed"] == true);
    MustCall(**client, "session/close", Json{{"session", session}});

    serve.Signal(SIGTERM);
    REQUIRE(serve.Wait(std::chrono::seconds(30)).has_value());
    auto reader = agents::TrajectoryReader::Open(trajectories);
    REQUIRE(reader.ok());
    auto episode = (*reader)->Get(created["trajectory"]);
    REQUIRE_MESSAGE(episode.ok(), episode.status().ToString());
    Result<Json> notebook = agents::EpisodeToNotebook(*episode);
    REQUIRE_MESSAGE(notebook.ok(), notebook.status().ToString());
    std::vector<std::string> sources;
    for (const Json& cell : (*notebook)["cells"]) {
      if (cell["cell_type"] == "code") sources.push_back(cell["source"].get<std::string>());
    }
    REQUIRE(sources.size() == 3);
    CHECK(sources[1] == "rows[99]");
    CHECK((*notebook)["nbformat"] == 4);
  }
}

TEST_SUITE("server.transport.interpreter") {
  TEST_CASE("kernels of a server killed with SIGKILL are killed and removed by the janitor" * doctest::timeout(120)) {
    TempDir dir;
    std::filesystem::create_directories(dir / "envs");
    Status packed = sandbox::PackEnvironment(std::string(ENVFORGE_TEST_SOURCE_DIR) + "/tests/fixtures/envs/interp_mini",
                                             dir / "envs/interp_mini.envdb");
    REQUIRE_MESSAGE(packed.ok(), packed.ToString());
    ChildProcess serve({ExecutableDirectory() + "/envforge", "serve", "--envs", dir / "envs", "--port", "0",
                        "--port-file", dir / "port", "--kernel-pool", "3"},
                       dir / "serve.stderr");
    const std::string prefix = std::to_string(serve.pid()) + "-k";
    // The pool's kernels, as directories under the default scratch root and as cgroups.
    auto owned = [&] {
      int found = 0;
      for (const char* root :
           {"/tmp/envforge-kernels", "/sys/fs/cgroup/pids/envforge-kernels", "/sys/fs/cgroup/envforge-kernels"}) {
        std::error_code error;
        for (const auto& entry : std::filesystem::directory_iterator(root, error)) {
          if (entry.path().filename().string().rfind(prefix, 0) == 0) ++found;
        }
      }
      return found;
    };
    auto processes = [&] {
      int found = 0;
      std::error_code error;
      for (const auto& entry : std::filesystem::directory_iterator("/sys/fs/cgroup/pids/envforge-kernels", error)) {
        if (entry.path().filename().string().rfind(prefix, 0) != 0) continue;
        Result<std::string> procs = ReadFileToString(entry.path() / "cgroup.procs");
        if (!procs.ok()) continue;
        found += static_cast<int>(std::count(procs->begin(), procs->end(), '\n'));
      }
      return found;
    };
    REQUIRE(WaitFor([&] { return owned() >= 3; }, std::chrono::seconds(60)));
    const bool with_cgroups = geteuid() == 0;
    if (with_cgroups) REQUIRE(WaitFor([&] { return processes() >= 3; }, std::chrono::seconds(60)));
    serve.Signal(SIGKILL);
    REQUIRE(serve.Wait(std::chrono::seconds(10)).has_value());
    CHECK(WaitFor([&] { return owned() == 0; }, std::chrono::seconds(20)));
    if (with_cgroups) CHECK(processes() == 0);
  }
}

}  // namespace
}  // namespace envforge::server::testing
