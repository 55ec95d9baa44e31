// JUnit XML reports: every table row of tests/fixtures/junit/README.md (real runners' output), the
// shapes of the producers without a fixture (Surefire, Gradle, PHPUnit, mocha, vitest, unittest,
// go-junit-report) written from their documented output, duplicates, broken runs, bad input, ANSI
// escapes, nesting and a 50 MB report.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tests/temp_dir.h"
#include "verifiers/junit_report.h"

namespace envforge::verifiers {
namespace {

using Rows = std::vector<std::pair<std::string, TestStatus>>;
constexpr TestStatus kPass = TestStatus::kPass;
constexpr TestStatus kFail = TestStatus::kFail;
constexpr TestStatus kError = TestStatus::kError;
constexpr TestStatus kSkip = TestStatus::kSkip;
constexpr TestStatus kXfail = TestStatus::kXfail;

std::string Fixture(const std::string& name) {
  return std::string(ENVFORGE_TEST_SOURCE_DIR) + "/tests/fixtures/junit/" + name;
}

JunitReport ReadFixture(const std::string& name, const JunitOptions& options = {}) {
  auto report = ReadJunitFile(Fixture(name), options);
  REQUIRE_MESSAGE(report.ok(), report.status().ToString());
  return std::move(report).value();
}

JunitReport Parse(const std::string& xml, const JunitOptions& options = {}) {
  auto report = ParseJunitXml(xml, options);
  REQUIRE_MESSAGE(report.ok(), report.status().ToString());
  return std::move(report).value();
}

// The report holds exactly these ids, in this order, with these statuses.
void CheckExactly(const JunitReport& report, const Rows& rows) {
  REQUIRE(report.tests.size() == rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    CAPTURE(rows[i].first);
    CHECK(report.tests[i].id == rows[i].first);
    CHECK(TestStatusName(report.tests[i].status) == TestStatusName(rows[i].second));
  }
  CHECK(report.counts.tests == rows.size());
}

// Every row's id is in the report with that status (order and extra ids not checked).
void CheckRows(const JunitReport& report, const Rows& rows) {
  for (const auto& [id, status] : rows) {
    CAPTURE(id);
    const JunitTest* test = report.Find(id);
    REQUIRE(test != nullptr);
    CHECK(TestStatusName(test->status) == TestStatusName(status));
  }
}

const JunitTest* FindByName(const JunitReport& report, const std::string& classname, const std::string& name) {
  for (const JunitTest& test : report.tests) {
    if (test.classname == classname && test.name == name) return &test;
  }
  return nullptr;
}

bool HasProblem(const JunitReport& report, const std::string& kind, const std::string& fragment) {
  for (const JunitProblem& problem : report.problems) {
    if (problem.kind == kind && problem.detail.find(fragment) != std::string::npos) return true;
  }
  return false;
}

bool HasNote(const JunitReport& report, const std::string& fragment) {
  for (const std::string& note : report.notes) {
    if (note.find(fragment) != std::string::npos) return true;
  }
  return false;
}

// ------------------------------------------------------------------------------------------------
TEST_SUITE("verifiers.junit.fixtures") {
  TEST_CASE("pytest xunit1: every README row, collection error, teardown merge, xfail and XPASS") {
    JunitReport report = ReadFixture("pytest-xunit1.xml");
    CHECK(report.producer == JunitProducer::kPytest);
    CheckExactly(report, {
                             {"tests/sub/test_b.py", kError},
                             {"tests/test_a.py::TestK::test_p[1]", kFail},
                             {"tests/test_a.py::TestK::test_p[a b]", kPass},
                             {"tests/test_a.py::TestK::test_p[[x]]", kPass},
                             {"tests/test_a.py::TestK::test_out", kPass},
                             {"tests/test_a.py::test_fail_and_teardown", kError},
                             {"tests/test_a.py::test_xf", kXfail},
                             {"tests/test_a.py::test_xpass_strict", kFail},
                             {"tests/test_a.py::test_xpass_nonstrict", kPass},
                             {"tests/test_a.py::test_sk", kSkip},
                         });
    // tests="10" in the header, 11 elements: counts come from the elements.
    CHECK(report.counts.testcase_elements == 11);
    CHECK(report.counts.declared_tests == 10u);
    CHECK(HasNote(report, "tests=\"10\""));
    CHECK(report.Find("tests/test_a.py::test_fail_and_teardown")->occurrences == 2);
    CHECK(report.Find("tests/test_a.py::test_fail_and_teardown")->message.find("failed on teardown") == 0);
    CHECK(report.Find("tests/test_a.py::test_xf")->message == "known");
    CHECK(report.counts.pass == 4);
    CHECK(report.counts.fail == 2);
    CHECK(report.counts.error == 2);
    CHECK(report.counts.skip == 1);
    CHECK(report.counts.xfail == 1);
    // The module that did not import: its tests are absent, the run is broken.
    CHECK(report.broken());
    CHECK(HasProblem(report, "collection_error", "tests/sub/test_b.py"));
    CHECK_FALSE(HasNote(report, "guessed"));
  }

  TEST_CASE("pytest xunit2 degrades to the same ids by guessing file paths, and says so") {
    JunitReport xunit2 = ReadFixture("pytest-xunit2.xml");
    JunitReport xunit1 = ReadFixture("pytest-xunit1.xml");
    CHECK(xunit2.producer == JunitProducer::kPytest);
    CHECK(xunit2.StatusMap() == xunit1.StatusMap());
    CHECK(HasNote(xunit2, "junit_family=xunit1"));
    CHECK(HasProblem(xunit2, "collection_error", "tests/sub/test_b.py"));
  }

  TEST_CASE("jest-junit default: names as TestIds, the top-level test's leading space trimmed") {
    JunitReport report = ReadFixture("jest-junit-default.xml");
    CHECK(report.producer == JunitProducer::kJest);
    // The README's table by name, exactly as written.
    const std::vector<std::pair<std::string, TestStatus>> by_name = {
        {"outer inner adds", kPass},  {"outer inner inc 1 -> 2", kPass}, {"outer inner inc 2 -> 3", kFail},
        {"outer skipped one", kSkip}, {"outer todo one", kPass},         {" top level", kPass},
    };
    REQUIRE(report.tests.size() == by_name.size());
    for (const auto& [name, status] : by_name) {
      CAPTURE(name);
      const JunitTest* test = FindByName(report, name, name);
      REQUIRE(test != nullptr);
      CHECK(TestStatusName(test->status) == TestStatusName(status));
    }
    CheckRows(report, {{"top level", kPass}, {"outer inner inc 2 -> 3", kFail}});
    CHECK(report.Find(" top level") == nullptr);
    // broken.test.js is simply absent with this configuration: nothing in the XML says so.
    CHECK_FALSE(report.broken());
  }

  TEST_CASE("jest-junit configured: file-qualified ids, the failed suite as one error and a broken run") {
    JunitReport report = ReadFixture("jest-junit-configured.xml");
    CHECK(report.producer == JunitProducer::kJest);
    const std::vector<std::tuple<std::string, std::string, TestStatus>> table = {
        {"__tests__/a.test.js", "adds", kPass},
        {"__tests__/a.test.js", "inc 1 -> 2", kPass},
        {"__tests__/a.test.js", "inc 2 -> 3", kFail},
        {"__tests__/a.test.js", "skipped one", kSkip},
        {"__tests__/a.test.js", "todo one", kPass},
        {"__tests__/a.test.js", "top level", kPass},
        {"Test suite failed to run", "__tests__/broken.test.js", kError},
    };
    REQUIRE(report.tests.size() == table.size());
    for (const auto& [classname, name, status] : table) {
      CAPTURE(name);
      const JunitTest* test = FindByName(report, classname, name);
      REQUIRE(test != nullptr);
      CHECK(TestStatusName(test->status) == TestStatusName(status));
    }
    CheckRows(report, {{"__tests__/a.test.js › inc 2 -> 3", kFail}, {"__tests__/broken.test.js", kError}});
    CHECK(report.Find("__tests__/broken.test.js")->occurrences == 2);  // <error> + <failure> merged
    CHECK(report.broken());
    REQUIRE(report.problems.size() == 1);  // one problem for the file, not one per testcase
    CHECK(report.problems[0].kind == "load_failed");
  }

  TEST_CASE("gotestsum: package-qualified ids, subtests kept, and a package that did not build") {
    JunitReport report = ReadFixture("gotestsum.xml");
    CHECK(report.producer == JunitProducer::kGo);
    CheckExactly(report, {
                             {"example.com/m/pkg1::TestSub/bad", kFail},
                             {"example.com/m/pkg1::TestSub", kFail},
                             {"example.com/m/pkg1::TestSkip", kSkip},
                             {"example.com/m/pkg1::TestOK", kPass},
                             {"example.com/m/pkg1::TestSub/case_one", kPass},
                         });
    // errors="1" on <testsuites> and no suite for that package: broken.
    CHECK(report.broken());
    CHECK(HasProblem(report, "build_failed", "errors=\"1\""));
    CHECK(report.Find("example.com/m/pkg1::TestSkip")->message.find("later") != std::string::npos);
  }

  TEST_CASE("gtest: status/result attributes, escaped messages, DISABLED_ and value-parametrised cases") {
    JunitReport report = ReadFixture("gtest.xml");
    CHECK(report.producer == JunitProducer::kGtest);
    CheckExactly(report, {
                             {"Suite.Pass", kPass},
                             {"Suite.Fail", kFail},
                             {"Suite.DISABLED_Off", kSkip},
                             {"Suite.Skip", kSkip},
                             {"Nums/P.Even/0", kPass},
                             {"Nums/P.Even/1", kFail},
                         });
    CHECK(report.Find("Suite.Fail")->message.find("msg <&>") != std::string::npos);
    CHECK(report.Find("Suite.DISABLED_Off")->message == "not run (suppressed)");
    CHECK_FALSE(report.broken());
  }

  TEST_CASE("ctest: bare <testsuite> root, empty failures, disabled and SKIP_RETURN_CODE tests") {
    JunitReport report = ReadFixture("ctest.xml");
    CHECK(report.producer == JunitProducer::kCtest);
    CheckExactly(report, {
                             {"gt.Suite.Pass", kPass},
                             {"gt.Suite.Fail", kFail},
                             {"gt.Suite.Off", kSkip},
                             {"gt.Suite.Skip", kSkip},
                             {"gt.Nums/P.Even/2", kPass},
                             {"gt.Nums/P.Even/3", kFail},
                             {"gt_all", kFail},
                             {"c2_all", kFail},
                             {"always_fail", kFail},
                             {"skipper", kSkip},
                             {"disabled_one", kSkip},
                         });
    // The empty <failure message=""/> borrows the output from <system-out>.
    CHECK(report.Find("gt.Suite.Fail")->message.find("[  FAILED  ] Suite.Fail") != std::string::npos);
    CHECK(report.Find("disabled_one")->message == "disabled");
  }

  TEST_CASE("catch2 v2: classname::TEST_CASE/SECTION") {
    JunitReport report = ReadFixture("catch2-v2.xml");
    CHECK(report.producer == JunitProducer::kCatch2);
    CheckExactly(report,
                 {{"c2.global::adds", kPass}, {"c2.global::sections/a", kPass}, {"c2.global::sections/b", kFail}});
    CHECK(report.Find("c2.global::sections/b")->message.find("1 == 2") == 0);
  }

  TEST_CASE("doctest: every README row; the absolute source path is cut or made relative") {
    JunitReport report = ReadFixture("doctest.xml");
    CHECK(report.producer == JunitProducer::kDoctest);
    for (const auto& [name, status] : Rows{{"adds", kPass}, {"subs/a", kPass}, {"subs/b", kFail}}) {
      const JunitTest* test = FindByName(report, "/src/cpp/dt.cpp", name);
      REQUIRE(test != nullptr);
      CHECK(TestStatusName(test->status) == TestStatusName(status));
    }
    CheckExactly(report, {{"dt.cpp::adds", kPass}, {"dt.cpp::subs/a", kPass}, {"dt.cpp::subs/b", kFail}});
    JunitOptions options;
    options.source_root = "/src/";
    CheckExactly(ReadFixture("doctest.xml", options),
                 {{"cpp/dt.cpp::adds", kPass}, {"cpp/dt.cpp::subs/a", kPass}, {"cpp/dt.cpp::subs/b", kFail}});
  }

  TEST_CASE("auto-detection names the producer of every fixture; an explicit producer wins") {
    const std::vector<std::pair<std::string, JunitProducer>> expected = {
        {"pytest-xunit1.xml", JunitProducer::kPytest},
        {"pytest-xunit2.xml", JunitProducer::kPytest},
        {"jest-junit-default.xml", JunitProducer::kJest},
        {"jest-junit-configured.xml", JunitProducer::kJest},
        {"gotestsum.xml", JunitProducer::kGo},
        {"gtest.xml", JunitProducer::kGtest},
        {"ctest.xml", JunitProducer::kCtest},
        {"catch2-v2.xml", JunitProducer::kCatch2},
        {"doctest.xml", JunitProducer::kDoctest},
    };
    for (const auto& [file, producer] : expected) {
      CAPTURE(file);
      JunitReport report = ReadFixture(file);
      CHECK(JunitProducerName(report.producer) == JunitProducerName(producer));
      CHECK(report.producer_detected);
    }
    JunitOptions options;
    options.producer = JunitProducer::kGeneric;
    JunitReport generic = ReadFixture("catch2-v2.xml", options);
    CHECK(generic.producer == JunitProducer::kGeneric);
    CHECK_FALSE(generic.producer_detected);
    CHECK(generic.Find("c2.global::sections/b") != nullptr);
  }

  TEST_CASE("the report's JSON carries producer, counts, problems and every test") {
    JunitReport report = ReadFixture("pytest-xunit1.xml");
    Json json = report.ToJson();
    CHECK(json["producer"] == "pytest");
    CHECK(json["producer_detected"] == true);
    CHECK(json["broken"] == true);
    CHECK(json["problems"][0]["kind"] == "collection_error");
    CHECK(json["counts"]["tests"] == 10);
    CHECK(json["counts"]["testcase_elements"] == 11);
    CHECK(json["counts"]["declared_tests"] == 10);
    REQUIRE(json["tests"].size() == 10);
    CHECK(json["tests"][1]["id"] == "tests/test_a.py::TestK::test_p[1]");
    CHECK(json["tests"][1]["status"] == "fail");
    CHECK(json["tests"][1]["message"].get<std::string>().find("assert 1 != 1") == 0);
    CHECK(json["tests"][2].contains("message") == false);
    CHECK(json["tests"][5]["occurrences"] == 2);
  }

}  // TEST_SUITE

// ------------------------------------------------------------------------------------------------
TEST_SUITE("verifiers.junit.producers") {
  TEST_CASE("Maven Surefire: classname#name, reruns, flaky passes and a class that never ran") {
    const std::string xml = R"xml(<?xml version="1.0" encoding="UTF-8"?>
<testsuite xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:noNamespaceSchemaLocation="https://maven.apache.org/surefire/maven-surefire-plugin/xsd/surefire-test-report-3.0.xsd" version="3.0" name="com.example.CalcTest" time="0.05" tests="6" errors="1" skipped="1" failures="2">
  <properties>
    <property name="java.version" value="17.0.9"/>
    <property name="surefire.test.class.path" value="/src/target/test-classes"/>
  </properties>
  <testcase name="adds" classname="com.example.CalcTest" time="0.001"/>
  <testcase name="divides" classname="com.example.CalcTest" time="0.002">
    <failure message="expected: &lt;2&gt; but was: &lt;3&gt;" type="org.opentest4j.AssertionFailedError"><![CDATA[org.opentest4j.AssertionFailedError: expected: <2> but was: <3>
	at com.example.CalcTest.divides(CalcTest.java:20)]]></failure>
    <rerunFailure message="expected: &lt;2&gt; but was: &lt;3&gt;" type="org.opentest4j.AssertionFailedError"><stackTrace>...</stackTrace></rerunFailure>
  </testcase>
  <testcase name="sometimes" classname="com.example.CalcTest" time="0.003">
    <flakyFailure message="timing" type="java.lang.AssertionError"><stackTrace>java.lang.AssertionError: timing</stackTrace></flakyFailure>
  </testcase>
  <testcase name="parses(String)[1]" classname="com.example.CalcTest" time="0.001">
    <error message="boom" type="java.lang.IllegalStateException">java.lang.IllegalStateException: boom</error>
  </testcase>
  <testcase name="later" classname="com.example.CalcTest" time="0">
    <skipped message="not now"/>
  </testcase>
  <testcase name="classMethod" classname="com.example.DbTest" time="0">
    <error message="no database" type="java.sql.SQLException">java.sql.SQLException: no database</error>
  </testcase>
</testsuite>)xml";
    JunitReport report = Parse(xml);
    CHECK(report.producer == JunitProducer::kSurefire);
    CheckExactly(report, {
                             {"com.example.CalcTest#adds", kPass},
                             {"com.example.CalcTest#divides", kFail},
                             {"com.example.CalcTest#sometimes", kPass},
                             {"com.example.CalcTest#parses(String)[1]", kError},
                             {"com.example.CalcTest#later", kSkip},
                             {"com.example.DbTest#classMethod", kError},
                         });
    CHECK(report.Find("com.example.CalcTest#sometimes")->flaky);
    CHECK_FALSE(report.Find("com.example.CalcTest#divides")->flaky);
    CHECK(report.Find("com.example.CalcTest#divides")->message.find("expected: <2> but was: <3>") == 0);
    CHECK(HasProblem(report, "class_failed", "com.example.DbTest#classMethod"));
  }

