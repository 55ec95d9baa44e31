// Reading JUnit XML into a JunitReport (verifiers/junit_report.h): load with pugixml, walk every
// <testcase> without recursion, read each one's outcome, name it per producer
// (internal/junit_dialects.h), merge duplicates worst-status-wins.
#include "verifiers/junit_report.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <new>
#include <unordered_map>
#include <unordered_set>

#include <pugixml.hpp>

#include "base/fd.h"
#include "verifiers/internal/junit_dialects.h"
#include "verifiers/internal/junit_outcome.h"
#include "verifiers/internal/junit_text.h"

namespace envforge::verifiers {
namespace {

using internal::CaseFields;
using internal::Outcome;
using internal::RawCase;

struct ProducerEntry {
  JunitProducer producer;
  std::string_view name;
};

constexpr ProducerEntry kProducers[] = {
    {JunitProducer::kAuto, "auto"},         {JunitProducer::kGeneric, "generic"},
    {JunitProducer::kPytest, "pytest"},     {JunitProducer::kUnittest, "unittest"},
    {JunitProducer::kJest, "jest"},         {JunitProducer::kVitest, "vitest"},
    {JunitProducer::kMocha, "mocha"},       {JunitProducer::kGo, "go"},
    {JunitProducer::kSurefire, "surefire"}, {JunitProducer::kGradle, "gradle"},
    {JunitProducer::kGtest, "gtest"},       {JunitProducer::kCtest, "ctest"},
    {JunitProducer::kCatch2, "catch2"},     {JunitProducer::kDoctest, "doctest"},
    {JunitProducer::kPhpunit, "phpunit"},
};

constexpr ProducerEntry kProducerAliases[] = {
    {JunitProducer::kGo, "gotestsum"},     {JunitProducer::kGo, "go-junit-report"}, {JunitProducer::kSurefire, "maven"},
    {JunitProducer::kGtest, "googletest"}, {JunitProducer::kUnittest, "xmlrunner"},
};

// ---------------------------------------------------------------------------------------------
// Walking the document.

struct Walked {
  std::vector<pugi::xml_node> suites;  // every <testsuite>/<testsuites>, the root included
  std::vector<RawCase> cases;          // every <testcase> inside them, in document order
};

// Depth-first over suites with an explicit stack: suites may nest arbitrarily deep (PHPUnit nests;
// a hostile file can nest 100,000 levels) and recursion would overflow the stack.
Walked Walk(pugi::xml_node root) {
  struct Frame {
    pugi::xml_node suite;
    pugi::xml_node next;
    const char* file;
  };
  Walked walked;
  walked.suites.push_back(root);
  std::vector<Frame> stack{{root, root.first_child(), root.attribute("file").value()}};
  while (!stack.empty()) {
    pugi::xml_node child = stack.back().next;
    if (!child) {
      stack.pop_back();
      continue;
    }
    stack.back().next = child.next_sibling();
    if (child.type() != pugi::node_element) continue;
    std::string_view tag = child.name();
    const Frame& parent = stack.back();
    if (tag == "testcase") {
      walked.cases.push_back({child, parent.suite, parent.file});
    } else if (tag == "testsuite" || tag == "testsuites") {
      const char* file = child.attribute("file") ? child.attribute("file").value() : parent.file;
      walked.suites.push_back(child);
      stack.push_back({child, child.first_child(), file});
    }
  }
  return walked;
}

std::string Attr(pugi::xml_node node, const char* name) { return internal::StripAnsi(node.attribute(name).value()); }

CaseFields ReadFields(const RawCase& raw, const Outcome& outcome) {
  CaseFields fields;
  fields.classname = Attr(raw.testcase, "classname");
  fields.name = Attr(raw.testcase, "name");
  fields.file = Attr(raw.testcase, "file");
  fields.suite_name = Attr(raw.suite, "name");
  fields.suite_file = internal::StripAnsi(raw.suite_file);
  fields.status = outcome.status;
  fields.message = outcome.message;
  return fields;
}

// ---------------------------------------------------------------------------------------------
// Building the report.

class Builder {
 public:
  Builder(JunitReport& report, const JunitOptions& options, size_t expected_cases)
      : report_(report), options_(options) {
    report_.tests.reserve(expected_cases);
    index_.reserve(expected_cases);
  }

