// The seam between the audit and the runtime: a *lane* judges answers of a task with its
// verifier or its oracle, and runs its gold solution. The audit drives two lanes (two session
// managers, so two zygotes with two Python hash seeds) to spread the work over two cores and to
// re-judge answers in a second process family (determinism across processes).
//
// SessionJudgeLane is the real lane over sandbox::SessionManager::JudgeAnswers. Tests may
// implement JudgeLane with plain C++ judges to exercise the audit's rules without sessions.
//
// Thread safety: one lane is used by one thread at a time; distinct lanes run concurrently.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "sandbox/session_manager.h"

namespace envforge::verifiers {

using Verdict = sandbox::JudgeVerdict;
using JudgeKind = sandbox::Judge;

// Same verdict: both defects, or both non-defects with the same passed and score. Reasons are not
// compared (their wording may legitimately vary, e.g. with set iteration order).
bool SameVerdict(const Verdict& a, const Verdict& b);
// "passed", "failed: reason; reason", "defect: message".
std::string DescribeVerdict(const Verdict& verdict, size_t max_reasons = 2);

class JudgeLane {
 public:
  virtual ~JudgeLane() = default;
  // The gold solution's answer text. FailedPrecondition, DeadlineExceeded or Unavailable: the
  // solution itself failed (raised, broke a rule, ran out of time, crashed) -- a fault of the task;
  // any other error is the lane's (infrastructure).
  virtual Result<std::string> SolveGold(const std::string& task_id) = 0;
  // One verdict per answer, in order. A judge that raises, hangs, crashes its session or returns a
  // non-verdict yields a defect verdict for that answer; an error Status means the lane failed
  // (infrastructure), or FailedPrecondition for kOracle on a task without an oracle.
  virtual Result<std::vector<Verdict>> Judge(const std::string& task_id, JudgeKind judge,
                                             const std::vector<std::string>& answers) = 0;
};

// A lane over its own SessionManager. Every batch is judged in a judge process of its own (a
// fresh fork of the pristine zygote, SessionManager::JudgeAsync), so nothing one batch's judge
// did reaches the next, and within a batch the judge's view of the data is read-only (no write,
// PRAGMA, TEMP object or ATTACH). One session per task is kept only to name the task and limits
// (nothing runs in it). When a batch fails because its judge process died or hit the hard
// deadline, each of its answers is judged again alone, and an answer that fails alone too gets a
// defect verdict carrying the status.
class SessionJudgeLane : public JudgeLane {
 public:
  // Opens `envdb_path` in a new manager with `options`. An empty options.scratch_root gets a
  // directory of its own (/tmp/envforge-audit-<pid>-<n>, removed with the lane): the manager's
  // default, /tmp/envforge-scratch-<pid>, would be shared by two managers of one process. Errors:
  // SessionManager::Create's and OpenEnvironment's.
  static Result<std::unique_ptr<SessionJudgeLane>> Create(const std::string& envdb_path,
                                                          sandbox::ManagerOptions options);
  ~SessionJudgeLane() override;

  Result<std::string> SolveGold(const std::string& task_id) override;
  Result<std::vector<Verdict>> Judge(const std::string& task_id, JudgeKind judge,
                                     const std::vector<std::string>& answers) override;

  sandbox::SessionManager& manager() { return *manager_; }

 private:
  SessionJudgeLane(std::unique_ptr<sandbox::SessionManager> manager, std::string env_id, std::string owned_scratch);
  Result<sandbox::SessionManager::SessionId> SessionFor(const std::string& task_id);
  void DropSession(const std::string& task_id);

  std::unique_ptr<sandbox::SessionManager> manager_;
  std::string env_id_;
  std::map<std::string, sandbox::SessionManager::SessionId> sessions_;
  std::string owned_scratch_;  // removed by the destructor, after the manager
};

}  // namespace envforge::verifiers
