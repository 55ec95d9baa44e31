// envsynth's parts without the sandbox: the band decisions (exact and early), the run database
// (create, reopen, replace, versions), pack-problem attribution, options round trip and checks,
// environment seeds; the procedural proposer's sweep of dead runs' generator directories.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include "base/sqlite.h"
#include "envsynth/band_filter.h"
#include "envsynth/funnel.h"
#include "envsynth/procedural_proposer.h"
#include "envsynth/run_store.h"
#include "envsynth/synth_run.h"
#include "envsynth/task_validation.h"
#include "tests/temp_dir.h"

namespace envforge::envsynth {
namespace {

using testing::TempDir;

BandVerdict Decide(int64_t k, double lo, double hi, int64_t early, int64_t scored, int64_t passed) {
  BandOptions options;
  options.k = k;
  options.lo = lo;
  options.hi = hi;
  options.early_after = early;
  return DecideBand(options, scored, passed);
}

TEST_SUITE("envsynth") {
  TEST_CASE("band: the default band keeps a task at its first pass and first fail, exactly") {
    CHECK(Decide(100, 0, 1, 20, 20, 10).decision == BandDecision::kInBand);
    CHECK(Decide(100, 0, 1, 20, 2, 1).decision == BandDecision::kInBand);
    CHECK(Decide(100, 0, 1, 20, 19, 19).decision == BandDecision::kUndecided);  // all passed, before the early rule
    CHECK(Decide(100, 0, 1, 20, 40, 0).decision == BandDecision::kUndecided);   // all failed: never stopped early
    CHECK(Decide(100, 0, 1, 20, 100, 0).decision == BandDecision::kTooHard);
    CHECK(Decide(100, 0, 1, 0, 100, 100).decision == BandDecision::kTooEasy);
    CHECK_FALSE(Decide(100, 0, 1, 0, 100, 100).early);
  }

  TEST_CASE("band: the all-pass early stop is the only statistical decision, and says so") {
    BandVerdict early = Decide(100, 0, 1, 20, 20, 20);
    CHECK(early.decision == BandDecision::kTooEasy);
    CHECK(early.early);
    CHECK(Decide(100, 0, 1, 0, 60, 60).decision == BandDecision::kUndecided);  // disabled
    CHECK(Decide(100, 0, 1, 20, 20, 19).decision == BandDecision::kInBand);
  }

  TEST_CASE("band: a narrower band decides from what the rest of the episodes could still change") {
    // (0.2, 0.8) with k = 10: 3 passes of 4 played could end anywhere in [0.3, 0.9] -> undecided.
    CHECK(Decide(10, 0.2, 0.8, 0, 4, 3).decision == BandDecision::kUndecided);
    CHECK(Decide(10, 0.2, 0.8, 0, 8, 5).decision == BandDecision::kInBand);    // [0.5, 0.7]
    CHECK(Decide(10, 0.2, 0.8, 0, 8, 8).decision == BandDecision::kTooEasy);   // >= 0.8 already
    CHECK(Decide(10, 0.2, 0.8, 0, 9, 1).decision == BandDecision::kTooHard);   // at most 0.2
    CHECK(Decide(10, 0.2, 0.8, 0, 10, 2).decision == BandDecision::kTooHard);  // the edge is outside
  }

  TEST_CASE("band: options are checked and named") {
    BandOptions bad;
    bad.lo = 0.6;
    bad.hi = 0.4;
    CHECK(ValidateBandOptions(bad).message().find("0 <= lo < hi <= 1") != std::string::npos);
    bad = BandOptions{};
    bad.hi = 1.5;
    CHECK(ValidateBandOptions(bad).code() == StatusCode::kInvalidArgument);
    bad = BandOptions{};
    bad.k = 0;
    CHECK(ValidateBandOptions(bad).message().find("--k") != std::string::npos);
    CHECK(ValidateBandOptions(BandOptions{}).ok());
  }

  TEST_CASE("run store: records round-trip, a Put replaces its key, and a reopened run keeps them") {
    TempDir dir;
    const std::string path = dir / "run.sqlite";
    {
      auto store = RunStore::Create(path, Json{{"envs", 3}});
      REQUIRE(store.ok());
      EnvironmentRecord env{"logistics/0", "logistics",  0, 12345, "logistics_12345", "pending", "", "", 0,
                            1.5,           Json::array()};
      REQUIRE(store->PutEnvironment(env).ok());
      CandidateRecord c;
      c.key = "logistics/0/0/1";
      c.env_key = "logistics/0";
      c.category = "logistics";
      c.level = 1;
      c.task_id = "route_l1_0";
      c.stage = stage::kProposed;
      c.knobs = {{"constraints", 1}};
      REQUIRE(store->PutCandidate(c).ok());
      c.stage = stage::kVerified;
      c.validation = {{"passed", true}};
      REQUIRE(store->PutCandidate(c).ok());
      REQUIRE(store->AddEvent({0, 0, "logistics/0", c.key, "augment", {{"tools", {"get_route"}}}}).ok());
      CHECK(RunStore::Create(path, Json::object()).status().code() == StatusCode::kAlreadyExists);
    }
    auto reopened = RunStore::Open(path);
    REQUIRE(reopened.ok());
    CHECK(reopened->config() == Json{{"envs", 3}});
    auto candidates = reopened->Candidates();
    REQUIRE(candidates.ok());
    REQUIRE(candidates->size() == 1);
    CHECK(candidates->front().stage == "verified");
    CHECK(candidates->front().validation == Json{{"passed", true}});
    CHECK(candidates->front().knobs == Json{{"constraints", 1}});
    auto env = reopened->GetEnvironment("logistics/0");
    REQUIRE(env.ok());
    REQUIRE(env->has_value());
    CHECK((*env)->seed == 12345);
    CHECK((*env)->seconds == doctest::Approx(1.5));
    auto events = reopened->Events();
    REQUIRE(events.ok());
    REQUIRE(events->size() == 1);
    CHECK(events->front().kind == "augment");
    auto missing = reopened->GetCandidate("nope");
    REQUIRE(missing.ok());
    CHECK_FALSE(missing->has_value());
  }

  TEST_CASE("run store: another format version and a file that is not a run database are refused by name") {
    TempDir dir;
    const std::string path = dir / "run.sqlite";
    REQUIRE(RunStore::Create(path, Json::object()).ok());
    {
      auto db = Database::Open(path, Database::Mode::kReadWrite);
      REQUIRE(db.ok());
      REQUIRE(db->Exec("UPDATE run_meta SET value = '99' WHERE key = 'format_version'").ok());
    }
    auto old = RunStore::Open(path);
    CHECK(old.status().code() == StatusCode::kFailedPrecondition);
    CHECK(old.status().message().find("format version '99'") != std::string::npos);
    const std::string other = dir / "other.sqlite";
    {
      auto db = Database::Open(other, Database::Mode::kReadWriteCreate);
      REQUIRE(db.ok());
      REQUIRE(db->Exec("CREATE TABLE t (x)").ok());
    }
    CHECK(RunStore::Open(other).status().code() == StatusCode::kInvalidArgument);
    CHECK(RunStore::Open(dir / "absent.sqlite").status().code() == StatusCode::kNotFound);
  }

  TEST_CASE("run store: opened read-only (the viewer), a run is read beside its writer and never changed") {
    TempDir dir;
    const std::string path = dir / "run.sqlite";
    auto writer = RunStore::Create(path, Json{{"envs", 1}});
    REQUIRE(writer.ok());
    CandidateRecord c;
    c.key = "calendar/0/0/1";
    c.env_key = "calendar/0";
    c.category = "calendar";
    c.level = 1;
    c.stage = stage::kKept;
    REQUIRE(writer->PutCandidate(c).ok());
    auto reader = RunStore::OpenReadOnly(path);
    REQUIRE(reader.ok());
    CHECK(reader->config() == Json{{"envs", 1}});
    auto funnel = BuildFunnel(*reader);
    REQUIRE(funnel.ok());
    CHECK(funnel->totals().kept == 1);
    c.key = "calendar/0/1/1";
    CHECK_FALSE(reader->PutCandidate(c).ok());  // a reader writes nothing
    REQUIRE(writer->PutCandidate(c).ok());      // while the writer goes on
    CHECK(reader->Candidates()->size() == 2);
    // A file that is not a run database keeps its journal mode: the reader sets none.
    const std::string other = dir / "other.sqlite";
    {
      auto db = Database::Open(other, Database::Mode::kReadWriteCreate);
      REQUIRE(db.ok());
      REQUIRE(db->Exec("CREATE TABLE t (x)").ok());
    }
    CHECK(RunStore::OpenReadOnly(other).status().code() == StatusCode::kInvalidArgument);
    CHECK(RunStore::OpenReadOnly(dir / "absent.sqlite").status().code() == StatusCode::kNotFound);
    auto db = Database::Open(other, Database::Mode::kReadOnly);
    REQUIRE(db.ok());
    auto mode = db->Prepare("PRAGMA journal_mode");
    REQUIRE(mode.ok());
    auto has_row = mode->Step();
    REQUIRE((has_row.ok() && *has_row));
    CHECK(mode->ColumnText(0) == "delete");
  }

  TEST_CASE("funnel: counts by category and level, drop reasons by class, cost per kept task") {
    TempDir dir;
    auto store = RunStore::Create(dir / "run.sqlite", Json{{"envs", 1}});
    REQUIRE(store.ok());
    REQUIRE(store
                ->PutEnvironment(
                    {"calendar/0", "calendar", 0, 7, "calendar_7", "done", "", "x.envdb", 1, 10.0, Json::array()})
                .ok());
    auto put = [&](int64_t lineage, int64_t level, const char* reached, const char* dropped, Json filter) {
      CandidateRecord c;
      c.key = "calendar/0/" + std::to_string(lineage) + "/" + std::to_string(level);
      c.env_key = "calendar/0";
      c.category = "calendar";
      c.lineage = lineage;
      c.level = level;
      c.stage = reached;
      c.dropped_at = dropped;
      c.filter = std::move(filter);
      c.model_calls = 4;
      c.tokens = 100;
      REQUIRE(store->PutCandidate(c).ok());
    };
    put(0, 1, stage::kKept, "", {{"decision", "in_band"}, {"scored", 4}, {"pass_rate", 0.5}});
    put(1, 1, stage::kAudited, "filter",
        {{"decision", "too_easy"}, {"early", true}, {"scored", 4}, {"pass_rate", 1.0}});
    put(0, 2, stage::kProposed, "validation", nullptr);
    auto funnel = BuildFunnel(*store);
    REQUIRE(funnel.ok());
    REQUIRE(funnel->rows.size() == 3);  // calendar L1, calendar L2, all
    CHECK(funnel->rows[0].candidates == 2);
    CHECK(funnel->rows[0].audited == 2);
    CHECK(funnel->rows[0].in_band == 1);
    CHECK(funnel->rows[0].kept == 1);
    CHECK(funnel->rows[0].mean_pass_rate == doctest::Approx(0.75));
    CHECK(funnel->rows[0].early_stops == 1);
    CHECK(funnel->rows[1].verified == 0);
    CHECK(funnel->totals().candidates == 3);
    CHECK(funnel->drop_classes.at("filter: too_easy (early stop)") == 1);
    Json json = funnel->ToJson();
    CHECK(json["cost"]["model_calls_per_kept_task"].get<double>() == doctest::Approx(12.0));
    CHECK(json["cost"]["seconds_per_kept_task"].get<double>() == doctest::Approx(10.0));
  }

  TEST_CASE("pack problems are split by task; environment-level lines go to the empty key") {
    auto split = SplitPackProblems(
        "cannot pack /tmp/x: 4 problems\n"
        "tasks/route_l1_0/verifier.py:3: import of 'os' is not allowed\n"
        "tasks/route_l1_0/task.json:1: difficulty must be 1..5\n"
        "tools.py:10: tool 'x': *args is not allowed\n"
        "tasks/other:1: unexpected entry\n");
    CHECK(split["route_l1_0"].size() == 2);
    CHECK(split[""].size() == 1);
    CHECK(split["other"].size() == 1);
  }

  TEST_CASE("options: JSON round trip, and every bad value named") {
    SynthOptions o;
    o.categories = {"logistics", "calendar"};
    o.envs = 4;
    o.tasks_per_env = 3;
    o.out_dir = "/tmp/x";
    o.policy = "scripted:/tmp/p.jsonl";
    o.band.lo = 0.1;
    o.band.hi = 0.9;
    o.shard_index = 1;
    o.shard_count = 2;
    o.strict_tools = true;
    auto back = SynthOptions::FromJson(o.ToJson());
    REQUIRE(back.ok());
    CHECK(back->ToJson() == o.ToJson());
    CHECK(back->strict_tools);
    Json before_the_option = o.ToJson();
    before_the_option.erase("strict_tools");  // a run begun before --strict-tools
    CHECK_FALSE(SynthOptions::FromJson(before_the_option)->strict_tools);
    SynthOptions dense = o;
    dense.policy = "embedded:/tmp/model";
    dense.dense_policy = true;
    CHECK(dense.Validate().ok());
    CHECK(SynthOptions::FromJson(dense.ToJson())->dense_policy);
    before_the_option = dense.ToJson();
    before_the_option.erase("dense_policy");  // a run begun before --dense
    CHECK_FALSE(SynthOptions::FromJson(before_the_option)->dense_policy);
    SynthOptions capped = o;
    capped.max_tokens = 1000;
    capped.max_tokens_per_turn = 300;
    CHECK(capped.Validate().ok());
    CHECK(SynthOptions::FromJson(capped.ToJson())->max_tokens_per_turn == 300);
    before_the_option = capped.ToJson();
    before_the_option.erase("max_tokens_per_turn");  // a run begun before --max-tokens-per-turn
    CHECK(SynthOptions::FromJson(before_the_option)->max_tokens_per_turn == 1000);
    capped.max_tokens_per_turn = 1001;
    CHECK(capped.Validate().message().find("--max-tokens-per-turn must be 1..1000 (--max-tokens), got 1001") !=
          std::string::npos);
    dense.policy = "scripted:/tmp/p.jsonl";
    CHECK(dense.Validate().message().find("--dense applies to an embedded policy only") != std::string::npos);
    CHECK(SynthOptions::FromJson(Json{{"envs", 1}}).status().code() == StatusCode::kInvalidArgument);
    CHECK(o.Validate().ok());
    SynthOptions bad = o;
    bad.policy.clear();
    CHECK(bad.Validate().message().find("--policy") != std::string::npos);
    bad = o;
    bad.shard_index = 2;
    CHECK(bad.Validate().message().find("--shard") != std::string::npos);
    bad = o;
    bad.band.lo = 1;
    CHECK(bad.Validate().message().find("--band") != std::string::npos);
    bad = o;
    bad.categories.clear();
    CHECK(bad.Validate().code() == StatusCode::kInvalidArgument);
  }

  TEST_CASE("environment seeds: a pure function of run seed, category and index, in 1..999999999") {
    std::set<uint64_t> seen;
    for (int64_t i = 0; i < 200; ++i) {
      uint64_t seed = DeriveEnvironmentSeed(1, "logistics", i);
      CHECK(seed >= 1);
      CHECK(seed <= 999'999'999ULL);
      CHECK(seed == DeriveEnvironmentSeed(1, "logistics", i));
      seen.insert(seed);
    }
    CHECK(seen.size() == 200);
    CHECK(DeriveEnvironmentSeed(1, "logistics", 0) != DeriveEnvironmentSeed(2, "logistics", 0));
    CHECK(DeriveEnvironmentSeed(1, "logistics", 0) != DeriveEnvironmentSeed(1, "calendar", 0));
  }

  TEST_CASE("procedural proposer: the generators written out by SIGKILLed runs are swept, a live run's kept") {
    namespace fs = std::filesystem;
    // A pid no process has now: a child that has exited and been reaped.
    pid_t dead = ::fork();
    if (dead == 0) ::_exit(0);
    REQUIRE(dead > 0);
    REQUIRE(::waitpid(dead, nullptr, 0) == dead);
    const fs::path tmp = fs::temp_directory_path();
    const fs::path left = tmp / ("envforge-synth-generators-" + std::to_string(dead) + "-0");
    const fs::path alive = tmp / ("envforge-synth-generators-" + std::to_string(::getppid()) + "-7");
    fs::create_directories(left / "nested");
    fs::create_directories(alive);
    auto proposer = OpenProceduralProposer();
    REQUIRE(proposer.ok());
    CHECK_FALSE(fs::exists(left));
    CHECK(fs::exists(alive));  // its owner (this test's parent) runs
    fs::remove_all(alive);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::envsynth
