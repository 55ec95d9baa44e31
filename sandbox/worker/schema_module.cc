// `_envforge_schema`: toolsets/json_schema.h inside the worker's embedded Python, so that a gold
// solution's tool calls (runtime.py _proxy_call) are checked by the same validator as an agent's
// (the session manager's CompiledSchema), not by a second implementation that could disagree.
//
//   compile(schema_text) -> Schema        ValueError naming the keyword's pointer when the schema
//                                         is outside the supported subset
//   Schema.check(arguments_text) -> str   "" when valid, else DescribeViolations' one line
//                                         ("arguments invalid: /city: expected string, ...")
//
// runtime.py compiles every tool's schema once, in the zygote at load (regexes included), so a
// session only validates: pure computation and heap allocation, nothing the seccomp filter or
// Landlock refuses.
#include <pybind11/embed.h>

#include <string>
#include <string_view>
#include <utility>

#include "base/json.h"
#include "toolsets/json_schema.h"

namespace py = pybind11;

namespace envforge::sandbox::worker {
namespace {

constexpr size_t kMaxViolations = 16;  // as the session manager reports an agent's call

std::string_view Utf8(const py::str& text) {
  Py_ssize_t size = 0;
  const char* utf8 = PyUnicode_AsUTF8AndSize(text.ptr(), &size);
  if (utf8 == nullptr) throw py::error_already_set();
  return std::string_view(utf8, static_cast<size_t>(size));
}

class Schema {
 public:
  explicit Schema(toolsets::CompiledSchema compiled) : compiled_(std::move(compiled)) {}

  std::string Check(const py::str& arguments_text) const {
    Result<Json> arguments = ParseJson(Utf8(arguments_text), "arguments");
    if (!arguments.ok()) return "arguments invalid: " + arguments.status().message();
    return toolsets::DescribeViolations(compiled_.Validate(*arguments, kMaxViolations));
  }

 private:
  toolsets::CompiledSchema compiled_;
};

Schema CompileSchema(const py::str& schema_text) {
  Result<Json> schema = ParseJson(Utf8(schema_text), "input schema");
  if (!schema.ok()) throw py::value_error(schema.status().message());
  Result<toolsets::CompiledSchema> compiled = toolsets::CompiledSchema::Compile(*schema);
  if (!compiled.ok()) throw py::value_error(compiled.status().message());
  return Schema(std::move(compiled).value());
}

}  // namespace
}  // namespace envforge::sandbox::worker

PYBIND11_EMBEDDED_MODULE(_envforge_schema, m) {
  using envforge::sandbox::worker::Schema;
  py::class_<Schema>(m, "Schema").def("check", &Schema::Check, py::arg("arguments_text"));
  m.def("compile", &envforge::sandbox::worker::CompileSchema, py::arg("schema_text"));
}
