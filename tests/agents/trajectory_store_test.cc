// The trajectory store on real SQLite files: concurrent recording, Flush, reopening, readers in
// other connections, id prefixes, filters, rejected records, files that are not stores, and a
// database locked by another connection (records stay queued and land once it is released).
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agents/trajectory_store.h"
#include "base/sqlite.h"
#include "tests/agents/agents_test_util.h"

namespace envforge::agents {
namespace {

using testing::OkStep;
using testing::OpenStore;
using testing::TempDir;
using testing::WaitFor;

EpisodeStart Start(const std::string& env_name, const std::string& task_id) {
  EpisodeStart start;
  start.env_id = std::string(64, 'a');
  start.env_name = env_name;
  start.task_id = task_id;
  start.task_version = "tv-" + task_id;
  start.verifier_version = "tv-" + task_id;
  start.client = "test";
  return start;
}

void Insert(Database& db, const std::string& sql, const std::vector<SqlValue>& values = {}) {
  auto stmt = db.Prepare(sql);
  REQUIRE_MESSAGE(stmt.ok(), stmt.status().ToString());
  REQUIRE(stmt->BindAll(values).ok());
  Status run = stmt->Run();
  REQUIRE_MESSAGE(run.ok(), run.ToString());
}

// A second connection holding SQLite's write lock (BEGIN EXCLUSIVE) until it runs COMMIT.
Database HoldWriteLock(const std::string& path) {
  auto locker = Database::Open(path, Database::Mode::kReadWrite);
  REQUIRE(locker.ok());
  REQUIRE(locker->Exec("BEGIN EXCLUSIVE").ok());
  return std::move(*locker);
}

// Flush, retried up to 50 times (each waits up to the store's flush deadline): the writer's
// backoff after failed writes is at most 1 s between attempts.
bool FlushPatiently(TrajectoryStore& store) {
  for (int attempt = 0; attempt < 50; ++attempt) {
    if (store.Flush().ok()) return true;
  }
  return false;
}

TEST_SUITE("agents.trajectory_store") {
  TEST_CASE("8 threads x 2000 steps are all committed, in order, and survive reopening") {
    TempDir dir;
    const std::string path = dir / "traj.sqlite";
    constexpr int kThreads = 8;
    constexpr int kSteps = 2000;
    std::vector<std::string> ids(kThreads);
    {
      auto store = OpenStore(path);
      std::atomic<bool> writing{true};
      std::atomic<int> reader_errors{0};
      std::atomic<int> reader_regressions{0};
      // A reader in its own connections the whole time: it sees committed data only, never less
      // than it saw before.
      std::thread reader([&] {
        int64_t last_steps = 0;
        while (writing.load()) {
          auto counts = store->Count();
          if (!counts.ok()) {
            ++reader_errors;
            continue;
          }
          if (counts->steps < last_steps) ++reader_regressions;
          last_steps = counts->steps;
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
      });
      std::vector<std::thread> writers;
      for (int t = 0; t < kThreads; ++t) {
        writers.emplace_back([&, t] {
          EpisodeStart start = Start("env" + std::to_string(t % 2), "task" + std::to_string(t));
          start.seed = t;
          ids[t] = store->BeginEpisode(start);
          for (int i = 0; i < kSteps; ++i) {
            store->RecordStep(ids[t], OkStep(i, "tool", Json{{"i", i}, {"t", t}}, Json{{"value", i * 10 + t}}));
          }
          store->RecordSubmit(ids[t], "answer " + std::to_string(t), Json{{"passed", t % 2 == 0}, {"score", 1.0}});
          store->EndEpisode(ids[t], EpisodeOutcome::kSubmitted);
        });
      }
      for (auto& writer : writers) writer.join();
      Status flushed = store->Flush();
      REQUIRE_MESSAGE(flushed.ok(), flushed.ToString());
      writing = false;
      reader.join();
      CHECK(reader_errors == 0);
      CHECK(reader_regressions == 0);

      TrajectoryStoreStats stats = store->Stats();
      constexpr uint64_t kRecords = kThreads * (kSteps + 3);
      CHECK(stats.records_enqueued == kRecords);
      CHECK(stats.records_written == kRecords);
      CHECK(stats.queue_depth == 0);
      CHECK(stats.write_errors == 0);
      CHECK(stats.last_error.empty());
      CHECK(stats.batches_written >= kRecords / 512);
      CHECK(stats.batches_written < kRecords);  // batched, not one transaction per record

      auto counts = store->Count();
      REQUIRE(counts.ok());
      CHECK(counts->episodes == kThreads);
      CHECK(counts->steps == kThreads * kSteps);
      CHECK(counts->open_episodes == 0);
    }
    // Reopened, by a writer and by a reader.
    auto reopened = OpenStore(path);
    auto reader = TrajectoryReader::Open(path);
    REQUIRE_MESSAGE(reader.ok(), reader.status().ToString());
    for (int t = 0; t < kThreads; ++t) {
      auto episode = (*reader)->Get(ids[t]);
      REQUIRE_MESSAGE(episode.ok(), episode.status().ToString());
      CHECK(episode->summary.steps == kSteps);
      CHECK(episode->summary.start.seed == t);
      CHECK(episode->summary.start.task_id == "task" + std::to_string(t));
      CHECK(episode->summary.outcome == EpisodeOutcome::kSubmitted);
      CHECK(episode->summary.answer == "answer " + std::to_string(t));
      REQUIRE(episode->summary.verdict.has_value());
      CHECK((*episode->summary.verdict)["passed"] == (t % 2 == 0));
      REQUIRE(episode->steps.size() == kSteps);
      bool in_order = true;
      for (int i = 0; i < kSteps; ++i) {
        const StepRecord& step = episode->steps[i];
        in_order = in_order && step.step == i && step.arguments["i"] == i && step.result.content["value"] == i * 10 + t;
      }
      CHECK(in_order);
    }
    auto counts = reopened->Count();
    REQUIRE(counts.ok());
    CHECK(counts->steps == kThreads * kSteps);
  }

  TEST_CASE("Flush returns at once with nothing queued; the destructor commits what is queued") {
    TempDir dir;
    const std::string path = dir / "traj.sqlite";
    std::string id;
    {
      // A long flush interval: only the destructor's flush can have written the records.
      auto store = OpenStore(path, {.batch_max_records = 1000, .flush_interval = std::chrono::milliseconds(60'000)});
      CHECK(store->Flush().ok());
      id = store->BeginEpisode(Start("env", "task"));
      store->RecordStep(id, OkStep(0, "search", Json{{"q", "x"}}, Json::array({1, 2})));
      CHECK(store->path() == path);
    }
    auto reader = TrajectoryReader::Open(path);
    REQUIRE(reader.ok());
    auto episode = (*reader)->Get(id);
    REQUIRE_MESSAGE(episode.ok(), episode.status().ToString());
    CHECK(episode->steps.size() == 1);
    CHECK(!episode->summary.outcome.has_value());
    auto counts = (*reader)->Count();
    REQUIRE(counts.ok());
    CHECK(counts->open_episodes == 1);
  }

  TEST_CASE("episode ids are t- plus 24 hex digits, and a unique prefix of 6+ hex digits finds one") {
    TempDir dir;
    const std::string path = dir / "traj.sqlite";
    auto store = OpenStore(path);
    std::set<std::string> ids;
    for (int i = 0; i < 50; ++i) ids.insert(store->BeginEpisode(Start("env", "task")));
    CHECK(ids.size() == 50);
    for (const std::string& id : ids) {
      CHECK(id.size() == 26);
      CHECK(id.rfind("t-", 0) == 0);
      CHECK(id.find_first_not_of("0123456789abcdef", 2) == std::string::npos);
    }
    REQUIRE(store->Flush().ok());
    const std::string id = *ids.begin();

    auto full = store->Get(id);
    REQUIRE(full.ok());
    CHECK(full->summary.id == id);
    auto by_hex = store->Get(id.substr(2));
    REQUIRE(by_hex.ok());
    CHECK(by_hex->summary.id == id);
    // 16 hex digits are unique among 50 random ids.
    auto by_prefix = store->Get(id.substr(0, 2 + 16));
    REQUIRE(by_prefix.ok());
    CHECK(by_prefix->summary.id == id);
    auto upper = id.substr(2, 16);
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    CHECK(store->Get(upper).ok());

    SUBCASE("an ambiguous prefix names the candidates") {
      auto db = Database::Open(path, Database::Mode::kReadWrite);
      REQUIRE(db.ok());
      for (const char* twin : {"t-abcdef000000000000000001", "t-abcdef000000000000000002"}) {
        Insert(
            *db,
            "INSERT INTO episodes(id, env_id, env_version, env_name, task_id, task_version, verifier_version, client,"
            " started_at_us, steps) VALUES (?, 'e', 'e', 'env', 't', 'v', 'v', 'c', 1, 0)",
            {std::string(twin)});
      }
      auto ambiguous = store->Get("abcdef");
      CHECK(ambiguous.status().code() == StatusCode::kInvalidArgument);
      CHECK(ambiguous.status().message().find("ambiguous") != std::string::npos);
      CHECK(ambiguous.status().message().find("t-abcdef000000000000000001") != std::string::npos);
      CHECK(ambiguous.status().message().find("t-abcdef000000000000000002") != std::string::npos);
      auto unique = store->Get("t-abcdef000000000000000002");
      REQUIRE(unique.ok());
      CHECK(unique->summary.start.env_name == "env");
    }
    SUBCASE("too short, unknown and malformed ids") {
      CHECK(store->Get(id.substr(0, 2 + 5)).status().code() == StatusCode::kInvalidArgument);
      CHECK(store->Get("t-000000000000000000000000").status().code() == StatusCode::kNotFound);
      CHECK(store->Get("not-an-id").status().code() == StatusCode::kNotFound);
      CHECK(store->Get("").status().code() == StatusCode::kNotFound);
    }
  }

  TEST_CASE("List filters by environment (id or name), task and outcome, newest first, with limit and offset") {
    TempDir dir;
    auto store = OpenStore(dir / "traj.sqlite");
    std::vector<std::string> ids;
    const std::vector<std::tuple<std::string, std::string, EpisodeOutcome>> episodes = {
        {"trip", "a", EpisodeOutcome::kSubmitted},
        {"trip", "b", EpisodeOutcome::kCrashed},
        {"mini", "a", EpisodeOutcome::kSubmitted},
        {"trip", "a", EpisodeOutcome::kInfraError}};
    for (const auto& [env, task, outcome] : episodes) {
      EpisodeStart start = Start(env, task);
      start.env_id = env == "trip" ? std::string(64, 'b') : std::string(64, 'c');
      ids.push_back(store->BeginEpisode(start));
      store->EndEpisode(ids.back(), outcome);
      // Distinct start times, so "newest first" is one order.
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ids.push_back(store->BeginEpisode(Start("mini", "b")));  // still open
    REQUIRE(store->Flush().ok());

    auto ids_of = [](const Result<std::vector<EpisodeSummary>>& list) {
      REQUIRE_MESSAGE(list.ok(), list.status().ToString());
      std::vector<std::string> out;
      for (const auto& summary : *list) out.push_back(summary.id);
      return out;
    };
    CHECK(ids_of(store->List({})) == std::vector<std::string>{ids[4], ids[3], ids[2], ids[1], ids[0]});
    CHECK(ids_of(store->List({.env_id = "trip"})) == std::vector<std::string>{ids[3], ids[1], ids[0]});
    CHECK(ids_of(store->List({.env_id = std::string(64, 'c')})) == std::vector<std::string>{ids[2]});
    CHECK(ids_of(store->List({.task_id = "a"})) == std::vector<std::string>{ids[3], ids[2], ids[0]});
    CHECK(ids_of(store->List({.env_id = "trip", .task_id = "a", .outcome = EpisodeOutcome::kSubmitted})) ==
          std::vector<std::string>{ids[0]});
    CHECK(ids_of(store->List({.limit = 2})) == std::vector<std::string>{ids[4], ids[3]});
    CHECK(ids_of(store->List({.limit = 2, .offset = 2})) == std::vector<std::string>{ids[2], ids[1]});
    CHECK(ids_of(store->List({.limit = 0})).size() == 5);  // no limit
    CHECK(ids_of(store->List({.env_id = "nowhere"})).empty());
    auto counts = store->Count();
    REQUIRE(counts.ok());
    CHECK(counts->episodes == 5);
    CHECK(counts->open_episodes == 1);
  }

  TEST_CASE(
      "a duplicate step is rejected with a write error and the first record kept; ending twice keeps the first "
      "outcome") {
    TempDir dir;
    auto store = OpenStore(dir / "traj.sqlite");
    std::string id = store->BeginEpisode(Start("env", "task"));
    store->RecordStep(id, OkStep(0, "first_tool", Json::object(), Json("first")));
    store->RecordStep(id, OkStep(0, "second_tool", Json::object(), Json("second")));
    store->RecordStep(id, OkStep(1, "next", Json::object(), Json("next")));
    store->RecordStep("t-000000000000000000000000", OkStep(0, "orphan", Json::object(), Json()));
    store->EndEpisode(id, EpisodeOutcome::kCrashed);
    store->EndEpisode(id, EpisodeOutcome::kClosed);
    REQUIRE(store->Flush().ok());

    TrajectoryStoreStats stats = store->Stats();
    CHECK(stats.write_errors == 2);  // the duplicate and the orphan
    CHECK(stats.records_enqueued == 7);
    CHECK(stats.records_written == 5);
    CHECK(stats.queue_depth == 0);
    auto episode = store->Get(id);
    REQUIRE(episode.ok());
    REQUIRE(episode->steps.size() == 2);
    CHECK(episode->steps[0].tool == "first_tool");
    CHECK(episode->steps[0].result.content == "first");
    CHECK(episode->steps[1].tool == "next");
    CHECK(episode->summary.steps == 2);
    CHECK(episode->summary.outcome == EpisodeOutcome::kCrashed);
    CHECK(episode->summary.ended_at_us.has_value());
    auto counts = store->Count();
    REQUIRE(counts.ok());
    CHECK(counts->steps == 2);
  }

  TEST_CASE("files that are not trajectory stores are refused with the right code") {
    TempDir dir;
    SUBCASE("a text file") {
      std::ofstream(dir / "notes.txt") << "hello, this is not SQLite at all\n";
      auto store = TrajectoryStore::Open(dir / "notes.txt");
      CHECK(store.status().code() == StatusCode::kInvalidArgument);
      CHECK(store.status().message().find("not a trajectory store") != std::string::npos);
      CHECK(TrajectoryReader::Open(dir / "notes.txt").status().code() == StatusCode::kInvalidArgument);
    }
    SUBCASE("an SQLite database of something else (an environment bundle, say)") {
      {
        auto db = Database::Open(dir / "other.sqlite", Database::Mode::kReadWriteCreate);
        REQUIRE(db.ok());
        REQUIRE(db->Exec("CREATE TABLE hotels(name TEXT); INSERT INTO hotels VALUES ('x')").ok());
      }
      auto store = TrajectoryStore::Open(dir / "other.sqlite");
      CHECK(store.status().code() == StatusCode::kInvalidArgument);
      CHECK(store.status().message().find("no _meta table") != std::string::npos);
      CHECK(TrajectoryReader::Open(dir / "other.sqlite").status().code() == StatusCode::kInvalidArgument);
    }
    SUBCASE("a store of a newer format") {
      OpenStore(dir / "new.sqlite").reset();
      {
        auto db = Database::Open(dir / "new.sqlite", Database::Mode::kReadWrite);
        REQUIRE(db.ok());
        REQUIRE(db->Exec("UPDATE _meta SET value = '4' WHERE key = 'format_version'").ok());
      }
      auto store = TrajectoryStore::Open(dir / "new.sqlite");
      CHECK(store.status().code() == StatusCode::kInvalidArgument);
      CHECK(store.status().message().find("newer") != std::string::npos);
    }
    SUBCASE("a corrupt database") {
      std::string bytes("SQLite format 3", 16);
      bytes += std::string(4080, '\x5a');
      std::ofstream(dir / "corrupt.sqlite", std::ios::binary) << bytes;
      CHECK(TrajectoryStore::Open(dir / "corrupt.sqlite").status().code() == StatusCode::kDataLoss);
      CHECK(TrajectoryReader::Open(dir / "corrupt.sqlite").status().code() == StatusCode::kDataLoss);
    }
    SUBCASE("missing files and directories") {
      CHECK(TrajectoryReader::Open(dir / "missing.sqlite").status().code() == StatusCode::kNotFound);
      CHECK(TrajectoryStore::Open(dir / "no/such/dir/traj.sqlite").status().code() == StatusCode::kInternal);
      CHECK(TrajectoryReader::Open(dir.path().string()).status().code() == StatusCode::kInvalidArgument);
    }
    SUBCASE("a store whose recorded JSON nests past the bound: a DataLoss naming the step, not a crash") {
      const std::string path = dir / "deep.sqlite";
      std::string id;
      {
        auto store = OpenStore(path);
        id = store->BeginEpisode(Start("env", "task"));
        REQUIRE(store->Flush().ok());
      }
      {
        auto db = Database::Open(path, Database::Mode::kReadWrite);
        REQUIRE(db.ok());
        // 100,000 levels, as a hostile or corrupted file could hold: what crashed readers before.
        Insert(*db,
               "INSERT INTO steps(episode_id, step, tool, arguments, result, outcome, started_at_us, duration_us)"
               " VALUES (?, 0, 'put', ?, '{\"outcome\":\"ok\",\"content\":1}', 'ok', 1, 1)",
               {id, std::string(100'000, '[') + std::string(100'000, ']')});
      }
      auto reader = TrajectoryReader::Open(path);
      REQUIRE(reader.ok());
      auto episode = (*reader)->Get(id);
      CHECK(episode.status().code() == StatusCode::kDataLoss);
      CHECK(episode.status().message().find("step 0: arguments nests deeper than 128 levels") != std::string::npos);
    }
    SUBCASE("an empty file becomes a store") {
      std::ofstream(dir / "empty.sqlite").close();
      CHECK(TrajectoryStore::Open(dir / "empty.sqlite").ok());
      CHECK(TrajectoryReader::Open(dir / "empty.sqlite").ok());
    }
  }

  TEST_CASE("while another connection holds the write lock, records stay queued and land once it is released") {
    TempDir dir;
    const std::string path = dir / "traj.sqlite";
    auto store = OpenStore(path, {.flush_deadline = std::chrono::milliseconds(400)});
    std::string before = store->BeginEpisode(Start("env", "before"));
    REQUIRE(store->Flush().ok());

    Database locker = HoldWriteLock(path);
    std::string id = store->BeginEpisode(Start("env", "during"));
    for (int i = 0; i < 10; ++i) store->RecordStep(id, OkStep(i, "tool", Json::object(), Json(i)));
    store->EndEpisode(id, EpisodeOutcome::kClosed);

    REQUIRE(WaitFor([&] { return store->Stats().write_errors > 0; }));
    TrajectoryStoreStats stats = store->Stats();
    CHECK(stats.queue_depth == 12);
    CHECK(!stats.last_error.empty());
    Status flushed = store->Flush();
    CHECK(flushed.code() == StatusCode::kDeadlineExceeded);
    CHECK(flushed.message().find("12 records not committed") != std::string::npos);
    CHECK(flushed.message().find("last write error") != std::string::npos);
    // Readers are not blocked by the lock and see only what was committed.
    auto counts = store->Count();
    REQUIRE(counts.ok());
    CHECK(counts->episodes == 1);
    CHECK(store->Get(before).ok());

    REQUIRE(locker.Exec("COMMIT").ok());
    REQUIRE(FlushPatiently(*store));
    stats = store->Stats();
    CHECK(stats.queue_depth == 0);
    CHECK(stats.last_error.empty());
    CHECK(stats.records_written == stats.records_enqueued);
    auto episode = store->Get(id);
    REQUIRE_MESSAGE(episode.ok(), episode.status().ToString());
    CHECK(episode->steps.size() == 10);
    CHECK(episode->summary.outcome == EpisodeOutcome::kClosed);
  }

  TEST_CASE("WhenCommitted answers once what came before it is on disk: at once, after a batch, or late") {
    TempDir dir;
    const std::string path = dir / "traj.sqlite";
    // A one-minute flush interval: a waiter has to wake the writer itself.
    auto store = OpenStore(
        path, {.flush_interval = std::chrono::milliseconds(60'000), .flush_deadline = std::chrono::milliseconds(400)});
    struct Answer {
      std::mutex mutex;
      std::vector<Status> statuses;
      std::vector<bool> on_caller_thread;
      std::vector<int64_t> steps_on_disk;  // what a separate reader saw when the answer came
    };
    auto answer = std::make_shared<Answer>();
    auto await_commit = [&](std::string episode_id) {
      auto caller = std::this_thread::get_id();
      store->WhenCommitted([answer, caller, path, episode_id](Status status) {
        int64_t steps = -1;
        if (auto reader = TrajectoryReader::Open(path); reader.ok()) {
          if (auto episode = (*reader)->Get(episode_id); episode.ok() && episode->summary.outcome.has_value()) {
            steps = static_cast<int64_t>(episode->steps.size());
          }
        }
        std::lock_guard lock(answer->mutex);
        answer->statuses.push_back(status);
        answer->on_caller_thread.push_back(std::this_thread::get_id() == caller);
        answer->steps_on_disk.push_back(steps);
      });
    };
    auto answers = [&] {
      std::lock_guard lock(answer->mutex);
      return answer->statuses.size();
    };

    SUBCASE("nothing queued: inline, on the caller's thread") {
      await_commit("none");
      REQUIRE(answers() == 1);
      CHECK(answer->statuses[0].ok());
      CHECK(answer->on_caller_thread[0]);
    }
    SUBCASE("queued records: on the writer thread, with the episode's end and steps readable") {
      std::string id = store->BeginEpisode(Start("env", "task"));
      for (int i = 0; i < 5; ++i) store->RecordStep(id, OkStep(i, "tool", Json::object(), Json(i)));
      store->EndEpisode(id, EpisodeOutcome::kSubmitted);
      await_commit(id);
      // Far below the flush interval: the waiter woke the writer.
      REQUIRE(WaitFor([&] { return answers() == 1; }));
      CHECK(answer->statuses[0].ok());
      CHECK(!answer->on_caller_thread[0]);
      CHECK(answer->steps_on_disk[0] == 5);
      CHECK(store->Stats().queue_depth == 0);
    }
    SUBCASE("writes blocked past the flush deadline: DeadlineExceeded naming the write error, then nothing more") {
      Database locker = HoldWriteLock(path);
      std::string id = store->BeginEpisode(Start("env", "during"));
      store->EndEpisode(id, EpisodeOutcome::kSubmitted);
      await_commit(id);
      REQUIRE(WaitFor([&] { return answers() == 1; }));
      CHECK(answer->statuses[0].code() == StatusCode::kDeadlineExceeded);
      CHECK(answer->statuses[0].message().find("last write error") != std::string::npos);
      CHECK(answer->steps_on_disk[0] == -1);
      REQUIRE(locker.Exec("COMMIT").ok());
      FlushPatiently(*store);
      CHECK(store->Stats().queue_depth == 0);
      CHECK(answers() == 1);  // answered exactly once
    }
  }

  TEST_CASE("a store closed while its writes fail answers each waiter once, with an error") {
    TempDir dir;
    const std::string path = dir / "traj.sqlite";
    auto store = OpenStore(path, {.flush_deadline = std::chrono::milliseconds(200)});
    REQUIRE(store->Flush().ok());
    Database locker = HoldWriteLock(path);
    store->BeginEpisode(Start("env", "task"));
    auto statuses = std::make_shared<std::vector<Status>>();
    store->WhenCommitted([statuses](Status committed) { statuses->push_back(committed); });
    REQUIRE(WaitFor([&] { return store->Stats().write_errors > 0; }));
    store.reset();  // flushes for 200 ms, then gives up: the writer is gone when this returns
    REQUIRE(statuses->size() == 1);
    // Past its deadline while the writer retried, or abandoned at the close: either way not Ok.
    CHECK(
        ((*statuses)[0].code() == StatusCode::kDeadlineExceeded || (*statuses)[0].code() == StatusCode::kUnavailable));
    REQUIRE(locker.Exec("COMMIT").ok());
  }

  TEST_CASE("EpisodeToJson carries the summary, versions, fork link and every step with its typed result") {
    TempDir dir;
    auto store = OpenStore(dir / "traj.sqlite");
    EpisodeStart start = Start("trip_planning", "cheapest");
    start.parent_id = "t-111111111111111111111111";
    start.fork_step = 3;
    std::string id = store->BeginEpisode(start);
    StepRecord step = OkStep(3, "get_weather", Json{{"city", "Suzhou"}}, Json{{"sky", "clear"}});
    store->RecordStep(id, step);
    StepRecord failed;
    failed.step = 4;
    failed.tool = "get_city";
    failed.arguments = Json{{"name", "Atlantis"}};
    failed.result = toolsets::ToolResult::Error(toolsets::Outcome::kToolError, "unknown city 'Atlantis'", "4");
    store->RecordStep(id, failed);
    store->RecordSubmit(id, "{\"hotel\": \"X\"}",
                        Json{{"passed", false}, {"score", 0.0}, {"reasons", {"no"}}, {"verifier_version", "vv"}});
    store->EndEpisode(id, EpisodeOutcome::kSubmitted);
    REQUIRE(store->Flush().ok());
    auto episode = store->Get(id);
    REQUIRE(episode.ok());
    Json json = EpisodeToJson(*episode);
    CHECK(json["id"] == id);
    CHECK(json["env_name"] == "trip_planning");
    CHECK(json["task_version"] == "tv-cheapest");
    CHECK(json["parent_id"] == "t-111111111111111111111111");
    CHECK(json["fork_step"] == 3);
    CHECK(json["seed"].is_null());
    CHECK(json["outcome"] == "submitted");
    CHECK(json["answer"] == "{\"hotel\": \"X\"}");
    CHECK(json["verdict"]["verifier_version"] == "vv");
    REQUIRE(json["steps"].size() == 2);
    CHECK(json["steps"][0]["step"] == 3);
    CHECK(json["steps"][0]["arguments"]["city"] == "Suzhou");
    CHECK(json["steps"][0]["result"]["content"]["sky"] == "clear");
    CHECK(json["steps"][1]["result"]["outcome"] == "tool_error");
    CHECK(json["steps"][1]["result"]["message"] == "unknown city 'Atlantis'");
    Json summary = EpisodeSummaryToJson(episode->summary);
    CHECK(summary["steps"] == 2);

    for (auto outcome :
         {EpisodeOutcome::kSubmitted, EpisodeOutcome::kClosed, EpisodeOutcome::kCrashed, EpisodeOutcome::kExpired,
          EpisodeOutcome::kInfraError, EpisodeOutcome::kShutdown, EpisodeOutcome::kReset}) {
      CHECK(EpisodeOutcomeFromName(EpisodeOutcomeName(outcome)) == outcome);
    }
    CHECK(!EpisodeOutcomeFromName("won").has_value());
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::agents
