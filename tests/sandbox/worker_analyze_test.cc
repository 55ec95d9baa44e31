// `envforge-worker analyze`: tool schemas from tools.py and every rule for solutions, verifiers
// and oracles, each problem with its precise line. Runs the real worker binary.
#include <doctest/doctest.h>

#include <string>

#include "base/fd.h"
#include "base/json.h"
#include "base/subprocess.h"

namespace envforge {
namespace {

Json Analyze(const Json& request) {
  CommandOptions options;
  options.stdin_text = request.dump();
  options.timeout = std::chrono::seconds(60);
  auto run = RunCommand({ExecutableDirectory() + "/envforge-worker", "analyze"}, options);
  REQUIRE(run.ok());
  INFO("stderr: " << run->stderr_text);
  REQUIRE(run->exit_code == 0);
  auto parsed = ParseJson(run->stdout_text);
  REQUIRE(parsed.ok());
  return *parsed;
}

Json Tools(const std::string& source) { return Analyze({{"tools", {{"path", "tools.py"}, {"source", source}}}}); }

// The problems as "path:line: message" lines, for readable failures and substring checks.
std::string Problems(const Json& result) {
  std::string out;
  for (const Json& p : result["problems"]) {
    out += p["path"].get<std::string>() + ":" + std::to_string(p["line"].get<int>()) + ": " +
           p["message"].get<std::string>() + "\n";
  }
  return out;
}

bool HasProblem(const Json& result, const std::string& path, int line, const std::string& fragment) {
  for (const Json& p : result["problems"]) {
    if (p["path"] == path && p["line"] == line && p["message"].get<std::string>().find(fragment) != std::string::npos) {
      return true;
    }
  }
  return false;
}

TEST_SUITE("sandbox.worker.analyze") {
  TEST_CASE("public tools become MCP specs with typed schemas, defaults and Args descriptions") {
    const char* source = R"PY(import json

_CACHE = {}


def _helper(x):
    return x


def find_hotels(city: str, max_price: float = 500.0, tags: list[str] = [], limit: int = 10,
                *, include_closed: bool = False, extra: dict = {}):
    """Find hotels in a city.

    The second paragraph is not part of the description.

    Args:
        city: exact city name,
            as returned by list_cities.
        max_price (float): upper bound in CNY.
    """
    return []


def list_cities(ids: list) -> list:
    """List   every
    city."""
    return []
)PY";
    Json result = Tools(source);
    INFO(Problems(result));
    CHECK(result["problems"].empty());
    REQUIRE(result["tools"].size() == 2);
    const Json& find = result["tools"][0];
    CHECK(find["name"] == "find_hotels");
    CHECK(find["line"] == 10);
    CHECK(find["description"] == "Find hotels in a city.");
    CHECK(find["source"].get<std::string>().rfind("def find_hotels(city: str", 0) == 0);
    const Json& schema = find["inputSchema"];
    CHECK(schema["type"] == "object");
    CHECK(schema["additionalProperties"] == false);
    CHECK(schema["required"] == Json::array({"city"}));
    CHECK(schema["properties"]["city"] ==
          Json({{"type", "string"}, {"description", "exact city name, as returned by list_cities."}}));
    CHECK(schema["properties"]["max_price"] ==
          Json({{"type", "number"}, {"default", 500.0}, {"description", "upper bound in CNY."}}));
    CHECK(schema["properties"]["tags"] ==
          Json({{"type", "array"}, {"items", {{"type", "string"}}}, {"default", Json::array()}}));
    CHECK(schema["properties"]["limit"] == Json({{"type", "integer"}, {"default", 10}}));
    CHECK(schema["properties"]["include_closed"] == Json({{"type", "boolean"}, {"default", false}}));
    CHECK(schema["properties"]["extra"] == Json({{"type", "object"}, {"default", Json::object()}}));
    const Json& list = result["tools"][1];
    CHECK(list["name"] == "list_cities");
    CHECK(list["description"] == "List every city.");
    CHECK(list["inputSchema"]["properties"]["ids"] == Json({{"type", "array"}}));
  }

