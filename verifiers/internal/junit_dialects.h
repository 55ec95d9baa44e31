// What differs between JUnit producers: recognising who wrote a report, building each producer's
// TestId, and the cases (or header counts) that reveal tests which never ran. The rules are
// documented in verifiers/junit_report.h; this is their implementation.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <pugixml.hpp>

#include "verifiers/junit_report.h"

namespace envforge::verifiers::internal {

// One <testcase> and where it sits. The nodes belong to the document being read.
struct RawCase {
  pugi::xml_node testcase;
  pugi::xml_node suite;         // the nearest enclosing <testsuite> or <testsuites>
  const char* suite_file = "";  // the `file` attribute of the nearest enclosing suite that has one
};

// The fields of one <testcase> the dialects read, ANSI escapes already stripped.
struct CaseFields {
  std::string classname;
  std::string name;
  std::string file;        // the testcase's own `file` attribute
  std::string suite_name;  // the nearest enclosing suite's `name`
  std::string suite_file;  // RawCase::suite_file
  TestStatus status = TestStatus::kPass;
  std::string message;
};

// Recognises the producer from the report's shape: root and suite names, properties, the
// attributes only one runner writes. kGeneric when nothing matches.
JunitProducer DetectProducer(pugi::xml_node root, const std::vector<pugi::xml_node>& suites,
                             const std::vector<RawCase>& cases);

// The TestId of one case before whitespace is collapsed. Sets *guessed when a part of the id was
// inferred rather than read (pytest xunit2 file paths).
std::string TestIdFor(JunitProducer producer, const CaseFields& fields, const JunitOptions& options, bool* guessed);

// A case that stands for tests which did not run (a file that failed to load, a package that did
// not build), with its id; nullopt for an ordinary test.
std::optional<JunitProblem> CaseProblem(JunitProducer producer, const CaseFields& fields, const std::string& id);

// A report-level sign of tests that never ran: gotestsum's `errors` count on <testsuites> above
// the <error> elements present (`error_elements`).
std::optional<JunitProblem> DocumentProblem(JunitProducer producer, pugi::xml_node root, size_t error_elements);

// A decimal count attribute, nullopt when absent or not a plain number.
std::optional<size_t> CountAttribute(pugi::xml_node node, const char* name);

}  // namespace envforge::verifiers::internal