  TEST_CASE("Gradle: one <testcase> per execution without mergeReruns merges worst-status-wins") {
    const std::string xml = R"xml(<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="com.example.CalcTest" tests="4" skipped="0" failures="1" errors="0" timestamp="2026-01-02T03:04:05" hostname="builder" time="0.021">
  <properties/>
  <testcase name="adds()" classname="com.example.CalcTest" time="0.004"/>
  <testcase name="retried()" classname="com.example.CalcTest" time="0.005">
    <failure message="org.opentest4j.AssertionFailedError: expected: &lt;true&gt; but was: &lt;false&gt;" type="org.opentest4j.AssertionFailedError">org.opentest4j.AssertionFailedError: expected: &lt;true&gt; but was: &lt;false&gt;
	at app//com.example.CalcTest.retried(CalcTest.java:31)
</failure>
  </testcase>
  <testcase name="retried()" classname="com.example.CalcTest" time="0.002"/>
  <testcase name="negates()" classname="com.example.CalcTest" time="0.001"/>
  <system-out><![CDATA[]]></system-out>
  <system-err><![CDATA[]]></system-err>
</testsuite>)xml";
    JunitReport report = Parse(xml);
    CHECK(report.producer == JunitProducer::kGradle);
    CheckExactly(report, {{"com.example.CalcTest#adds()", kPass},
                          {"com.example.CalcTest#retried()", kFail},
                          {"com.example.CalcTest#negates()", kPass}});
    CHECK(report.Find("com.example.CalcTest#retried()")->occurrences == 2);
    CHECK(HasNote(report, "1 duplicate"));
  }

