// The audit's JSON form and its human table (verifiers/audit.h).
#include <cinttypes>
#include <cmath>

#include "verifiers/audit.h"
#include "verifiers/probes.h"

namespace envforge::verifiers {
namespace {

double Round(double value, int digits) {
  double scale = std::pow(10.0, digits);
  return std::round(value * scale) / scale;
}

std::string Percent(double rate) {
  char text[32];
  if (rate > 0 && rate < 0.0001) {
    std::snprintf(text, sizeof text, "%.2g%%", 100 * rate);
  } else {
    std::snprintf(text, sizeof text, "%.2f%%", 100 * rate);
  }
  return text;
}

std::string SpaceSize(const TaskAudit& task) {
  if (task.space_size_saturated || task.space_size > 1'000'000'000ULL) {
    char text[32];
    std::snprintf(text, sizeof text, "~1e%.1f", task.space_log10_size);
    return text;
  }
  return std::to_string(task.space_size);
}

std::string Stats(const FamilyStats& stats, bool oracle) {
  std::string text = std::to_string(stats.accepted) + "/" + std::to_string(stats.judged) + " accepted";
  if (oracle) text += " (oracle " + std::to_string(stats.oracle_accepted) + ")";
  return text;
}

// An answer as a person reads it: raw when it is printable on one line, else JSON-escaped.
std::string ShowAnswer(const Finding& finding) {
  if (finding.answer.empty()) {
    return finding.kind == "gold_failed" || finding.kind == "schema_defect" ? "(none)" : "(empty text)";
  }
  bool plain = finding.answer.find_first_not_of(" \t\n\r") != std::string::npos;
  for (unsigned char c : finding.answer) plain = plain && c >= 0x20;
  return Abbreviate(plain ? finding.answer : DumpJson(Json(finding.answer)), 300);
}

}  // namespace

Json Finding::ToJson() const { return Json{{"kind", kind}, {"answer", answer}, {"probe", probe}, {"detail", detail}}; }

Json FamilyStats::ToJson() const {
  return Json{{"judged", judged}, {"accepted", accepted}, {"oracle_accepted", oracle_accepted}};
}

Json TaskAudit::ToJson() const {
  Json findings_json = Json::array();
  for (const auto& finding : findings) findings_json.push_back(finding.ToJson());
  Json space_json{{"mode", space_mode},
                  {"size", space_size_saturated ? Json(nullptr) : Json(space_size)},
                  {"log10_size", Round(space_log10_size, 3)},
                  {"slots", space_slots},
                  {"domains", space_domains},
                  {"judged", space.judged},
                  {"accepted", space.accepted},
                  {"oracle_accepted", space.oracle_accepted},
                  {"acceptance_rate", AcceptanceRate()}};
  if (!space_error.empty()) space_json["error"] = space_error;
  if (space_mode == "sampled" && space.judged > 0) {
    space_json["estimated_accepted"] = AcceptanceRate() * std::pow(10.0, space_log10_size);
  }
  Json oracle_json = nullptr;
  if (has_oracle) {
    oracle_json = Json{{"compared", compared},
                       {"oracle_accepts", oracle_accepts},
                       {"oracle_rejects", oracle_rejects},
                       {"false_accepts", false_accepts},
                       {"false_accept_rate", FalseAcceptRate()},
                       {"false_rejects", false_rejects},
                       {"false_reject_rate", FalseRejectRate()}};
  }
  Json stopped_json = nullptr;
  if (!stopped.empty()) {
    stopped_json = Json{{"reason", stopped},
                        {"detail", stopped_detail},
                        {"answer", stopped_answer},
                        {"probes_not_judged", probes_not_judged}};
  }
  return Json{
      {"id", id},
      {"verdict", verdict},
      {"verdict_reasons", verdict_reasons},
      {"stopped", std::move(stopped_json)},
      {"verifier_version", verifier_version},
      {"has_oracle", has_oracle},
      {"oracle_kind", oracle_kind},
      {"gold",
       {{"answer", gold_answer},
        {"error", gold_error},
        {"runs", gold_runs},
        {"passes", gold_passes},
        {"runs_other_lane", gold_runs_other_lane},
        {"passes_other_lane", gold_passes_other_lane}}},
      {"trivial", {{"probes", trivial_probes}, {"failed", trivial_failed}, {"accepted", trivial.accepted}}},
      {"answer_space", std::move(space_json)},
      {"neighbourhood", neighbourhood.ToJson()},
      {"boundary",
       [&] {
         Json b = boundary.ToJson();
         b["boundary_values"] = boundary_values;
         return b;
       }()},
      {"walk", walk.ToJson()},
      {"mutants", mutants.ToJson()},
      {"structural", structural.ToJson()},
      {"distinct_accepted", distinct_accepted},
      {"oracle", std::move(oracle_json)},
      {"determinism",
       {{"deterministic", deterministic()},
        {"rejudged", rejudged},
        {"verifier_differences", verifier_differences},
        {"oracle_differences", oracle_differences},
        {"lanes", lanes}}},
      {"defects", {{"verifier", verifier_defects}, {"oracle", oracle_defects}}},
      {"finding_counts", finding_counts},
      {"findings", std::move(findings_json)},
      {"probes", probes},
      {"judgements", judgements},
      {"seconds", Round(seconds, 3)},
      {"probes_per_second", seconds > 0 ? Round(double(probes) / seconds, 1) : 0.0},
      {"judgements_per_second", seconds > 0 ? Round(double(judgements) / seconds, 1) : 0.0},
  };
}

Json AuditReport::ToJson() const {
  Json tasks_json = Json::array();
  Json stopped = Json::array();
  for (const auto& task : tasks) {
    Json task_json = task.ToJson();
    if (!task.stopped.empty()) {
      task_json["stopped"]["budget_seconds"] = static_cast<double>(options.task_budget.count()) / 1000.0;
      stopped.push_back(task.id);
    }
    tasks_json.push_back(std::move(task_json));
  }
  return Json{{"path", path},
              {"env", env_name},
              {"hash", content_hash},
              {"options",
               {{"k", options.k},
                {"max_enumerate", options.max_enumerate},
                {"samples", options.samples},
                {"neighbourhood", options.neighbourhood},
                {"boundary", options.boundary},
                {"walk", options.walk},
                {"rejudge_samples", options.rejudge_samples},
                {"seed", options.seed},
                {"batch_size", options.batch_size},
                {"task_budget_seconds", static_cast<double>(options.task_budget.count()) / 1000.0}}},
              {"tasks", std::move(tasks_json)},
              {"broken", AnyBroken()},
              {"stopped", std::move(stopped)},
              {"probes", probes},
              {"judgements", judgements},
              {"seconds", Round(seconds, 3)},
              {"probes_per_second", seconds > 0 ? Round(double(probes) / seconds, 1) : 0.0},
              {"judgements_per_second", seconds > 0 ? Round(double(judgements) / seconds, 1) : 0.0}};
}

void AuditReport::PrintTable(std::FILE* out) const {
  std::fprintf(out, "audit %s (%s), %zu task(s), seed %" PRIu64 "\n", env_name.c_str(),
               content_hash.substr(0, 16).c_str(), tasks.size(), options.seed);
  for (const TaskAudit& task : tasks) {
    std::string upper = task.verdict;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    std::fprintf(out, "\n%s  %s%s\n", task.id.c_str(), upper.c_str(),
                 !task.has_oracle                   ? "  (no oracle)"
                 : task.oracle_kind == "answer_key" ? "  (oracle: the answer key)"
                                                    : "");
    for (const auto& reason : task.verdict_reasons) std::fprintf(out, "  ! %s\n", reason.c_str());
    auto row = [out](const char* name, const std::string& value) {
      std::fprintf(out, "  %-24s %s\n", name, value.c_str());
    };
    if (!task.stopped.empty()) {
      row("STOPPED", task.stopped + " after " + std::to_string(task.probes - task.probes_not_judged) + " of " +
                         std::to_string(task.probes) + " probes; the rest were skipped");
      if (!task.stopped_answer.empty()) {
        Finding shown{"hang", task.stopped_answer, "", ""};
        row("hung on answer", ShowAnswer(shown));
      }
    }
    if (!task.gold_error.empty()) {
      row("gold pass", "solution failed: " + Abbreviate(task.gold_error, 100));
    } else {
      row("gold pass", std::to_string(task.gold_passes) + "/" + std::to_string(task.gold_runs) +
                           " (lane 2: " + std::to_string(task.gold_passes_other_lane) + "/" +
                           std::to_string(task.gold_runs_other_lane) + ")");
    }
    row("trivial probes failed", std::to_string(task.trivial_failed) + "/" + std::to_string(task.trivial_probes));
    if (task.space_mode == "none") {
      row("answer space", task.space_error.empty() ? "none (no annotated fields)" : "error: " + task.space_error);
    } else {
      row("answer space", task.space_mode + " " + std::to_string(task.space.judged) + " of " + SpaceSize(task) + " (" +
                              std::to_string(task.space_slots) + " slots)");
      std::string accepted = std::to_string(task.space.accepted) + " (" + Percent(task.AcceptanceRate()) + ")";
      if (task.has_oracle) accepted += ", oracle " + std::to_string(task.space.oracle_accepted);
      row("accepted in space", accepted);
    }
    row("gold neighbourhood", Stats(task.neighbourhood, task.has_oracle));
    row("boundary (thresholds)",
        Stats(task.boundary, task.has_oracle) + ", " + std::to_string(task.boundary_values) + " boundary values");
    row("walk", Stats(task.walk, task.has_oracle));
    row("mutants accepted", Stats(task.mutants, task.has_oracle));
    row("structural accepted", Stats(task.structural, task.has_oracle));
    row("distinct accepted", std::to_string(task.distinct_accepted));
    if (task.has_oracle) {
      row("false accepts", std::to_string(task.false_accepts) + " (" + Percent(task.FalseAcceptRate()) + " of " +
                               std::to_string(task.oracle_rejects) + " oracle-rejected)");
      row("false rejects", std::to_string(task.false_rejects) + " (" + Percent(task.FalseRejectRate()) + " of " +
                               std::to_string(task.oracle_accepts) + " oracle-accepted)");
    } else {
      row("oracle", "none: false accepts/rejects not measurable");
    }
    row("determinism", std::string(task.deterministic() ? "yes" : "NO") + " (" + std::to_string(task.rejudged) +
                           " re-judged on another lane, " + std::to_string(task.verifier_differences) + " differ)");
    row("defects",
        "verifier " + std::to_string(task.verifier_defects) + ", oracle " + std::to_string(task.oracle_defects));
    char speed[96];
    std::snprintf(speed, sizeof speed, "%zu probes, %" PRIu64 " judgements in %.1f s (%.0f judgements/s)", task.probes,
                  task.judgements, task.seconds, task.seconds > 0 ? double(task.judgements) / task.seconds : 0.0);
    row("work", speed);
    for (const Finding& finding : task.findings) {
      std::fprintf(out, "  - %s: %s\n      answer: %s\n      %s\n", finding.kind.c_str(),
                   Abbreviate(finding.probe, 120).c_str(), ShowAnswer(finding).c_str(),
                   Abbreviate(finding.detail, 300).c_str());
    }
    for (const auto& [kind, count] : task.finding_counts) {
      size_t shown = 0;
      for (const Finding& finding : task.findings) shown += finding.kind == kind ? 1 : 0;
      if (count > shown) std::fprintf(out, "  (%zu more %s finding(s) not shown)\n", count - shown, kind.c_str());
    }
  }
  size_t broken = 0, suspect = 0, sound = 0, stopped = 0;
  for (const auto& task : tasks) {
    broken += task.verdict == "broken";
    suspect += task.verdict == "suspect";
    sound += task.verdict == "sound";
    stopped += task.stopped.empty() ? 0 : 1;
  }
  std::string stopped_note =
      stopped == 0 ? "" : " (" + std::to_string(stopped) + " stopped early: a hang or the task budget spent)";
  std::fprintf(out, "\n%zu sound, %zu suspect, %zu broken%s; %zu probes, %" PRIu64 " judgements in %.1f s (%.0f/s)\n",
               sound, suspect, broken, stopped_note.c_str(), probes, judgements, seconds,
               seconds > 0 ? double(judgements) / seconds : 0.0);
}

}  // namespace envforge::verifiers
