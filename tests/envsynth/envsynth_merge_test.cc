// MergeRuns (envsynth/run_merge.h) on run databases made with RunStore::Create and Put* (no
// sessions): the union of two shards and its funnel, every column copied, events in time order,
// overlaps refused or kept once, configs compared key by key, and no output or temporary file
// left by any failure.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "base/sqlite.h"
#include "envsynth/funnel.h"
#include "envsynth/run_merge.h"
#include "envsynth/run_store.h"
#include "tests/temp_dir.h"

namespace envforge::envsynth {
namespace {

using testing::TempDir;
using Rows = std::vector<std::vector<SqlValue>>;

Json Config(int64_t shard_index, int64_t shard_count, const std::string& out_dir) {
  return {{"categories", {"logistics", "calendar"}}, {"envs", 4}, {"k", 100}, {"seed", 1}, {"out_dir", out_dir},
          {"shard", {shard_index, shard_count}}};
}

EnvironmentRecord Environment(const std::string& category, int64_t index, const std::string& status) {
  EnvironmentRecord env;
  env.key = category + "/" + std::to_string(index);
  env.category = category;
  env.index = index;
  env.seed = 1000 + static_cast<uint64_t>(index);
  env.name = category + "_" + std::to_string(index);
  env.status = status;
  env.output = status == "done" ? "/envs/" + env.key + ".envdb" : "";
  env.kept_tasks = status == "done" ? 1 : 0;
  env.seconds = 2.5;
  return env;
}

CandidateRecord Candidate(const EnvironmentRecord& env, int64_t level, const char* reached, const char* dropped) {
  CandidateRecord c;
  c.key = env.key + "/0/" + std::to_string(level);
  c.env_key = env.key;
  c.category = env.category;
  c.level = level;
  c.task_id = "task_l" + std::to_string(level);
  c.artifact_hash = "hash-" + c.key;
  c.stage = reached;
  c.dropped_at = dropped;
  c.knobs = {{"level", level}};
  c.filter = {{"decision", *dropped ? "too_hard" : "in_band"}, {"scored", 4}, {"pass_rate", *dropped ? 0.0 : 0.5}};
  c.seconds = 1.25;
  c.model_calls = 4;
  c.tokens = 100;
  return c;
}

// A shard of a 4-environment run over two categories: environment i is in shard i % 2.
void MakeShard(RunStore& store, int64_t shard_index) {
  const char* category = shard_index == 0 ? "logistics" : "calendar";
  for (int64_t index = shard_index; index < 4; index += 2) {
    EnvironmentRecord env = Environment(category, index, index < 2 ? "done" : "failed");
    REQUIRE(store.PutEnvironment(env).ok());
    REQUIRE(store.PutCandidate(Candidate(env, 1, stage::kKept, "")).ok());
    REQUIRE(store.PutCandidate(Candidate(env, 2, stage::kAudited, "filter")).ok());
  }
}

Result<RunStore> CreateShard(const std::string& path, int64_t shard_index, int64_t shard_count = 2) {
  return RunStore::Create(path, Config(shard_index, shard_count, "/out/shard-" + std::to_string(shard_index)));
}

// Every column of every row of `table`, as SQLite stores them (columns the records do not know
// included), ordered by `order`.
Rows AllRows(const std::string& path, const std::string& table, const std::string& order) {
  auto db = Database::Open(path, Database::Mode::kReadOnly);
  REQUIRE(db.ok());
  auto statement = db->Prepare("SELECT * FROM " + table + " ORDER BY " + order);
  REQUIRE(statement.ok());
  Rows rows;
  while (true) {
    auto has_row = statement->Step();
    REQUIRE(has_row.ok());
    if (!*has_row) return rows;
    std::vector<SqlValue> row;
    for (int i = 0; i < statement->ColumnCount(); ++i) row.push_back(statement->Column(i));
    rows.push_back(std::move(row));
  }
}

Rows Union(Rows a, const Rows& b) {
  a.insert(a.end(), b.begin(), b.end());
  std::sort(a.begin(), a.end(),
            [](const auto& x, const auto& y) { return std::get<std::string>(x[0]) < std::get<std::string>(y[0]); });
  return a;
}

// The names in `dir` that start with `prefix` (the output, its temporary file, SQLite's files).
std::vector<std::string> FilesStartingWith(const TempDir& dir, const std::string& prefix) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0) names.push_back(name);
  }
  return names;
}