  TEST_CASE("PHPUnit 9: nested suites with a data-provider level; warnings and risky tests pass") {
    const std::string xml = R"xml(<?xml version="1.0" encoding="UTF-8"?>
<testsuites>
  <testsuite name="tests" tests="7" assertions="6" errors="1" warnings="1" failures="1" skipped="2" time="0.012">
    <testsuite name="FooTest" file="/src/php/tests/FooTest.php" tests="7" assertions="6" errors="1" warnings="1" failures="1" skipped="2" time="0.012">
      <testcase name="testPass" class="FooTest" classname="FooTest" file="/src/php/tests/FooTest.php" line="8" assertions="1" time="0.001"/>
      <testcase name="testFail" class="FooTest" classname="FooTest" file="/src/php/tests/FooTest.php" line="13" assertions="1" time="0.002">
        <failure type="PHPUnit\Framework\ExpectationFailedException">FooTest::testFail
Failed asserting that 2 matches expected 1.

/src/php/tests/FooTest.php:15</failure>
      </testcase>
      <testcase name="testSkipped" class="FooTest" classname="FooTest" file="/src/php/tests/FooTest.php" line="18" assertions="0" time="0.000">
        <skipped/>
      </testcase>
      <testcase name="testIncomplete" class="FooTest" classname="FooTest" file="/src/php/tests/FooTest.php" line="23" assertions="0" time="0.000">
        <skipped/>
      </testcase>
      <testcase name="testRisky" class="FooTest" classname="FooTest" file="/src/php/tests/FooTest.php" line="28" assertions="0" time="0.000">
        <error type="PHPUnit\Framework\RiskyTestError">FooTest::testRisky
This test did not perform any assertions
</error>
      </testcase>
      <testcase name="testWarns" class="FooTest" classname="FooTest" file="/src/php/tests/FooTest.php" line="32" assertions="1" time="0.000">
        <warning type="PHPUnit\Framework\Warning">FooTest::testWarns
Method deprecated</warning>
      </testcase>
      <testsuite name="FooTest::testData" tests="2" assertions="2" errors="0" warnings="0" failures="0" skipped="0" time="0.001">
        <testcase name="testData with data set &quot;two&quot;" class="FooTest" classname="FooTest" file="/src/php/tests/FooTest.php" line="40" assertions="1" time="0.000"/>
        <testcase name="testData with data set #0" class="FooTest" classname="FooTest" file="/src/php/tests/FooTest.php" line="40" assertions="1" time="0.000">
          <error type="TypeError">FooTest::testData with data set #0 (null)
TypeError: bad</error>
        </testcase>
      </testsuite>
    </testsuite>
  </testsuite>
</testsuites>)xml";
    JunitReport report = Parse(xml);
    CHECK(report.producer == JunitProducer::kPhpunit);
    CheckExactly(report, {
                             {"FooTest::testPass", kPass},
                             {"FooTest::testFail", kFail},
                             {"FooTest::testSkipped", kSkip},
                             {"FooTest::testIncomplete", kSkip},
                             {"FooTest::testRisky", kPass},
                             {"FooTest::testWarns", kPass},
                             {"FooTest::testData with data set \"two\"", kPass},
                             {"FooTest::testData with data set #0", kError},
                         });
    CHECK(report.Find("FooTest::testRisky")->message.find("risky: FooTest::testRisky") == 0);
    CHECK(report.Find("FooTest::testWarns")->message.find("warning: ") == 0);
  }

  TEST_CASE("mocha-junit-reporter: file + full title, and a failing before-all hook breaks the run") {
    const std::string xml = R"xml(<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="Mocha Tests" time="0.0100" tests="4" failures="2">
  <testsuite name="Root Suite" timestamp="2026-01-02T03:04:05" tests="0" time="0.0000" failures="0">
  </testsuite>
  <testsuite name="outer" timestamp="2026-01-02T03:04:05" tests="1" file="/src/js/test/a.spec.js" time="0.0010" failures="0">
    <testcase name="outer adds" time="0.0010" classname="adds">
    </testcase>
  </testsuite>
  <testsuite name="inner" timestamp="2026-01-02T03:04:05" tests="2" file="/src/js/test/a.spec.js" time="0.0020" failures="1">
    <testcase name="outer inner subtracts" time="0.0010" classname="subtracts">
      <failure message="expected 1 to equal 2" type="AssertionError"><![CDATA[AssertionError: expected 1 to equal 2
    at Context.<anonymous> (test/a.spec.js:9:22)]]></failure>
    </testcase>
    <testcase name="outer inner pending" time="0.0000" classname="pending">
      <skipped/>
    </testcase>
  </testsuite>
  <testsuite name="db" timestamp="2026-01-02T03:04:05" tests="1" file="/src/js/test/db.spec.js" time="0.0000" failures="1">
    <testcase name="db &quot;before all&quot; hook for &quot;never runs&quot;" time="0.0000" classname="&quot;before all&quot; hook for &quot;never runs&quot;">
      <failure message="connect ECONNREFUSED" type="Error"><![CDATA[Error: connect ECONNREFUSED]]></failure>
    </testcase>
  </testsuite>
</testsuites>)xml";
    JunitReport report = Parse(xml);
    CHECK(report.producer == JunitProducer::kMocha);
    CheckExactly(report, {
                             {"a.spec.js › outer adds", kPass},
                             {"a.spec.js › outer inner subtracts", kFail},
                             {"a.spec.js › outer inner pending", kSkip},
                             {"db.spec.js › db \"before all\" hook for \"never runs\"", kFail},
                         });
    CHECK(HasProblem(report, "hook_failed", "before all"));
    JunitOptions options;
    options.source_root = "/src/js";
    CHECK(Parse(xml, options).Find("test/a.spec.js › outer adds") != nullptr);
  }

  TEST_CASE("vitest: classname > name, and an import failure as a broken file") {
    const std::string xml = R"xml(<?xml version="1.0" encoding="UTF-8" ?>
<testsuites name="vitest tests" tests="5" failures="2" errors="0" time="0.42">
    <testsuite name="__tests__/a.test.js" timestamp="2026-01-02T03:04:05.000Z" hostname="vm" tests="4" failures="1" errors="0" skipped="2" time="0.005">
        <testcase classname="__tests__/a.test.js" name="outer &gt; inner &gt; adds" time="0.001">
        </testcase>
        <testcase classname="__tests__/a.test.js" name="outer &gt; inner &gt; inc 2 -&gt; 3" time="0.002">
            <failure message="expected 3 to be 4 // Object.is equality" type="AssertionError">
AssertionError: expected 3 to be 4 // Object.is equality
 ❯ __tests__/a.test.js:4:20
            </failure>
        </testcase>
        <testcase classname="__tests__/a.test.js" name="outer &gt; skipped one" time="0">
            <skipped/>
        </testcase>
        <testcase classname="__tests__/a.test.js" name="outer &gt; todo one" time="0">
            <skipped/>
        </testcase>
    </testsuite>
    <testsuite name="__tests__/broken.test.js" timestamp="2026-01-02T03:04:05.000Z" hostname="vm" tests="1" failures="1" errors="0" skipped="0" time="0">
        <testcase classname="__tests__/broken.test.js" name="__tests__/broken.test.js" time="0">
            <failure message="Cannot find module &apos;does-not-exist&apos;" type="Error">
Error: Cannot find module 'does-not-exist'
            </failure>
        </testcase>
    </testsuite>
</testsuites>)xml";
    JunitReport report = Parse(xml);
    CHECK(report.producer == JunitProducer::kVitest);
    CheckExactly(report, {
                             {"__tests__/a.test.js > outer > inner > adds", kPass},
                             {"__tests__/a.test.js > outer > inner > inc 2 -> 3", kFail},
                             {"__tests__/a.test.js > outer > skipped one", kSkip},
                             {"__tests__/a.test.js > outer > todo one", kSkip},
                             {"__tests__/broken.test.js", kFail},
                         });
    CHECK(HasProblem(report, "load_failed", "__tests__/broken.test.js"));
  }

  TEST_CASE("unittest through unittest-xml-reporting: dotted unittest ids, expected failures as xfail") {
    const std::string xml = R"xml(<?xml version="1.0" encoding="UTF-8"?>
<testsuites>
	<testsuite name="tests.test_calc.CalcTest-20260102030405" tests="5" file="tests/test_calc.py" time="0.004" timestamp="2026-01-02T03:04:05" failures="1" errors="1" skipped="2">
		<testcase classname="tests.test_calc.CalcTest" name="test_adds" time="0.001" timestamp="2026-01-02T03:04:05" file="tests/test_calc.py" line="6"/>
		<testcase classname="tests.test_calc.CalcTest" name="test_divides" time="0.001" timestamp="2026-01-02T03:04:05" file="tests/test_calc.py" line="9">
			<failure type="AssertionError" message="3 != 2"><![CDATA[Traceback (most recent call last):
  File "tests/test_calc.py", line 10, in test_divides
    self.assertEqual(3, 2)
AssertionError: 3 != 2
]]></failure>
		</testcase>
		<testcase classname="tests.test_calc.CalcTest" name="test_later" time="0.000" timestamp="2026-01-02T03:04:05" file="tests/test_calc.py" line="12">
			<skipped type="skip" message="not yet"/>
		</testcase>
		<testcase classname="tests.test_calc.CalcTest" name="test_known_bug" time="0.000" timestamp="2026-01-02T03:04:05" file="tests/test_calc.py" line="16">
			<skipped type="XFAIL" message="expected failure: (&lt;class 'ZeroDivisionError'&gt;, ...)"/>
		</testcase>
		<testcase classname="tests.test_calc.CalcTest" name="test_surprise" time="0.000" timestamp="2026-01-02T03:04:05" file="tests/test_calc.py" line="20">
			<error type="UnexpectedSuccess" message="Unexpected success: This test was marked as expected failure but passed, please review it"/>
		</testcase>
	</testsuite>
</testsuites>)xml";
    JunitReport report = Parse(xml);
    CHECK(report.producer == JunitProducer::kUnittest);
    CheckExactly(report, {
                             {"tests.test_calc.CalcTest.test_adds", kPass},
                             {"tests.test_calc.CalcTest.test_divides", kFail},
                             {"tests.test_calc.CalcTest.test_later", kSkip},
                             {"tests.test_calc.CalcTest.test_known_bug", kXfail},
                             {"tests.test_calc.CalcTest.test_surprise", kError},
                         });
  }

  TEST_CASE("go-junit-report: [build failed] and [setup failed] cases stand for their package") {
    const std::string xml = R"xml(<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="3" errors="2">
	<testsuite name="example.com/m/ok" tests="1" failures="0" errors="0" id="0" hostname="vm" time="0.100" timestamp="2026-01-02T03:04:05Z">
		<properties>
			<property name="go.version" value="go1.21.0 linux/amd64"></property>
		</properties>
		<testcase name="TestA" classname="example.com/m/ok" time="0.100"></testcase>
	</testsuite>
	<testsuite name="example.com/m/broken" tests="1" failures="0" errors="1" id="1" hostname="vm" time="0.000" timestamp="2026-01-02T03:04:05Z">
		<testcase name="[build failed]" classname="example.com/m/broken" time="0.000">
			<error message="Build error"><![CDATA[broken/b_test.go:15: undefined: x]]></error>
		</testcase>
	</testsuite>
	<testsuite name="example.com/m/nosetup" tests="1" failures="0" errors="1" id="2" hostname="vm" time="0.000" timestamp="2026-01-02T03:04:05Z">
		<testcase name="[setup failed]" classname="example.com/m/nosetup" time="0.000">
			<error message="Build error"><![CDATA[nosetup/n_test.go:4: cannot find package "other/package"]]></error>
		</testcase>
	</testsuite>
</testsuites>)xml";
    JunitReport report = Parse(xml);
    CHECK(report.producer == JunitProducer::kGo);
    CheckExactly(
        report,
        {{"example.com/m/ok::TestA", kPass}, {"example.com/m/broken", kError}, {"example.com/m/nosetup", kError}});
    CHECK(HasProblem(report, "build_failed", "example.com/m/broken"));
    CHECK(HasProblem(report, "build_failed", "example.com/m/nosetup"));
    // Both errors are accounted for by their cases: no report-level problem on top.
    CHECK(report.problems.size() == 2);
  }

  TEST_CASE("gotestsum where every package failed to build: an error, unless the caller accepts it") {
    const std::string xml = R"xml(<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="0" failures="0" errors="2" time="0.512"></testsuites>)xml";
    auto refused = ParseJunitXml(xml);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.status().code() == StatusCode::kInvalidArgument);
    CHECK(refused.status().message().find("no tests") != std::string::npos);
    JunitOptions options;
    options.producer = JunitProducer::kGo;
    options.allow_empty_when_broken = true;
    JunitReport report = Parse(xml, options);
    CHECK(report.broken());
    CHECK(report.tests.empty());
    CHECK(HasProblem(report, "build_failed", "2 package(s)"));
  }

  TEST_CASE("an empty report is an error unless allow_empty (one file of a directory of reports)") {
    // The JUnit 5 console launcher's legacy reports: TEST-junit-platform-suite.xml holds no test.
    const std::string xml = R"xml(<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="JUnit Platform Suite" tests="0" skipped="0" failures="0" errors="0" time="0.01"></testsuite>)xml";
    CHECK_FALSE(ParseJunitXml(xml).ok());
    JunitOptions options;
    options.allow_empty = true;
    JunitReport report = Parse(xml, options);
    CHECK(report.tests.empty());
    CHECK_FALSE(report.broken());
  }

  TEST_CASE("nested suites: cases at every depth, and 100,000 levels without recursion") {
    const std::string nested = R"xml(<testsuites><testsuite name="a"><testcase classname="A" name="one"/>
    <testsuite name="b"><testsuite name="c"><testcase classname="C" name="deep"><failure/></testcase></testsuite>
    <testcase classname="B" name="two"/></testsuite></testsuite></testsuites>)xml";
    CheckExactly(Parse(nested), {{"A::one", kPass}, {"C::deep", kFail}, {"B::two", kPass}});

    constexpr int kDepth = 100'000;
    std::string deep = "<testsuites>";
    for (int i = 0; i < kDepth; ++i) deep += "<testsuite>";
    deep += R"xml(<testcase classname="Deep" name="bottom"><skipped/></testcase>)xml";
    for (int i = 0; i < kDepth; ++i) deep += "</testsuite>";
    deep += "</testsuites>";
    CheckExactly(Parse(deep), {{"Deep::bottom", kSkip}});
  }

}  // TEST_SUITE