  void Add(const RawCase& raw) {
    ++report_.counts.testcase_elements;
    Outcome outcome = internal::ReadOutcome(raw.testcase);
    if (raw.testcase.child("error")) ++error_elements_;
    CaseFields fields = ReadFields(raw, outcome);
    std::string id = internal::CollapseWhitespace(internal::TestIdFor(report_.producer, fields, options_, &guessed_));
    if (id.empty()) {
      ++nameless_;
      return;
    }
    if (auto problem = internal::CaseProblem(report_.producer, fields, id)) AddProblem(std::move(*problem), id);
    Merge(std::move(id), std::move(fields), std::move(outcome));
  }

  void Finish(pugi::xml_node root) {
    if (auto problem = internal::DocumentProblem(report_.producer, root, error_elements_)) {
      report_.problems.push_back(std::move(*problem));
    }
    CountStatuses();
    report_.counts.declared_tests = DeclaredTests(root);
    AddNotes();
  }

 private:
  void Merge(std::string id, CaseFields fields, Outcome outcome) {
    auto [it, inserted] = index_.try_emplace(id, report_.tests.size());
    if (inserted) {
      report_.tests.push_back({std::move(id), outcome.status, std::move(outcome.message), std::move(fields.classname),
                               std::move(fields.name), outcome.flaky, 1});
      return;
    }
    JunitTest& test = report_.tests[it->second];
    ++test.occurrences;
    ++duplicates_;
    test.flaky = test.flaky || outcome.flaky;
    if (TestStatusSeverity(outcome.status) > TestStatusSeverity(test.status)) {
      test.status = outcome.status;
      test.message = std::move(outcome.message);
    }
  }

  void AddProblem(JunitProblem problem, const std::string& id) {
    // jest writes a broken file twice (<error> and <failure>): one problem per kind and id.
    if (problem_keys_.insert(problem.kind + '\n' + id).second) report_.problems.push_back(std::move(problem));
  }

  void CountStatuses() {
    JunitCounts& counts = report_.counts;
    counts.tests = report_.tests.size();
    for (const JunitTest& test : report_.tests) {
      switch (test.status) {
        case TestStatus::kPass: ++counts.pass; break;
        case TestStatus::kFail: ++counts.fail; break;
        case TestStatus::kError: ++counts.error; break;
        case TestStatus::kSkip: ++counts.skip; break;
        case TestStatus::kXfail: ++counts.xfail; break;
        case TestStatus::kMissing: break;  // never parsed
      }
    }
  }

  // The root's `tests`, else the sum over its child suites' (pytest writes it only on the suite).
  static std::optional<size_t> DeclaredTests(pugi::xml_node root) {
    if (auto tests = internal::CountAttribute(root, "tests")) return tests;
    std::optional<size_t> sum;
    for (pugi::xml_node suite : root.children("testsuite")) {
      if (auto tests = internal::CountAttribute(suite, "tests")) sum = sum.value_or(0) + *tests;
    }
    return sum;
  }

  void AddNotes() {
    if (guessed_ && report_.producer == JunitProducer::kPytest) {
      report_.notes.push_back(
          "pytest report without file attributes (junit_family xunit2): file paths in test ids are guessed from "
          "dotted classnames; run pytest with -o junit_family=xunit1 for exact ids");
    }
    const JunitCounts& counts = report_.counts;
    if (counts.declared_tests && *counts.declared_tests != counts.testcase_elements) {
      report_.notes.push_back("the report declares tests=\"" + std::to_string(*counts.declared_tests) +
                              "\" but holds " + std::to_string(counts.testcase_elements) +
                              " <testcase> elements; counts here are recomputed");
    }
    if (duplicates_ > 0) {
      report_.notes.push_back(std::to_string(duplicates_) +
                              " duplicate <testcase> element(s) merged, worst status wins");
    }
    if (nameless_ > 0) {
      report_.notes.push_back(std::to_string(nameless_) + " <testcase> element(s) without name or classname ignored");
    }
  }

