// schema_agreement_cases.json through every path that validates tool arguments, in a real session
// of the real envforge-worker:
//   1. toolsets/json_schema.h called directly (the expected verdict and message),
//   2. the session manager's check of an agent's tools/call (outcome invalid_call),
//   3. the worker's check of a gold solution's tool calls inside the sandbox (runtime.py through
//      the embedded _envforge_schema module): the solution calls one tool per case and returns
//      each ToolCallError's text.
// All three must accept and refuse the same arguments, with the same messages.
//
// Each case becomes a tool t<i>. Arguments must be an object, so a case whose instance is not an
// object is wrapped: {"v": instance} against {"type": "object", "properties": {"v": schema},
// "required": ["v"]}, with the schema's $defs/definitions lifted to the wrapper's root so that
// "#/$defs/..." references still resolve.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/json.h"
#include "tests/sandbox/manager_test_util.h"
#include "toolsets/json_schema.h"

namespace envforge::toolsets {
namespace {

namespace st = ::envforge::sandbox::testing;

struct Case {
  std::string tool;
  Json schema;     // the tool's input schema
  Json arguments;  // the call's arguments
  bool valid = false;
};

std::vector<Case> LoadCases() {
  const char* source = std::getenv("ENVFORGE_SOURCE_DIR");
  std::ifstream file(std::string(source != nullptr ? source : ENVFORGE_TEST_SOURCE_DIR) +
                     "/tests/toolsets/schema_agreement_cases.json");
  REQUIRE(file.good());
  std::stringstream text;
  text << file.rdbuf();
  const Json document = Json::parse(text.str());
  std::vector<Case> cases;
  for (const Json& c : document["cases"]) {
    Case out;
    out.tool = "t" + std::to_string(cases.size());
    out.valid = c["valid"].get<bool>();
    if (c["instance"].is_object()) {
      out.schema = c["schema"];
      out.arguments = c["instance"];
    } else {
      Json inner = c["schema"];
      out.schema = {{"type", "object"}, {"required", {"v"}}};
      for (const char* container : {"$defs", "definitions"}) {
        if (inner.is_object() && inner.contains(container)) out.schema[container] = inner[container];
      }
      out.schema["properties"] = {{"v", inner}};
      out.arguments = {{"v", c["instance"]}};
    }
    cases.push_back(std::move(out));
  }
  return cases;
}

// The message runtime.py raises for a refused call; "" for an accepted one.
std::string ExpectedSolutionMessage(const Case& c) {
  Result<CompiledSchema> compiled = CompiledSchema::Compile(c.schema);
  REQUIRE_MESSAGE(compiled.ok(), compiled.status().message());
  std::string violations = DescribeViolations(compiled->Validate(c.arguments));
  return violations.empty() ? "" : "invalid call to tool '" + c.tool + "': " + violations;
}

// tools.py: one accept-anything function per case.
std::string ToolsSource(const std::vector<Case>& cases) {
  std::string source = "\n";
  for (const Case& c : cases) source += "def " + c.tool + "(**arguments):\n    return True\n\n";
  return source;
}

// solve(tools): calls every tool with its case's arguments (JSON literals read as Python) and
// returns, per case, "" or the ToolCallError's text.
std::string SolutionSource(const std::vector<Case>& cases) {
  std::string source =
      "true, false, null = True, False, None\n\n"
      "def attempt(call, arguments):\n"
      "    try:\n"
      "        call(**arguments)\n"
      "        return ''\n"
      "    except ToolCallError as exc:\n"
      "        return str(exc)\n\n"
      "def solve(tools):\n"
      "    return [\n";
  for (const Case& c : cases) source += "        attempt(tools." + c.tool + ", " + DumpJson(c.arguments) + "),\n";
  return source + "    ]\n";
}

// The fixture bundle plus the case tools, with sum_task's solution replaced by SolutionSource
// (content hash and task version recomputed, as WriteFixtureBundle does).
std::string WriteBundle(const std::string& path, const std::vector<Case>& cases) {
  std::vector<st::FixtureTool> tools;
  std::vector<std::string> schemas;
  schemas.reserve(cases.size());
  for (const Case& c : cases) schemas.push_back(DumpJson(c.schema));
  for (size_t i = 0; i < cases.size(); ++i) tools.push_back({cases[i].tool.c_str(), schemas[i].c_str()});
  st::WriteFixtureBundle(path, "schema agreement", ToolsSource(cases), tools);
  const std::string solution = SolutionSource(cases);
  auto db = Database::Open(path, Database::Mode::kReadWrite);
  REQUIRE(db.ok());
  st::Exec(*db, "UPDATE _tasks SET solution_source = ? WHERE id = 'sum_task'", {solution});
  auto hash = sandbox::ComputeContentHash(path);
  REQUIRE_MESSAGE(hash.ok(), hash.status().ToString());
  st::Exec(*db, "UPDATE _env SET value = ? WHERE key = 'content_hash'", {*hash});
  sandbox::TaskRecord task;
  task.id = "sum_task";
  task.prompt = "What is 2 + 3? Answer with the integer.";
  task.solution_source = solution;
  task.verifier_source = "def verify(answer, db):\n    return answer == 5\n";
  st::Exec(*db, "UPDATE _tasks SET version = ? WHERE id = 'sum_task'", {sandbox::TaskVersion(*hash, task)});
  return path;
}

TEST_CASE("the agreement cases through C++, an agent's tools/call and a solution's calls in the worker") {
  const std::vector<Case> cases = LoadCases();
  REQUIRE(cases.size() >= 50);
  st::TempDir dir;
  auto manager = sandbox::SessionManager::Create(sandbox::ManagerOptions{});
  REQUIRE_MESSAGE(manager.ok(), manager.status().ToString());
  auto env = (*manager)->OpenEnvironment(WriteBundle(dir / "agreement.envdb", cases));
  REQUIRE_MESSAGE(env.ok(), env.status().ToString());
  auto session = (*manager)->CreateSession(*env, "sum_task");
  REQUIRE_MESSAGE(session.ok(), session.status().ToString());

  for (const Case& c : cases) {  // path 2: the agent's call
    INFO(c.tool << " " << DumpJson(c.schema) << " " << DumpJson(c.arguments));
    std::string expected = ExpectedSolutionMessage(c);
    CHECK(expected.empty() == c.valid);  // path 1
    ToolResult result = (*manager)->CallTool(*session, st::Call(c.tool, c.arguments));
    CHECK((result.outcome == Outcome::kInvalidCall) == !c.valid);
    if (!c.valid) CHECK(expected == "invalid call to tool '" + c.tool + "': " + result.message);
  }

  auto solved = (*manager)->Solve(*session);  // path 3: the solution's calls in the worker
  REQUIRE_MESSAGE(solved.ok(), solved.status().ToString());
  REQUIRE(solved->answer.is_array());
  REQUIRE(solved->answer.size() == cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO(cases[i].tool << " " << DumpJson(cases[i].schema) << " " << DumpJson(cases[i].arguments));
    CHECK(solved->answer[i].get<std::string>() == ExpectedSolutionMessage(cases[i]));
  }
}

}  // namespace
}  // namespace envforge::toolsets
