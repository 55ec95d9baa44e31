// PackEnvironment: what a good source directory becomes, every problem a bad one reports, and
// that a failed pack leaves nothing behind.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include <set>

#include "tests/sandbox/bundle_test_util.h"
#include "toolsets/tool_protocol.h"

namespace envforge::sandbox {
namespace {

using namespace testing;

TEST_SUITE("sandbox.bundle.pack") {
  TEST_CASE("a good source directory becomes a bundle holding its data, tools, tasks and files") {
    ScratchDir dir;
    PackOptions options;
    options.provenance = {{"model", "scripted"}, {"seed", 42}};
    EnvBundle bundle = PackAndLoad(FixtureEnv("mini").string(), dir / "mini.envdb", options);

    CHECK(bundle.manifest.name == "mini_library");
    CHECK(bundle.manifest.kind == "general");
    CHECK(bundle.manifest.category == "library catalogue");
    CHECK(bundle.manifest.format_version == 1);
    CHECK(bundle.manifest.provenance["generator"] == "hand-written");  // from env.json
    CHECK(bundle.manifest.provenance["seed"] == 42);                   // the option wins
    CHECK(bundle.manifest.provenance["model"] == "scripted");
    CHECK(bundle.manifest.provenance["source_dir"] == fs::absolute(FixtureEnv("mini")).lexically_normal().string());
    CHECK(bundle.manifest.content_hash.size() == 64);
    CHECK(bundle.tools_module == ReadFile((FixtureEnv("mini") / "tools.py").string()));

    // Tools in source order, then the runtime's submit_result.
    REQUIRE(bundle.tools.size() == 3);
    CHECK(bundle.tools[0].spec.name == "list_books");
    CHECK(bundle.tools[1].spec.name == "get_book");
    CHECK(bundle.tools[2].spec.name == toolsets::kSubmitResultTool);
    CHECK_FALSE(bundle.tools[0].builtin);
    CHECK(bundle.tools[2].builtin);
    CHECK(bundle.tools[2].spec.input_schema == toolsets::SubmitResultSpec().input_schema);
    CHECK(bundle.tools[0].spec.description == "List the titles of an author's books, oldest first.");
    CHECK(bundle.tools[0].spec.input_schema["required"] == Json::array({"author"}));
    CHECK(Contains(bundle.tools[1].source, "def get_book("));

    // Tasks sorted by id, with their sources and versions.
    REQUIRE(bundle.tasks.size() == 2);
    CHECK(bundle.tasks[0].id == "count_books");
    CHECK(bundle.tasks[1].id == "oldest_book");
    const TaskRecord& oldest = bundle.tasks[1];
    CHECK(oldest.difficulty == 1);
    CHECK(oldest.knobs == Json{{"author", "Alan Turing"}});
    CHECK(oldest.answer_schema["required"] == Json::array({"title"}));
    CHECK(oldest.solution_source == ReadFile((FixtureEnv("mini") / "tasks/oldest_book/solution.py").string()));
    CHECK(oldest.verifier_source == ReadFile((FixtureEnv("mini") / "tasks/oldest_book/verifier.py").string()));
    CHECK(Contains(oldest.oracle_source, "def verify(answer, db)"));
    CHECK(bundle.tasks[0].oracle_source.empty());
    CHECK(oldest.version == TaskVersion(bundle.manifest.content_hash, oldest));
    CHECK(oldest.audit.is_null());

    // Data tables and blobs as schema.sql and files/ had them; reserved tables as documented.
    auto db = Database::Open(dir / "mini.envdb", Database::Mode::kReadOnly).value();
    auto books = db.Prepare("SELECT count(*), sum(price) FROM books").value();
    REQUIRE(books.Step().value());
    CHECK(books.ColumnInt(0) == 3);
    CHECK(books.ColumnDouble(1) == doctest::Approx(21.75));
    auto files = db.Prepare("SELECT path, data FROM _files ORDER BY path").value();
    REQUIRE(files.Step().value());
    CHECK(files.ColumnText(0) == "cover.bin");
    CHECK(std::get<std::vector<uint8_t>>(files.Column(1)).size() == 12);
    REQUIRE(files.Step().value());
    CHECK(files.ColumnText(0) == "notes/about.txt");
    CHECK_FALSE(files.Step().value());
    auto passk = db.Prepare("SELECT count(*) FROM _tasks WHERE passk IS NULL AND audit IS NULL").value();
    REQUIRE(passk.Step().value());
    CHECK(passk.ColumnInt(0) == 2);
    auto journal = db.Prepare("PRAGMA journal_mode").value();
    REQUIRE(journal.Step().value());
    CHECK(journal.ColumnText(0) == "delete");
  }

  TEST_CASE("every problem of a broken source directory is reported at once, as path:line: message") {
    ScratchDir dir;
    Status status = Pack(FixtureEnv("broken_many").string(), dir / "broken.envdb");
    REQUIRE_FALSE(status.ok());
    CHECK(status.code() == StatusCode::kInvalidArgument);
    const std::string& message = status.message();
    INFO(message);
    CHECK(Contains(message, "8 problems"));
    CHECK(Contains(message, "env.json:3: kind 'spreadsheet' is not one of general, code, search, interpreter"));
    CHECK(Contains(message, "env.json:6: unknown key 'version'"));
    CHECK(Contains(message, "tasks/bad_spec/task.json:3: answer_schema: "));
    CHECK(Contains(message, "pattern"));
    CHECK(Contains(message, "tasks/bad_spec/task.json:4: 'difficulty' must be an integer from 1 to 5, got 9"));
    CHECK(Contains(message, "tasks/bad_spec/task.json:5: 'knobs' must be a JSON object"));
    CHECK(Contains(message, "tasks/bad_spec/verifier.py: missing"));
    CHECK(Contains(message, "tasks/escapes/verifier.py:1: import of 'os' is not allowed"));
    CHECK(Contains(message, "tools.py:13: tool 'undocumented' has no docstring"));
    CHECK(ListDir(dir.path()).empty());
  }

  TEST_CASE("task.json and env.json fields are checked one by one") {
    ScratchDir dir;
    std::string source = CopyFixture(dir, "mini");
    std::string task_json = source + "/tasks/count_books/task.json";
    struct Case {
      const char* file;
      const char* from;
      const char* to;
      const char* expected;
    } cases[] = {
        {"task", "\"difficulty\": 2", "\"difficulty\": 2.5",
         "task.json:8: 'difficulty' must be an integer from 1 to 5, got 2.5"},
        {"task", "\"difficulty\": 2", "\"difficulty\": 0", "'difficulty' must be an integer from 1 to 5, got 0"},
        {"task", "\"difficulty\": 2", "\"difficulty\": \"2\"",
         "'difficulty' must be an integer from 1 to 5, got \"2\""},
        {"task", "\"prompt\": \"How many", "\"prompt\": \"   \", \"x\": \"",
         "task.json:2: 'prompt' must be a non-empty string"},
        {"task", "\"prompt\": \"How many", "\"notes\": 1, \"prompt\": \"How", "task.json:2: unknown key 'notes'"},
        {"task", "\"knobs\": {}", "\"extra\": {}", "missing required field 'knobs'"},
        {"task", "\"answer_schema\": {", "\"answer_schema\": 7, \"unused\": {",
         "task.json:3: 'answer_schema' must be a JSON Schema object"},
        {"task", "\"required\": [\"count\"]", "\"required\": \"count\"", "task.json:3: answer_schema: "},
        {"task", "\"knobs\": {}\n}", "\"knobs\": {}\n", "invalid JSON"},
        {"env", "\"kind\": \"general\"", "\"kind\": 3", "env.json:3: 'kind' must be a string"},
        {"env", "\"name\": \"mini_library\"", "\"name\": \"mini library\"",
         "env.json:2: name 'mini library' must match [A-Za-z0-9_.-]+"},
        {"env", "\"category\": \"library catalogue\",", "", "env.json: missing required string field 'category'"},
        {"env", "\"provenance\": {\"generator\": \"hand-written\", \"seed\": 0}", "\"provenance\": []",
         "env.json:6: 'provenance' must be a JSON object"},
    };
    std::string original_task = ReadFile(task_json);
    std::string original_env = ReadFile(source + "/env.json");
    for (const Case& c : cases) {
      CAPTURE(c.expected);
      WriteFile(task_json, original_task);
      WriteFile(source + "/env.json", original_env);
      EditFile(std::string(c.file) == "task" ? task_json : source + "/env.json", c.from, c.to);
      Status status = Pack(source, dir / "out.envdb", WithInstantWorker());
      REQUIRE_FALSE(status.ok());
      CHECK(status.code() == StatusCode::kInvalidArgument);
      CHECK_MESSAGE(Contains(status.message(), c.expected), status.message());
      CHECK_FALSE(fs::exists(dir / "out.envdb"));
    }
  }

  TEST_CASE("the layout of tasks/ and files/ is checked") {
    ScratchDir dir;
    std::string source = CopyFixture(dir, "mini");
    WriteFile(source + "/tasks/count_books/orcale.py", "def verify(answer, db):\n    return True\n");
    WriteFile(source + "/tasks/README.md", "notes\n");
    fs::create_directories(source + "/tasks/bad id");
    fs::create_symlink("/etc/hostname", source + "/files/link");
    WriteFile(source + "/tasks/.hidden/ignored.txt", "dotfiles are ignored\n");
    fs::create_directories(source + "/tasks/oldest_book/__pycache__");
    Status status = Pack(source, dir / "out.envdb", WithInstantWorker());
    REQUIRE_FALSE(status.ok());
    INFO(status.message());
    CHECK(Contains(status.message(), "4 problems"));
    CHECK(Contains(status.message(), "tasks/count_books/orcale.py: unexpected entry"));
    CHECK(Contains(status.message(), "tasks/README.md: not a task directory"));
    CHECK(Contains(status.message(), "tasks/bad id: task id 'bad id' must match [A-Za-z0-9_.-]+"));
    CHECK(Contains(status.message(), "files/link: symbolic links are not packed"));

    ScratchDir empty;
    Status missing = Pack(empty.path().string(), dir / "out.envdb", WithInstantWorker());
    REQUIRE_FALSE(missing.ok());
    INFO(missing.message());
    for (const char* expected : {"env.json: missing", "schema.sql: missing", "tools.py: missing", "tasks: missing"}) {
      CHECK(Contains(missing.message(), expected));
    }
    CHECK(Pack((dir.path() / "nowhere").string(), dir / "out.envdb").code() == StatusCode::kNotFound);
    CHECK(Pack(source, dir / "no/such/dir/out.envdb").code() == StatusCode::kNotFound);
  }

  TEST_CASE("sources that are not UTF-8 text are refused") {
    ScratchDir dir;
    std::string source = CopyFixture(dir, "mini");
    WriteFile(source + "/tasks/count_books/solution.py", "def solve(tools):\n    return '\xff'\n");
    Status status = Pack(source, dir / "out.envdb", WithInstantWorker());
    CHECK(Contains(status.message(), "tasks/count_books/solution.py: not valid UTF-8 text"));
  }

  TEST_CASE("a failed schema.sql names its line and SQLite's message, and leaves nothing behind") {
    ScratchDir dir;
    std::string source = CopyFixture(dir, "mini");
    // Half-way: the tables and two rows exist when the bad statement runs.
    EditFile(source + "/schema.sql", "INSERT INTO books VALUES (1,",
             "INSERT INTO books VALUES (1, 'x', 'y');\nINSERT INTO nope VALUES (1,");
    Status status = Pack(source, dir / "out.envdb", WithInstantWorker());
    REQUIRE_FALSE(status.ok());
    INFO(status.message());
    CHECK(status.code() == StatusCode::kInvalidArgument);
    CHECK(Contains(status.message(), "schema.sql:21: table books has 6 columns but 3 values were supplied"));
    CHECK(ListDir(dir.path()) == std::vector<std::string>{"mini"});

    WriteFile(source + "/schema.sql", "CREATE TABLE t(x);\nINSERT INTO t VALUES(1);\nSELEC 2;\n");
    status = Pack(source, dir / "out.envdb", WithInstantWorker());
    CHECK(Contains(status.message(), "schema.sql:3: near \"SELEC\": syntax error"));
    CHECK(ListDir(dir.path()) == std::vector<std::string>{"mini"});
  }

  TEST_CASE("schema.sql may not use reserved names, attach files or change pragmas") {
    ScratchDir dir;
    std::string source = CopyFixture(dir, "mini");
    std::string schema = source + "/schema.sql";
    struct Case {
      std::string sql;
      std::string expected;
    } cases[] = {
        {"CREATE TABLE t(x);\nCREATE TABLE _secret(x);\n", "schema.sql:2: table '_secret' uses a reserved name"},
        {"CREATE TABLE t(x);\nCREATE VIEW _v AS SELECT 1;\n", "schema.sql:2: view '_v' uses a reserved name"},
        {"CREATE TABLE t(x);\n\nATTACH DATABASE '" + (dir / "evil.db") + "' AS evil;\n",
         "schema.sql:3: ATTACH is not allowed"},
        {"PRAGMA writable_schema = ON;\n", "schema.sql:1: PRAGMA writable_schema is not allowed"},
        {"CREATE TABLE t(x);\nINSERT INTO t VALUES (1);\nROLLBACK;\n", "schema.sql:3: ROLLBACK is not allowed"},
        {"CREATE TABLE t(x);\nVACUUM INTO '" + (dir / "copy.db") + "';\n",
         "schema.sql:2: cannot VACUUM from within a transaction"},
    };
    for (const Case& c : cases) {
      CAPTURE(c.sql);
      WriteFile(schema, c.sql);
      Status status = Pack(source, dir / "out.envdb", WithInstantWorker());
      REQUIRE_FALSE(status.ok());
      CHECK_MESSAGE(Contains(status.message(), c.expected), status.message());
      CHECK(ListDir(dir.path()) == std::vector<std::string>{"mini"});  // evil.db, copy.db never created
    }
  }

  TEST_CASE("a verifier with a forbidden import fails the pack and keeps the previous bundle") {
    ScratchDir dir;
    std::string source = CopyFixture(dir, "mini");
    std::string output = dir / "mini.envdb";
    REQUIRE(Pack(source, output).ok());
    std::string before = ReadFile(output);

    WriteFile(
        source + "/tasks/count_books/verifier.py",
        "import json\nimport subprocess\n\n\ndef verify(answer, db):\n    return subprocess.call(['true']) == 0\n");
    Status status = Pack(source, output);
    REQUIRE_FALSE(status.ok());
    CHECK(status.code() == StatusCode::kInvalidArgument);
    CHECK_MESSAGE(Contains(status.message(), "tasks/count_books/verifier.py:2: import of 'subprocess' is not allowed"),
                  status.message());
    CHECK(ReadFile(output) == before);
    CHECK(ListDir(dir.path()) == (std::vector<std::string>{"mini", "mini.envdb"}));
  }

  TEST_CASE("tool specs from analyze are checked: at least one tool, no submit_result") {
    ScratchDir dir;
    std::string source = CopyFixture(dir, "mini");
    WriteFile(source + "/tools.py", "\"\"\"No public function.\"\"\"\n\n\ndef _helper():\n    return 1\n");
    Status status = Pack(source, dir / "out.envdb");
    CHECK_MESSAGE(Contains(status.message(), "tools.py: defines no tool"), status.message());

    WriteFile(source + "/tools.py",
              "def submit_result(answer_text: str) -> str:\n    \"\"\"Mine.\"\"\"\n    return answer_text\n");
    status = Pack(source, dir / "out.envdb");
    CHECK_MESSAGE(Contains(status.message(), "tools.py:1: "), status.message());
    CHECK_MESSAGE(Contains(status.message(), "submit_result"), status.message());
    CHECK(ListDir(dir.path()) == std::vector<std::string>{"mini"});
  }

  // A stand-in worker: a shell script whose behaviour the test chooses.
  std::string FakeWorker(const ScratchDir& dir, const std::string& body) {
    std::string path = dir / "fake-worker";
    WriteFile(path, "#!/bin/sh\n" + body + "\n");
    REQUIRE(::chmod(path.c_str(), 0755) == 0);
    return path;
  }

  TEST_CASE("specs the worker reports are checked again: names, duplicates, schemas, the reserved name") {
    ScratchDir workers;
    ScratchDir dir;
    std::string source = CopyFixture(dir, "mini");
    PackOptions options;
    options.worker_path = FakeWorker(
        workers,
        "cat >/dev/null\necho '{\"problems\": [], \"tools\": ["
        "{\"name\": \"a\", \"description\": \"\", \"inputSchema\": {\"type\": \"object\", \"pattern\": \"(\"}, "
        "\"source\": \"\", \"line\": 3},"
        "{\"name\": \"a\", \"description\": \"\", \"inputSchema\": {\"type\": \"object\"}, \"source\": \"\", \"line\": "
        "7},"
        "{\"name\": \"bad name!\", \"description\": \"\", \"inputSchema\": {}, \"source\": \"\", \"line\": 9},"
        "{\"name\": \"submit_result\", \"description\": \"\", \"inputSchema\": [], \"source\": \"\", \"line\": 11}]}'");
    Status status = Pack(source, dir / "out.envdb", options);
    REQUIRE_FALSE(status.ok());
    INFO(status.message());
    CHECK(Contains(status.message(), "5 problems"));
    CHECK(Contains(status.message(), "tools.py:3: tool 'a': inputSchema: "));
    CHECK(Contains(status.message(), "tools.py:7: tool 'a' is defined twice"));
    CHECK(Contains(status.message(), "tools.py:9: tool name 'bad name!' is not"));
    CHECK(Contains(status.message(), "tools.py:11: tool name 'submit_result' is reserved for the runtime"));
    CHECK(Contains(status.message(), "tools.py:11: tool 'submit_result': inputSchema must be a JSON Schema object"));
    CHECK(ListDir(dir.path()) == std::vector<std::string>{"mini"});
  }

  TEST_CASE("a worker that fails, hangs or prints garbage is an Internal error carrying its stderr") {
    ScratchDir dir;
    std::string source = CopyFixture(dir, "mini");
    std::string output = dir / "out.envdb";
    PackOptions options;
    options.analyze_timeout = std::chrono::milliseconds(300);
    struct Case {
      std::string body;
      std::string expected;
    } cases[] = {
        // While analyze runs, the bundle is being built beside the output under a temporary name.
        {"cat >/dev/null; ls '" + dir.path().string() + "' >&2; exit 1",
         "exited with status 1; stderr:\nfake-worker\nmini\nout.envdb.tmp." + std::to_string(::getpid()) + "."},
        {"cat >/dev/null; echo 'analysis exploded' >&2; exit 3", "exited with status 3; stderr:\nanalysis exploded"},
        {"cat >/dev/null; echo 'not json'; echo 'warning: odd' >&2", "printed something that is not JSON"},
        {"cat >/dev/null; echo '{\"tools\": {}}'", "replied without \"tools\" and \"problems\" arrays"},
        {"cat >/dev/null; echo '{\"tools\": [{\"name\": 1}], \"problems\": []}'", "replied without name, description"},
        {"cat >/dev/null; kill -9 $$", "was killed by signal 9"},
        {"exec sleep 5", "timed out after 300 ms"},
    };
    for (const Case& c : cases) {
      CAPTURE(c.body);
      options.worker_path = FakeWorker(dir, c.body);
      Status status = Pack(source, output, options);
      CHECK(status.code() == StatusCode::kInternal);
      CHECK_MESSAGE(Contains(status.message(), c.expected), status.message());
      CHECK_FALSE(fs::exists(output));
    }
    options.worker_path = dir / "no-such-worker";
    Status missing = Pack(source, output, options);
    CHECK(missing.code() == StatusCode::kInternal);
    CHECK(Contains(missing.message(), "no-such-worker"));
    CHECK(ListDir(dir.path()) == (std::vector<std::string>{"fake-worker", "mini"}));
  }

  // Budgets (sandbox/env_pack.h): the environment's SQL and files are untrusted work.
  TEST_CASE("a schema.sql that never ends is stopped by the time budget, naming the statement's line") {
    ScratchDir dir;
    std::string source = CopyFixture(dir, "mini");
    WriteFile(source + "/schema.sql",
              "CREATE TABLE t(x);\n"
              "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c)\n"
              "  SELECT count(*) FROM c;\n");
    PackOptions options = WithInstantWorker();
    options.max_time = std::chrono::seconds(1);
    Status status = Pack(source, dir / "out.envdb", options);
    REQUIRE_FALSE(status.ok());
    INFO(status.message());
    CHECK(status.code() == StatusCode::kInvalidArgument);
    CHECK(Contains(status.message(),
                   "schema.sql:2: the time budget of 1 s (--max-seconds) was spent running this statement"));
    CHECK(ListDir(dir.path()) == std::vector<std::string>{"mini"});
  }

  TEST_CASE("a schema.sql that grows the bundle past the size budget stops there, naming the statement") {
    ScratchDir dir;
    std::string source = CopyFixture(dir, "mini");
    WriteFile(source + "/schema.sql",
              "CREATE TABLE t(x);\n\n"
              "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c)\n"
              "  INSERT INTO t SELECT randomblob(10000) FROM c;\n");
    PackOptions options = WithInstantWorker();
    options.max_bytes = 1 << 20;
    Status status = Pack(source, dir / "out.envdb", options);
    REQUIRE_FALSE(status.ok());
    INFO(status.message());
    CHECK(status.code() == StatusCode::kInvalidArgument);
    CHECK(Contains(status.message(),
                   "schema.sql:3: the size budget of 1048576 bytes (--max-bytes) was spent running this statement"));
    CHECK(ListDir(dir.path()) == std::vector<std::string>{"mini"});

    // Sources and files/ are measured before they are read: they go into the bundle too.
    WriteFile(source + "/schema.sql", "CREATE TABLE t(x);\n");
    WriteFile(source + "/files/big.bin", std::string(2 << 20, 'x'));
    status = Pack(source, dir / "out.envdb", options);
    REQUIRE_FALSE(status.ok());
    CHECK_MESSAGE(Contains(status.message(),
                           "files/big.bin: 2097152 bytes: the size budget of 1048576 bytes (--max-bytes) "
                           "was spent reading the sources"),
                  status.message());
    CHECK(ListDir(dir.path()) == std::vector<std::string>{"mini"});
  }

  TEST_CASE("the analysis gets what is left of the time budget, and a budget that binds is named") {
    ScratchDir dir;
    std::string source = CopyFixture(dir, "mini");
    PackOptions options;
    options.worker_path = dir / "slow-worker";
    WriteFile(options.worker_path, "#!/bin/sh\nexec sleep 30\n");
    REQUIRE(::chmod(options.worker_path.c_str(), 0755) == 0);
    options.max_time = std::chrono::seconds(1);  // analyze_timeout stays 60 s
    Status status = Pack(source, dir / "out.envdb", options);
    CHECK(status.code() == StatusCode::kInvalidArgument);
    CHECK_MESSAGE(
        Contains(status.message(), "the time budget of 1 s (--max-seconds) was spent in envforge-worker analyze"),
        status.message());
    CHECK(ListDir(dir.path()) == (std::vector<std::string>{"mini", "slow-worker"}));

    options.max_time = std::chrono::milliseconds(0);
    CHECK(Pack(source, dir / "out.envdb", options).code() == StatusCode::kInvalidArgument);
    options.max_time = std::chrono::seconds(1);
    options.max_bytes = 0;
    CHECK(Pack(source, dir / "out.envdb", options).code() == StatusCode::kInvalidArgument);
  }

  TEST_CASE("temporary files of dead pack processes are swept by the next pack into the directory") {
    ScratchDir dir;
    std::string source = CopyFixture(dir, "mini");
    pid_t dead = ::fork();
    REQUIRE(dead >= 0);
    if (dead == 0) ::_exit(0);
    REQUIRE(::waitpid(dead, nullptr, 0) == dead);
    std::string dead_pid = std::to_string(dead), live_pid = std::to_string(::getpid());
    const std::vector<std::string> swept = {"mini.envdb.tmp." + dead_pid + ".123",
                                            "mini.envdb.tmp." + dead_pid + ".123-journal",
                                            "other.envdb.tmp." + dead_pid + ".9"};
    const std::vector<std::string> kept = {"other.envdb.tmp." + live_pid + ".9",   // a live pack
                                           "notes.txt.tmp." + dead_pid + ".1",     // not a bundle
                                           "mini.envdb.tmp." + dead_pid + ".x1"};  // not our name
    for (const auto& name : swept) WriteFile(dir / name, "partial");
    for (const auto& name : kept) WriteFile(dir / name, "keep");
    PackAndLoad(source, dir / "mini.envdb", WithInstantWorker());
    std::vector<std::string> expected = kept;
    expected.push_back("mini");
    expected.push_back("mini.envdb");
    std::sort(expected.begin(), expected.end());
    CHECK(ListDir(dir.path()) == expected);
  }

  TEST_CASE("the shipped trip_planning environment packs and loads") {
    fs::path source = SourceDir() / "data/envs/trip_planning";
    ScratchDir dir;
    EnvBundle bundle = PackAndLoad(source.string(), dir / "trip_planning.envdb");
    CHECK(bundle.manifest.name == "trip_planning");
    CHECK(bundle.tools.size() >= 2);
    CHECK(bundle.tools.back().spec.name == toolsets::kSubmitResultTool);
    CHECK_FALSE(bundle.tasks.empty());
    for (const TaskRecord& task : bundle.tasks) CHECK(bundle.FindTask(task.id) == &task);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::sandbox
