// Reading one <testcase>'s outcome (junit_outcome.h).
#include "verifiers/internal/junit_outcome.h"

#include <optional>
#include <string_view>

#include "verifiers/internal/junit_text.h"

namespace envforge::verifiers::internal {
namespace {

// The direct text (PCDATA and CDATA) of an element, at most `limit` bytes of it.
std::string ElementText(pugi::xml_node node, size_t limit) {
  std::string text;
  for (pugi::xml_node child : node.children()) {
    if (child.type() != pugi::node_pcdata && child.type() != pugi::node_cdata) continue;
    std::string_view value = child.value();
    text.append(value.substr(0, limit - text.size()));
    if (text.size() >= limit) break;
  }
  return text;
}

// A clean message from an element: its message attribute and its text (when they differ).
std::string MessageOf(pugi::xml_node element) {
  // Read twice the budget raw: escapes removed afterwards can shrink it.
  const size_t raw_limit = 2 * kJunitMaxMessageBytes;
  std::string attr(Trim(StripAnsi(Truncate(element.attribute("message").value(), raw_limit))));
  std::string text(Trim(StripAnsi(ElementText(element, raw_limit))));
  std::string message = text.empty() || text == attr ? attr : attr.empty() ? text : attr + "\n" + text;
  return Truncate(message, kJunitMaxMessageBytes);
}

// The status a testcase's status/result attributes give when no child element decided it.
std::optional<TestStatus> StatusFromAttributes(pugi::xml_node testcase, std::string* message) {
  std::string_view status = testcase.attribute("status").value();
  std::string_view result = testcase.attribute("result").value();
  if (result == "suppressed" || result == "skipped" || status == "notrun" || status == "disabled" ||
      status == "skipped") {
    *message = status == "disabled" ? "disabled" : "not run" + (result.empty() ? "" : " (" + std::string(result) + ")");
    return TestStatus::kSkip;
  }
  if (status == "fail" || status == "failed" || status == "failure") return TestStatus::kFail;
  if (status == "error") return TestStatus::kError;
  return std::nullopt;
}

bool IsXfail(pugi::xml_node skipped) {
  std::string_view type = skipped.attribute("type").value();
  return type == "pytest.xfail" || type == "XFAIL";
}

}  // namespace

Outcome ReadOutcome(pugi::xml_node testcase) {
  Outcome outcome;
  pugi::xml_node decider;  // the worst failure/error/skipped child
  std::optional<TestStatus> worst;
  pugi::xml_node note;  // a PHPUnit warning or risky error: a pass with a message
  for (pugi::xml_node child : testcase.children()) {
    std::string_view tag = child.name();
    std::optional<TestStatus> status;
    if (tag == "error") {
      if (std::string_view(child.attribute("type").value()) == "PHPUnit\\Framework\\RiskyTestError") {
        note = child;
      } else {
        status = TestStatus::kError;
      }
    } else if (tag == "failure") {
      status = TestStatus::kFail;
    } else if (tag == "skipped") {
      status = IsXfail(child) ? TestStatus::kXfail : TestStatus::kSkip;
    } else if (tag == "flakyFailure" || tag == "flakyError") {
      outcome.flaky = true;
    } else if (tag == "warning") {
      note = child;
    }
    if (status && (!worst || TestStatusSeverity(*status) > TestStatusSeverity(*worst))) {
      worst = status;
      decider = child;
    }
  }
  if (worst) {
    outcome.status = *worst;
    outcome.message = MessageOf(decider);
  } else if (auto from_attributes = StatusFromAttributes(testcase, &outcome.message)) {
    outcome.status = *from_attributes;
  } else if (note) {
    std::string_view tag = note.name();
    outcome.message = Truncate((tag == "warning" ? "warning: " : "risky: ") + MessageOf(note), kJunitMaxMessageBytes);
  }
  bool failing = outcome.status == TestStatus::kFail || outcome.status == TestStatus::kError;
  if (failing && outcome.message.empty()) outcome.message = MessageOf(testcase.child("system-out"));  // ctest
  return outcome;
}

}  // namespace envforge::verifiers::internal
