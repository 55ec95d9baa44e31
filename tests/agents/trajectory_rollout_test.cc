// The trajectory store's formats 2 (rollouts) and 3 (keep routing, keep sampling mask) on real
// SQLite files: format-1 and format-2 files written by the old code migrate in place in one
// transaction (and still read, unmigrated, through a read-only reader); every new record and
// EpisodeStart field round-trips through the file and EpisodeToJson; the token-exact "tokens"
// view segments contexts, aligns routing and kept sets with the ids and flags inconsistent
// recordings; many threads recording messages, model turns and events lose and reorder nothing.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "agents/trajectory_store.h"
#include "base/sqlite.h"
#include "tests/agents/agents_test_util.h"

namespace envforge::agents {
namespace {

namespace fs = std::filesystem;
using testing::OkStep;
using testing::OpenStore;
using testing::SourceDir;
using testing::TempDir;

// The fixtures' episodes (tests/fixtures/trajectories/README.md).
constexpr const char* kSubmittedId = "t-4b3bb778b685fc8fe52f1920";
constexpr const char* kForkedId = "t-bb6816791142b0eb439771f3";
constexpr const char* kOpenId = "t-ec7a2e6c4aec484092a328be";
constexpr const char* kRolloutIds[] = {"t-7aba830c753a69e4bacb34f0", "t-cd6eceef4f9768c9d3987a89"};  // v2

std::string CopyFixture(const TempDir& dir, const std::string& name) {
  std::string path = dir / name;
  fs::copy_file(SourceDir() + "/tests/fixtures/trajectories/" + name, path);
  return path;
}
std::string CopyV1Fixture(const TempDir& dir) { return CopyFixture(dir, "v1_store.sqlite"); }

// One integer of a query over a store file.
int64_t QueryInt(const std::string& path, const std::string& sql, const std::vector<SqlValue>& values = {}) {
  auto db = Database::Open(path, Database::Mode::kReadOnly);
  REQUIRE(db.ok());
  auto stmt = db->Prepare(sql);
  REQUIRE_MESSAGE(stmt.ok(), stmt.status().ToString());
  REQUIRE(stmt->BindAll(values).ok());
  REQUIRE(stmt->Step().value());
  return stmt->ColumnInt(0);
}

// What the format-2 fixture's rollout episodes hold, whichever way they are read: two turns each
// (a 1113-token prompt, 6 tokens; 42 new tokens continuing 1119, 6 tokens), nothing recorded of
// routing or kept sets.
void CheckV2Episode(const Result<Episode>& episode) {
  REQUIRE_MESSAGE(episode.ok(), episode.status().ToString());
  CHECK(episode->summary.start.kind == "rollout");
  CHECK(episode->messages.size() == 6);
  REQUIRE(episode->model_turns.size() == 2);
  CHECK(episode->model_turns[0].input_tokens.size() == 1113);
  CHECK(episode->model_turns[1].reused_tokens == 1119);
  for (const ModelTurnRecord& turn : episode->model_turns) {
    CHECK(turn.output_tokens.size() == 6);
    CHECK(turn.routing_width == 0);
    CHECK(turn.routing.empty());
    CHECK(turn.kept_vocab == 0);
    CHECK(turn.kept_ids.empty());
  }
  Json json = EpisodeToJson(*episode);
  for (const char* field : {"routing_start", "routing_width", "routing", "kept_vocab", "kept_ids"}) {
    CHECK_MESSAGE(json["model_turns"][1][field].is_null(), field);
  }
  REQUIRE(json["tokens"].size() == 1);
  CHECK(json["tokens"][0]["ids"].size() == 1113 + 6 + 42 + 6);
  CHECK(json["tokens"][0]["consistent"] == true);
  CHECK(!json["tokens"][0].contains("routing"));
  CHECK(!json["tokens"][0].contains("kept"));
}

// Routing of width 2 whose ids name their position: position p routes to {p, 100 + p}.
std::vector<int16_t> PositionRouting(int64_t first, int64_t count) {
  std::vector<int16_t> ids;
  for (int64_t p = first; p < first + count; ++p) {
    ids.push_back(static_cast<int16_t>(p));
    ids.push_back(static_cast<int16_t>(100 + p));
  }
  return ids;
}
Json PositionRoutingJson(int64_t p) { return Json::array({p, 100 + p}); }

std::string MetaVersion(const std::string& path) {
  auto db = Database::Open(path, Database::Mode::kReadOnly);
  REQUIRE(db.ok());
  auto stmt = db->Prepare("SELECT value FROM _meta WHERE key = 'format_version'");
  REQUIRE(stmt.ok());
  REQUIRE(stmt->Step().value());
  return stmt->ColumnText(0);
}

bool HasColumn(const std::string& path, const std::string& table, const std::string& column) {
  auto db = Database::Open(path, Database::Mode::kReadOnly);
  REQUIRE(db.ok());
  auto stmt = db->Prepare("SELECT 1 FROM pragma_table_info(?) WHERE name = ?");
  REQUIRE(stmt.ok());
  REQUIRE(stmt->BindAll({table, column}).ok());
  return stmt->Step().value();
}

// What the fixture holds, whichever way it is read.
void CheckFixtureEpisodes(const Result<Episode>& submitted, const Result<Episode>& forked,
                          const Result<Episode>& open) {
  REQUIRE_MESSAGE(submitted.ok(), submitted.status().ToString());
  REQUIRE_MESSAGE(forked.ok(), forked.status().ToString());
  REQUIRE_MESSAGE(open.ok(), open.status().ToString());
  const EpisodeSummary& s = submitted->summary;
  CHECK(s.start.env_name == "trip_planning");
  CHECK(s.start.task_id == "cheapest");
  CHECK(s.start.seed == 7);
  CHECK(s.start.client == "127.0.0.1:5555");
  CHECK(s.outcome == EpisodeOutcome::kSubmitted);
  CHECK(s.answer == "X");
  REQUIRE(s.verdict.has_value());
  CHECK((*s.verdict)["passed"] == true);
  REQUIRE(submitted->steps.size() == 3);
  CHECK(submitted->steps[0].tool == "get_city");
  CHECK(submitted->steps[0].result.content == Json{{"id", 3}});
  CHECK(submitted->steps[1].result.outcome == toolsets::Outcome::kToolError);
  CHECK(submitted->steps[1].result.message == "no hotel 99");
  CHECK(submitted->steps[2].tool == "submit_result");
  CHECK(forked->summary.start.parent_id == kSubmittedId);
  CHECK(forked->summary.start.fork_step == 1);
  CHECK(forked->summary.outcome == EpisodeOutcome::kCrashed);
  CHECK(!open->summary.outcome.has_value());
  CHECK(open->summary.start.env_name == "mini");
  // Format-1 episodes were all served, with nothing of the model side.
  for (const Result<Episode>* episode : {&submitted, &forked, &open}) {
    const EpisodeStart& start = (*episode)->summary.start;
    CHECK(start.kind == "served");
    CHECK(start.backend.empty());
    CHECK(start.model.empty());
    CHECK(start.sampling.is_null());
    CHECK(start.rollout_id.empty());
    CHECK(start.sample_index == -1);
    CHECK((*episode)->messages.empty());
    CHECK((*episode)->model_turns.empty());
    CHECK((*episode)->context_events.empty());
    Json json = EpisodeToJson(**episode);
    CHECK(json["kind"] == "served");
    CHECK(json["rollout_id"].is_null());
    CHECK(json["tokens"] == Json::array());
  }
}

// A model turn with distinctive values in every field.
ModelTurnRecord Turn(int64_t turn, int64_t message_index, std::vector<int32_t> input, int64_t reused,
                     std::vector<int32_t> output) {
  ModelTurnRecord record;
  record.turn = turn;
  record.message_index = message_index;
  record.input_tokens = std::move(input);
  record.reused_tokens = reused;
  record.prompt_tokens = reused + static_cast<int64_t>(record.input_tokens.size());
  record.output_tokens = std::move(output);
  for (size_t i = 0; i < record.output_tokens.size(); ++i) {
    record.logprobs.push_back(-0.25 * static_cast<double>(i + 1));
    record.kept_counts.push_back(static_cast<int64_t>(i + 1));
  }
  record.finish_reason = "tool_calls";
  record.raw_text = "text of turn " + std::to_string(turn);
  record.started_at_us = 1'700'000'000'000'000 + turn;
  record.duration_us = 1000 + turn;
  return record;
}

TEST_SUITE("agents.trajectory_store.rollouts") {
  TEST_CASE("a format-1 file reads unmigrated through a reader, and TrajectoryStore::Open migrates it in place") {
    TempDir dir;
    const std::string path = CopyV1Fixture(dir);
    REQUIRE(MetaVersion(path) == "1");

    auto reader = TrajectoryReader::Open(path);
    REQUIRE_MESSAGE(reader.ok(), reader.status().ToString());
    CheckFixtureEpisodes((*reader)->Get(kSubmittedId), (*reader)->Get(kForkedId), (*reader)->Get(kOpenId));
    auto all = (*reader)->List({});
    REQUIRE(all.ok());
    CHECK(all->size() == 3);
    CHECK((*reader)->List({.kind = "served"})->size() == 3);
    CHECK((*reader)->List({.kind = "rollout"})->empty());
    CHECK((*reader)->List({.rollout_id = "r-1"})->empty());
    auto counts = (*reader)->Count();
    REQUIRE(counts.ok());
    CHECK(counts->episodes == 3);
    CHECK(counts->steps == 4);
    CHECK(counts->model_turns == 0);
    // Reading changed nothing.
    CHECK(MetaVersion(path) == "1");
    CHECK(!HasColumn(path, "episodes", "kind"));

    {
      auto store = OpenStore(path);
      CHECK(MetaVersion(path) == "3");  // both migrations, in one transaction
      for (const char* column : {"kind", "backend", "model", "sampling", "rollout_id", "sample_index"}) {
        CHECK_MESSAGE(HasColumn(path, "episodes", column), column);
      }
      CHECK(HasColumn(path, "messages", "tool_outcome"));
      CHECK(HasColumn(path, "model_turns", "kept_counts"));
      CHECK(HasColumn(path, "model_turns", "routing"));
      CHECK(HasColumn(path, "context_events", "summary"));
      CheckFixtureEpisodes(store->Get(kSubmittedId), store->Get(kForkedId), store->Get(kOpenId));
      // The migrated file takes both kinds of records, for old episodes and new ones.
      store->RecordMessage(kOpenId, MessageRecord{.index = 0, .role = "user", .content = "late"});
      store->EndEpisode(kOpenId, EpisodeOutcome::kClosed);
      EpisodeStart start;
      start.env_id = std::string(64, 'e');
      start.env_name = "mini";
      start.kind = "rollout";
      start.rollout_id = "r-1";
      std::string id = store->BeginEpisode(start);
      store->RecordModelTurn(id, Turn(0, 1, {1, 2}, 0, {3}));
      REQUIRE(store->Flush().ok());
      CHECK(store->Stats().write_errors == 0);
      CHECK(store->List({.kind = "rollout"})->size() == 1);
      CHECK(store->List({.rollout_id = "r-1"})->front().id == id);
      CHECK(store->Get(kOpenId)->messages.size() == 1);
    }
    // Reopening a migrated file migrates nothing again; a reader sees format 3.
    auto again = OpenStore(path);
    CHECK(MetaVersion(path) == "3");
    CHECK(again->Count()->episodes == 4);
    auto migrated_reader = TrajectoryReader::Open(path);
    REQUIRE(migrated_reader.ok());
    CHECK((*migrated_reader)->Get(kOpenId)->messages[0].content == "late");
    CHECK((*migrated_reader)->Count()->model_turns == 1);
  }

  TEST_CASE("a migration that fails leaves the file at format 1, untouched, and says why") {
    TempDir dir;
    const std::string path = CopyV1Fixture(dir);
    {
      // A table the migration creates is already there: its CREATE TABLE fails half way through.
      auto db = Database::Open(path, Database::Mode::kReadWrite);
      REQUIRE(db.ok());
      REQUIRE(db->Exec("CREATE TABLE model_turns(x INTEGER)").ok());
    }
    auto store = TrajectoryStore::Open(path);
    REQUIRE(!store.ok());
    CHECK(store.status().code() == StatusCode::kInternal);
    CHECK(store.status().message().find("migrating the trajectory store from format 1 to 2") != std::string::npos);
    CHECK(store.status().message().find("model_turns") != std::string::npos);
    CHECK(MetaVersion(path) == "1");
    CHECK(!HasColumn(path, "episodes", "kind"));  // the ALTERs before the failure were rolled back
    CHECK(!HasColumn(path, "messages", "role"));
    auto reader = TrajectoryReader::Open(path);
    REQUIRE(reader.ok());
    CheckFixtureEpisodes((*reader)->Get(kSubmittedId), (*reader)->Get(kForkedId), (*reader)->Get(kOpenId));
  }

  TEST_CASE("a format-2 file reads unmigrated through a reader, and TrajectoryStore::Open migrates it to format 3") {
    TempDir dir;
    const std::string path = CopyFixture(dir, "v2_store.sqlite");
    REQUIRE(MetaVersion(path) == "2");
    {
      auto reader = TrajectoryReader::Open(path);
      REQUIRE_MESSAGE(reader.ok(), reader.status().ToString());
      for (const char* id : kRolloutIds) CheckV2Episode((*reader)->Get(id));
      CHECK((*reader)->Count()->model_turns == 4);
      CHECK(MetaVersion(path) == "2");  // reading changed nothing
      CHECK(!HasColumn(path, "model_turns", "routing"));
    }
    std::string id = kRolloutIds[0];
    {
      auto store = OpenStore(path);
      CHECK(MetaVersion(path) == "3");
      for (const char* column : {"routing_start", "routing_width", "routing", "kept_vocab", "kept_ids"}) {
        CHECK_MESSAGE(HasColumn(path, "model_turns", column), column);
      }
      // The old turns recorded nothing: NULL, and read as before.
      CHECK(QueryInt(path,
                     "SELECT count(*) FROM model_turns WHERE routing_start IS NULL AND routing_width IS NULL AND "
                     "routing IS NULL AND kept_vocab IS NULL AND kept_ids IS NULL") == 4);
      for (const char* rollout_id : kRolloutIds) CheckV2Episode(store->Get(rollout_id));
      // The migrated file takes turns with recordings.
      ModelTurnRecord turn = Turn(2, 6, {7}, 1167, {8, 9});
      turn.routing_start = 1166;
      turn.routing_width = 2;
      turn.routing = PositionRouting(1166, 3);
      store->RecordModelTurn(id, turn);
      REQUIRE(store->Flush().ok());
      CHECK(store->Stats().write_errors == 0);
    }
    auto reader = TrajectoryReader::Open(path);
    REQUIRE(reader.ok());
    auto episode = (*reader)->Get(id);
    REQUIRE(episode.ok());
    REQUIRE(episode->model_turns.size() == 3);
    CHECK(episode->model_turns[2].routing == PositionRouting(1166, 3));
    Json tokens = TokenSegmentsToJson(episode->model_turns);
    REQUIRE(tokens.size() == 1);
    CHECK(tokens[0]["consistent"] == true);
    const Json& routing = tokens[0]["routing"];
    REQUIRE(routing.size() == 1167 + 1 + 2);
    CHECK(routing[1165].is_null());  // turn 1 recorded nothing
    CHECK(routing[1166] == PositionRoutingJson(1166));
    CHECK(routing[1168] == PositionRoutingJson(1168));
    CHECK(routing[1169].is_null());  // the last output token was never fed
  }

  TEST_CASE("a format 2 -> 3 migration that fails leaves the file at format 2 and says why") {
    TempDir dir;
    const std::string path = CopyFixture(dir, "v2_store.sqlite");
    {
      // The last column the migration adds is already there: its ALTER fails after the others ran.
      auto db = Database::Open(path, Database::Mode::kReadWrite);
      REQUIRE(db.ok());
      REQUIRE(db->Exec("ALTER TABLE model_turns ADD COLUMN kept_ids BLOB").ok());
    }
    auto store = TrajectoryStore::Open(path);
    REQUIRE(!store.ok());
    CHECK(store.status().code() == StatusCode::kInternal);
    CHECK(store.status().message().find("migrating the trajectory store from format 2 to 3") != std::string::npos);
    CHECK(store.status().message().find("kept_ids") != std::string::npos);
    CHECK(MetaVersion(path) == "2");
    CHECK(!HasColumn(path, "model_turns", "routing"));  // the ALTERs before the failure were rolled back
  }

  TEST_CASE("routing and kept sets round-trip bit for bit; a turn that recorded none stores NULLs") {
    TempDir dir;
    const std::string path = dir / "traj.sqlite";
    ModelTurnRecord recorded = Turn(0, 2, {1, 2, 3}, 0, {4, 5, 6});
    recorded.routing_start = 0;
    recorded.routing_width = 3;
    recorded.routing = {0, 1, 2, 32767, -32768, -1, 255, 256, 7, 8, 9, 10, 11, 12, 13};  // 5 positions
    recorded.kept_vocab = 1000;
    recorded.kept_counts = {2, 1000, 1};
    recorded.kept_ids = {4, 999, 6};
    ModelTurnRecord plain = Turn(1, 4, {7}, 6, {8});
    std::string id;
    {
      auto store = OpenStore(path);
      EpisodeStart start;
      start.env_name = "mini";
      start.kind = "rollout";
      id = store->BeginEpisode(start);
      store->RecordModelTurn(id, recorded);
      store->RecordModelTurn(id, plain);
      REQUIRE(store->Flush().ok());
      CHECK(store->Stats().write_errors == 0);
    }
    CHECK(MetaVersion(path) == "3");
    CHECK(QueryInt(path, "SELECT length(routing) FROM model_turns WHERE turn = 0") == 15 * 2);
    CHECK(QueryInt(path, "SELECT length(kept_ids) FROM model_turns WHERE turn = 0") == 3 * 4);
    CHECK(QueryInt(path,
                   "SELECT count(*) FROM model_turns WHERE turn = 1 AND routing_start IS NULL AND routing_width IS "
                   "NULL AND routing IS NULL AND kept_vocab IS NULL AND kept_ids IS NULL") == 1);
    auto reader = TrajectoryReader::Open(path);
    REQUIRE(reader.ok());
    auto episode = (*reader)->Get(id);
    REQUIRE_MESSAGE(episode.ok(), episode.status().ToString());
    REQUIRE(episode->model_turns.size() == 2);
    const ModelTurnRecord& read = episode->model_turns[0];
    CHECK(read.routing_start == 0);
    CHECK(read.routing_width == 3);
    CHECK(read.routing == recorded.routing);
    CHECK(read.kept_vocab == 1000);
    CHECK(read.kept_ids == recorded.kept_ids);
    CHECK(episode->model_turns[1].routing_width == 0);
    CHECK(episode->model_turns[1].kept_vocab == 0);

    Json json = EpisodeToJson(*episode);
    const Json& turn = json["model_turns"][0];
    CHECK(turn["routing_start"] == 0);
    CHECK(turn["routing_width"] == 3);
    CHECK(turn["routing"] == Json::array({0, 1, 2, 32767, -32768, -1, 255, 256, 7, 8, 9, 10, 11, 12, 13}));
    CHECK(turn["kept_vocab"] == 1000);
    CHECK(turn["kept_ids"] == Json::array({4, 999, 6}));
    CHECK(json["model_turns"][1]["routing"].is_null());
    CHECK(json["model_turns"][1]["kept_ids"].is_null());
    const Json& segment = json["tokens"][0];
    CHECK(segment["routing"][4] == Json::array({11, 12, 13}));
    CHECK(segment["kept"] ==
          Json::array({nullptr, nullptr, nullptr, Json::array({4, 999}), nullptr, Json::array({6}), nullptr, nullptr}));

    SUBCASE("a routing BLOB of an odd length is DataLoss naming the column") {
      auto db = Database::Open(path, Database::Mode::kReadWrite);
      REQUIRE(db.ok());
      REQUIRE(db->Exec("UPDATE model_turns SET routing = x'010203' WHERE turn = 0").ok());
      auto broken = (*reader)->Get(id);
      CHECK(broken.status().code() == StatusCode::kDataLoss);
      CHECK(broken.status().message().find("model turn 0: routing holds 3 bytes") != std::string::npos);
    }
  }

  TEST_CASE("every new record and start field round-trips through the file and EpisodeToJson") {
    TempDir dir;
    const std::string path = dir / "traj.sqlite";
    std::string id;
    ModelTurnRecord turn = Turn(0, 2, {0, -1, 2'147'483'647, std::numeric_limits<int32_t>::min()}, 0, {7, 8, 9});
    // Values whose every bit must survive: a subnormal, negative zero, the largest finite double.
    turn.logprobs = {-4.9406564584124654e-324, -0.0, -std::numeric_limits<double>::max()};
    turn.kept_counts = {1, std::numeric_limits<int64_t>::max(), 0};
    turn.parse_error = "arguments are not JSON: {\"city\": ";
    {
      auto store = OpenStore(path);
      EpisodeStart start;
      start.env_id = std::string(64, 'a');
      start.env_name = "trip_planning";
      start.task_id = "cheapest";
      start.client = "rollout";
      start.kind = "rollout";
      start.backend = "scripted:/tmp/script.jsonl";
      start.model = "tiny-dsv32";
      start.sampling = Json{{"temperature", 0.7}, {"top_p", 0.95},     {"top_k", 40},
                            {"seed", 11},         {"max_tokens", 256}, {"thinking", true}};
      start.rollout_id = "r-20261124-abc";
      start.sample_index = 3;
      id = store->BeginEpisode(start);
      store->RecordMessage(
          id, MessageRecord{.index = 0, .role = "system", .content = "You plan trips.", .created_at_us = 10});
      store->RecordMessage(
          id, MessageRecord{
                  .index = 1, .role = "user", .content = "Cheapest hotel in Suzhou?\nTwo lines.", .created_at_us = 11});
      store->RecordMessage(id, MessageRecord{.index = 2,
                                             .role = "assistant",
                                             .content = "",
                                             .reasoning_content = "I should list hotels.",
                                             .tool_calls = Json::array({Json{{"id", "call_0"},
                                                                             {"name", "get_all_hotels_by_city"},
                                                                             {"arguments", Json{{"city", "Suzhou"}}}}}),
                                             .created_at_us = 12});
      store->RecordModelTurn(id, turn);
      store->RecordStep(id, OkStep(0, "get_all_hotels_by_city", Json{{"city", "Suzhou"}}, Json::array({"A", "B"})));
      store->RecordMessage(id, MessageRecord{.index = 3,
                                             .role = "tool",
                                             .content = "[\"A\",\"B\"]",
                                             .tool_call_id = "call_0",
                                             .tool_outcome = "ok",
                                             .step = 0,
                                             .created_at_us = 13});
      store->RecordContextEvent(id, ContextEventRecord{.seq = 0,
                                                       .turn = 0,
                                                       .strategy = "summary",
                                                       .tokens_before = 900,
                                                       .tokens_after = 120,
                                                       .messages_dropped = 2,
                                                       .summary = "Listed Suzhou hotels: A, B.",
                                                       .created_at_us = 14});
      store->EndEpisode(id, EpisodeOutcome::kMaxTurns);
      // Rejected: a second message 3, a second turn 0, a second event 0, and records of no episode.
      store->RecordMessage(id, MessageRecord{.index = 3, .role = "user", .content = "duplicate"});
      store->RecordModelTurn(id, Turn(0, 9, {}, 0, {}));
      store->RecordContextEvent(id, ContextEventRecord{.seq = 0, .strategy = "discard-all"});
      store->RecordMessage("t-000000000000000000000000", MessageRecord{.index = 0, .role = "user"});
      store->RecordModelTurn("t-000000000000000000000000", Turn(0, 0, {}, 0, {}));
      store->RecordContextEvent("t-000000000000000000000000", ContextEventRecord{});
      REQUIRE(store->Flush().ok());
      TrajectoryStoreStats stats = store->Stats();
      CHECK(stats.write_errors == 6);
      CHECK(stats.records_written == stats.records_enqueued - 6);
      CHECK(stats.last_error.find("rejected") != std::string::npos);
    }
    auto reader = TrajectoryReader::Open(path);
    REQUIRE(reader.ok());
    auto episode = (*reader)->Get(id);
    REQUIRE_MESSAGE(episode.ok(), episode.status().ToString());
    const EpisodeStart& start = episode->summary.start;
    CHECK(start.kind == "rollout");
    CHECK(start.backend == "scripted:/tmp/script.jsonl");
    CHECK(start.model == "tiny-dsv32");
    CHECK(start.sampling["top_k"] == 40);
    CHECK(start.sampling["thinking"] == true);
    CHECK(start.rollout_id == "r-20261124-abc");
    CHECK(start.sample_index == 3);
    CHECK(episode->summary.outcome == EpisodeOutcome::kMaxTurns);

    REQUIRE(episode->messages.size() == 4);
    const MessageRecord& assistant = episode->messages[2];
    CHECK(assistant.role == "assistant");
    CHECK(assistant.reasoning_content == "I should list hotels.");
    CHECK(assistant.tool_calls[0]["arguments"]["city"] == "Suzhou");
    CHECK(assistant.step == -1);
    CHECK(episode->messages[1].content == "Cheapest hotel in Suzhou?\nTwo lines.");
    const MessageRecord& tool = episode->messages[3];
    CHECK(tool.content == "[\"A\",\"B\"]");  // the first message 3, not the duplicate
    CHECK(tool.tool_call_id == "call_0");
    CHECK(tool.tool_outcome == "ok");
    CHECK(tool.step == 0);
    CHECK(tool.created_at_us == 13);

    REQUIRE(episode->model_turns.size() == 1);
    const ModelTurnRecord& read = episode->model_turns[0];
    CHECK(read.message_index == 2);
    CHECK(read.input_tokens == turn.input_tokens);
    CHECK(read.output_tokens == turn.output_tokens);
    REQUIRE(read.logprobs.size() == 3);
    for (size_t i = 0; i < 3; ++i) {
      CHECK(std::bit_cast<uint64_t>(read.logprobs[i]) == std::bit_cast<uint64_t>(turn.logprobs[i]));
    }
    CHECK(read.kept_counts == turn.kept_counts);
    CHECK(read.reused_tokens == 0);
    CHECK(read.prompt_tokens == 4);
    CHECK(read.finish_reason == "tool_calls");
    CHECK(read.parse_error == turn.parse_error);
    CHECK(read.raw_text == "text of turn 0");
    CHECK(read.started_at_us == turn.started_at_us);
    CHECK(read.duration_us == turn.duration_us);

    REQUIRE(episode->context_events.size() == 1);
    const ContextEventRecord& event = episode->context_events[0];
    CHECK(event.strategy == "summary");
    CHECK(event.tokens_before == 900);
    CHECK(event.tokens_after == 120);
    CHECK(event.messages_dropped == 2);
    CHECK(event.summary == "Listed Suzhou hotels: A, B.");
    CHECK(episode->steps.size() == 1);

    Json json = EpisodeToJson(*episode);
    CHECK(json["kind"] == "rollout");
    CHECK(json["backend"] == "scripted:/tmp/script.jsonl");
    CHECK(json["model"] == "tiny-dsv32");
    CHECK(json["sampling"]["temperature"] == 0.7);
    CHECK(json["rollout_id"] == "r-20261124-abc");
    CHECK(json["sample_index"] == 3);
    CHECK(json["outcome"] == "max_turns");
    CHECK(json["messages"].size() == 4);
    CHECK(json["messages"][3]["step"] == 0);
    CHECK(json["messages"][2]["step"].is_null());
    CHECK(json["model_turns"][0]["input_tokens"] ==
          Json::array({0, -1, 2'147'483'647, std::numeric_limits<int32_t>::min()}));
    CHECK(json["model_turns"][0]["output_tokens"].is_array());
    CHECK(json["model_turns"][0]["kept_counts"][1] == std::numeric_limits<int64_t>::max());
    CHECK(json["context_events"][0]["strategy"] == "summary");
    REQUIRE(json["tokens"].size() == 1);
    CHECK(json["tokens"][0]["ids"].size() == 7);
    // The JSON text a trainer reads parses back to the same arrays.
    Json reparsed = ParseJson(DumpJson(json)).value();
    CHECK(reparsed["model_turns"][0]["output_tokens"] == Json::array({7, 8, 9}));

    CHECK((*reader)->List({.rollout_id = "r-20261124-abc"})->size() == 1);
    CHECK((*reader)->List({.rollout_id = "other"})->empty());
    CHECK((*reader)->List({.outcome = EpisodeOutcome::kMaxTurns, .kind = "rollout"})->size() == 1);

    for (EpisodeOutcome outcome : AllEpisodeOutcomes()) {
      CHECK(EpisodeOutcomeFromName(EpisodeOutcomeName(outcome)) == outcome);
    }
    CHECK(AllEpisodeOutcomes().size() == 12);
    for (const char* name : {"max_turns", "max_tokens", "context_exhausted", "invalid_calls", "timeout"}) {
      CHECK_MESSAGE(EpisodeOutcomeFromName(name).has_value(), name);
    }
  }

  TEST_CASE("a token BLOB whose length is not whole values is DataLoss naming the episode, turn and column") {
    TempDir dir;
    const std::string path = dir / "traj.sqlite";
    std::string id;
    {
      auto store = OpenStore(path);
      EpisodeStart start;
      start.env_name = "mini";
      id = store->BeginEpisode(start);
      store->RecordModelTurn(id, Turn(4, 0, {1, 2, 3}, 0, {4}));
      REQUIRE(store->Flush().ok());
    }
    {
      auto db = Database::Open(path, Database::Mode::kReadWrite);
      REQUIRE(db.ok());
      auto stmt = db->Prepare("UPDATE model_turns SET output_tokens = ? WHERE episode_id = ?");
      REQUIRE(stmt.ok());
      REQUIRE(stmt->BindAll({std::vector<uint8_t>{1, 2, 3, 4, 5}, id}).ok());
      REQUIRE(stmt->Run().ok());
    }
    auto reader = TrajectoryReader::Open(path);
    REQUIRE(reader.ok());
    auto episode = (*reader)->Get(id);
    CHECK(episode.status().code() == StatusCode::kDataLoss);
    CHECK(episode.status().message().find("episode " + id + " model turn 4: output_tokens holds 5 bytes") !=
          std::string::npos);
  }

  TEST_CASE("tokens: one segment per contiguous context, with masks, logprobs and consistency checks") {
    // turn 0: fresh context [10 11 12] -> [20 21]
    // turn 1: continues it (reuses all 5) with [13] -> [22]
    // turn 2: after a discard-all reset, a fresh context [10 14] -> [23]
    // turn 3: reuses only the first 2 tokens of turn 2's context (history cut) with [15] -> [24]
    std::vector<ModelTurnRecord> turns = {Turn(0, 2, {10, 11, 12}, 0, {20, 21}), Turn(1, 4, {13}, 5, {22}),
                                          Turn(2, 6, {10, 14}, 0, {23}), Turn(3, 8, {15}, 2, {24})};
    Json segments = TokenSegmentsToJson(turns);
    REQUIRE(segments.size() == 3);

    const Json& first = segments[0];
    CHECK(first["ids"] == Json::array({10, 11, 12, 20, 21, 13, 22}));
    CHECK(first["mask"] == Json::array({0, 0, 0, 1, 1, 0, 1}));
    CHECK(first["logprobs"] == Json::array({nullptr, nullptr, nullptr, -0.25, -0.5, nullptr, -0.25}));
    CHECK(first["turns"] == Json::array({0, 1}));
    CHECK(first["consistent"] == true);
    CHECK(first["problems"].empty());
    CHECK(!first.contains("prefix_of"));

    const Json& reset = segments[1];
    CHECK(reset["ids"] == Json::array({10, 14, 23}));
    CHECK(reset["mask"] == Json::array({0, 0, 1}));
    CHECK(reset["turns"] == Json::array({2}));
    CHECK(reset["consistent"] == true);

    const Json& cut = segments[2];
    CHECK(cut["ids"] == Json::array({10, 14, 15, 24}));
    CHECK(cut["mask"] == Json::array({0, 0, 0, 1}));  // the copied prefix is trained where it was sampled
    CHECK(cut["turns"] == Json::array({3}));
    CHECK(cut["prefix_of"] == Json{{"segment", 1}, {"tokens", 2}});
    CHECK(cut["consistent"] == true);

    // Every output token appears with mask 1 exactly once across the segments.
    size_t trained = 0;
    for (const Json& segment : segments) {
      for (const Json& bit : segment["mask"]) trained += bit == 1 ? 1 : 0;
    }
    CHECK(trained == 5);

    SUBCASE("no model turns: no segments") { CHECK(TokenSegmentsToJson({}) == Json::array()); }

    SUBCASE("reusing more than the recording holds is inconsistent, naming the turn") {
      std::vector<ModelTurnRecord> bad = {Turn(0, 2, {1, 2}, 0, {3}), Turn(1, 4, {4}, 7, {5})};
      Json json = TokenSegmentsToJson(bad);
      REQUIRE(json.size() == 1);
      CHECK(json[0]["consistent"] == false);
      CHECK(json[0]["problems"][0] ==
            "turn 1: reused_tokens 7 exceeds the 3 tokens the recording holds for its context");
    }
    SUBCASE("a first turn that claims reuse is inconsistent") {
      Json json = TokenSegmentsToJson({Turn(0, 2, {1}, 4, {2})});
      CHECK(json[0]["consistent"] == false);
      CHECK(json[0]["problems"][0].get<std::string>().find("turn 0: reuses 4 tokens") != std::string::npos);
    }
    SUBCASE("prompt_tokens, logprob counts and missing ids are checked") {
      ModelTurnRecord turn = Turn(0, 2, {1, 2}, 0, {3, 4});
      turn.prompt_tokens = 5;
      turn.logprobs.pop_back();
      ModelTurnRecord textual = Turn(1, 4, {}, 0, {});  // an openai backend without token ids
      textual.prompt_tokens = 0;
      Json json = TokenSegmentsToJson({turn, textual});
      REQUIRE(json.size() == 2);
      CHECK(json[0]["consistent"] == false);
      REQUIRE(json[0]["problems"].size() == 2);
      CHECK(json[0]["problems"][0] == "turn 0: prompt_tokens 5 != reused_tokens 0 + 2 input tokens");
      CHECK(json[0]["problems"][1] == "turn 0: 1 logprobs for 2 output tokens");
      CHECK(json[0]["logprobs"] == Json::array({nullptr, nullptr, -0.25, nullptr}));
      CHECK(json[1]["consistent"] == false);
      CHECK(json[1]["problems"][0] == "turn 1: generated text without output token ids");
    }
  }

  TEST_CASE("tokens: routing and kept sets align with the ids; left out where nothing was recorded; misfits") {
    // turn 0: fresh [10 11 12] -> [20 21]; routes positions 0..3 (21 is fed by turn 1); kept sets:
    //         20 truncated to {20, 7, 8}, 21 drawn from the whole vocabulary.
    // turn 1: continues (reuses 5) with [13] -> [22 23]; routes 4..6 (21, 13, 22); both truncated.
    // turn 2: reuses only 3 (history cut) with [14] -> [24]; routes position 3 only; no kept sets.
    // turn 3: a fresh context recording nothing.
    ModelTurnRecord t0 = Turn(0, 2, {10, 11, 12}, 0, {20, 21});
    t0.routing_width = 2;
    t0.routing = PositionRouting(0, 4);
    t0.kept_vocab = 100;
    t0.kept_counts = {3, 100};
    t0.kept_ids = {20, 7, 8};
    ModelTurnRecord t1 = Turn(1, 4, {13}, 5, {22, 23});
    t1.routing_start = 4;
    t1.routing_width = 2;
    t1.routing = PositionRouting(4, 3);
    t1.kept_vocab = 100;
    t1.kept_counts = {1, 2};
    t1.kept_ids = {22, 23, 5};
    ModelTurnRecord t2 = Turn(2, 6, {14}, 3, {24});
    t2.routing_start = 3;
    t2.routing_width = 2;
    t2.routing = {99, 98};
    ModelTurnRecord t3 = Turn(3, 8, {1}, 0, {2});
    Json segments = TokenSegmentsToJson({t0, t1, t2, t3});
    REQUIRE(segments.size() == 3);

    const Json& first = segments[0];
    CHECK(first["consistent"] == true);
    CHECK(first["ids"] == Json::array({10, 11, 12, 20, 21, 13, 22, 23}));
    Json routing = Json::array();
    for (int64_t p = 0; p < 7; ++p) routing.push_back(PositionRoutingJson(p));
    routing.push_back(nullptr);
    CHECK(first["routing"] == routing);
    CHECK(first["kept"] == Json::array({nullptr, nullptr, nullptr, Json::array({20, 7, 8}), nullptr, nullptr,
                                        Json::array({22}), Json::array({23, 5})}));

    const Json& cut = segments[1];
    CHECK(cut["consistent"] == true);
    CHECK(cut["ids"] == Json::array({10, 11, 12, 14, 24}));
    CHECK(cut["prefix_of"] == Json{{"segment", 0}, {"tokens", 3}});
    // The copied prefix brings its routing; the turn adds position 3's; no turn here kept sets.
    CHECK(cut["routing"] == Json::array({PositionRoutingJson(0), PositionRoutingJson(1), PositionRoutingJson(2),
                                         Json::array({99, 98}), nullptr}));
    CHECK(!cut.contains("kept"));

    CHECK(segments[2]["consistent"] == true);
    CHECK(!segments[2].contains("routing"));
    CHECK(!segments[2].contains("kept"));

    SUBCASE("routing that is not whole positions, or reaches past the ids, is a problem naming the turn") {
      ModelTurnRecord ragged = t0;
      ragged.routing.pop_back();
      Json json = TokenSegmentsToJson({ragged});
      CHECK(json[0]["consistent"] == false);
      CHECK(json[0]["problems"][0] == "turn 0: routing holds 7 ids, not whole positions of 2");
      ModelTurnRecord beyond = t0;
      beyond.routing = PositionRouting(0, 6);
      json = TokenSegmentsToJson({beyond});
      CHECK(json[0]["problems"][0] == "turn 0: routing covers positions 0..5, outside the segment's 5 ids");
      CHECK(!json[0].contains("routing"));
    }
    SUBCASE("kept_ids that do not hold the ids kept_counts call for are a problem") {
      ModelTurnRecord few = t0;
      few.kept_ids = {20};
      Json json = TokenSegmentsToJson({few});
      CHECK(json[0]["consistent"] == false);
      CHECK(json[0]["problems"][0] == "turn 0: kept_ids holds 1 ids, kept_counts call for 3");
      ModelTurnRecord many = t0;
      many.kept_ids.push_back(1);
      CHECK(TokenSegmentsToJson({many})[0]["problems"][0] == "turn 0: kept_ids holds 4 ids, kept_counts call for 3");
    }
  }

  TEST_CASE("16 threads recording messages, model turns, events and steps: nothing dropped, every episode in order") {
    TempDir dir;
    const std::string path = dir / "traj.sqlite";
    constexpr int kThreads = 16;
    constexpr int kTurns = 150;
    std::vector<std::string> ids(kThreads);
    {
      auto store = OpenStore(path);
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
          EpisodeStart start;
          start.env_name = "env";
          start.kind = "rollout";
          start.rollout_id = "r-many";
          start.sample_index = t;
          ids[t] = store->BeginEpisode(start);
          int64_t message = 0;
          int64_t reused = 0;
          for (int turn = 0; turn < kTurns; ++turn) {
            store->RecordMessage(ids[t],
                                 MessageRecord{.index = message++, .role = "user", .content = std::to_string(turn)});
            ModelTurnRecord record = Turn(turn, message, {turn, t}, reused, {turn * 1000 + t});
            reused += 3;
            store->RecordMessage(
                ids[t],
                MessageRecord{.index = message++, .role = "assistant", .content = "answer " + std::to_string(turn)});
            store->RecordModelTurn(ids[t], record);
            store->RecordStep(ids[t], OkStep(turn, "tool", Json{{"turn", turn}}, Json(turn)));
            if (turn % 50 == 49) {
              store->RecordContextEvent(ids[t],
                                        ContextEventRecord{.seq = turn / 50, .turn = turn, .strategy = "discard75"});
            }
          }
          store->EndEpisode(ids[t], EpisodeOutcome::kMaxTurns);
        });
      }
      for (auto& thread : threads) thread.join();
      REQUIRE(store->Flush().ok());
      TrajectoryStoreStats stats = store->Stats();
      constexpr uint64_t kPerEpisode = 2 + kTurns * 4 + kTurns / 50;
      CHECK(stats.records_enqueued == kThreads * kPerEpisode);
      CHECK(stats.records_written == stats.records_enqueued);
      CHECK(stats.write_errors == 0);
      CHECK(stats.queue_depth == 0);
    }
    auto reader = TrajectoryReader::Open(path);
    REQUIRE(reader.ok());
    CHECK((*reader)->List({.rollout_id = "r-many", .limit = 0})->size() == kThreads);
    CHECK((*reader)->Count()->model_turns == kThreads * kTurns);
    for (int t = 0; t < kThreads; ++t) {
      auto episode = (*reader)->Get(ids[t]);
      REQUIRE_MESSAGE(episode.ok(), episode.status().ToString());
      CHECK(episode->summary.start.sample_index == t);
      REQUIRE(episode->messages.size() == 2 * kTurns);
      REQUIRE(episode->model_turns.size() == kTurns);
      REQUIRE(episode->context_events.size() == kTurns / 50);
      CHECK(episode->steps.size() == kTurns);
      bool in_order = true;
      for (int turn = 0; turn < kTurns; ++turn) {
        const ModelTurnRecord& record = episode->model_turns[turn];
        in_order = in_order && record.turn == turn && record.output_tokens == std::vector<int32_t>{turn * 1000 + t} &&
                   record.message_index == 2 * turn + 1 &&
                   episode->messages[2 * turn].content == std::to_string(turn) &&
                   episode->messages[2 * turn + 1].index == 2 * turn + 1;
      }
      CHECK(in_order);
      // One context grows turn by turn: a single consistent segment.
      Json tokens = TokenSegmentsToJson(episode->model_turns);
      REQUIRE(tokens.size() == 1);
      CHECK(tokens[0]["consistent"] == true);
      CHECK(tokens[0]["ids"].size() == 3 * kTurns);
    }
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::agents
