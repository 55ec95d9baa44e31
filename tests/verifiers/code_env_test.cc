// Code environments end to end on the Python fixture of scripts/code_fixtures.py: import (the
// repository cut at its base commit), validation in the sandbox (F2P > 0, P2F = 0; a bad gold
// patch refused with the broken test named), grading of submissions, the sandbox's walls, and the
// errors of bad input.
#include <doctest/doctest.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>

#include "base/fd.h"
#include "base/subprocess.h"
#include "sandbox/code/code_bundle.h"
#include "sandbox/code/code_instance.h"
#include "sandbox/code/code_workspace.h"
#include "sandbox/code/repo_snapshot.h"
#include "sandbox/code/sandboxed_command.h"
#include "sandbox/env_bundle.h"
#include "sandbox/session_manager.h"
#include "tests/temp_dir.h"
#include "verifiers/code_validation.h"

namespace envforge::verifiers {
namespace {

namespace fs = std::filesystem;
using sandbox::code::CodeInstance;
using testing::TempDir;

std::string SourceDir() {
  const char* dir = std::getenv("ENVFORGE_SOURCE_DIR");
  return dir != nullptr && *dir != '\0' ? dir : ENVFORGE_TEST_SOURCE_DIR;
}

std::string Trim(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

std::string Git(const fs::path& repo, const std::vector<std::string>& args) {
  auto out = sandbox::code::RunGit(repo, args);
  REQUIRE_MESSAGE(out.ok(), out.status().ToString());
  return Trim(*out);
}

// The Python fixture (generated once per process) and its bundle.
struct Fixture {
  TempDir dir;
  fs::path repo;
  CodeInstance instance;
  std::string bad_patch;
  std::string bundle;

  Fixture() {
    auto generated = RunCommand({"/usr/bin/python3", SourceDir() + "/scripts/code_fixtures.py", "--out",
                                 (dir.path() / "fixtures").string(), "--language", "python"},
                                {.timeout = std::chrono::minutes(3)});
    REQUIRE(generated.ok());
    REQUIRE_MESSAGE(generated->exit_code == 0, generated->stderr_text);
    const fs::path root = dir.path() / "fixtures" / "python";
    repo = root / "repo";
    auto instances = sandbox::code::ReadCodeInstances((root / "instance.json").string());
    REQUIRE_MESSAGE(instances.ok(), instances.status().ToString());
    instance = (*instances)[0];
    bad_patch = ReadFileToString((root / "bad_patch.diff").string()).value();
    bundle = (dir.path() / "py.envdb").string();
    auto imported = sandbox::code::ImportCodeInstances(*instances, repo.string(), bundle);
    REQUIRE_MESSAGE(imported.ok(), imported.status().ToString());
  }
};

Fixture& Python() {
  static Fixture fixture;
  return fixture;
}

Result<sandbox::code::SubmissionGrade> GradeCodeSubmission(const std::string& bundle, const std::string& task_id,
                                                           const std::string& diff, const CodeRunOptions& options) {
  ENVFORGE_ASSIGN_OR_RETURN(std::string archive, sandbox::code::LoadRepoArchive(bundle, task_id));
  ENVFORGE_ASSIGN_OR_RETURN(sandbox::code::CodeTask task, sandbox::code::LoadCodeTask(bundle, task_id));
  return sandbox::code::GradeSubmission(sandbox::code::RepoSource::FromArchive(archive), task.instance, diff, options);
}

CodeRunOptions RunOptions() {
  CodeRunOptions options;
  options.limits.wall_ms = 120'000;
  return options;
}

TEST_SUITE("verifiers.code_env") {
  TEST_CASE("import: a code bundle with the runtime tools, the problem statement as prompt, patches kept apart") {
    Fixture& f = Python();
    auto bundle = sandbox::EnvBundle::Load(f.bundle);
    REQUIRE_MESSAGE(bundle.ok(), bundle.status().ToString());
    CHECK(bundle->manifest.kind == "code");
    REQUIRE(bundle->tasks.size() == 1);
    CHECK(bundle->tasks[0].id == f.instance.instance_id);
    CHECK(bundle->tasks[0].prompt == f.instance.problem_statement);
    CHECK(bundle->tasks[0].solution_source.empty());  // the gold patch is not a task source
    std::vector<std::string> tools;
    for (const auto& tool : bundle->tools) tools.push_back(tool.spec.name);
    CHECK(tools == std::vector<std::string>{"read_file", "list_dir", "search_code", "edit_file", "apply_patch",
                                            "run_command", "run_tests", "submit_result"});
    auto task = sandbox::code::LoadCodeTask(f.bundle, f.instance.instance_id);
    REQUIRE(task.ok());
    CHECK(task->instance.patch == f.instance.patch);
    CHECK(task->instance.base_commit.size() == 40);
  }

  TEST_CASE("import: the repository holds the base commit and its history, nothing later") {
    Fixture& f = Python();
    TempDir work;
    auto archive = sandbox::code::LoadRepoArchive(f.bundle, f.instance.instance_id);
    REQUIRE(archive.ok());
    REQUIRE(sandbox::code::ExtractTar(*archive, work.path()).ok());
    const std::string base = Git(f.repo, {"rev-parse", f.instance.base_commit});
    CHECK(Git(work.path(), {"rev-parse", "HEAD"}) == base);
    CHECK(Git(work.path(), {"status", "--porcelain"}).empty());
    CHECK(Git(work.path(), {"rev-list", "--all", "--count"}) == Git(f.repo, {"rev-list", "--count", base}));
    const std::string later = Git(f.repo, {"rev-list", base + "..main"});
    REQUIRE(!later.empty());  // the fixture has the fix and more after the base
    for (size_t start = 0; start < later.size();) {
      const size_t end = std::min(later.find('\n', start), later.size());
      const std::string commit = later.substr(start, end - start);
      CAPTURE(commit);
      CHECK_FALSE(sandbox::code::RunGit(work.path(), {"cat-file", "-e", commit}).ok());
      start = end + 1;
    }
    CHECK(Git(work.path(), {"remote"}).empty());
    CHECK(Git(work.path(), {"reflog", "--all"}).empty());
    CHECK(Git(work.path(), {"for-each-ref", "--format=%(refname)"}) == "refs/heads/main");
  }

  TEST_CASE("validate: the gold patch turns the declared tests from failing to passing and breaks none") {
    Fixture& f = Python();
    auto validation = ValidateCodeTask(f.bundle, f.instance.instance_id, 2, RunOptions());
    REQUIRE_MESSAGE(validation.ok(), validation.status().ToString());
    CHECK_MESSAGE(validation->valid, validation->reason);
    CHECK(std::set<std::string>(validation->fail_to_pass.begin(), validation->fail_to_pass.end()) ==
          std::set<std::string>(f.instance.fail_to_pass.begin(), f.instance.fail_to_pass.end()));
    CHECK(validation->pass_to_fail.empty());
    CHECK(validation->flaky.empty());
    CHECK(validation->pass_to_pass.size() == f.instance.pass_to_pass.size());
    CHECK(validation->after_command["isolation"]["network"] == "off: an empty network namespace");
    // Stored beside the instance, outside the content hash.
    auto hash_before = sandbox::ComputeContentHash(f.bundle);
    REQUIRE(sandbox::code::StoreCodeValidation(f.bundle, f.instance.instance_id, validation->ToJson()).ok());
    CHECK(sandbox::ComputeContentHash(f.bundle).value() == hash_before.value());
    CHECK(sandbox::code::LoadCodeTask(f.bundle, f.instance.instance_id)->validation["valid"] == true);
  }

  TEST_CASE("validate: a gold patch that breaks a passing test is invalid, and the test is named") {
    Fixture& f = Python();
    auto validation = ValidateCodeTask(f.bundle, f.instance.instance_id, 1, RunOptions(), f.bad_patch);
    REQUIRE_MESSAGE(validation.ok(), validation.status().ToString());
    CHECK_FALSE(validation->valid);
    REQUIRE(validation->pass_to_fail.size() == 1);
    CHECK(validation->reason.find(validation->pass_to_fail[0]) != std::string::npos);
  }

  TEST_CASE("grading: the gold diff resolves; nothing, or deleting the tests, does not") {
    Fixture& f = Python();
    auto gold = GradeCodeSubmission(f.bundle, f.instance.instance_id, f.instance.patch, RunOptions());
    REQUIRE_MESSAGE(gold.ok(), gold.status().ToString());
    CHECK_MESSAGE(gold->resolved, gold->ToJson().dump());
    auto nothing = GradeCodeSubmission(f.bundle, f.instance.instance_id, "", RunOptions());
    REQUIRE(nothing.ok());
    CHECK_FALSE(nothing->resolved);
    CHECK(nothing->failing.size() >= f.instance.fail_to_pass.size());
    // Deleting the tests does not pass them: the graded copy gets the test patch's files back, so
    // without the fix the fail-to-pass tests fail; with it, they pass.
    TempDir work;
    REQUIRE(
        sandbox::code::ExtractTar(sandbox::code::LoadRepoArchive(f.bundle, f.instance.instance_id).value(), work.path())
            .ok());
    Git(work.path(), {"rm", "-q", "-r", "tests"});
    const std::string deleted = *sandbox::code::RunGit(work.path(), {"diff", "HEAD"});
    auto cheated = GradeCodeSubmission(f.bundle, f.instance.instance_id, deleted, RunOptions());
    REQUIRE(cheated.ok());
    CHECK_FALSE(cheated->resolved);
    REQUIRE(sandbox::code::RunGit(work.path(), {"apply", "-"}, f.instance.patch).ok());
    const std::string fixed_and_deleted = *sandbox::code::RunGit(work.path(), {"diff", "HEAD"});
    auto fixed = GradeCodeSubmission(f.bundle, f.instance.instance_id, fixed_and_deleted, RunOptions());
    REQUIRE(fixed.ok());
    CHECK_MESSAGE(fixed->resolved, fixed->ToJson().dump());
    auto undeleted = GradeCodeSubmission(f.bundle, f.instance.instance_id, "not a diff\n", RunOptions());
    REQUIRE(undeleted.ok());
    CHECK_FALSE(undeleted->resolved);  // a diff that does not apply resolves nothing
  }

  TEST_CASE("a run reads every JUnit file: an empty one beside real ones is fine, only empty ones are an error") {
    Fixture& f = Python();
    const auto archive = sandbox::code::RepoSource::FromArchive(
        sandbox::code::LoadRepoArchive(f.bundle, f.instance.instance_id).value());
    CodeInstance with_empty = f.instance;
    with_empty.test_command +=
        "; printf '<testsuite name=\"platform\" tests=\"0\"></testsuite>' > \"$ENVFORGE_JUNIT_DIR/empty.xml\"";
    auto run = sandbox::code::RunTestsOnFreshCopy(archive, with_empty, {}, false, RunOptions());
    REQUIRE_MESSAGE(run.ok(), run.status().ToString());
    CHECK(run->junit_files == 2);
    CHECK(run->statuses.size() >= f.instance.pass_to_pass.size());
    CodeInstance only_empty = f.instance;
    only_empty.test_command =
        "printf '<testsuite name=\"platform\" tests=\"0\"></testsuite>' > \"$ENVFORGE_JUNIT_DIR/empty.xml\"";
    auto empty = sandbox::code::RunTestsOnFreshCopy(archive, only_empty, {}, false, RunOptions());
    REQUIRE_FALSE(empty.ok());
    CHECK(empty.status().code() == StatusCode::kDataLoss);
    CHECK(empty.status().message().find("hold no test") != std::string::npos);
    CodeInstance none = f.instance;
    none.test_command = "true";
    auto nothing = sandbox::code::RunTestsOnFreshCopy(archive, none, {}, false, RunOptions());
    REQUIRE_FALSE(nothing.ok());
    CHECK(nothing.status().message().find("wrote no JUnit XML") != std::string::npos);
  }

  TEST_CASE("the sandbox: no network, read-only toolchains, the working copy writable, a wall clock") {
    TempDir work;
    auto run = [&](const std::string& command, int64_t wall_ms = 20'000) {
      sandbox::code::SandboxedCommandOptions options;
      options.command = command;
      options.workdir = work.path();
      options.limits.wall_ms = wall_ms;
      auto result = sandbox::code::RunSandboxedCommand(options);
      REQUIRE_MESSAGE(result.ok(), result.status().ToString());
      return *result;
    };
    auto network = run("python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 80), timeout=3)'");
    CHECK_FALSE(network.succeeded());
    CHECK(run("echo hi > /work/out.txt && cat out.txt").output == "hi\n");
    CHECK(fs::exists(work.path() / "out.txt"));
    CHECK_FALSE(run("touch /usr/envforge-test").succeeded());
    CHECK_FALSE(run("touch /etc/envforge-test").succeeded());
    CHECK(run("test ! -e /root/.bashrc && test -z \"$(ls /home 2>/dev/null)\"").succeeded());
    auto slow = run("sleep 30", 500);
    CHECK(slow.timed_out);
    CHECK(slow.seconds < 10);
    auto background = run("(sleep 60 &) ; echo started");  // a leftover process does not hold the run
    CHECK(background.succeeded());
    CHECK(background.seconds < 10);
    auto failing = run("echo oops >&2; exit 3");
    CHECK(failing.exit_code == 3);
    CHECK(failing.output == "oops\n");
  }

  toolsets::ToolResult CallTool(sandbox::code::CodeWorkspace & workspace, const std::string& name, Json arguments) {
    return workspace.Call({"c", name, std::move(arguments)});
  }

  TEST_CASE("workspace tools: read, list, search, edit, apply_patch, run_command, run_tests and the diff") {
    Fixture& f = Python();
    TempDir dir;
    sandbox::code::CodeWorkspaceOptions options;
    options.test_command = f.instance.test_command;
    options.junit_producer = f.instance.junit_producer;
    auto created = sandbox::code::CodeWorkspace::Create(
        sandbox::code::RepoSource::FromArchive(
            sandbox::code::LoadRepoArchive(f.bundle, f.instance.instance_id).value()),
        dir.path() / "ws", options);
    REQUIRE_MESSAGE(created.ok(), created.status().ToString());
    sandbox::code::CodeWorkspace& ws = **created;
    const std::string source = sandbox::code::DiffPaths(f.instance.patch)[0];

    auto read = CallTool(ws, "read_file", {{"path", source}, {"start_line", 1}, {"end_line", 3}});
    REQUIRE_MESSAGE(read.ok(), read.message);
    CHECK(read.content["content"].get<std::string>().starts_with("1\t"));
    auto listed = CallTool(ws, "list_dir", {{"depth", 2}});
    REQUIRE(listed.ok());
    const Json& entries = listed.content["entries"];
    CHECK(std::find(entries.begin(), entries.end(), source) != entries.end());
    CHECK(std::none_of(entries.begin(), entries.end(),
                       [](const Json& e) { return e.get<std::string>().starts_with(".git/"); }));
    auto found = CallTool(ws, "search_code", {{"pattern", "def [a-z_]+\\("}, {"max_results", 5}});
    REQUIRE_MESSAGE(found.ok(), found.message);
    CHECK_FALSE(found.content["matches"].empty());

    // Paths and symlinks stay inside the working copy.
    CHECK(CallTool(ws, "read_file", {{"path", "../../../etc/passwd"}}).outcome == toolsets::Outcome::kToolError);
    CHECK(CallTool(ws, "read_file", {{"path", "/etc/passwd"}}).outcome == toolsets::Outcome::kToolError);
    REQUIRE(CallTool(ws, "run_command", {{"command", "ln -s /etc/passwd leak"}}).content["exit_code"] == 0);
    auto leak = CallTool(ws, "read_file", {{"path", "leak"}});
    CHECK(leak.outcome == toolsets::Outcome::kToolError);
    CHECK(CallTool(ws, "edit_file", {{"path", "leak"}, {"old_text", "root"}, {"new_text", "x"}}).outcome ==
          toolsets::Outcome::kToolError);
    REQUIRE(CallTool(ws, "run_command", {{"command", "rm leak"}}).ok());

    // edit_file: exactly one occurrence, or a new file.
    CHECK(CallTool(ws, "edit_file", {{"path", "NOTES.md"}, {"old_text", ""}, {"new_text", "a\na\n"}}).ok());
    auto twice = CallTool(ws, "edit_file", {{"path", "NOTES.md"}, {"old_text", "a"}, {"new_text", "b"}});
    CHECK(twice.message.find("2 times") != std::string::npos);
    CHECK(CallTool(ws, "edit_file", {{"path", "NOTES.md"}, {"old_text", "a\na"}, {"new_text", "b"}}).ok());

    // The gold fix through apply_patch: the fail-to-pass tests pass in run_tests (the test patch is
    // not in the working copy, so only the existing tests run).
    CHECK(CallTool(ws, "apply_patch", {{"patch", "not a diff"}}).outcome == toolsets::Outcome::kToolError);
    auto applied = CallTool(ws, "apply_patch", {{"patch", f.instance.patch}});
    REQUIRE_MESSAGE(applied.ok(), applied.message);
    CHECK(applied.content["files"].size() >= 1);
    auto tests = CallTool(ws, "run_tests", {});
    REQUIRE_MESSAGE(tests.ok(), tests.message);
    CHECK(tests.content["tests"].size() >= 4);
    for (const auto& [id, status] : tests.content["tests"].items()) CHECK_MESSAGE(status == "pass", id);
    auto subset = CallTool(ws, "run_tests", {{"tests", {f.instance.pass_to_pass[0], "no::such_test"}}});
    REQUIRE(subset.ok());
    CHECK(subset.content["tests"].size() == 2);
    CHECK(subset.content["tests"]["no::such_test"] == "missing");

    // The diff of the working copy (new file included) is what submit_result grades.
    auto diff = ws.Diff();
    REQUIRE_MESSAGE(diff.ok(), diff.status().ToString());
    CHECK(diff->find("NOTES.md") != std::string::npos);
    CHECK(diff->find(source) != std::string::npos);
    auto grade = GradeCodeSubmission(f.bundle, f.instance.instance_id, *diff, RunOptions());
    REQUIRE(grade.ok());
    CHECK_MESSAGE(grade->resolved, grade->ToJson().dump());
    auto network = CallTool(
        ws, "run_command",
        {{"command", "python3 -c 'import urllib.request; urllib.request.urlopen(\"http://1.1.1.1\", timeout=3)'"}});
    REQUIRE(network.ok());
    CHECK(network.content["exit_code"] != 0);
    auto slow = CallTool(ws, "run_command", {{"command", "sleep 20"}, {"timeout_seconds", 1}});
    CHECK(slow.content["timed_out"] == true);
  }

  TEST_CASE("code sessions through the session manager: tools, the gold patch, submit_result graded") {
    Fixture& f = Python();
    auto manager = sandbox::SessionManager::Create(sandbox::ManagerOptions{});
    REQUIRE_MESSAGE(manager.ok(), manager.status().ToString());
    auto env_id = (*manager)->OpenEnvironment(f.bundle);
    REQUIRE_MESSAGE(env_id.ok(), env_id.status().ToString());
    auto taskless = (*manager)->CreateSession(*env_id, std::string());
    REQUIRE_FALSE(taskless.ok());
    CHECK(taskless.status().code() == StatusCode::kFailedPrecondition);

    // A session that applies the gold patch through apply_patch and submits: passed.
    auto solver = (*manager)->CreateSession(*env_id, f.instance.instance_id);
    REQUIRE_MESSAGE(solver.ok(), solver.status().ToString());
    auto listed = (*manager)->CallTool(*solver, {"1", "list_dir", Json::object()});
    REQUIRE_MESSAGE(listed.ok(), listed.message);
    auto applied = (*manager)->CallTool(*solver, {"2", "apply_patch", {{"patch", f.instance.patch}}});
    REQUIRE_MESSAGE(applied.ok(), applied.message);
    auto bad_call = (*manager)->CallTool(*solver, {"3", "read_file", {{"no_path", 1}}});
    CHECK(bad_call.outcome == toolsets::Outcome::kInvalidCall);  // the schema is checked first
    auto submitted = (*manager)->CallTool(*solver, {"4", "submit_result", Json::object()});
    REQUIRE_MESSAGE(submitted.ok(), submitted.message);
    CHECK(submitted.content["passed"] == true);
    CHECK(submitted.content["score"] == 1.0);

    // One that submits nothing fails, naming the tests; sessions do not share working copies.
    auto idle = (*manager)->CreateSession(*env_id, f.instance.instance_id);
    REQUIRE(idle.ok());
    auto untouched =
        (*manager)->CallTool(*idle, {"1", "read_file", {{"path", sandbox::code::DiffPaths(f.instance.patch)[0]}}});
    REQUIRE(untouched.ok());
    auto nothing = (*manager)->CallTool(*idle, {"2", "submit_result", {{"answer_text", "done"}}});
    REQUIRE_MESSAGE(nothing.ok(), nothing.message);
    CHECK(nothing.content["passed"] == false);
    CHECK_FALSE(nothing.content["reasons"].empty());

    // Solve applies the gold patch (env check and session solve use it).
    auto gold = (*manager)->CreateSession(*env_id, f.instance.instance_id);
    REQUIRE(gold.ok());
    auto solved = (*manager)->Solve(*gold);
    REQUIRE_MESSAGE(solved.ok(), solved.status().ToString());
    CHECK(solved->answer_text == f.instance.patch);
    CHECK(
        (*manager)->CallTool(*gold, {"1", "submit_result", {{"answer_text", solved->answer_text}}}).content["passed"] ==
        true);
    for (auto id : {*solver, *idle, *gold}) CHECK((*manager)->CloseSession(id).ok());
    const Json stats = (*manager)->CodeCopyStats(*env_id).value();
    CHECK(stats["templates"] == 1);  // one extraction for the task; each session got a copy of it
    // Three sessions and three gradings (each on a fresh copy): overlays where this process may
    // mount them, else copies.
    CHECK(stats["overlay_checkouts"].get<int>() + stats["ready_checkouts"].get<int>() +
              stats["copied_checkouts"].get<int>() ==
          6);
  }

  TEST_CASE("a fork of a code session starts from the parent's working copy and goes its own way") {
    Fixture& f = Python();
    auto manager = sandbox::SessionManager::Create(sandbox::ManagerOptions{});
    REQUIRE_MESSAGE(manager.ok(), manager.status().ToString());
    auto env_id = (*manager)->OpenEnvironment(f.bundle);
    REQUIRE_MESSAGE(env_id.ok(), env_id.status().ToString());
    auto parent = (*manager)->CreateSession(*env_id, f.instance.instance_id);
    REQUIRE_MESSAGE(parent.ok(), parent.status().ToString());
    auto noted = (*manager)->CallTool(
        *parent, {"1", "edit_file", {{"path", "NOTES.txt"}, {"old_text", ""}, {"new_text", "parent's note\n"}}});
    REQUIRE_MESSAGE(noted.ok(), noted.message);

    auto child = (*manager)->ForkSession(*parent);
    REQUIRE_MESSAGE(child.ok(), child.status().ToString());
    auto inherited = (*manager)->CallTool(*child, {"1", "read_file", {{"path", "NOTES.txt"}}});
    REQUIRE_MESSAGE(inherited.ok(), inherited.message);
    CHECK(inherited.content["content"] == "1\tparent's note\n");
    // The child fixes the issue; the parent's copy does not change, and each is graded on its own.
    auto applied = (*manager)->CallTool(*child, {"2", "apply_patch", {{"patch", f.instance.patch}}});
    REQUIRE_MESSAGE(applied.ok(), applied.message);
    auto child_note =
        (*manager)->CallTool(*child, {"3", "edit_file", {{"path", "CHILD.txt"}, {"old_text", ""}, {"new_text", "x"}}});
    REQUIRE(child_note.ok());
    CHECK((*manager)->CallTool(*parent, {"2", "read_file", {{"path", "CHILD.txt"}}}).outcome ==
          toolsets::Outcome::kToolError);
    auto child_verdict = (*manager)->CallTool(*child, {"4", "submit_result", Json::object()});
    REQUIRE_MESSAGE(child_verdict.ok(), child_verdict.message);
    CHECK(child_verdict.content["passed"] == true);
    auto parent_verdict = (*manager)->CallTool(*parent, {"3", "submit_result", Json::object()});
    REQUIRE_MESSAGE(parent_verdict.ok(), parent_verdict.message);
    CHECK(parent_verdict.content["passed"] == false);

    // A fork of a fork, after its parent closed: the copy is the grandchild's own.
    auto grandchild = (*manager)->ForkSession(*child);
    REQUIRE_MESSAGE(grandchild.ok(), grandchild.status().ToString());
    CHECK((*manager)->CloseSession(*child).ok());
    CHECK((*manager)->CallTool(*grandchild, {"1", "read_file", {{"path", "CHILD.txt"}}}).content["content"] ==
          "1\tx\n");
    for (auto id : {*parent, *grandchild}) CHECK((*manager)->CloseSession(id).ok());
  }

  TEST_CASE("concurrent code sessions do not see each other: edits, commands and test runs stay in their copy") {
    Fixture& f = Python();
    auto manager = sandbox::SessionManager::Create(sandbox::ManagerOptions{});
    REQUIRE_MESSAGE(manager.ok(), manager.status().ToString());
    auto env_id = (*manager)->OpenEnvironment(f.bundle);
    REQUIRE_MESSAGE(env_id.ok(), env_id.status().ToString());
    constexpr int kSessions = 8;
    std::vector<sandbox::SessionManager::SessionId> sessions;
    for (int i = 0; i < kSessions; ++i) {
      auto session = (*manager)->CreateSession(*env_id, f.instance.instance_id);
      REQUIRE_MESSAGE(session.ok(), session.status().ToString());
      sessions.push_back(*session);
      if (i % 2 == 1) REQUIRE((*manager)->CallTool(*session, {"p", "apply_patch", {{"patch", f.instance.patch}}}).ok());
    }
    // Every session at once: a marker written, a pause, read back; then the tests.
    std::mutex mutex;
    std::condition_variable answered_cv;
    std::vector<toolsets::ToolResult> markers(kSessions), tests(kSessions);
    int answered = 0;
    for (int i = 0; i < kSessions; ++i) {
      const std::string command = "echo session-" + std::to_string(i) + " > marker.txt && sleep 0.3 && cat marker.txt";
      (*manager)->CallToolAsync(sessions[i], {"m", "run_command", {{"command", command}}},
                                [&, i](toolsets::ToolResult result) {
                                  std::lock_guard lock(mutex);
                                  markers[i] = std::move(result);
                                  ++answered;
                                  answered_cv.notify_all();
                                });
      (*manager)->CallToolAsync(sessions[i], {"t", "run_tests", Json::object()}, [&, i](toolsets::ToolResult result) {
        std::lock_guard lock(mutex);
        tests[i] = std::move(result);
        ++answered;
        answered_cv.notify_all();
      });
    }
    {
      std::unique_lock lock(mutex);
      REQUIRE(answered_cv.wait_for(lock, std::chrono::minutes(5), [&] { return answered == 2 * kSessions; }));
    }
    const std::string source = sandbox::code::DiffPaths(f.instance.patch)[0];
    const std::string original =
        (*manager)->CallTool(sessions[0], {"r", "read_file", {{"path", source}}}).content["content"];
    for (int i = 0; i < kSessions; ++i) {
      CAPTURE(i);
      REQUIRE_MESSAGE(markers[i].ok(), markers[i].message);
      CHECK(markers[i].content["output"] == "session-" + std::to_string(i) + "\n");
      REQUIRE_MESSAGE(tests[i].ok(), tests[i].message);
      for (const std::string& id : f.instance.pass_to_pass)
        CHECK(tests[i].content["tests"].value(id, "missing") == "pass");
      const bool patched = i % 2 == 1;
      const Json read = (*manager)->CallTool(sessions[i], {"r", "read_file", {{"path", source}}}).content;
      CHECK((read["content"] == original) != patched);
    }
    for (auto id : sessions) CHECK((*manager)->CloseSession(id).ok());
  }

  TEST_CASE("bad input: a missing commit, a malformed instance, a bundle that is not a code bundle") {
    Fixture& f = Python();
    TempDir dir;
    CodeInstance missing = f.instance;
    missing.base_commit = "0123456789abcdef0123456789abcdef01234567";
    auto imported = sandbox::code::ImportCodeInstances({missing}, f.repo.string(), dir / "x.envdb");
    REQUIRE_FALSE(imported.ok());
    CHECK(imported.status().code() == StatusCode::kNotFound);
    CHECK(imported.status().message().find("0123456789abcdef") != std::string::npos);
    CHECK_FALSE(fs::exists(dir / "x.envdb"));  // nothing half-written
    Json json = f.instance.ToJson();
    json.erase("test_command");
    auto parsed = sandbox::code::ParseCodeInstance(json, "instance.json");
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.status().message().find("test_command") != std::string::npos);
    json = f.instance.ToJson();
    json["language"] = "cobol";
    CHECK(sandbox::code::ParseCodeInstance(json, "x").status().message().find("cobol") != std::string::npos);
    json = f.instance.ToJson();
    json["FAIL_TO_PASS"] = "[\"a::b\"]";  // SWE-bench's datasets store the lists as strings
    CHECK(sandbox::code::ParseCodeInstance(json, "x")->fail_to_pass == std::vector<std::string>{"a::b"});
    auto not_code =
        sandbox::code::LoadCodeTask((fs::path(SourceDir()) / "tests/fixtures/envs/interp_mini").string(), "t");
    CHECK_FALSE(not_code.ok());
  }

}  // TEST_SUITE
}  // namespace
}  // namespace envforge::verifiers
