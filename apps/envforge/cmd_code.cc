// envforge code: code environments (issue 14). `code junit` shows how envforge reads a test
// runner's JUnit XML (verifiers/junit_report.h): each test's stable id and status, the counts, the
// producer, and what made the run broken. For debugging a runner's configuration.
#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "apps/envforge/cli_args.h"
#include "apps/envforge/commands.h"
#include "base/json.h"
#include "verifiers/junit_report.h"

namespace envforge::cli {
namespace {

constexpr const char* kJunitCommand = "envforge code junit";

// The first line of `text`, at most max_chars (with "..." when cut).
std::string Excerpt(std::string_view text, size_t max_chars) {
  text = text.substr(0, text.find('\n'));
  if (text.size() <= max_chars) return std::string(text);
  size_t cut = max_chars - 3;
  while (cut > 0 && (text[cut] & 0xc0) == 0x80) --cut;  // never split a UTF-8 character
  return std::string(text.substr(0, cut)) + "...";
}

// Characters on screen, not bytes: ids carry multi-byte separators ("›").
size_t DisplayWidth(std::string_view text) {
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) { return (c & 0xc0) != 0x80; }));
}

std::string PadRight(const std::string& text, size_t width) {
  size_t shown = DisplayWidth(text);
  return shown >= width ? text : text + std::string(width - shown, ' ');
}

void PrintTable(const verifiers::JunitReport& report) {
  constexpr size_t kMaxIdWidth = 80;
  size_t width = DisplayWidth("TEST ID");
  for (const auto& test : report.tests) width = std::max(width, std::min(DisplayWidth(test.id), kMaxIdWidth));
  std::printf("%s  %-7s  %s\n", PadRight("TEST ID", width).c_str(), "STATUS", "MESSAGE");
  for (const auto& test : report.tests) {
    std::string status(verifiers::TestStatusName(test.status));
    std::printf("%s  %-7s  %s\n", PadRight(test.id, width).c_str(), status.c_str(), Excerpt(test.message, 100).c_str());
  }
}

void PrintSummary(const verifiers::JunitReport& report) {
  const verifiers::JunitCounts& c = report.counts;
  std::printf("\n%zu tests (%zu <testcase> elements): %zu pass, %zu fail, %zu error, %zu skip, %zu xfail\n", c.tests,
              c.testcase_elements, c.pass, c.fail, c.error, c.skip, c.xfail);
  std::printf("producer: %s (%s)\n", std::string(verifiers::JunitProducerName(report.producer)).c_str(),
              report.producer_detected ? "detected" : "given");
  if (report.broken()) {
    std::printf("broken: tests absent from this report did not run\n");
    for (const auto& problem : report.problems) {
      std::printf("  %-16s  %s\n", problem.kind.c_str(), Excerpt(problem.detail, 200).c_str());
    }
  }
  for (const std::string& note : report.notes) std::printf("note: %s\n", note.c_str());
}

int Junit(const ParsedArgs& parsed) {
  verifiers::JunitOptions options;
  auto producer = verifiers::JunitProducerFromName(parsed.OptionOr("--producer"));
  if (!producer.ok()) return Fail(producer.status().WithContext("--producer"), kExitUsage, kJunitCommand);
  options.producer = *producer;
  options.source_root = parsed.OptionOr("--root");
  auto report = verifiers::ReadJunitFile(parsed.positional[0], options);
  if (!report.ok()) return Fail(report.status(), ExitCodeFor(report.status()), kJunitCommand);
  if (parsed.Has("--json")) {
    std::printf("%s\n", report->ToJson().dump(2, ' ', false, Json::error_handler_t::replace).c_str());
    return kExitOk;
  }
  PrintTable(*report);
  PrintSummary(*report);
  return kExitOk;
}

}  // namespace

std::vector<Command> CodeJunitCommands() {
  return {
      {{.name = "code junit",
        .positionals = "FILE.xml",
        .summary = "a test runner's JUnit XML as envforge reads it: each test's stable id and status, counts, the "
                   "producer, and what made the run broken",
        .details =
            "Statuses: pass, fail, error, skip, xfail. Broken: a package that did not build, a test file that did "
            "not load (the tests they hold are absent from the report).\n"
            "Exit 0 parsed (whatever the tests' statuses), 2 bad input (no file, empty or malformed XML, not a "
            "JUnit report, no tests, unknown producer), 3 infrastructure.",
        .options =
            {{.name = "--producer",
              .metavar = "NAME",
              .help = "who wrote the report: auto (detected from its shape), pytest, unittest, jest, vitest, mocha, go "
                      "(gotestsum, go-junit-report), surefire, gradle, gtest, ctest, catch2, doctest, phpunit, generic",
              .default_text = "auto"},
             {.name = "--root",
              .metavar = "DIR",
              .help = "the directory the tests ran in: absolute paths under it become relative in ids"},
             JsonOption("the whole report as one JSON object")},
        .min_positional = 1,
        .max_positional = 1},
       Junit},
  };
}

}  // namespace envforge::cli
