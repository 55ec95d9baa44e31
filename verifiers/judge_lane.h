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

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/cleanup_registry.h"
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
  // One verdict per answer, in order. A judge that raises, runs past its wall-time limit, crashes
  // its session or returns a non-verdict yields a defect verdict for that answer; an error Status
  // means the lane failed (infrastructure), or FailedPrecondition for kOracle on a task without an
  // oracle.
  // A HANG ends the call early: when the judge never returns for an answer (it swallows the
  // wall-time exception and its session is killed at the hard deadline), the call returns the
  // verdicts up to and including that answer's -- a defect with limit "wall_time" -- and so FEWER
  // verdicts than answers; the answers after it are not judged. (Judging them would cost a hard
  // deadline each, hours for a task; one hang already makes the task broken.)
  virtual Result<std::vector<Verdict>> Judge(const std::string& task_id, JudgeKind judge,
                                             const std::vector<std::string>& answers) = 0;
  // The longest one Judge call of `answers` answers may run before the runtime kills its session
  // (its hard deadline); a hang costs one more call of one answer on top. Zero: not bounded by
  // the lane (the audit then checks its budget between calls only).
  virtual std::chrono::milliseconds CallDeadline(size_t answers) const {
    (void)answers;
    return std::chrono::milliseconds(0);
  }
};

// A lane over its own SessionManager. Every batch is judged in a judge process of its own (a
// fresh fork of the pristine zygote, SessionManager::JudgeAsync), so nothing one batch's judge
// did reaches the next, and within a batch the judge's view of the data is read-only (no write,
// PRAGMA, TEMP object or ATTACH). One session per task is kept only to name the task and limits
// (nothing runs in it). When a batch fails because its judge process died or hit the hard
// deadline, its answers are judged again one by one, each alone: an answer that fails alone too
// gets a defect verdict carrying the status, and the first answer that hits the hard deadline
// alone is a hang (see Judge): the call returns there.
class SessionJudgeLane : public JudgeLane {
 public:
  // Opens `envdb_path` in a new manager with `options`. An empty options.scratch_root gets a
  // directory of its own (/tmp/envforge-audit-<pid>-<n>, removed with the lane): the manager's
  // default, /tmp/envforge-scratch-<pid>, would be shared by two managers of one process. That
  // directory is registered for removal on SIGINT/SIGTERM/SIGHUP (base/cleanup_registry.h), and
  // the /tmp/envforge-audit-<pid>-<n> directories of processes that no longer exist (a SIGKILLed
  // audit) are swept first. Errors: SessionManager::Create's and OpenEnvironment's.
  static Result<std::unique_ptr<SessionJudgeLane>> Create(const std::string& envdb_path,
                                                          sandbox::ManagerOptions options);
  ~SessionJudgeLane() override;

  Result<std::string> SolveGold(const std::string& task_id) override;
  Result<std::vector<Verdict>> Judge(const std::string& task_id, JudgeKind judge,
                                     const std::vector<std::string>& answers) override;
  // answers * wall_time + kill_grace: SessionManager::JudgeAnswers' hard deadline.
  std::chrono::milliseconds CallDeadline(size_t answers) const override;

  sandbox::SessionManager& manager() { return *manager_; }

 private:
  SessionJudgeLane(std::unique_ptr<sandbox::SessionManager> manager, std::string env_id, std::string owned_scratch,
                   sandbox::SandboxLimits limits);
  Result<sandbox::SessionManager::SessionId> SessionFor(const std::string& task_id);
  void DropSession(const std::string& task_id);

  std::unique_ptr<sandbox::SessionManager> manager_;
  std::string env_id_;
  std::map<std::string, sandbox::SessionManager::SessionId> sessions_;
  std::string owned_scratch_;               // removed by the destructor, after the manager
  ScopedCleanupPath scratch_registration_;  // removes owned_scratch_ on a signal
  sandbox::SandboxLimits limits_;           // of every session of this lane
};

}  // namespace envforge::verifiers
