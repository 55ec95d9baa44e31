#include "envsynth/task_validation.h"

#include <chrono>
#include <sstream>

namespace envforge::envsynth {
namespace {

// One line per judge for the reasons: "verifier: <reasons or defect>".
std::string Describe(const char* who, const sandbox::JudgeVerdict& verdict) {
  if (verdict.defect) return std::string(who) + " defect: " + verdict.defect_message;
  std::string out = std::string(who) + (verdict.passed ? " accepted" : " rejected the gold answer");
  for (const std::string& reason : verdict.reasons) out += "; " + reason;
  return out;
}

void Judge(sandbox::SessionManager& manager, sandbox::SessionManager::SessionId session, bool has_oracle,
           TaskValidation& result) {
  auto verifier = manager.JudgeAnswers(session, sandbox::Judge::kVerifier, {result.answer_text});
  if (!verifier.ok()) {
    result.attribution = "verifier";
    result.reasons.push_back("verifier could not judge: " + verifier.status().message());
    return;
  }
  const sandbox::JudgeVerdict& v = verifier->front();
  bool verifier_ok = !v.defect && v.passed;
  bool oracle_ok = true;
  std::string oracle_text;
  if (has_oracle) {
    auto oracle = manager.JudgeAnswers(session, sandbox::Judge::kOracle, {result.answer_text});
    if (!oracle.ok()) {
      oracle_ok = false;
      oracle_text = "oracle could not judge: " + oracle.status().message();
    } else {
      oracle_ok = !oracle->front().defect && oracle->front().passed;
      oracle_text = Describe("oracle", oracle->front());
    }
  }
  result.passed = verifier_ok && oracle_ok;
  if (result.passed) return;
  if (!verifier_ok) result.reasons.push_back(Describe("verifier", v));
  if (!oracle_ok) result.reasons.push_back(oracle_text);
  if (v.defect || (!verifier_ok && oracle_ok)) {
    result.attribution = "verifier";
  } else if (verifier_ok) {
    result.attribution = "oracle";
  } else {
    result.attribution = "task";
  }
}

}  // namespace

Json TaskValidation::ToJson() const {
  return {{"passed", passed},
          {"attribution", attribution},
          {"reasons", reasons},
          {"answer", answer_text},
          {"seconds", seconds}};
}

Result<std::vector<TaskValidation>> ValidateTasks(sandbox::SessionManager& manager, const std::string& env_id,
                                                  const std::vector<std::string>& task_ids) {
  const sandbox::EnvBundle* bundle = manager.FindEnvironment(env_id);
  if (bundle == nullptr) return NotFoundError("unknown environment '" + env_id + "'");
  std::vector<TaskValidation> out;
  for (const std::string& id : task_ids) {
    const sandbox::TaskRecord* task = bundle->FindTask(id);
    if (task == nullptr) return NotFoundError("environment '" + bundle->manifest.name + "' has no task '" + id + "'");
    const auto start = std::chrono::steady_clock::now();
    TaskValidation result;
    result.task_id = id;
    ENVFORGE_ASSIGN_OR_RETURN(sandbox::SessionManager::SessionId session, manager.CreateSession(env_id, id));
    auto solved = manager.Solve(session);
    if (!solved.ok()) {
      result.attribution = "solution";
      result.reasons.push_back("gold solution failed: " + solved.status().message());
    } else {
      result.answer_text = solved->answer_text;
      Judge(manager, session, !task->oracle_source.empty(), result);
    }
    (void)manager.CloseSession(session);
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    out.push_back(std::move(result));
  }
  return out;
}

std::map<std::string, std::vector<std::string>> SplitPackProblems(const std::string& message) {
  std::map<std::string, std::vector<std::string>> out;
  std::istringstream lines(message);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    // The summary line above the list ("cannot pack DIR: 3 problems") names no problem itself.
    const bool summary =
        line.rfind("cannot pack ", 0) == 0 && (line.ends_with(" problem") || line.ends_with(" problems"));
    if (summary) continue;
    std::string key;
    if (line.rfind("tasks/", 0) == 0) {
      size_t slash = line.find('/', 6);
      size_t colon = line.find(':', 6);
      size_t end = std::min(slash, colon);
      if (end != std::string::npos) key = line.substr(6, end - 6);
    }
    out[key].push_back(line);
  }
  return out;
}

}  // namespace envforge::envsynth