struct TwoShards {
  TempDir dir;
  std::string a = dir / "shard-0.sqlite", b = dir / "shard-1.sqlite", out = dir / "merged.sqlite";
};

TEST_SUITE("envsynth.merge") {
  TEST_CASE("two shards merge into their union: every row and column, events in time order, funnel totals summed") {
    TwoShards t;
    {
      auto a = CreateShard(t.a, 0);
      auto b = CreateShard(t.b, 1);
      REQUIRE(a.ok());
      REQUIRE(b.ok());
      MakeShard(*a, 0);
      MakeShard(*b, 1);
      // Interleaved in time across the shards: the merged log keeps that order.
      REQUIRE(a->AddEvent({0, 0, "logistics/0", "", "augment", {{"n", 1}}}).ok());
      REQUIRE(b->AddEvent({0, 0, "calendar/1", "", "repair", {{"n", 2}}}).ok());
      REQUIRE(a->AddEvent({0, 0, "logistics/2", "", "resume", {{"n", 3}}}).ok());
      REQUIRE(b->AddEvent({0, 0, "calendar/3", "calendar/3/0/1", "revalidate", {{"n", 4}}}).ok());
    }
    REQUIRE(MergeRuns({t.a, t.b}, t.out).ok());
    // The output alone: no temporary file, no journal or WAL beside it.
    CHECK(FilesStartingWith(t.dir, "merged.sqlite") == std::vector<std::string>{"merged.sqlite"});

    auto merged = RunStore::Open(t.out);
    REQUIRE(merged.ok());
    CHECK(merged->config()["shard"] == Json::array({0, 1}));
    CHECK(merged->config()["merged_from"] == Json::array({t.a, t.b}));
    CHECK(merged->config()["out_dir"] == "/out/shard-0");  // the first input's
    CHECK(merged->config()["envs"] == 4);
    auto environments = merged->Environments();
    REQUIRE(environments.ok());
    CHECK(environments->size() == 4);
    auto candidates = merged->Candidates();
    REQUIRE(candidates.ok());
    CHECK(candidates->size() == 8);

    CHECK(AllRows(t.out, "environments", "key") ==
          Union(AllRows(t.a, "environments", "key"), AllRows(t.b, "environments", "key")));
    CHECK(AllRows(t.out, "candidates", "key") ==
          Union(AllRows(t.a, "candidates", "key"), AllRows(t.b, "candidates", "key")));

    auto events = merged->Events();
    REQUIRE(events.ok());
    REQUIRE(events->size() == 4);
    for (int64_t i = 0; i < 4; ++i) {
      CHECK((*events)[i].id == i + 1);
      CHECK((*events)[i].detail["n"] == i + 1);
    }
    CHECK((*events)[3].candidate_key == "calendar/3/0/1");
    CHECK((*events)[3].kind == "revalidate");

    auto shard_a = RunStore::Open(t.a);
    auto shard_b = RunStore::Open(t.b);
    REQUIRE(shard_a.ok());
    REQUIRE(shard_b.ok());
    auto fa = BuildFunnel(*shard_a), fb = BuildFunnel(*shard_b), fm = BuildFunnel(*merged);
    REQUIRE(fa.ok());
    REQUIRE(fb.ok());
    REQUIRE(fm.ok());
    CHECK(fm->totals().candidates == fa->totals().candidates + fb->totals().candidates);
    CHECK(fm->totals().audited == fa->totals().audited + fb->totals().audited);
    CHECK(fm->totals().kept == fa->totals().kept + fb->totals().kept);
    CHECK(fm->envs_done == fa->envs_done + fb->envs_done);
    CHECK(fm->envs_failed == fa->envs_failed + fb->envs_failed);
    CHECK(fm->envs_pending == 0);
    CHECK(fm->model_calls == fa->model_calls + fb->model_calls);
    CHECK(fm->tokens == fa->tokens + fb->tokens);
    CHECK(fm->seconds == doctest::Approx(fa->seconds + fb->seconds));
    CHECK(fm->dropped.size() == fa->dropped.size() + fb->dropped.size());
  }

  TEST_CASE("a merged run merges again, and one input alone gives a copy of it") {
    TwoShards t;
    {
      auto a = CreateShard(t.a, 0);
      auto b = CreateShard(t.b, 1);
      REQUIRE(a.ok());
      REQUIRE(b.ok());
      MakeShard(*a, 0);
      MakeShard(*b, 1);
    }
    const std::string only_a = t.dir / "only-a.sqlite";
    REQUIRE(MergeRuns({t.a}, only_a).ok());
    CHECK(AllRows(only_a, "candidates", "key") == AllRows(t.a, "candidates", "key"));
    const std::string again = t.dir / "again.sqlite";
    REQUIRE(MergeRuns({only_a, t.b}, again).ok());  // "merged_from" and "shard" differ: allowed
    CHECK(AllRows(again, "environments", "key") ==
          Union(AllRows(t.a, "environments", "key"), AllRows(t.b, "environments", "key")));
  }

  TEST_CASE(
      "a key in two inputs with different rows is refused, naming the key and both files, and nothing is written") {
    TwoShards t;
    {
      auto a = CreateShard(t.a, 0);
      auto b = CreateShard(t.b, 1);
      REQUIRE(a.ok());
      REQUIRE(b.ok());
      MakeShard(*a, 0);
      MakeShard(*b, 1);
      SUBCASE("environment") {
        EnvironmentRecord clash = Environment("logistics", 0, "failed");
        REQUIRE(b->PutEnvironment(clash).ok());
      }
      SUBCASE("candidate") {
        CandidateRecord clash = Candidate(Environment("logistics", 0, "done"), 1, stage::kKept, "");
        clash.tokens = 101;
        REQUIRE(b->PutCandidate(clash).ok());
      }
    }
    Status merged = MergeRuns({t.a, t.b}, t.out);
    CHECK(merged.code() == StatusCode::kInvalidArgument);
    CHECK(merged.message().find("'logistics/0") != std::string::npos);
    CHECK(merged.message().find(t.a) != std::string::npos);
    CHECK(merged.message().find(t.b) != std::string::npos);
    CHECK(FilesStartingWith(t.dir, "merged.sqlite").empty());  // neither the output nor its temporary file
  }

  TEST_CASE("rows identical in every column are kept once, events included") {
    TwoShards t;
    {
      auto a = CreateShard(t.a, 0);
      auto b = CreateShard(t.b, 1);
      REQUIRE(a.ok());
      REQUIRE(b.ok());
      MakeShard(*a, 0);
      MakeShard(*b, 1);
      REQUIRE(a->AddEvent({0, 0, "logistics/0", "", "augment", Json::object()}).ok());
      REQUIRE(b->PutEnvironment(Environment("logistics", 0, "done")).ok());  // the same row as shard 0's
      REQUIRE(b->PutCandidate(Candidate(Environment("logistics", 0, "done"), 1, stage::kKept, "")).ok());
    }
    const std::string copy = t.dir / "shard-0-copy.sqlite";
    std::filesystem::copy_file(t.a, copy);  // the same file twice over: every row and event identical
    REQUIRE(MergeRuns({t.a, t.b, copy}, t.out).ok());
    auto merged = RunStore::Open(t.out);
    REQUIRE(merged.ok());
    auto environments = merged->Environments();
    auto candidates = merged->Candidates();
    auto events = merged->Events();
    REQUIRE(environments.ok());
    REQUIRE(candidates.ok());
    REQUIRE(events.ok());
    CHECK(environments->size() == 4);
    CHECK(candidates->size() == 8);
    CHECK(events->size() == 1);
  }

  TEST_CASE("configs that differ in a key other than shard and out_dir are refused, naming the key and both files") {
    TwoShards t;
    Json other = Config(1, 2, "/elsewhere");
    other["k"] = 50;
    REQUIRE(CreateShard(t.a, 0).ok());
    REQUIRE(RunStore::Create(t.b, other).ok());
    Status merged = MergeRuns({t.a, t.b}, t.out);
    CHECK(merged.code() == StatusCode::kInvalidArgument);
    CHECK(merged.message().find("'k'") != std::string::npos);
    CHECK(merged.message().find(t.a) != std::string::npos);
    CHECK(merged.message().find(t.b) != std::string::npos);
    CHECK(FilesStartingWith(t.dir, "merged.sqlite").empty());

    const std::string missing_key = t.dir / "missing-key.sqlite";
    Json fewer = Config(1, 2, "/elsewhere");
    fewer.erase("seed");
    REQUIRE(RunStore::Create(missing_key, fewer).ok());
    CHECK(MergeRuns({t.a, missing_key}, t.out).message().find("'seed'") != std::string::npos);
  }

  TEST_CASE("an existing output is refused and left untouched") {
    TwoShards t;
    REQUIRE(CreateShard(t.a, 0).ok());
    { std::ofstream(t.out) << "keep me"; }
    Status merged = MergeRuns({t.a}, t.out);
    CHECK(merged.code() == StatusCode::kAlreadyExists);
    std::ifstream in(t.out);
    CHECK(std::string(std::istreambuf_iterator<char>(in), {}) == "keep me");
    CHECK(FilesStartingWith(t.dir, "merged.sqlite") == std::vector<std::string>{"merged.sqlite"});
  }

  TEST_CASE("bad inputs are refused by code, and none leaves an output or a temporary file") {
    TwoShards t;
    REQUIRE(CreateShard(t.a, 0).ok());
    CHECK(MergeRuns({}, t.out).code() == StatusCode::kInvalidArgument);
    CHECK(MergeRuns({t.a, t.dir / "absent.sqlite"}, t.out).code() == StatusCode::kNotFound);
    CHECK(MergeRuns({t.a}, t.dir / "no-such-dir/merged.sqlite").code() == StatusCode::kNotFound);
    {
      auto db = Database::Open(t.b, Database::Mode::kReadWriteCreate);
      REQUIRE(db.ok());
      REQUIRE(db->Exec("CREATE TABLE t (x)").ok());
    }
    CHECK(MergeRuns({t.a, t.b}, t.out).code() == StatusCode::kInvalidArgument);  // not a run database
    const std::string old = t.dir / "old.sqlite";
    REQUIRE(CreateShard(old, 1).ok());
    {
      auto db = Database::Open(old, Database::Mode::kReadWrite);
      REQUIRE(db.ok());
      REQUIRE(db->Exec("UPDATE run_meta SET value = '99' WHERE key = 'format_version'").ok());
    }
    CHECK(MergeRuns({t.a, old}, t.out).code() == StatusCode::kFailedPrecondition);
    CHECK(FilesStartingWith(t.dir, "merged.sqlite").empty());
  }

  TEST_CASE("a table or column this envforge does not know is refused by name, after the copy had started") {
    TwoShards t;
    {
      auto a = CreateShard(t.a, 0);
      auto b = CreateShard(t.b, 1);
      REQUIRE(a.ok());
      REQUIRE(b.ok());
      MakeShard(*a, 0);
      MakeShard(*b, 1);
    }
    auto db = Database::Open(t.b, Database::Mode::kReadWrite);
    REQUIRE(db.ok());
    SUBCASE("column") {
      REQUIRE(db->Exec("ALTER TABLE candidates ADD COLUMN future TEXT").ok());
      Status merged = MergeRuns({t.a, t.b}, t.out);
      CHECK(merged.code() == StatusCode::kFailedPrecondition);
      CHECK(merged.message().find("candidates.future") != std::string::npos);
    }
    SUBCASE("table") {
      REQUIRE(db->Exec("CREATE TABLE future (x)").ok());
      Status merged = MergeRuns({t.a, t.b}, t.out);
      CHECK(merged.code() == StatusCode::kFailedPrecondition);
      CHECK(merged.message().find("'future'") != std::string::npos);
    }
    CHECK(FilesStartingWith(t.dir, "merged.sqlite").empty());
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::envsynth
