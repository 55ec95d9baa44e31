// EnvBundle::Load on real files: good ones, and every kind of damage the header promises to catch.
#include <sys/stat.h>

#include "tests/sandbox/bundle_test_util.h"
#include "toolsets/tool_protocol.h"

namespace envforge::sandbox {
namespace {

using namespace testing;

// One packed mini bundle per test binary; tests copy it before damaging it.
const std::string& PackedMini() {
  static ScratchDir dir;  // removed at exit
  static const std::string path = [] {
    std::string output = dir / "mini.envdb";
    Status status = Pack(FixtureEnv("mini").string(), output);
    REQUIRE_MESSAGE(status.ok(), status.ToString());
    return output;
  }();
  return path;
}

std::string CopyOfMini(const ScratchDir& dir, const std::string& name = "copy.envdb") {
  std::string path = dir / name;
  fs::copy_file(PackedMini(), path);
  return path;
}

// Loads `path`, expecting `code` and a message that names the file and contains `expected`.
void ExpectLoadError(const std::string& path, StatusCode code, const std::string& expected) {
  auto bundle = EnvBundle::Load(path);
  REQUIRE_FALSE(bundle.ok());
  INFO(bundle.status().ToString());
  CHECK(bundle.status().code() == code);
  CHECK(bundle.status().message().starts_with(path + ": "));
  CHECK(Contains(bundle.status().message(), expected));
}

TEST_SUITE("sandbox.bundle.load") {
  TEST_CASE("FindTask, FindTool and ToJson describe the loaded bundle") {
    auto bundle = EnvBundle::Load(PackedMini());
    REQUIRE_MESSAGE(bundle.ok(), bundle.status().ToString());
    CHECK(bundle->path == PackedMini());
    REQUIRE(bundle->FindTask("count_books") != nullptr);
    CHECK(bundle->FindTask("count_books")->difficulty == 2);
    CHECK(bundle->FindTask("nope") == nullptr);
    CHECK(bundle->FindTask("") == nullptr);
    REQUIRE(bundle->FindTool("get_book") != nullptr);
    CHECK(bundle->FindTool("get_book")->spec.input_schema["properties"]["fields"]["default"] == Json::array({"year"}));
    CHECK(bundle->FindTool("submit_result")->builtin);
    CHECK(bundle->FindTool("nope") == nullptr);

    Json json = bundle->ToJson();
    CHECK(json["hash"] == bundle->manifest.content_hash);
    CHECK(json["manifest"]["name"] == "mini_library");
    CHECK(json["manifest"]["kind"] == "general");
    CHECK(json["manifest"]["format_version"] == 1);
    CHECK(json["manifest"]["content_hash"] == bundle->manifest.content_hash);
    CHECK(json["manifest"]["provenance"]["generator"] == "hand-written");
    REQUIRE(json["tools"].size() == 3);
    CHECK(json["tools"][0] == toolsets::ToJson(bundle->tools[0].spec));
    CHECK(json["tools"][2]["name"] == "submit_result");
    REQUIRE(json["tasks"].size() == 2);
    const Json& task = json["tasks"][1];
    CHECK(task["id"] == "oldest_book");
    CHECK(task["has_oracle"] == true);
    CHECK(json["tasks"][0]["has_oracle"] == false);
    CHECK(task["version"] == bundle->FindTask("oldest_book")->version);
    CHECK(task["difficulty"] == 1);
    CHECK(task["knobs"] == Json{{"author", "Alan Turing"}});
    CHECK(task["answer_schema"]["type"] == "object");
    CHECK(Contains(task["prompt"].get<std::string>(), "oldest book"));
    CHECK_FALSE(task.contains("solution_source"));  // sources stay out of listings
  }

  TEST_CASE("Load opens read-only and never modifies the file") {
    ScratchDir dir;
    std::string path = CopyOfMini(dir);
    REQUIRE(::chmod(path.c_str(), 0444) == 0);
    struct stat before {};
    REQUIRE(::stat(path.c_str(), &before) == 0);
    std::string bytes = ReadFile(path);
    for (int i = 0; i < 2; ++i) REQUIRE(EnvBundle::Load(path).ok());
    REQUIRE(ComputeContentHash(path).ok());
    struct stat after {};
    REQUIRE(::stat(path.c_str(), &after) == 0);
    CHECK(ReadFile(path) == bytes);
    CHECK(after.st_mtim.tv_sec == before.st_mtim.tv_sec);
    CHECK(after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
    CHECK(ListDir(dir.path()) == std::vector<std::string>{"copy.envdb"});  // no journal, no -wal/-shm
  }

  TEST_CASE("files that are not bundles: missing, empty, not SQLite, truncated, WAL mode") {
    ScratchDir dir;
    ExpectLoadError(dir / "missing.envdb", StatusCode::kNotFound, "no such file");

    WriteFile(dir / "empty.envdb", "");
    ExpectLoadError(dir / "empty.envdb", StatusCode::kInvalidArgument, "empty file");

    WriteFile(dir / "text.envdb", "name,kind\ntrip,general\n");
    ExpectLoadError(dir / "text.envdb", StatusCode::kInvalidArgument, "not a SQLite database");

    std::string whole = ReadFile(PackedMini());
    REQUIRE(whole.size() >= 8192);
    WriteFile(dir / "half.envdb", whole.substr(0, whole.size() / 2));
    ExpectLoadError(dir / "half.envdb", StatusCode::kDataLoss, "truncated");
    WriteFile(dir / "header.envdb", whole.substr(0, 60));
    ExpectLoadError(dir / "header.envdb", StatusCode::kDataLoss, "truncated");
    WriteFile(dir / "ragged.envdb", whole + "xyz");
    ExpectLoadError(dir / "ragged.envdb", StatusCode::kDataLoss, "not a whole number");

    std::string corrupt = whole;
    for (size_t i = 4096; i < corrupt.size(); i += 97) corrupt[i] = static_cast<char>(corrupt[i] ^ 0x5a);
    WriteFile(dir / "corrupt.envdb", corrupt);
    auto loaded = EnvBundle::Load(dir / "corrupt.envdb");
    REQUIRE_FALSE(loaded.ok());
    CHECK(loaded.status().code() == StatusCode::kDataLoss);
    CHECK(loaded.status().message().starts_with(dir / "corrupt.envdb: "));

    std::string wal = CopyOfMini(dir, "wal.envdb");
    ExecOn(wal, "PRAGMA journal_mode = WAL");
    ExpectLoadError(wal, StatusCode::kInvalidArgument, "WAL mode");
  }

  TEST_CASE("missing reserved tables, columns and _env keys are reported by name") {
    ScratchDir dir;
    struct Case {
      const char* sql;
      StatusCode code;
      const char* expected;
    } cases[] = {
        {"DROP TABLE _files", StatusCode::kDataLoss, "missing reserved table _files"},
        {"DROP TABLE _env", StatusCode::kDataLoss, "missing reserved table _env"},
        {"ALTER TABLE _tasks DROP COLUMN audit", StatusCode::kDataLoss, "reserved table _tasks lacks column 'audit'"},
        {"ALTER TABLE _tools RENAME COLUMN builtin TO built_in", StatusCode::kDataLoss,
         "reserved table _tools lacks column 'builtin'"},
        {"DELETE FROM _env WHERE key = 'tools_module'", StatusCode::kDataLoss, "_env lacks key 'tools_module'"},
        {"DELETE FROM _env WHERE key = 'format_version'", StatusCode::kDataLoss, "_env lacks key 'format_version'"},
        {"UPDATE _env SET value = '2' WHERE key = 'format_version'", StatusCode::kInvalidArgument,
         "unsupported format_version '2' (this build reads 1)"},
        {"UPDATE _env SET value = 'cooking' WHERE key = 'kind'", StatusCode::kInvalidArgument, "_env kind 'cooking'"},
        {"UPDATE _env SET value = 'abc' WHERE key = 'content_hash'", StatusCode::kDataLoss,
         "is not a SHA-256 hex digest"},
        {"DELETE FROM _tools WHERE name = 'submit_result'", StatusCode::kDataLoss, "lacks the builtin submit_result"},
        {"UPDATE _tools SET builtin = 1 WHERE name = 'get_book'", StatusCode::kInvalidArgument,
         "_tools[get_book] is marked builtin"},
        {"UPDATE _tools SET position = 0", StatusCode::kDataLoss, "position 0 is used twice"},
        {"UPDATE _tasks SET difficulty = 'hard'", StatusCode::kDataLoss,
         "_tasks[count_books].difficulty is not an integer"},
        {"UPDATE _tasks SET prompt = NULL WHERE id = 'oldest_book'", StatusCode::kDataLoss,
         "_tasks[oldest_book].prompt is not text"},
    };
    for (const Case& c : cases) {
      CAPTURE(c.sql);
      std::string path = CopyOfMini(dir, "damaged.envdb");
      // NOT NULL constraints would refuse some damage; a hostile writer is not bound by them.
      if (Contains(c.sql, "prompt = NULL")) {
        ExecOn(path,
               "PRAGMA writable_schema = ON; UPDATE sqlite_schema SET sql = replace(sql, 'prompt TEXT NOT NULL', "
               "'prompt TEXT') WHERE name = '_tasks'");
      }
      ExecOn(path, c.sql);
      ExpectLoadError(path, c.code, c.expected);
      fs::remove(path);
    }
  }

  TEST_CASE("invalid JSON in a column names the table, row and column") {
    ScratchDir dir;
    struct Case {
      const char* sql;
      const char* expected;
    } cases[] = {
        {"UPDATE _tasks SET knobs = '{not json' WHERE id = 'count_books'",
         "_tasks[count_books].knobs is not valid JSON"},
        {"UPDATE _tasks SET answer_schema = '[1]' WHERE id = 'oldest_book'",
         "_tasks[oldest_book].answer_schema is not a JSON object"},
        {"UPDATE _tasks SET audit = 'nope' WHERE id = 'oldest_book'", "_tasks[oldest_book].audit is not valid JSON"},
        {"UPDATE _tasks SET passk = '{' WHERE id = 'oldest_book'", "_tasks[oldest_book].passk is not valid JSON"},
        {"UPDATE _tools SET input_schema = '{\"type\": ' WHERE name = 'list_books'",
         "_tools[list_books].input_schema is not valid JSON"},
        {"UPDATE _env SET value = 'generator=me' WHERE key = 'provenance'", "_env provenance is not valid JSON"},
    };
    for (const Case& c : cases) {
      CAPTURE(c.sql);
      std::string path = CopyOfMini(dir, "damaged.envdb");
      ExecOn(path, c.sql);
      ExpectLoadError(path, StatusCode::kDataLoss, c.expected);
      fs::remove(path);
    }
  }

  TEST_CASE("a tampered data row, tool, task or file is a content hash mismatch") {
    ScratchDir dir;
    auto original = EnvBundle::Load(PackedMini()).value();
    const char* tampering[] = {
        "UPDATE books SET price = 1.0 WHERE id = 1",
        "INSERT INTO authors VALUES ('Grace Hopper', 1906)",
        "UPDATE _tools SET description = 'Lists books.' WHERE name = 'list_books'",
        "UPDATE _tasks SET oracle_source = NULL",
        "UPDATE _files SET data = X'00' WHERE path = 'cover.bin'",
        "UPDATE _env SET value = 'renamed' WHERE key = 'name'",
        "CREATE TABLE extra(x)",
    };
    for (const char* sql : tampering) {
      CAPTURE(sql);
      std::string path = CopyOfMini(dir, "tampered.envdb");
      ExecOn(path, sql);
      std::string computed = ComputeContentHash(path).value();
      CHECK(computed != original.manifest.content_hash);
      ExpectLoadError(path, StatusCode::kDataLoss,
                      "content hash mismatch: recorded " + original.manifest.content_hash + ", computed " + computed);
      fs::remove(path);
    }

    std::string path = CopyOfMini(dir, "version.envdb");
    ExecOn(path, "UPDATE _tasks SET version = 'x' WHERE id = 'count_books'");
    ExpectLoadError(path, StatusCode::kDataLoss, "task 'count_books' version mismatch: recorded x, computed ");
  }

  TEST_CASE("ComputeContentHash names the file in its errors") {
    ScratchDir dir;
    auto missing = ComputeContentHash(dir / "missing.envdb");
    CHECK(missing.status().code() == StatusCode::kNotFound);
    CHECK(missing.status().message().starts_with(dir / "missing.envdb: "));
    std::string path = CopyOfMini(dir);
    ExecOn(path, "DROP TABLE _tools");
    auto damaged = ComputeContentHash(path);
    CHECK(damaged.status().code() == StatusCode::kDataLoss);
    CHECK(Contains(damaged.status().message(), path + ": missing reserved table _tools"));
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::sandbox