// ------------------------------------------------------------------------------------------------
TEST_SUITE("verifiers.junit.model") {
  TEST_CASE("duplicates merge worst-status-wins at the first one's position") {
    const std::string xml = R"xml(<testsuite name="s">
    <testcase classname="K" name="a"><skipped/></testcase>
    <testcase classname="K" name="b"/>
    <testcase classname="K" name="a"/>
    <testcase classname="K" name="a"><failure message="first failure"/></testcase>
    <testcase classname="K" name="a"><skipped type="pytest.xfail"/></testcase>
    <testcase classname="K" name="b"><error message="boom"/></testcase>
    <testcase classname="K" name="b"><failure message="later failure"/></testcase>
  </testsuite>)xml";
    JunitOptions options;
    options.producer = JunitProducer::kGeneric;
    JunitReport report = Parse(xml, options);
    CheckExactly(report, {{"K::a", kFail}, {"K::b", kError}});
    CHECK(report.tests[0].occurrences == 4);
    CHECK(report.tests[0].message == "first failure");
    CHECK(report.tests[1].message == "boom");
  }

  TEST_CASE("the severity order is error > fail > missing > pass > xfail > skip") {
    const std::vector<TestStatus> ascending = {TestStatus::kSkip,    TestStatus::kXfail, TestStatus::kPass,
                                               TestStatus::kMissing, TestStatus::kFail,  TestStatus::kError};
    for (size_t i = 0; i < ascending.size(); ++i) {
      CHECK(TestStatusSeverity(ascending[i]) == static_cast<int>(i));
      CHECK(TestStatusFromName(TestStatusName(ascending[i])) == ascending[i]);
      for (size_t j = 0; j < ascending.size(); ++j) {
        CHECK(WorseStatus(ascending[i], ascending[j]) == ascending[std::max(i, j)]);
      }
    }
    CHECK_FALSE(TestStatusFromName("passed").has_value());
  }

  TEST_CASE("ANSI escapes are stripped from names and messages; whitespace in ids is collapsed") {
    // A raw ESC, ESC as a character reference, an OSC hyperlink, and pytest's visible "#x1B".
    const std::string xml =
        "<testsuites><testsuite name=\"pytest\">"
        "<testcase classname=\"tests.test_c\" name=\"test_\x1b[1mred\x1b[0m\" file=\"tests/test_c.py\">"
        "<failure message=\"&#x1B;[31mAssertionError&#x1B;[0m: \x1b]8;;http://x\x07link\x1b]8;;\x07\">"
        "#x1B[1m#x1B[31mE   assert 1 == 2#x1B[0m</failure></testcase>"
        "<testcase classname=\"tests.test_c\" name=\"test_\n  spaced \t name\" file=\"tests/test_c.py\"/>"
        "</testsuite></testsuites>";
    JunitReport report = Parse(xml);
    CheckExactly(report, {{"tests/test_c.py::test_red", kFail}, {"tests/test_c.py::test_ spaced name", kPass}});
    CHECK(report.tests[0].name == "test_red");
    CHECK(report.tests[0].message == "AssertionError: link\nE   assert 1 == 2");
    CHECK(report.ToJson().dump().find("\\u001b") == std::string::npos);
  }

  TEST_CASE("a 50 MB report parses completely, in linear time") {
    constexpr size_t kTarget = 50u << 20;
    const std::string output(160, 'o');
    const std::string trace(400, 't');
    std::string xml = R"xml(<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">)xml";
    xml.reserve(kTarget + (1u << 20));
    size_t cases = 0, failing = 0;
    while (xml.size() < kTarget) {
      std::string module = "tests/pkg" + std::to_string(cases % 97) + "/test_m" + std::to_string(cases % 1013);
      std::string dotted = module;
      for (char& c : dotted) c = c == '/' ? '.' : c;
      xml += "<testcase classname=\"" + dotted + ".TestK\" name=\"test_" + std::to_string(cases) + "[p-" +
             std::to_string(cases % 7) + "]\" file=\"" + module + ".py\" line=\"" + std::to_string(cases % 400) +
             "\" time=\"0.001\">";
      if (cases % 10 == 3) {
        xml += "<failure message=\"assert " + std::to_string(cases) + " == 0\">" + trace + "</failure>";
        ++failing;
      }
      xml += "<system-out>" + output + "</system-out></testcase>";
      ++cases;
    }
    xml += "</testsuite></testsuites>";
    REQUIRE(xml.size() >= kTarget);

    auto start = std::chrono::steady_clock::now();
    JunitReport report = Parse(xml);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    MESSAGE("parsed " << xml.size() << " bytes, " << cases << " testcases in " << seconds << " s");
    CHECK(report.producer == JunitProducer::kPytest);
    CHECK(report.counts.testcase_elements == cases);
    CHECK(report.counts.tests == cases);
    CHECK(report.counts.fail == failing);
    CHECK(report.counts.pass == cases - failing);
    CHECK(report.tests[3].id == "tests/pkg3/test_m3.py::TestK::test_3[p-3]");
    CHECK(report.tests[3].status == kFail);
    CHECK(report.tests.back().id.find("::TestK::test_" + std::to_string(cases - 1) + "[") != std::string::npos);
  }

  TEST_CASE("pytest ids: nested classes from xunit1, and xunit2 guesses split at the first capitalised part") {
    const std::string xml = R"xml(<testsuites><testsuite name="pytest">
    <testcase classname="tests.unit.test_x.TestOuter.TestInner" name="test_a" file="tests/unit/test_x.py" line="3"/>
    <testcase classname="tests.unit.test_x" name="test_b[1.5]" file="tests/unit/test_x.py" line="9"/>
    <testcase classname="tests.unit.test_y.FooTests" name="test_c"/>
    <testcase classname="tests.unit.test_y" name="test_d"/>
  </testsuite></testsuites>)xml";
    JunitReport report = Parse(xml);
    CheckExactly(report, {{"tests/unit/test_x.py::TestOuter::TestInner::test_a", kPass},
                          {"tests/unit/test_x.py::test_b[1.5]", kPass},
                          {"tests/unit/test_y.py::FooTests::test_c", kPass},
                          {"tests/unit/test_y.py::test_d", kPass}});
    CHECK(HasNote(report, "guessed"));
  }

  TEST_CASE("producer names: every name round-trips, aliases are accepted, others are refused") {
    for (JunitProducer producer :
         {JunitProducer::kAuto, JunitProducer::kGeneric, JunitProducer::kPytest, JunitProducer::kUnittest,
          JunitProducer::kJest, JunitProducer::kVitest, JunitProducer::kMocha, JunitProducer::kGo,
          JunitProducer::kSurefire, JunitProducer::kGradle, JunitProducer::kGtest, JunitProducer::kCtest,
          JunitProducer::kCatch2, JunitProducer::kDoctest, JunitProducer::kPhpunit}) {
      auto back = JunitProducerFromName(JunitProducerName(producer));
      REQUIRE(back.ok());
      CHECK(*back == producer);
    }
    CHECK(*JunitProducerFromName("gotestsum") == JunitProducer::kGo);
    CHECK(*JunitProducerFromName("go-junit-report") == JunitProducer::kGo);
    auto unknown = JunitProducerFromName("nunit");
    REQUIRE_FALSE(unknown.ok());
    CHECK(unknown.status().code() == StatusCode::kInvalidArgument);
    CHECK(unknown.status().message().find("pytest|unittest") != std::string::npos);
  }

}  // TEST_SUITE

