// JUnit XML reports: what a test runner says happened to each test, as an ordered list of
// (stable TestId, status, message) plus what made the run incomplete (issue 14;
// reference/real-envs.md section 2).
//
// There is no JUnit standard; every runner writes its own dialect. This module reads them all with
// one walk over every <testcase> at any depth (suites nest in PHPUnit; ctest's root is a bare
// <testsuite>), never trusting header counts (they are recomputed from the testcases), and turns
// each producer's naming into one deterministic TestId, so that the same test gets the same id in a
// run before and after a patch. Grading (F2P / P2F) compares two such reports; it lives elsewhere.
//
// TESTIDS, per producer (real-envs.md 2.5). Every id has ANSI escapes removed and runs of
// whitespace collapsed to one space, trimmed at both ends; case is kept.
//   pytest    file::Class::name. xunit1 (`-o junit_family=xunit1`): `file` attribute + the classname
//             minus its dotted-module prefix (nested classes joined by "::") + name. xunit2 (no
//             `file`): GUESSED from the dotted classname: the components before the first one that
//             starts with an upper-case letter are the module path (dots become "/", ".py" added),
//             the rest are classes; the report gets a note saying so. Same ids as xunit1 whenever
//             directories and modules are lower case and classes are not (PEP 8). A collection
//             error (classname "") has the id of its file (xunit2: the dotted name made a path).
//   unittest  classname.name, the id `python -m unittest` accepts (unittest-xml-reporting).
//   jest      with a `file` attribute or a path-like classname (JEST_JUNIT_CLASSNAME="{filepath}"):
//             file + " › " + name; else (the default configuration) the name alone, whose leading
//             space for top-level tests is trimmed. "Test suite failed to run" cases: the file.
//   vitest    classname + " > " + name; a file that failed to load (classname == name): the file.
//   mocha     file + " › " + name (mocha-junit-reporter's `name` is the full title; `file` is the
//             suite's), or the name alone when no suite has a file.
//   go        import path + "::" + name (subtests keep their "/" segments; parents are kept). The
//             import path is the enclosing suite's name, else the classname. go-junit-report's
//             "[build failed]" / "[setup failed]" cases: the import path alone.
//   surefire, gradle   classname + "#" + name.
//   gtest     classname + "." + name (what --gtest_filter takes; Nums/P.Even/1).
//   ctest     name.
//   catch2    classname + "::" + name.      doctest   path + "::" + name (path: see below).
//   phpunit   classname + "::" + name (data sets included: `testData with data set "two"`).
//   generic   classname + "::" + name, or the name alone when classname is empty.
// Absolute paths inside ids (doctest's classname; the files of pytest, jest and mocha) are made
// relative to JunitOptions::source_root when they lie under it, and are cut to their last
// component otherwise, so that ids do not depend on where the checkout happened to be.
//
// STATUS of one <testcase>: the worst of its <error>, <failure> and <skipped> children
// (error > fail > xfail > skip), or, when it has none of them, its attributes, or pass:
//   <error>                           error (PHPUnit 9's RiskyTestError: pass, see below)
//   <failure>                         fail (pytest's strict XPASS is a failure already)
//   <skipped type="pytest.xfail">, <skipped type="XFAIL"> (unittest-xml-reporting)   xfail
//   <skipped>                         skip
//   no such child: gtest status="notrun" / result="suppressed" or "skipped", ctest
//     status="disabled" / "notrun": skip; status="fail"|"failed": fail; status="error": error
//   otherwise                         pass
// Unknown children never fail a test: Surefire/Gradle <flakyFailure>/<flakyError> alone mean
// passed on a rerun (pass, flaky = true); <rerunFailure>/<rerunError> only accompany a <failure>
// or <error>; PHPUnit's <warning> is a pass with the warning as message. A PHPUnit risky test
// (<error type="PHPUnit\Framework\RiskyTestError">: no assertions, output, ...) is a pass with
// the message "risky: ...", as PHPUnit itself counts it (exit 0 without --fail-on-risky).
//
// DUPLICATES (the same TestId twice: pytest's call failure + teardown error, Gradle without
// mergeReruns, jest titles repeated across files) merge into one entry at the position of the
// first, WORST STATUS WINS: error > fail > missing > pass > xfail > skip (TestStatusSeverity).
// The message is the worst occurrence's; `occurrences` counts the <testcase> elements merged.
//
// BROKEN RUNS. Some failures happen outside every test: a Go package that does not compile, a
// jest/vitest test file that cannot load, a pytest module that cannot be collected, a mocha
// "before all" hook. The tests they hold are ABSENT from the report. Each such signal is a
// JunitProblem and makes the report broken(): tests absent from a broken report did not run
// (missing, counted as failing), they were not removed. A broken report is still a parsed
// report, not an infrastructure error: a run before the gold patch is often broken by design (the
// test patch calls code the fix adds). Signals, by producer:
//   go        "build_failed": gotestsum's `errors="N"` on <testsuites> larger than the number of
//             <error> elements (the package has no suite at all); go-junit-report's
//             "[build failed]" / "[setup failed]" cases.
//   jest      "load_failed": a case with classname "Test suite failed to run".
//   vitest    "load_failed": a failing case whose classname equals its name (the file).
//   pytest    "collection_error": a case with classname "" and an <error> (a module that did not
//             import; its tests are absent).
//   mocha     "hook_failed": a failing '"before all" hook ...' (or each/after) case.
//   surefire, gradle   "class_failed": a failing case named initializationError or classMethod
//             (JUnit 4 class rules and @BeforeClass: the class's tests did not run).
//
// ERRORS (never "all passed"): a file that does not exist (NotFound) or cannot be read (the
// errno's code); a file larger than JunitOptions::max_bytes (ResourceExhausted); an empty or
// whitespace-only file, or malformed XML (DataLoss: a runner killed mid-write leaves both; the
// message has the byte offset and line); a root element that is not <testsuites> or <testsuite>
// (InvalidArgument); a directory, or no named <testcase> (InvalidArgument; with
// allow_empty_when_broken, a broken report without testcases is returned instead); an unknown
// producer name (InvalidArgument). Out of memory is ResourceExhausted. No exception leaves this
// module.
//
// Cost: linear in the report's size (pugixml DOM, one stack-free walk, hashed merge): a 50 MB
// report of 140,000 testcases takes about half a second to a second on one core, and about 2-3x
// its size in memory while parsing.
//
// Thread safety: the functions are pure (ReadJunitFile reads one file); reports are values.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/json.h"
#include "base/status.h"

namespace envforge::verifiers {

// What happened to one test. kMissing is never produced by parsing: it is the status a comparison
// gives a test that one run has and another run lacks (it counts as a failure).
enum class TestStatus : unsigned char { kPass, kFail, kError, kSkip, kXfail, kMissing };

// "pass", "fail", "error", "skip", "xfail", "missing".
std::string_view TestStatusName(TestStatus status);
// The inverse of TestStatusName; nullopt for any other text.
std::optional<TestStatus> TestStatusFromName(std::string_view name);
// Merge rank, higher is worse: skip 0 < xfail 1 < pass 2 < missing 3 < fail 4 < error 5.
int TestStatusSeverity(TestStatus status);
// The worse of two statuses (a on a tie).
TestStatus WorseStatus(TestStatus a, TestStatus b);
// Grading's reading of a status (real-envs.md 0.2): pass and xfail count as passing; fail, error
// and missing as failing; skip as neither.
inline bool CountsAsPassing(TestStatus status) { return status == TestStatus::kPass || status == TestStatus::kXfail; }
inline bool CountsAsFailing(TestStatus status) {
  return status == TestStatus::kFail || status == TestStatus::kError || status == TestStatus::kMissing;
}

// Who wrote the report. kAuto asks ParseJunitXml to detect it; a parsed report never holds kAuto.
// kGeneric is plain JUnit from a runner not recognised.
enum class JunitProducer : unsigned char {
  kAuto,
  kGeneric,
  kPytest,
  kUnittest,  // unittest through unittest-xml-reporting (xmlrunner)
  kJest,      // jest-junit
  kVitest,    // vitest --reporter=junit
  kMocha,     // mocha-junit-reporter
  kGo,        // gotestsum --junitfile, go-junit-report
  kSurefire,  // Maven Surefire / Failsafe
  kGradle,
  kGtest,
  kCtest,  // ctest --output-junit
  kCatch2,
  kDoctest,
  kPhpunit,
};

// "auto", "generic", "pytest", "unittest", "jest", "vitest", "mocha", "go", "surefire", "gradle",
// "gtest", "ctest", "catch2", "doctest", "phpunit".
std::string_view JunitProducerName(JunitProducer producer);
// The inverse of JunitProducerName, also accepting "gotestsum" and "go-junit-report" (kGo),
// "maven" (kSurefire), "googletest" (kGtest), "xmlrunner" (kUnittest). InvalidArgument names the
// accepted names.
Result<JunitProducer> JunitProducerFromName(std::string_view name);
// The names JunitProducerFromName's error lists: "auto|generic|pytest|...|phpunit".
std::string JunitProducerNames();

struct JunitOptions {
  JunitProducer producer = JunitProducer::kAuto;  // kAuto: detect from the report's shape
  // The absolute directory the tests ran in, without a trailing "/" (one is tolerated). Absolute
  // paths under it lose this prefix in TestIds; empty: absolute paths are cut to their last
  // component.
  std::string source_root;
  // A report without any <testcase> is an error, unless this is set and the report is broken
  // (every package failed to build): then it is returned, empty and broken.
  bool allow_empty_when_broken = false;
  // Any report without testcases is returned, empty: for a directory of reports where one file may
  // legitimately hold none (the JUnit 5 console launcher's platform-suite file beside the
  // jupiter one); the caller then checks that the files together hold tests.
  bool allow_empty = false;
  size_t max_bytes = size_t{256} << 20;  // larger inputs are refused (ResourceExhausted)
};

// A message is cut to this many bytes (at a UTF-8 boundary) with "..." appended.
inline constexpr size_t kJunitMaxMessageBytes = 4096;

struct JunitTest {
  std::string id;  // the stable TestId (see the top of this file)
  TestStatus status = TestStatus::kPass;
  std::string message;    // why: the deciding element's message attribute and its text (a failure
                          // with neither: the testcase's <system-out>, as ctest writes it); ANSI
                          // escapes stripped, trimmed, at most kJunitMaxMessageBytes; may be empty
  std::string classname;  // as the first occurrence wrote them, ANSI escapes stripped
  std::string name;
  bool flaky = false;   // a runner rerun it and it passed (<flakyFailure>/<flakyError>)
  int occurrences = 1;  // <testcase> elements merged into this entry
};

// One reason the run did not execute everything (see BROKEN RUNS above).
struct JunitProblem {
  std::string kind;    // "build_failed", "load_failed", "collection_error", "hook_failed", "class_failed"
  std::string detail;  // for humans: what failed and what is therefore absent
};

struct JunitCounts {
  size_t tests = 0;  // entries after merging duplicates (== tests.size())
  size_t pass = 0;
  size_t fail = 0;
  size_t error = 0;
  size_t skip = 0;
  size_t xfail = 0;
  size_t testcase_elements = 0;          // <testcase> elements read, duplicates included
  std::optional<size_t> declared_tests;  // the root's `tests` attribute, when it has a number
};

struct JunitReport {
  JunitProducer producer = JunitProducer::kGeneric;  // never kAuto
  bool producer_detected = false;                    // true when producer came from detection, not from options
  std::vector<JunitTest> tests;                      // in document order of first appearance, ids unique
  JunitCounts counts;
  std::vector<JunitProblem> problems;  // non-empty: broken
  std::vector<std::string> notes;      // caveats for humans (guessed ids, header count mismatches)

  bool broken() const { return !problems.empty(); }
  // The entry with this id, or nullptr. Linear; use StatusMap for many lookups.
  const JunitTest* Find(std::string_view id) const;
  // TestId -> status: the input of a before/after comparison.
  std::map<std::string, TestStatus> StatusMap() const;
  // {"producer", "producer_detected", "broken", "problems": [{"kind", "detail"}], "notes",
  //  "counts": {"tests", "pass", "fail", "error", "skip", "xfail", "testcase_elements",
  //  "declared_tests"?}, "tests": [{"id", "status", "classname", "name", "message"?, "flaky"?,
  //  "occurrences"?}]}; optional keys only when non-empty / true / above 1.
  Json ToJson() const;
};

// Parses a report held in memory (any encoding pugixml detects: UTF-8, UTF-16/32 with a BOM).
// Errors as listed at the top of this file.
Result<JunitReport> ParseJunitXml(std::string_view xml, const JunitOptions& options = {});

// Reads `path` (checking its size against options.max_bytes first) and parses it. Every error
// message starts with the path.
Result<JunitReport> ReadJunitFile(const std::string& path, const JunitOptions& options = {});

}  // namespace envforge::verifiers