  JunitReport& report_;
  const JunitOptions& options_;
  std::unordered_map<std::string, size_t> index_;
  std::unordered_set<std::string> problem_keys_;
  size_t error_elements_ = 0;
  size_t duplicates_ = 0;
  size_t nameless_ = 0;
  bool guessed_ = false;
};

Status MalformedError(std::string_view xml, const pugi::xml_parse_result& parsed) {
  size_t offset = std::min(static_cast<size_t>(std::max<ptrdiff_t>(parsed.offset, 0)), xml.size());
  size_t line = 1 + static_cast<size_t>(std::count(xml.begin(), xml.begin() + static_cast<ptrdiff_t>(offset), '\n'));
  return DataLossError("malformed JUnit XML: " + std::string(parsed.description()) + " at byte " +
                       std::to_string(offset) + " (line " + std::to_string(line) +
                       "); a runner killed mid-write leaves a truncated file");
}

Result<JunitReport> Parse(std::string_view xml, const JunitOptions& options) {
  if (xml.size() > options.max_bytes) {
    return ResourceExhaustedError("JUnit report of " + std::to_string(xml.size()) + " bytes is over the limit of " +
                                  std::to_string(options.max_bytes) + " bytes");
  }
  if (xml.empty()) return DataLossError("empty JUnit report (0 bytes): the runner wrote nothing");
  if (internal::Trim(xml).empty()) return DataLossError("JUnit report holds only whitespace: the runner wrote nothing");
  pugi::xml_document doc;
  const unsigned kParseOptions = pugi::parse_cdata | pugi::parse_escapes | pugi::parse_eol;
  pugi::xml_parse_result parsed = doc.load_buffer(xml.data(), xml.size(), kParseOptions);
  if (!parsed) return MalformedError(xml, parsed);
  pugi::xml_node root = doc.document_element();
  std::string_view tag = root.name();
  if (tag != "testsuites" && tag != "testsuite") {
    return InvalidArgumentError("not a JUnit report: the root element is <" + std::string(tag) +
                                ">, not <testsuites> or <testsuite>");
  }
  Walked walked = Walk(root);
  JunitReport report;
  report.producer_detected = options.producer == JunitProducer::kAuto;
  report.producer =
      report.producer_detected ? internal::DetectProducer(root, walked.suites, walked.cases) : options.producer;
  Builder builder(report, options, walked.cases.size());
  for (const RawCase& raw : walked.cases) builder.Add(raw);
  builder.Finish(root);
  if (report.tests.empty() && !options.allow_empty && !(options.allow_empty_when_broken && report.broken())) {
    size_t elements = report.counts.testcase_elements;
    std::string why = elements == 0 ? "no <testcase> element in " + std::to_string(walked.suites.size()) + " suite(s)"
                                    : "none of its " + std::to_string(elements) + " <testcase> elements has a name";
    if (report.broken()) why += "; " + report.problems.front().detail;
    return InvalidArgumentError("JUnit report has no tests: " + why);
  }
  return report;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Names.

std::string_view TestStatusName(TestStatus status) {
  switch (status) {
    case TestStatus::kPass: return "pass";
    case TestStatus::kFail: return "fail";
    case TestStatus::kError: return "error";
    case TestStatus::kSkip: return "skip";
    case TestStatus::kXfail: return "xfail";
    case TestStatus::kMissing: return "missing";
  }
  return "error";
}

std::optional<TestStatus> TestStatusFromName(std::string_view name) {
  for (TestStatus status : {TestStatus::kPass, TestStatus::kFail, TestStatus::kError, TestStatus::kSkip,
                            TestStatus::kXfail, TestStatus::kMissing}) {
    if (TestStatusName(status) == name) return status;
  }
  return std::nullopt;
}

int TestStatusSeverity(TestStatus status) {
  switch (status) {
    case TestStatus::kSkip: return 0;
    case TestStatus::kXfail: return 1;
    case TestStatus::kPass: return 2;
    case TestStatus::kMissing: return 3;
    case TestStatus::kFail: return 4;
    case TestStatus::kError: return 5;
  }
  return 5;
}

TestStatus WorseStatus(TestStatus a, TestStatus b) { return TestStatusSeverity(b) > TestStatusSeverity(a) ? b : a; }

std::string_view JunitProducerName(JunitProducer producer) {
  for (const ProducerEntry& entry : kProducers) {
    if (entry.producer == producer) return entry.name;
  }
  return "generic";
}

std::string JunitProducerNames() {
  std::string names;
  for (const ProducerEntry& entry : kProducers) names += (names.empty() ? "" : "|") + std::string(entry.name);
  return names;
}

Result<JunitProducer> JunitProducerFromName(std::string_view name) {
  for (const ProducerEntry& entry : kProducers) {
    if (entry.name == name) return entry.producer;
  }
  for (const ProducerEntry& entry : kProducerAliases) {
    if (entry.name == name) return entry.producer;
  }
  return InvalidArgumentError("unknown JUnit producer '" + std::string(name) + "'; expected " + JunitProducerNames());
}

// ---------------------------------------------------------------------------------------------
// The report.

const JunitTest* JunitReport::Find(std::string_view id) const {
  for (const JunitTest& test : tests) {
    if (test.id == id) return &test;
  }
  return nullptr;
}

std::map<std::string, TestStatus> JunitReport::StatusMap() const {
  std::map<std::string, TestStatus> map;
  for (const JunitTest& test : tests) map.emplace(test.id, test.status);
  return map;
}

Json JunitReport::ToJson() const {
  Json list = Json::array();
  for (const JunitTest& test : tests) {
    Json entry = {
        {"id", test.id}, {"status", TestStatusName(test.status)}, {"classname", test.classname}, {"name", test.name}};
    if (!test.message.empty()) entry["message"] = test.message;
    if (test.flaky) entry["flaky"] = true;
    if (test.occurrences > 1) entry["occurrences"] = test.occurrences;
    list.push_back(std::move(entry));
  }
  Json problem_list = Json::array();
  for (const JunitProblem& problem : problems) {
    problem_list.push_back({{"kind", problem.kind}, {"detail", problem.detail}});
  }
  Json count = {{"tests", counts.tests},
                {"pass", counts.pass},
                {"fail", counts.fail},
                {"error", counts.error},
                {"skip", counts.skip},
                {"xfail", counts.xfail},
                {"testcase_elements", counts.testcase_elements}};
  if (counts.declared_tests) count["declared_tests"] = *counts.declared_tests;
  return {{"producer", JunitProducerName(producer)},
          {"producer_detected", producer_detected},
          {"broken", broken()},
          {"problems", std::move(problem_list)},
          {"notes", notes},
          {"counts", std::move(count)},
          {"tests", std::move(list)}};
}

Result<JunitReport> ParseJunitXml(std::string_view xml, const JunitOptions& options) {
  // Exceptions stay inside: only allocation can throw here (std containers; pugixml reports its
  // own allocation failures as a parse status).
  try {
    return Parse(xml, options);
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("out of memory reading a JUnit report of " + std::to_string(xml.size()) + " bytes");
  } catch (const std::exception& e) {
    return InternalError(std::string("reading a JUnit report: ") + e.what());
  }
}

Result<JunitReport> ReadJunitFile(const std::string& path, const JunitOptions& options) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) {
      return NotFoundError(path + ": no JUnit report (the runner wrote none: crashed, killed, or never ran)");
    }
    return ErrnoError(path, errno);
  }
  if (S_ISDIR(info.st_mode)) return InvalidArgumentError(path + ": is a directory, not a JUnit report");
  if (static_cast<uint64_t>(info.st_size) > options.max_bytes) {
    return ResourceExhaustedError(path + ": JUnit report of " + std::to_string(info.st_size) +
                                  " bytes is over the limit of " + std::to_string(options.max_bytes) + " bytes");
  }
  std::string bytes;
  try {
    ENVFORGE_ASSIGN_OR_RETURN(bytes, ReadFileToString(path));
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError(path + ": out of memory reading the JUnit report");
  }
  Result<JunitReport> report = ParseJunitXml(bytes, options);
  if (!report.ok()) return report.status().WithContext(path);
  return report;
}

}  // namespace envforge::verifiers
