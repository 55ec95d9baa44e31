// Producer detection, TestIds and run-level problems per JUnit producer (junit_dialects.h; the
// rules are documented in verifiers/junit_report.h).
#include "verifiers/internal/junit_dialects.h"

#include <cctype>
#include <charconv>
#include <cstring>
#include <string_view>

#include "verifiers/internal/junit_text.h"

namespace envforge::verifiers::internal {
namespace {

using std::string_view;

// Everything detection looks at, gathered in one pass over suites and cases.
struct Shape {
  string_view root_tag;
  string_view root_title;         // the root's `name`
  bool doctest = false;           // a suite with doctest_version
  bool go = false;                // a go.version property or a go-junit-report "[build failed]" case
  bool gtest = false;             // a case with gtest's `result` attribute
  bool status_attr = false;       // a case with a `status` attribute
  bool all_name_is_class = true;  // every case has name == classname (ctest)
  bool catch2 = false;            // classname "<exe>.global" or Catch2's hostname="tbd"
  bool phpunit = false;           // a case with `assertions` or `class`
  bool pytest = false;            // suite "pytest", a pytest.* type, a .py file without timestamp
  bool jest_failed_suite = false;
  bool mocha_root_suite = false;
  bool surefire = false;         // Surefire's schema or java.*/maven.*/surefire.* properties
  bool unittest = false;         // a case with xmlrunner's `timestamp`, or a "-YYYYMMDDhhmmss" suite
  bool root_properties = false;  // a bare <testsuite> root with a <properties> child (Gradle)
};

bool EndsWithTimestampSuffix(string_view name) {
  if (name.size() < 15 || name[name.size() - 15] != '-') return false;
  for (size_t i = name.size() - 14; i < name.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return false;
  }
  return true;
}

void LookAtSuite(pugi::xml_node suite, Shape& shape) {
  string_view name = suite.attribute("name").value();
  if (suite.attribute("doctest_version")) shape.doctest = true;
  if (name == "pytest") shape.pytest = true;
  if (name == "Root Suite") shape.mocha_root_suite = true;
  if (string_view(suite.attribute("hostname").value()) == "tbd") shape.catch2 = true;
  if (string_view(suite.attribute("xsi:noNamespaceSchemaLocation").value()).find("surefire") != string_view::npos) {
    shape.surefire = true;
  }
  if (EndsWithTimestampSuffix(name)) shape.unittest = true;
  for (pugi::xml_node property : suite.child("properties").children("property")) {
    string_view key = property.attribute("name").value();
    if (key == "go.version") shape.go = true;
    if (key.starts_with("java.") || key.starts_with("maven.") || key.starts_with("surefire.")) shape.surefire = true;
  }
}

void LookAtCase(const RawCase& raw, Shape& shape) {
  pugi::xml_node c = raw.testcase;
  string_view classname = c.attribute("classname").value();
  string_view name = c.attribute("name").value();
  if (c.attribute("result")) shape.gtest = true;
  if (c.attribute("status")) shape.status_attr = true;
  if (name != classname) shape.all_name_is_class = false;
  if (classname.ends_with(".global")) shape.catch2 = true;
  if (c.attribute("assertions") || c.attribute("class")) shape.phpunit = true;
  if (c.attribute("timestamp")) shape.unittest = true;
  if (classname == "Test suite failed to run") shape.jest_failed_suite = true;
  if (name == "[build failed]" || name == "[setup failed]") shape.go = true;
  if (string_view(c.attribute("file").value()).ends_with(".py") && !c.attribute("timestamp")) shape.pytest = true;
  for (pugi::xml_node child : c.children()) {
    if (string_view(child.attribute("type").value()).starts_with("pytest.")) shape.pytest = true;
  }
}

JunitProducer Decide(const Shape& s) {
  // Most specific first: each test below relies on a mark only that runner writes.
  if (s.doctest) return JunitProducer::kDoctest;
  if (s.go) return JunitProducer::kGo;
  if (s.gtest || s.root_title == "AllTests") return JunitProducer::kGtest;
  if (s.root_tag == "testsuite" && s.status_attr && s.all_name_is_class) return JunitProducer::kCtest;
  if (s.catch2) return JunitProducer::kCatch2;
  if (s.phpunit) return JunitProducer::kPhpunit;
  if (s.pytest) return JunitProducer::kPytest;
  if (s.root_title == "jest tests" || s.jest_failed_suite) return JunitProducer::kJest;
  if (s.root_title == "vitest tests") return JunitProducer::kVitest;
  if (s.root_title == "Mocha Tests" || s.mocha_root_suite) return JunitProducer::kMocha;
  if (s.surefire) return JunitProducer::kSurefire;
  if (s.unittest) return JunitProducer::kUnittest;
  if (s.root_properties) return JunitProducer::kGradle;
  return JunitProducer::kGeneric;
}

std::string Joined(string_view a, string_view separator, string_view b) {
  if (a.empty()) return std::string(b);
  std::string out;
  out.reserve(a.size() + separator.size() + b.size());
  out.append(a).append(separator).append(b);
  return out;
}

void ReplaceAll(std::string& text, string_view from, string_view to) {
  std::string out;
  out.reserve(text.size());
  size_t at = 0;
  for (size_t hit; (hit = text.find(from, at)) != std::string::npos; at = hit + from.size()) {
    out.append(text, at, hit - at).append(to);
  }
  out.append(text, at, std::string::npos);
  text = std::move(out);
}

// "tests.sub.test_b" -> "tests/sub/test_b.py".
std::string DottedModuleToPath(string_view dotted) {
  std::string path(dotted);
  for (char& c : path) {
    if (c == '.') c = '/';
  }
  return path + ".py";
}

// pytest xunit2: classname "tests.test_a.TestK" -> "tests/test_a.py::TestK". The class chain
// starts at the first component (after the first) that begins with an upper-case letter.
std::string GuessPytestPrefix(string_view classname) {
  size_t class_at = string_view::npos;
  for (size_t dot = classname.find('.'); dot != string_view::npos; dot = classname.find('.', dot + 1)) {
    if (dot + 1 < classname.size() && std::isupper(static_cast<unsigned char>(classname[dot + 1]))) {
      class_at = dot + 1;
      break;
    }
  }
  if (class_at == string_view::npos) return DottedModuleToPath(classname);
  std::string classes(classname.substr(class_at));
  ReplaceAll(classes, ".", "::");
  return DottedModuleToPath(classname.substr(0, class_at - 1)) + "::" + classes;
}

std::string PytestId(const CaseFields& f, const JunitOptions& options, bool* guessed) {
  if (f.classname.empty()) {  // a collection error names the module, not a test
    if (!f.file.empty()) return PathForId(f.file, options.source_root);
    *guessed = true;
    return DottedModuleToPath(f.name);
  }
  if (!f.file.empty()) {  // xunit1: the file attribute fixes where the module ends
    std::string file = PathForId(f.file, options.source_root);
    std::string module = f.file.ends_with(".py") ? f.file.substr(0, f.file.size() - 3) : f.file;
    for (char& c : module) {
      if (c == '/') c = '.';
    }
    if (f.classname == module) return file + "::" + f.name;
    if (f.classname.size() > module.size() && f.classname.starts_with(module) && f.classname[module.size()] == '.') {
      std::string classes = f.classname.substr(module.size() + 1);
      ReplaceAll(classes, ".", "::");
      return file + "::" + classes + "::" + f.name;
    }
  }
  *guessed = true;
  return GuessPytestPrefix(f.classname) + "::" + f.name;
}

bool LooksLikeJsFile(string_view text) {
  for (string_view ext : {".js", ".jsx", ".ts", ".tsx", ".mjs", ".cjs", ".mts", ".cts"}) {
    if (text.ends_with(ext)) return true;
  }
  return false;
}

std::string JestId(const CaseFields& f, const JunitOptions& options) {
  if (f.classname == "Test suite failed to run") return PathForId(f.name, options.source_root);
  if (!f.file.empty()) return PathForId(f.file, options.source_root) + " › " + f.name;
  if (LooksLikeJsFile(f.classname)) return PathForId(f.classname, options.source_root) + " › " + f.name;
  return f.name;
}

std::string VitestId(const CaseFields& f) {
  if (f.classname == f.name) return f.name;  // a file that failed to load
  return Joined(f.classname, " > ", f.name);
}

std::string MochaId(const CaseFields& f, const JunitOptions& options) {
  const std::string& file = f.file.empty() ? f.suite_file : f.file;
  if (file.empty()) return f.name;
  return PathForId(file, options.source_root) + " › " + f.name;
}

bool IsGoPackageFailure(const CaseFields& f) { return f.name == "[build failed]" || f.name == "[setup failed]"; }

std::string GoPackage(const CaseFields& f) { return f.suite_name.empty() ? f.classname : f.suite_name; }

std::string GoId(const CaseFields& f) {
  if (IsGoPackageFailure(f)) return GoPackage(f);
  return Joined(GoPackage(f), "::", f.name);
}

bool Failing(TestStatus status) { return status == TestStatus::kFail || status == TestStatus::kError; }

bool IsMochaHook(string_view name) {
  for (string_view hook :
       {"\"before all\" hook", "\"before each\" hook", "\"after all\" hook", "\"after each\" hook"}) {
    if (name.find(hook) != string_view::npos) return true;
  }
  return false;
}

JunitProblem Problem(std::string kind, const std::string& id, string_view what, const CaseFields& f) {
  std::string detail = id + ": " + std::string(what);
  std::string first = FirstLine(f.message, 200);
  if (!first.empty()) detail += " (" + first + ")";
  return {std::move(kind), std::move(detail)};
}

}  // namespace

std::optional<size_t> CountAttribute(pugi::xml_node node, const char* name) {
  string_view text = Trim(node.attribute(name).value());
  size_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

JunitProducer DetectProducer(pugi::xml_node root, const std::vector<pugi::xml_node>& suites,
                             const std::vector<RawCase>& cases) {
  Shape shape;
  shape.root_tag = root.name();
  shape.root_title = root.attribute("name").value();
  shape.root_properties = shape.root_tag == "testsuite" && root.child("properties");
  for (pugi::xml_node suite : suites) LookAtSuite(suite, shape);
  for (const RawCase& raw : cases) LookAtCase(raw, shape);
  return Decide(shape);
}

std::string TestIdFor(JunitProducer producer, const CaseFields& f, const JunitOptions& options, bool* guessed) {
  switch (producer) {
    case JunitProducer::kPytest: return PytestId(f, options, guessed);
    case JunitProducer::kUnittest: return Joined(f.classname, ".", f.name);
    case JunitProducer::kJest: return JestId(f, options);
    case JunitProducer::kVitest: return VitestId(f);
    case JunitProducer::kMocha: return MochaId(f, options);
    case JunitProducer::kGo: return GoId(f);
    case JunitProducer::kSurefire:
    case JunitProducer::kGradle: return Joined(f.classname, "#", f.name);
    case JunitProducer::kGtest: return Joined(f.classname, ".", f.name);
    case JunitProducer::kCtest: return f.name.empty() ? f.classname : f.name;
    case JunitProducer::kDoctest: return Joined(PathForId(f.classname, options.source_root), "::", f.name);
    case JunitProducer::kCatch2:
    case JunitProducer::kPhpunit:
    case JunitProducer::kAuto:
    case JunitProducer::kGeneric: return Joined(f.classname, "::", f.name);
  }
  return Joined(f.classname, "::", f.name);
}

std::optional<JunitProblem> CaseProblem(JunitProducer producer, const CaseFields& f, const std::string& id) {
  switch (producer) {
    case JunitProducer::kPytest:
      if (f.classname.empty() && f.status == TestStatus::kError) {
        return Problem("collection_error", id, "could not be collected; its tests are absent", f);
      }
      break;
    case JunitProducer::kJest:
      if (f.classname == "Test suite failed to run") {
        return Problem("load_failed", id, "test file failed to run; its tests are absent", f);
      }
      break;
    case JunitProducer::kVitest:
      if (f.classname == f.name && Failing(f.status)) {
        return Problem("load_failed", id, "test file failed to load; its tests are absent", f);
      }
      break;
    case JunitProducer::kMocha:
      if (Failing(f.status) && IsMochaHook(f.name)) {
        return Problem("hook_failed", id, "hook failed; the tests it guards are absent", f);
      }
      break;
    case JunitProducer::kGo:
      if (IsGoPackageFailure(f)) return Problem("build_failed", id, "package failed to build; its tests are absent", f);
      break;
    case JunitProducer::kSurefire:
    case JunitProducer::kGradle:
      if (Failing(f.status) && (f.name == "initializationError" || f.name == "classMethod")) {
        return Problem("class_failed", id, "test class failed before its tests; they are absent", f);
      }
      break;
    default: break;
  }
  return std::nullopt;
}

std::optional<JunitProblem> DocumentProblem(JunitProducer producer, pugi::xml_node root, size_t error_elements) {
  if (producer != JunitProducer::kGo || string_view(root.name()) != "testsuites") return std::nullopt;
  std::optional<size_t> declared = CountAttribute(root, "errors");
  if (!declared || *declared <= error_elements) return std::nullopt;
  size_t unseen = *declared - error_elements;
  return JunitProblem{"build_failed", "<testsuites errors=\"" + std::to_string(*declared) + "\"> but " +
                                          std::to_string(error_elements) +
                                          " <error> element(s): " + std::to_string(unseen) +
                                          " package(s) failed to build and have no suite; their tests are absent"};
}

}  // namespace envforge::verifiers::internal
