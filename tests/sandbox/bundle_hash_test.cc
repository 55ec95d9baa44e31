// Content hashes and task versions: deterministic, and moved by every change of content.
#include "tests/sandbox/bundle_test_util.h"

namespace envforge::sandbox {
namespace {

using namespace testing;

TEST_SUITE("sandbox.bundle.hash") {
  TEST_CASE("packing the same sources twice, from two places, gives the same hash and versions") {
    ScratchDir dir;
    EnvBundle first = PackAndLoad(FixtureEnv("mini").string(), dir / "a.envdb");
    std::string copy = CopyFixture(dir, "mini");
    EnvBundle second = PackAndLoad(copy, dir / "b.envdb");
    CHECK(first.manifest.content_hash == second.manifest.content_hash);
    CHECK(first.manifest.provenance["source_dir"] != second.manifest.provenance["source_dir"]);
    REQUIRE(first.tasks.size() == second.tasks.size());
    for (size_t i = 0; i < first.tasks.size(); ++i) CHECK(first.tasks[i].version == second.tasks[i].version);
    CHECK(ComputeContentHash(dir / "a.envdb").value() == first.manifest.content_hash);
  }

  TEST_CASE("changing a data row, a tool, a prompt, a verifier, a file or provenance changes the hash") {
    ScratchDir dir;
    std::string source = CopyFixture(dir, "mini");
    EnvBundle base = PackAndLoad(source, dir / "base.envdb");
    const TaskRecord& base_task = *base.FindTask("oldest_book");

    struct Case {
      const char* what;
      std::string file;
      std::string from;
      std::string to;
      bool task_version_moves;  // oldest_book's version, beyond the hash it includes
    } cases[] = {
        {"one data value", "schema.sql", "1843, 9.5", "1843, 9.75", false},
        {"a REAL that becomes an INTEGER", "schema.sql", "1843, 9.5", "1843, 9", false},
        {"one tool's description", "tools.py", "oldest first.", "oldest first!", false},
        {"a prompt", "tasks/oldest_book/task.json", "oldest book", "earliest book", true},
        {"a verifier", "tasks/oldest_book/verifier.py", "LIMIT 1", "LIMIT  1", true},
        {"a solution", "tasks/oldest_book/solution.py", "[0]", "[-0]", true},
        {"an oracle", "tasks/oldest_book/oracle.py", "not the oldest", "not oldest", false},
        {"knobs", "tasks/count_books/task.json", "\"knobs\": {}", "\"knobs\": {\"k\": 1}", false},
        {"a difficulty", "tasks/count_books/task.json", "\"difficulty\": 2", "\"difficulty\": 3", false},
        {"a file in files/", "files/notes/about.txt", "fixture", "Fixture", false},
        {"the schema", "schema.sql", "CREATE INDEX books_by_author ON books(author);", "", false},
        {"provenance", "env.json", "\"seed\": 0", "\"seed\": 1", false},
        {"the description", "env.json", "A tiny", "A small", false},
    };
    std::set<std::string> hashes = {base.manifest.content_hash};
    for (const Case& c : cases) {
      CAPTURE(c.what);
      std::string path = source + "/" + c.file;
      std::string original = ReadFile(path);
      EditFile(path, c.from, c.to);
      EnvBundle changed = PackAndLoad(source, dir / "changed.envdb");
      WriteFile(path, original);
      CHECK(changed.manifest.content_hash != base.manifest.content_hash);
      CHECK(hashes.insert(changed.manifest.content_hash).second);  // and differs from every other change
      const TaskRecord& task = *changed.FindTask("oldest_book");
      CHECK(task.version != base_task.version);  // the environment hash is part of every version
      TaskRecord same_env = base_task;
      CHECK((TaskVersion(changed.manifest.content_hash, task) !=
             TaskVersion(changed.manifest.content_hash, same_env)) == c.task_version_moves);
    }
    // Back to the original sources: back to the original hash.
    CHECK(PackAndLoad(source, dir / "again.envdb").manifest.content_hash == base.manifest.content_hash);
  }

  TEST_CASE("passk and audit, filled in by later stages, are outside the hash") {
    ScratchDir dir;
    std::string output = dir / "mini.envdb";
    EnvBundle base = PackAndLoad(FixtureEnv("mini").string(), output);
    ExecOn(output, "UPDATE _tasks SET passk = '{\"k\": 8, \"passed\": 3}', audit = '{\"false_accept\": 0}'");
    auto loaded = EnvBundle::Load(output);
    REQUIRE_MESSAGE(loaded.ok(), loaded.status().ToString());
    CHECK(loaded->manifest.content_hash == base.manifest.content_hash);
    CHECK(loaded->FindTask("oldest_book")->audit == Json{{"false_accept", 0}});
  }

  TEST_CASE("task versions hash the environment hash, prompt, solution and verifier as separate fields") {
    TaskRecord a;
    a.prompt = "ab";
    a.solution_source = "c";
    a.verifier_source = "d";
    TaskRecord b = a;
    b.prompt = "a";
    b.solution_source = "bc";
    std::string hash(64, '0');
    CHECK(TaskVersion(hash, a).size() == 64);
    CHECK(TaskVersion(hash, a) == TaskVersion(hash, a));
    CHECK(TaskVersion(hash, a) != TaskVersion(hash, b));
    CHECK(TaskVersion(hash, a) != TaskVersion(std::string(64, '1'), a));
    TaskRecord c = a;
    c.oracle_source = "other";
    c.knobs = {{"x", 1}};
    CHECK(TaskVersion(hash, a) == TaskVersion(hash, c));  // as documented: oracle and knobs are not in it
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::sandbox