  TEST_CASE("unsupported tool signatures are problems naming the tool, the parameter and the line") {
    const char* source = R"PY(from typing import Optional


def no_annotation(city):
    """Doc."""


def optional(city: Optional[str]):
    """Doc."""


def star(*cities: str):
    """Doc."""


def kwargs(**options: str):
    """Doc."""


def positional_only(city: str, /):
    """Doc."""


def undocumented(city: str):
    return city


def submit_result(answer_text: str):
    """Reserved."""


def nested(rows: list[list]):
    """Doc."""


def wrong_default(limit: int = "ten"):
    """Doc."""


def not_literal(limit: int = len("x")):
    """Doc."""


def fine(x: int):
    """Fine."""
)PY";
    Json result = Tools(source);
    INFO(Problems(result));
    CHECK(HasProblem(result, "tools.py", 4, "tool 'no_annotation': parameter 'city' has no type annotation"));
    CHECK(
        HasProblem(result, "tools.py", 8, "tool 'optional': parameter 'city': unsupported annotation 'Optional[str]'"));
    CHECK(HasProblem(result, "tools.py", 12, "tool 'star': *cities is not allowed"));
    CHECK(HasProblem(result, "tools.py", 16, "tool 'kwargs': **options is not allowed"));
    CHECK(HasProblem(result, "tools.py", 20, "tool 'positional_only': parameter 'city' is positional-only"));
    CHECK(HasProblem(result, "tools.py", 24, "tool 'undocumented' has no docstring"));
    CHECK(HasProblem(result, "tools.py", 28, "tool 'submit_result' is reserved"));
    CHECK(HasProblem(result, "tools.py", 32, "tool 'nested': parameter 'rows': list items must be"));
    CHECK(HasProblem(result, "tools.py", 36,
                     "tool 'wrong_default': parameter 'limit' is annotated int but defaults to 'ten'"));
    CHECK(HasProblem(result, "tools.py", 40, "tool 'not_literal': the default of parameter 'limit' is not a literal"));
    CHECK(result["problems"].size() == 10);
    REQUIRE(result["tools"].size() == 1);
    CHECK(result["tools"][0]["name"] == "fine");
  }

  TEST_CASE("a tools.py that does not compile is one problem at the failing line") {
    Json result = Tools("def ok(x: int):\n    \"\"\"Doc.\"\"\"\n\n\ndef broken(:\n    pass\n");
    INFO(Problems(result));
    REQUIRE(result["problems"].size() == 1);
    CHECK(result["problems"][0]["line"] == 5);
    CHECK(result["problems"][0]["message"].get<std::string>().find("syntax error") == 0);
    CHECK(result["tools"].empty());
  }

  TEST_CASE("solutions, verifiers and oracles: every forbidden construct at its line") {
    const char* solution = R"PY(import json
import sqlite3
from collections import abc, Counter
import os.path
from . import helpers
import importlib


def solve(tools):
    data = open("/etc/passwd").read()
    x = eval("1 + 1")
    exec("y = 2")
    code = compile("1", "f", "eval")
    m = __import__("os")
    g = globals()
    l = locals()
    v = vars(tools)
    a = getattr(tools, "db")
    setattr(tools, "x", 1)
    delattr(tools, "x")
    breakpoint()
    s = input()
    mv = memoryview(b"x")
    help(tools)
    cls = tools.__class__
    b = __builtins__
    name = type(tools).__name__
    return json.dumps([data, x, code, m, g, l, v, a, s, mv, cls, b, name])
)PY";
    Json result = Analyze({{"solutions", {{{"task", "t1"}, {"path", "tasks/t1/solution.py"}, {"source", solution}}}}});
    INFO(Problems(result));
    const std::string path = "tasks/t1/solution.py";
    CHECK(HasProblem(result, path, 2, "import of 'sqlite3' is not allowed in a solution"));
    CHECK(HasProblem(result, path, 4, "import of 'os.path' is not allowed"));
    CHECK(HasProblem(result, path, 5, "relative import is not allowed"));
    CHECK(HasProblem(result, path, 6, "import of 'importlib' is not allowed"));
    CHECK(HasProblem(result, path, 10, "use of 'open'"));
    CHECK(HasProblem(result, path, 11, "use of 'eval'"));
    CHECK(HasProblem(result, path, 12, "use of 'exec'"));
    CHECK(HasProblem(result, path, 13, "use of 'compile'"));
    CHECK(HasProblem(result, path, 14, "use of '__import__'"));
    CHECK(HasProblem(result, path, 15, "use of 'globals'"));
    CHECK(HasProblem(result, path, 16, "use of 'locals'"));
    CHECK(HasProblem(result, path, 17, "use of 'vars'"));
    CHECK(HasProblem(result, path, 18, "use of 'getattr'"));
    CHECK(HasProblem(result, path, 19, "use of 'setattr'"));
    CHECK(HasProblem(result, path, 20, "use of 'delattr'"));
    CHECK(HasProblem(result, path, 21, "use of 'breakpoint'"));
    CHECK(HasProblem(result, path, 22, "use of 'input'"));
    CHECK(HasProblem(result, path, 23, "use of 'memoryview'"));
    CHECK(HasProblem(result, path, 24, "use of 'help'"));
    CHECK(HasProblem(result, path, 25, "dunder attribute '__class__'"));
    CHECK(HasProblem(result, path, 26, "dunder name '__builtins__'"));
    // json, collections and `type(x).__name__` (line 27) are fine: exactly the 21 above.
    CHECK(result["problems"].size() == 21);