// ------------------------------------------------------------------------------------------------
TEST_SUITE("verifiers.junit.errors") {
  void CheckError(const Result<JunitReport>& result, StatusCode code, const std::string& fragment) {
    REQUIRE_FALSE(result.ok());
    CHECK(StatusCodeName(result.status().code()) == StatusCodeName(code));
    CHECK_MESSAGE(result.status().message().find(fragment) != std::string::npos, result.status().ToString());
  }

  TEST_CASE("an absent file is NotFound, never all passed") {
    CheckError(ReadJunitFile(Fixture("no-such-report.xml")), StatusCode::kNotFound, "no-such-report.xml");
  }

  TEST_CASE("an empty or whitespace-only report is DataLoss") {
    CheckError(ParseJunitXml(""), StatusCode::kDataLoss, "empty");
    CheckError(ParseJunitXml(" \n\t\n"), StatusCode::kDataLoss, "whitespace");
    testing::TempDir dir;
    std::ofstream(dir / "empty.xml").close();
    CheckError(ReadJunitFile(dir / "empty.xml"), StatusCode::kDataLoss, "empty.xml: empty");
  }

  TEST_CASE("malformed XML is DataLoss naming the byte and the line") {
    std::ifstream in(Fixture("ctest.xml"));
    std::string whole((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    REQUIRE(whole.size() > 1000);
    CheckError(ParseJunitXml(whole.substr(0, whole.size() / 2)), StatusCode::kDataLoss, "malformed JUnit XML");
    CheckError(ParseJunitXml("<testsuites>\n<testsuite name=\"a\">\n<testcase name=\"x\"></testsuite>"),
               StatusCode::kDataLoss, "line 3");
    CheckError(ParseJunitXml("<?xml version=\"1.0\"?><!-- only a comment -->"), StatusCode::kDataLoss, "malformed");
    CheckError(ParseJunitXml("not xml at all"), StatusCode::kDataLoss, "malformed");
  }

  TEST_CASE("a root other than testsuites/testsuite is InvalidArgument") {
    CheckError(ParseJunitXml("<html><body><testcase name=\"x\"/></body></html>"), StatusCode::kInvalidArgument,
               "root element is <html>");
  }

  TEST_CASE("a report with no testcase is InvalidArgument") {
    CheckError(ParseJunitXml(R"xml(<testsuites tests="0"><testsuite name="empty" tests="0"/></testsuites>)xml"),
               StatusCode::kInvalidArgument, "no tests");
    CheckError(ParseJunitXml("<testsuite name=\"x\"><testcase/></testsuite>"), StatusCode::kInvalidArgument,
               "no tests");
  }

  TEST_CASE("a report over max_bytes is refused before it is parsed") {
    JunitOptions options;
    options.max_bytes = 64;
    CheckError(ParseJunitXml(std::string(65, ' '), options), StatusCode::kResourceExhausted, "over the limit");
    CheckError(ReadJunitFile(Fixture("gtest.xml"), options), StatusCode::kResourceExhausted, "gtest.xml");
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::verifiers
