// Search environments end to end below the CLI: packing the fixture (tests/fixtures/search_env
// with a corpus built from tests/fixtures/search), then sessions through the SessionManager --
// search, open, find, submit_result's verdicts, the gold answer, bad arguments, recorded
// responses.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "sandbox/env_bundle.h"
#include "sandbox/search_bundle.h"
#include "sandbox/session_manager.h"
#include "tests/sandbox/search_env_fixture.h"
#include "toolsets/search_tools.h"

namespace envforge::sandbox {
namespace {

namespace fs = std::filesystem;
using ::envforge::testing::TempDir;
using toolsets::Outcome;
using toolsets::ToolCall;
using toolsets::ToolResult;

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

void WriteText(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// One manager with the packed fixture open.
struct SearchFixture {
  TempDir dir;
  std::string envdb;
  std::unique_ptr<SessionManager> manager;
  std::string env_id;

  SearchFixture() {
    envdb = testing::PackSearchEnv(dir, testing::MakeSearchEnvSource(dir));
    auto created = SessionManager::Create({});
    REQUIRE_MESSAGE(created.ok(), created.status().ToString());
    manager = std::move(created).value();
    auto opened = manager->OpenEnvironment(envdb);
    REQUIRE_MESSAGE(opened.ok(), opened.status().ToString());
    env_id = *opened;
  }

  SessionManager::SessionId NewSession(const std::string& task = "",
                                       std::vector<search::RecordedResponse> recorded = {}) {
    SessionOptions options;
    options.task_id = task;
    options.recorded_responses = std::move(recorded);
    auto id = manager->CreateSession(env_id, std::move(options));
    REQUIRE_MESSAGE(id.ok(), id.status().ToString());
    return *id;
  }

  ToolResult Call(SessionManager::SessionId session, const std::string& tool, Json arguments) {
    return manager->CallTool(session, ToolCall{"c", tool, std::move(arguments)});
  }

  Json Verdict(SessionManager::SessionId session, const std::string& answer) {
    ToolResult result = Call(session, "submit_result", {{"answer_text", answer}});
    REQUIRE_MESSAGE(result.ok(), result.message);
    return result.content;
  }
};

TEST_SUITE("sandbox.search") {
  TEST_CASE("packing a search source writes the builtin tools, the tasks, the corpus and the answer keys") {
    TempDir dir;
    const std::string envdb = testing::PackSearchEnv(dir, testing::MakeSearchEnvSource(dir));
    Result<EnvBundle> bundle = EnvBundle::Load(envdb);
    REQUIRE_MESSAGE(bundle.ok(), bundle.status().ToString());
    CHECK(bundle->manifest.kind == "search");
    CHECK(bundle->tools_module.empty());
    std::vector<std::string> names;
    for (const ToolRecord& tool : bundle->tools) {
      names.push_back(tool.spec.name);
      CHECK(tool.builtin);
    }
    CHECK(names == std::vector<std::string>{"search", "open", "find", "submit_result"});
    REQUIRE(bundle->tasks.size() == 4);
    const TaskRecord* neon = bundle->FindTask("neon-atomic-number");
    REQUIRE(neon != nullptr);
    CHECK(neon->difficulty == 2);
    CHECK(neon->knobs == Json{{"hops", 2}});
    CHECK(neon->answer_schema == toolsets::SearchAnswerSchema());
    CHECK(!Contains(DumpJson(bundle->ToJson()), "plumbum"));  // the answers are not in what clients see

    Result<SearchBundle> search = LoadSearchBundle(envdb);
    REQUIRE_MESSAGE(search.ok(), search.status().ToString());
    CHECK(search->backend.backend == "offline");
    CHECK(search->backend.corpus == kCorpusFilePath);
    CHECK(search->answers.at("lead-symbol").answer == "Pb");
    CHECK(search->answers.at("lead-symbol").aliases == std::vector<std::string>{"plumbum"});
    CHECK(search->answers.at("young-dog").aliases.empty());
    const std::string corpus = dir / "extracted.sqlite";
    REQUIRE(ExtractSearchCorpus(envdb, corpus).ok());
    Result<std::unique_ptr<search::CorpusReader>> reader = search::CorpusReader::Open(corpus);
    REQUIRE_MESSAGE(reader.ok(), reader.status().ToString());
    CHECK((*reader)->Get("elements:neon").ok());
  }

  TEST_CASE("a changed corpus or answer is a new environment version; the same sources pack the same") {
    TempDir dir;
    const std::string source = testing::MakeSearchEnvSource(dir);
    const std::string first = testing::PackSearchEnv(dir, source, "a.envdb");
    const std::string again = testing::PackSearchEnv(dir, source, "b.envdb");
    CHECK(EnvBundle::Load(first)->manifest.content_hash == EnvBundle::Load(again)->manifest.content_hash);
    const std::string other_corpus = testing::MakeSearchEnvSource(dir, "search_env_2", {"elements", "wordnet"});
    const std::string changed = testing::PackSearchEnv(dir, other_corpus, "c.envdb");
    CHECK(EnvBundle::Load(first)->manifest.content_hash != EnvBundle::Load(changed)->manifest.content_hash);
  }

  TEST_CASE("packing refuses a search source with problems and lists every one") {
    TempDir dir;
    const fs::path source = testing::MakeSearchEnvSource(dir);
    WriteText(source / "tools.py", "def search(query):\n    return []\n");
    WriteText(source / "tasks/blank/task.json", R"({"prompt": "Which?", "answer": "  the  "})");
    WriteText(source / "tasks/odd/task.json", R"({"prompt": "Which?", "answer": "x", "aliases": "y", "verifier": 1})");
    WriteText(source / "tasks/young-dog/solution.py", "def solve(tools):\n    return 'puppy'\n");
    Status packed = PackEnvironment(source.string(), dir / "bad.envdb");
    REQUIRE(packed.code() == StatusCode::kInvalidArgument);
    const std::string& message = packed.message();
    CHECK(Contains(message, "tools.py: a search environment has none"));
    CHECK(Contains(message, "tasks/blank/task.json: answer key: 'answer' '  the  ' normalises to nothing"));
    CHECK(Contains(message, "tasks/odd/task.json: unknown key 'verifier'"));
    CHECK(Contains(message, "tasks/odd/task.json: answer key: 'aliases' must be an array of strings"));
    CHECK(Contains(message, "tasks/young-dog/solution.py: unexpected entry"));
    CHECK(!fs::exists(dir / "bad.envdb"));

    fs::remove(source / "corpus.sqlite");
    fs::remove(source / "tools.py");
    fs::remove_all(source / "tasks/blank");
    fs::remove_all(source / "tasks/odd");
    fs::remove(source / "tasks/young-dog/solution.py");
    packed = PackEnvironment(source.string(), dir / "bad.envdb");
    CHECK(Contains(packed.message(), "corpus.sqlite: corpus"));
    WriteText(source / "search.json", R"({"backend": "brave", "corpus": "corpus.sqlite"})");
    packed = PackEnvironment(source.string(), dir / "bad.envdb");
    CHECK(Contains(packed.message(), "search.json: search config:"));
  }

  TEST_CASE("a search session lists search, open, find and submit_result and finds the document") {
    SearchFixture fixture;
    const EnvBundle* bundle = fixture.manager->FindEnvironment(fixture.env_id);
    REQUIRE(bundle != nullptr);
    CHECK(bundle->FindTool("search") != nullptr);
    CHECK(bundle->FindTool("open") != nullptr);
    CHECK(bundle->FindTool("find") != nullptr);
    auto session = fixture.NewSession("neon-atomic-number");

    ToolResult found = fixture.Call(session, "search", {{"query", "red glow in discharge tubes"}, {"top_k", 3}});
    REQUIRE_MESSAGE(found.ok(), found.message);
    CHECK(found.call_id == "c");
    CHECK(found.content["backend"] == "offline");
    REQUIRE(!found.content["hits"].empty());
    CHECK(found.content["hits"].size() <= 3);
    CHECK(found.content["hits"][0]["doc_id"] == "elements:neon");
    CHECK(Contains(found.content["hits"][0]["snippet"].get<std::string>(), "**"));

    ToolResult opened = fixture.Call(session, "open", {{"doc_id_or_url", "elements:neon"}});
    REQUIRE_MESSAGE(opened.ok(), opened.message);
    CHECK(Contains(opened.content["text"].get<std::string>(), "Atomic number: 10"));
    CHECK(opened.content["next_offset"].is_null());
    CHECK(opened.content["links_total"].get<int>() >= 1);

    ToolResult first = fixture.Call(session, "open", {{"doc_id_or_url", "elements:neon"}, {"max_chars", 8}});
    REQUIRE(first.ok());
    CHECK(first.content["text"].get<std::string>().size() == 8);
    CHECK(first.content["next_offset"] == 8);
    ToolResult rest = fixture.Call(session, "open", {{"doc_id_or_url", "elements:neon"}, {"offset", 8}});
    REQUIRE(rest.ok());
    CHECK(first.content["text"].get<std::string>() + rest.content["text"].get<std::string>() ==
          opened.content["text"].get<std::string>());

    ToolResult matched = fixture.Call(session, "find", {{"doc_id", "elements:neon"}, {"pattern", "ATOMIC NUMBER"}});
    REQUIRE_MESSAGE(matched.ok(), matched.message);
    REQUIRE(matched.content["matches"].size() == 1);
    CHECK(matched.content["matches"][0]["match"] == "Atomic number");
    CHECK(Contains(matched.content["matches"][0]["after"].get<std::string>(), "10"));
    CHECK(matched.content["truncated"] == false);
    ToolResult regex = fixture.Call(
        session, "find",
        {{"doc_id", "elements:neon"}, {"pattern", "atomic (number|weight)"}, {"regex", true}, {"max_matches", 1}});
    REQUIRE_MESSAGE(regex.ok(), regex.message);
    CHECK(regex.content["matches"].size() == 1);
    CHECK(regex.content["truncated"] == true);
  }

  TEST_CASE("submit_result: the answer and its aliases pass after normalisation; near misses fail") {
    SearchFixture fixture;
    auto neon = fixture.NewSession("neon-atomic-number");
    Json right = fixture.Verdict(neon, "10");
    CHECK(right["passed"] == true);
    CHECK(right["score"] == 1.0);
    CHECK(right["verifier_version"] ==
          fixture.manager->FindEnvironment(fixture.env_id)->FindTask("neon-atomic-number")->version);
    CHECK(fixture.Verdict(neon, " Ten. ")["passed"] == true);  // alias, case, punctuation
    CHECK(fixture.Verdict(neon, "\"10\"")["passed"] == true);  // a JSON string
    CHECK(fixture.Verdict(neon, "100")["passed"] == false);
    CHECK(fixture.Verdict(neon, "1.0")["passed"] == false);
    Json miss = fixture.Verdict(neon, "10 protons");
    CHECK(miss["passed"] == false);
    CHECK(miss["score"] == 0.0);
    CHECK(!Contains(DumpJson(miss["reasons"]), "ten"));  // a failing verdict does not reveal the aliases

    auto helium = fixture.NewSession("second-lightest-element");
    CHECK(fixture.Verdict(helium, "the  HELIUM!")["passed"] == true);
    CHECK(fixture.Verdict(helium, "Hélium")["passed"] == true);  // diacritics fold
    CHECK(fixture.Verdict(helium, "he")["passed"] == true);
    CHECK(fixture.Verdict(helium, "helium gas")["passed"] == false);
    CHECK(fixture.Verdict(helium, "Heliu")["passed"] == false);
    CHECK(fixture.Verdict(helium, "")["passed"] == false);

    auto puppy = fixture.NewSession("young-dog");  // no aliases: only the answer itself
    CHECK(fixture.Verdict(puppy, "A puppy")["passed"] == true);
    CHECK(fixture.Verdict(puppy, "puppies")["passed"] == false);
    CHECK(fixture.Verdict(puppy, "pup")["passed"] == false);
  }

  TEST_CASE("the gold solution submits the answer; JudgeAnswers uses the same answer key") {
    SearchFixture fixture;
    auto session = fixture.NewSession("lead-symbol");
    Result<SolveOutput> solved = fixture.manager->Solve(session);
    REQUIRE_MESSAGE(solved.ok(), solved.status().ToString());
    CHECK(solved->answer_text == "Pb");
    CHECK(solved->answer == Json("Pb"));
    CHECK(fixture.Verdict(session, solved->answer_text)["passed"] == true);
    Result<std::vector<JudgeVerdict>> judged =
        fixture.manager->JudgeAnswers(session, Judge::kVerifier, {"pb", "Plumbum", "lead", "P b"});
    REQUIRE_MESSAGE(judged.ok(), judged.status().ToString());
    REQUIRE(judged->size() == 4);
    CHECK((*judged)[0].passed);
    CHECK((*judged)[1].passed);
    CHECK_FALSE((*judged)[2].passed);
    CHECK_FALSE((*judged)[3].passed);
    CHECK_FALSE((*judged)[2].defect);
    CHECK(fixture.manager->JudgeAnswers(session, Judge::kOracle, {"Pb"}).status().code() ==
          StatusCode::kFailedPrecondition);
  }

  TEST_CASE("bad arguments are invalid calls or tool errors that say what is wrong") {
    SearchFixture fixture;
    auto session = fixture.NewSession("neon-atomic-number");
    auto expect = [&](const std::string& tool, Json arguments, Outcome outcome, const std::string& says) {
      ToolResult result = fixture.Call(session, tool, arguments);
      CAPTURE(tool);
      CAPTURE(DumpJson(arguments));
      CHECK(result.outcome == outcome);
      CHECK_MESSAGE(Contains(result.message, says), result.message);
      CHECK(result.session_alive);
    };
    expect("search", Json::object(), Outcome::kInvalidCall, "query");
    expect("search", {{"query", "neon"}, {"top_k", 0}}, Outcome::kInvalidCall, "top_k");
    expect("search", {{"query", "neon"}, {"top_k", 21}}, Outcome::kInvalidCall, "top_k");
    expect("search", {{"query", 7}}, Outcome::kInvalidCall, "query");
    expect("search", {{"query", "neon"}, {"limit", 3}}, Outcome::kInvalidCall, "limit");
    expect("search", {{"query", "?!  ..."}}, Outcome::kToolError, "search query is empty");
    expect("search", {{"query", std::string(600, 'a')}}, Outcome::kInvalidCall, "query");
    expect("open", {{"doc_id_or_url", "elements:unobtainium"}}, Outcome::kToolError, "no document with id or url");
    expect("open", {{"doc_id_or_url", "elements:neon"}, {"offset", 100000}}, Outcome::kToolError, "past the end");
    expect("open", {{"doc_id_or_url", "elements:neon"}, {"max_chars", 0}}, Outcome::kInvalidCall, "max_chars");
    expect("find", {{"doc_id", "elements:neon"}}, Outcome::kInvalidCall, "pattern");
    expect("find", {{"doc_id", "elements:neon"}, {"pattern", "(unclosed"}, {"regex", true}}, Outcome::kToolError,
           "regular expression");
    expect("find", {{"doc_id", "nowhere"}, {"pattern", "x"}}, Outcome::kToolError, "no document");
    expect("submit_result", {{"answer", "10"}}, Outcome::kInvalidCall, "answer_text");
    expect("fetch", {{"url", "http://example.org"}}, Outcome::kInvalidCall, "unknown tool 'fetch'");
    // The session is still good afterwards.
    CHECK(fixture.Call(session, "search", {{"query", "neon"}}).ok());
  }

  TEST_CASE("a session without a task searches but has nothing to submit or solve") {
    SearchFixture fixture;
    auto session = fixture.NewSession();
    CHECK(fixture.Call(session, "search", {{"query", "puppy"}}).ok());
    ToolResult submitted = fixture.Call(session, "submit_result", {{"answer_text", "puppy"}});
    CHECK(submitted.outcome == Outcome::kInvalidCall);
    CHECK(Contains(submitted.message, "no task"));
    CHECK(fixture.manager->Solve(session).status().code() == StatusCode::kFailedPrecondition);
  }

  TEST_CASE("recorded responses are served verbatim before the backend is asked") {
    SearchFixture fixture;
    ToolResult canned;
    canned.content =
        Json{{"backend", "brave"}, {"query", "neon"}, {"hits", Json::array({Json{{"doc_id", "https://x.example/"}}})}};
    ToolResult canned_error = ToolResult::Error(Outcome::kToolError, "recorded: no such page");
    auto session = fixture.NewSession(
        "neon-atomic-number",
        {{"search", {{"query", "neon"}}, canned}, {"open", {{"doc_id_or_url", "elements:neon"}}, canned_error}});
    ToolResult first = fixture.Call(session, "search", {{"query", "neon"}});
    REQUIRE(first.ok());
    CHECK(first.content == canned.content);
    ToolResult opened = fixture.Call(session, "open", {{"doc_id_or_url", "elements:neon"}});
    CHECK(opened.outcome == Outcome::kToolError);
    CHECK(opened.message == "recorded: no such page");
    // Each recorded response answers once; then the backend answers.
    ToolResult second = fixture.Call(session, "search", {{"query", "neon"}});
    REQUIRE(second.ok());
    CHECK(second.content["backend"] == "offline");
    CHECK(second.content["hits"][0]["doc_id"] == "elements:neon");
  }

  TEST_CASE("a live backend is packed as its configuration; a session without its key fails to start, saying why") {
    TempDir dir;
    const fs::path source = testing::MakeSearchEnvSource(dir);
    fs::remove(source / "corpus.sqlite");
    WriteText(source / "search.json", R"({"backend": "brave", "api_key_env": "ENVFORGE_TEST_SURELY_UNSET_KEY"})");
    const std::string envdb = testing::PackSearchEnv(dir, source.string(), "live.envdb");
    Result<SearchBundle> bundle = LoadSearchBundle(envdb);
    REQUIRE_MESSAGE(bundle.ok(), bundle.status().ToString());
    CHECK(bundle->backend.backend == "brave");
    CHECK(ExtractSearchCorpus(envdb, dir / "none.sqlite").code() == StatusCode::kNotFound);
    auto manager = SessionManager::Create({});
    REQUIRE(manager.ok());
    auto env_id = (*manager)->OpenEnvironment(envdb);
    REQUIRE_MESSAGE(env_id.ok(), env_id.status().ToString());
    auto session = (*manager)->CreateSession(*env_id, "young-dog");
    REQUIRE_FALSE(session.ok());
    CHECK(Contains(session.status().message(), "the session's search backend"));
    CHECK(Contains(session.status().message(), "ENVFORGE_TEST_SURELY_UNSET_KEY"));
  }

  TEST_CASE("a fork of a search session searches on its own") {
    SearchFixture fixture;
    auto parent = fixture.NewSession("second-lightest-element");
    REQUIRE(fixture.Call(parent, "search", {{"query", "helium"}}).ok());
    Result<SessionManager::SessionId> child = fixture.manager->ForkSession(parent);
    REQUIRE_MESSAGE(child.ok(), child.status().ToString());
    ToolResult found = fixture.Call(*child, "search", {{"query", "balloons"}});
    REQUIRE_MESSAGE(found.ok(), found.message);
    CHECK(!found.content["hits"].empty());
    CHECK(fixture.Verdict(*child, "helium")["passed"] == true);
    CHECK(fixture.Call(parent, "search", {{"query", "neon"}}).ok());
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::sandbox