    const char* verifier = R"PY(import subprocess
import math


def verify(answer, db):
    def frames():
        yield gen.gi_frame.f_back
    gen = frames()
    return "{0.__class__}".format(answer) and math.isfinite(1.0)
)PY";
    const char* oracle = "import socket\n\ndef verify(answer):\n    return True\n";
    const char* no_solve = "import json\n\ndef solve(tools, extra):\n    return 1\n";
    const char* missing = "import json\n";
    result = Analyze({{"verifiers", {{{"task", "t2"}, {"path", "tasks/t2/verifier.py"}, {"source", verifier}}}},
                      {"oracles", {{{"task", "t2"}, {"path", "tasks/t2/oracle.py"}, {"source", oracle}}}},
                      {"solutions",
                       {{{"task", "t3"}, {"path", "tasks/t3/solution.py"}, {"source", no_solve}},
                        {{"task", "t4"}, {"path", "tasks/t4/solution.py"}, {"source", missing}}}}});
    INFO(Problems(result));
    CHECK(HasProblem(result, "tasks/t2/verifier.py", 1, "import of 'subprocess' is not allowed in a verifier"));
    CHECK(HasProblem(result, "tasks/t2/verifier.py", 7, "frame attribute 'gi_frame'"));
    CHECK(HasProblem(result, "tasks/t2/verifier.py", 7, "frame attribute 'f_back'"));
    CHECK(HasProblem(result, "tasks/t2/verifier.py", 9, "format string reaching a dunder"));
    CHECK(HasProblem(result, "tasks/t2/oracle.py", 1, "import of 'socket' is not allowed in an oracle"));
    CHECK(HasProblem(result, "tasks/t2/oracle.py", 3, "verify must take exactly 2 positional parameters"));
    CHECK(HasProblem(result, "tasks/t3/solution.py", 3, "solve must take exactly 1 positional parameter"));
    CHECK(HasProblem(result, "tasks/t4/solution.py", 1, "must define `def solve(tools)`"));
    CHECK(result["problems"].size() == 8);
  }

  TEST_CASE("match class patterns may not read underscore or frame attributes by name") {
    const char* solution = R"PY(def solve(tools):
    match tools.list_hotels:
        case object(__globals__=g):
            return g
        case object(_private=p, gi_frame=f):
            return p, f
        case object(real=r, imag=i):
            return r, i
        case object(name=n):
            return n
)PY";
    Json result = Analyze({{"solutions", {{{"task", "t1"}, {"path", "tasks/t1/solution.py"}, {"source", solution}}}}});
    INFO(Problems(result));
    const std::string path = "tasks/t1/solution.py";
    CHECK(HasProblem(result, path, 3,
                     "a class pattern reading the attribute '__globals__' is not allowed in a solution"));
    CHECK(HasProblem(result, path, 5, "a class pattern reading the attribute '_private'"));
    CHECK(HasProblem(result, path, 5, "a class pattern reading the attribute 'gi_frame'"));
    // Public attribute names (lines 7 and 9) are fine, as `x.real` is.
    CHECK(result["problems"].size() == 3);
  }

  TEST_CASE("a malformed request is an error exit, not a result") {
    CommandOptions options;
    options.stdin_text = "[1, 2]";
    auto run = RunCommand({ExecutableDirectory() + "/envforge-worker", "analyze"}, options);
    REQUIRE(run.ok());
    CHECK(run->exit_code != 0);
    CHECK(run->stderr_text.find("malformed analyze request") != std::string::npos);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge
