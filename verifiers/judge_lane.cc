#include "verifiers/judge_lane.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string_view>

namespace envforge::verifiers {

bool SameVerdict(const Verdict& a, const Verdict& b) {
  if (a.defect || b.defect) return a.defect == b.defect;
  return a.passed == b.passed && std::abs(a.score - b.score) <= 1e-9;
}

std::string DescribeVerdict(const Verdict& verdict, size_t max_reasons) {
  if (verdict.defect) {
    return "defect: " + verdict.defect_message + (verdict.limit.empty() ? "" : " (limit " + verdict.limit + ")");
  }
  std::string text = verdict.passed ? "passed" : "failed";
  for (size_t i = 0; i < verdict.reasons.size() && i < max_reasons; ++i) {
    text += (i == 0 ? ": " : "; ") + verdict.reasons[i];
  }
  if (verdict.reasons.size() > max_reasons) text += "; ...";
  return text;
}

namespace {

constexpr std::string_view kScratchPrefix = "envforge-audit-";

// The pid of an audit scratch root "envforge-audit-<pid>-<n>" of /tmp; nullopt for anything else.
std::optional<pid_t> ScratchOwner(std::string_view name) { return PidOfProcessName(name, kScratchPrefix); }

}  // namespace

SessionJudgeLane::SessionJudgeLane(std::unique_ptr<sandbox::SessionManager> manager, std::string env_id,
                                   std::string owned_scratch, sandbox::SandboxLimits limits)
    : manager_(std::move(manager)),
      env_id_(std::move(env_id)),
      owned_scratch_(std::move(owned_scratch)),
      limits_(limits) {}

SessionJudgeLane::~SessionJudgeLane() {
  for (const auto& [task, session] : sessions_) (void)manager_->CloseSession(session);
  manager_.reset();
  if (!owned_scratch_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(owned_scratch_, ignored);
  }
}

Result<std::unique_ptr<SessionJudgeLane>> SessionJudgeLane::Create(const std::string& envdb_path,
                                                                   sandbox::ManagerOptions options) {
  std::string owned_scratch;
  ScopedCleanupPath registration;
  if (options.scratch_root.empty()) {
    static std::atomic<int> counter{0};
    static std::once_flag swept;
    std::call_once(swept, [] { SweepDeadProcessEntries("/tmp", ScratchOwner); });
    owned_scratch =
        "/tmp/" + std::string(kScratchPrefix) + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    registration = ScopedCleanupPath(owned_scratch, CleanupKind::kTree);
    std::error_code ec;
    std::filesystem::remove_all(owned_scratch, ec);
    std::filesystem::create_directories(owned_scratch, ec);
    if (ec) return InternalError("cannot create the scratch root " + owned_scratch + ": " + ec.message());
    ::chmod(owned_scratch.c_str(), 0711);
    options.scratch_root = owned_scratch;
  }
  sandbox::SandboxLimits limits = options.limits;
  auto manager = sandbox::SessionManager::Create(std::move(options));
  auto cleanup = [&] {
    std::error_code ignored;
    if (!owned_scratch.empty()) std::filesystem::remove_all(owned_scratch, ignored);
  };
  if (!manager.ok()) {
    cleanup();
    return manager.status();
  }
  auto env_id = (*manager)->OpenEnvironment(envdb_path);
  if (!env_id.ok()) {
    manager->reset();
    cleanup();
    return env_id.status();
  }
  std::unique_ptr<SessionJudgeLane> lane(
      new SessionJudgeLane(std::move(manager).value(), std::move(env_id).value(), std::move(owned_scratch), limits));
  lane->scratch_registration_ = std::move(registration);
  return lane;
}

std::chrono::milliseconds SessionJudgeLane::CallDeadline(size_t answers) const {
  return limits_.wall_time * static_cast<int64_t>(answers) + limits_.kill_grace;
}

Result<sandbox::SessionManager::SessionId> SessionJudgeLane::SessionFor(const std::string& task_id) {
  if (auto it = sessions_.find(task_id); it != sessions_.end()) return it->second;
  ENVFORGE_ASSIGN_OR_RETURN(auto session, manager_->CreateSession(env_id_, task_id));
  sessions_[task_id] = session;
  return session;
}

void SessionJudgeLane::DropSession(const std::string& task_id) {
  if (auto it = sessions_.find(task_id); it != sessions_.end()) {
    (void)manager_->CloseSession(it->second);
    sessions_.erase(it);
  }
}

Result<std::string> SessionJudgeLane::SolveGold(const std::string& task_id) {
  ENVFORGE_ASSIGN_OR_RETURN(auto session, manager_->CreateSession(env_id_, task_id));
  auto solved = manager_->Solve(session);
  (void)manager_->CloseSession(session);
  if (!solved.ok()) return solved.status();
  return solved->answer_text;
}

Result<std::vector<Verdict>> SessionJudgeLane::Judge(const std::string& task_id, JudgeKind judge,
                                                     const std::vector<std::string>& answers) {
  ENVFORGE_ASSIGN_OR_RETURN(auto session, SessionFor(task_id));
  auto verdicts = manager_->JudgeAnswers(session, judge, answers);
  if (verdicts.ok()) return verdicts;
  StatusCode code = verdicts.status().code();
  if (code != StatusCode::kDeadlineExceeded && code != StatusCode::kUnavailable) return verdicts.status();
  // The session died under this batch: find the answer(s) responsible, one fresh session each, up
  // to the first that hangs alone (the contract's HANG: the call ends there).
  DropSession(task_id);
  std::vector<Verdict> alone;
  alone.reserve(answers.size());
  for (const std::string& answer : answers) {
    ENVFORGE_ASSIGN_OR_RETURN(auto fresh, manager_->CreateSession(env_id_, task_id));
    auto single = manager_->JudgeAnswers(fresh, judge, {answer});
    (void)manager_->CloseSession(fresh);
    if (single.ok() && single->size() == 1) {
      alone.push_back(std::move((*single)[0]));
      continue;
    }
    if (!single.ok() && single.status().code() != StatusCode::kDeadlineExceeded &&
        single.status().code() != StatusCode::kUnavailable) {
      return single.status();
    }
    bool hung = !single.ok() && single.status().code() == StatusCode::kDeadlineExceeded;
    Verdict defect;
    defect.defect = true;
    defect.defect_message =
        std::string(judge == JudgeKind::kOracle ? "the oracle" : "the verifier") + " of task '" + task_id + "' " +
        (hung ? "never returned within its wall-time limit of " + std::to_string(limits_.wall_time.count()) +
                    " ms, judging this answer alone in a fresh session (killed at the hard deadline): " +
                    single.status().message()
         : single.ok() ? std::string("returned no verdict")
                       : single.status().message());
    if (hung) defect.limit = "wall_time";
    alone.push_back(std::move(defect));
    if (hung) break;
  }
  return alone;
}

}  // namespace envforge::verifiers
