#include "sandbox/session_manager.h"

#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "base/cleanup_registry.h"
#include "base/log.h"
#include "base/sqlite.h"
#include "sandbox/code/code_grading.h"
#include "sandbox/internal/code_runner.h"
#include "sandbox/internal/kernel_runner.h"
#include "sandbox/internal/search_environment.h"
#include "sandbox/internal/search_runner.h"
#include "sandbox/internal/session_channel.h"
#include "sandbox/internal/wire.h"
#include "sandbox/internal/zygote_process.h"
#include "sandbox/worker_locator.h"
#include "toolsets/code_tools.h"
#include "toolsets/interpreter_tools.h"
#include "toolsets/json_schema.h"
#include "toolsets/search/answer_match.h"
#include "toolsets/search_tools.h"

namespace envforge::sandbox {
namespace {

namespace asio = boost::asio;
using internal::ExitReport;
using internal::SessionChannel;
using internal::SessionFailure;
using internal::SessionReply;
using internal::ZygoteProcess;
using toolsets::Outcome;
using toolsets::ToolResult;

// An opened environment: the bundle and each tool's compiled input schema. Immutable once
// registered, shared by the io thread and callers of FindEnvironment.
struct Environment {
  std::string id;
  std::string label;  // "environment NAME (HASH8)"
  EnvBundle bundle;
  std::map<std::string, toolsets::CompiledSchema, std::less<>> schemas;
  std::string tool_names;  // "a, b, c" for unknown-tool messages
  // Interpreter environments (kind "interpreter"): the warm kernel pool, filling from the moment
  // the environment is opened. Null for every other kind. Thread-safe.
  std::shared_ptr<jupyter::KernelPool> kernels;
  // An interpreter environment whose tools.py defines no tool: its sessions' calls all go to the
  // kernel (execute, interrupt, restart) or to a judge process (submit_result), never to the
  // session's worker process, so a create completes once the kernel is ready (see MaybeFinishCreate).
  bool kernel_serves_every_call = false;
  // Code environments (kind "code"): the tasks' templates and ready working copies. Null for
  // every other kind. Thread-safe.
  std::shared_ptr<code::WorkingCopyPool> code_copies;
  // Search environments (kind "search"): the backend configuration (an offline corpus copied
  // out of the bundle) and the answer keys. Null for every other kind. Immutable.
  std::shared_ptr<const internal::SearchEnvironment> search;
};

bool IsInterpreter(const Environment& env) { return env.bundle.manifest.kind == "interpreter"; }
bool IsCode(const Environment& env) { return env.bundle.manifest.kind == "code"; }
bool IsSearch(const Environment& env) { return env.search != nullptr; }

// True when every tool of the interpreter environment is the runtime's (kernel tools, submit_result).
bool KernelServesEveryCall(const Environment& env) {
  if (!IsInterpreter(env)) return false;
  for (const ToolRecord& tool : env.bundle.tools) {
    if (!toolsets::IsInterpreterTool(tool.spec.name) && tool.spec.name != toolsets::kSubmitResultTool) return false;
  }
  return true;
}

// A code session's commands run under the session's limits where they are tighter than a test
// suite needs: memory and processes at least what builds take (a JVM, go test, make -j4).
code::CodeWorkspaceOptions CodeWorkspaceOptionsFor(const SandboxLimits& limits,
                                                   const std::filesystem::path& scratch_root) {
  code::CodeWorkspaceOptions options;
  options.scratch_root = scratch_root;
  for (code::CommandLimits* command : {&options.command_limits, &options.test_limits}) {
    command->memory_bytes = std::max<int64_t>(limits.memory_bytes, int64_t{2} << 30);
    command->max_processes = std::max<int64_t>(limits.max_processes, 256);
  }
  return options;
}

// A verdict for submit_result from a code submission's grade.
Json CodeVerdict(const code::SubmissionGrade& grade, const std::string& version, size_t diff_bytes) {
  return Json{{"passed", grade.resolved},
              {"score", grade.resolved ? 1.0 : 0.0},
              {"reasons", grade.failing},
              {"verifier_version", version},
              {"diff_bytes", diff_bytes}};
}

// The verdict JSON of submit_result, of a search task (as DoSubmit writes a verifier's).
Json SearchVerdictJson(const search::AnswerVerdict& verdict, const std::string& version) {
  return Json{{"passed", verdict.passed},
              {"score", verdict.score},
              {"reasons", verdict.reasons},
              {"verifier_version", version}};
}

// The bundle's _files, for the kernels' working directories.
Result<std::vector<jupyter::KernelFile>> ReadBundleFiles(const std::string& path) {
  ENVFORGE_ASSIGN_OR_RETURN(Database db, Database::Open(path, Database::Mode::kReadOnly));
  ENVFORGE_ASSIGN_OR_RETURN(Statement rows, db.Prepare("SELECT path, data FROM _files ORDER BY path"));
  std::vector<jupyter::KernelFile> files;
  for (;;) {
    ENVFORGE_ASSIGN_OR_RETURN(bool row, rows.Step());
    if (!row) break;
    SqlValue data = rows.Column(1);
    std::string bytes;
    if (auto* blob = std::get_if<std::vector<uint8_t>>(&data)) bytes.assign(blob->begin(), blob->end());
    if (auto* text = std::get_if<std::string>(&data)) bytes = *text;
    files.push_back({rows.ColumnText(0), std::move(bytes)});
  }
  return files;
}

// The pool's kernels run under the environment's default limits: memory, disk and file size as
// for a worker session; processes at least 64 (pids.max counts threads, and ipykernel runs
// about ten of its own).
jupyter::KernelLimits KernelLimitsFor(const SandboxLimits& limits) {
  jupyter::KernelLimits kernel;
  kernel.memory_bytes = limits.memory_bytes;
  kernel.max_processes = limits.max_processes <= 0 ? 0 : std::max<int64_t>(64, limits.max_processes);
  kernel.disk_bytes = limits.disk_bytes > 0 ? limits.disk_bytes : kernel.disk_bytes;
  kernel.max_file_bytes = limits.max_file_bytes;
  kernel.open_files = std::max<int64_t>(256, limits.max_open_files);
  return kernel;
}

// Runs an interpreter task's gold solution in `kernel` and reads back `answer` as JSON.
Result<SolveOutput> RunKernelSolution(jupyter::KernelSession* kernel, const std::string& solution) {
  if (kernel == nullptr) return UnavailableError("the session has no kernel");
  toolsets::ToolResult ran = kernel->Call({"solution", std::string(toolsets::kExecuteTool), {{"code", solution}}});
  if (ran.outcome == Outcome::kTimeout) return DeadlineExceededError("gold solution: " + ran.message);
  if (ran.outcome == Outcome::kInfraError) return InternalError("gold solution: " + ran.message);
  if (ran.outcome != Outcome::kOk) return FailedPreconditionError("gold solution failed: " + ran.message);
  toolsets::ToolResult read =
      kernel->Call({"answer",
                    std::string(toolsets::kExecuteTool),
                    {{"code", "import json as _envforge_json\nprint(_envforge_json.dumps(answer), end='')"}}});
  if (read.outcome != Outcome::kOk) {
    return FailedPreconditionError("gold solution: no JSON-serialisable variable `answer` after it ran (" +
                                   read.message + ")");
  }
  std::string text;
  for (const Json& output : read.content["outputs"]) {
    if (output.value("output_type", "") == "stream" && output.value("name", "") == "stdout")
      text += output.value("text", "");
  }
  Result<Json> answer = ParseJson(text, "the solution's answer");
  if (!answer.ok()) return FailedPreconditionError("gold solution: " + answer.status().message());
  SolveOutput output;
  output.answer = *answer;
  output.answer_text = std::move(text);
  return output;
}

// What one execute of a session may use, from its limits: the wall clock and CPU seconds per
// call, and its output limit (text capped at 64 KiB: an observation a model can read).
jupyter::KernelSessionOptions KernelSessionOptionsFor(const SandboxLimits& limits) {
  jupyter::KernelSessionOptions options;
  options.execute.wall = limits.wall_time;
  options.execute.cpu_seconds = static_cast<double>(limits.cpu_seconds);
  options.execute.caps.text_bytes = static_cast<size_t>(std::min<int64_t>(limits.max_output_bytes, 64 << 10));
  options.execute.caps.image_bytes = static_cast<size_t>(limits.max_output_bytes);
  return options;
}

std::chrono::milliseconds HardDeadline(const SandboxLimits& limits) { return limits.wall_time + limits.kill_grace; }

// Judge processes' ids (spawn ids, channel labels, scratch directories) never meet a session's.
constexpr uint64_t kFirstJudgeId = uint64_t{1} << 48;
// Warm sessions started at once per environment: enough to refill a pool within a second, few
// enough that a caller's own spawn (past an empty pool) does not queue behind many of them.
constexpr size_t kWarmStartsAtOnce = 4;
// How long the io thread keeps polling after a handler before it sleeps (RunIoLoop).
constexpr std::chrono::microseconds kIoPollFor{100};
// A pool refills once no session was taken from it for this long (or at once when it runs below a
// quarter of its size): a burst of creates is not slowed by forks competing for the CPU.
constexpr std::chrono::milliseconds kWarmRefillQuiet{3};
// What the manager keeps of a judge's verdict (the worker caps reasons the same way; the
// manager does not rely on it).
constexpr size_t kMaxReasons = 17;  // 16 and "... N more"
constexpr size_t kMaxReasonChars = 403;
constexpr size_t kMaxDefectChars = 4096;

std::string Truncated(std::string text, size_t max_chars) {
  if (text.size() > max_chars) text.resize(max_chars);
  return text;
}

ToolResult ResultFromReply(SessionReply reply, std::string call_id) {
  ToolResult result;
  result.call_id = std::move(call_id);
  result.duration_us = reply.duration_us;
  if (reply.failure) {
    result.outcome = reply.failure->outcome;
    result.message = std::move(reply.failure->message);
    result.limit = std::move(reply.failure->limit);
    result.session_alive = false;
    return result;
  }
  Json& frame = reply.frame;
  result.outcome = toolsets::ParseOutcome(frame["outcome"].get<std::string>()).value();  // checked by the channel
  if (result.outcome == Outcome::kOk) {
    if (auto it = frame.find("content"); it != frame.end()) result.content = std::move(*it);
  } else if (auto it = frame.find("message"); it != frame.end()) {
    result.message = it->is_string() ? it->get<std::string>() : DumpJson(*it);
  }
  if (auto it = frame.find("limit"); it != frame.end() && it->is_string()) result.limit = it->get<std::string>();
  if (auto it = frame.find("stdout"); it != frame.end() && it->is_string()) result.stdout_text = it->get<std::string>();
  if (auto it = frame.find("where"); it != frame.end() && it->is_string()) result.where = it->get<std::string>();
  return result;
}

}  // namespace

class SessionManager::Impl {
 public:
  using ZygoteKey = std::pair<std::string, size_t>;  // (environment id, shard)
  Impl(ManagerOptions options, bool owns_scratch_root);
  ~Impl();

  Result<std::string> OpenEnvironment(const std::string& path);
  std::shared_ptr<const Environment> FindEnv(const std::string& env_id) const;
  std::vector<std::string> EnvironmentIds() const;

  // Runs `fn` on the io thread and waits for its result (from any other thread).
  template <typename T>
  Result<T> RunOnIo(std::function<Result<T>()> fn) const;
  bool OnIoThread() const { return std::this_thread::get_id() == io_thread_id_; }
  // The io thread's loop: io_.run(), polling for a moment after each handler before sleeping.
  void RunIoLoop();
  template <typename Fn>
  void Post(Fn&& fn) {
    asio::post(io_, std::forward<Fn>(fn));
  }

  // The rest runs on the io thread.
  struct Session;
  void DoCreate(const std::string& env_id, SessionOptions options, std::function<void(Result<SessionId>)> done);
  Status DoPrewarm(const std::string& env_id);
  void DoCall(SessionId id, toolsets::ToolCall call, std::function<void(ToolResult)> done);
  // Why a call on session `id` (FindCreated's `session`) cannot go to its process (unknown, or
  // dead), or nullopt.
  std::optional<ToolResult> UnreachableSession(const Session* session, SessionId id, const std::string& call_id);
  // A validated call of a plain worker session's tool: through the call gate, then to its process.
  void CallWorker(Session& session, toolsets::ToolCall call, std::function<void(ToolResult)> done);
  void SendToWorker(Session& session, toolsets::ToolCall call, std::function<void(ToolResult)> done);
  // The call gate. GateIsFull forgets running calls past their grace first; a call's end (or the
  // grace timer) posts AdmitGatedCalls, which sends waiting calls while places are free.
  bool GateIsFull();
  void EndRunningCall(uint64_t ticket);
  void AdmitGatedCalls();
  void ArmGateTimer();
  void DoSolve(SessionId id, std::function<void(Result<SolveOutput>)> done);
  void DoJudge(SessionId id, Judge judge, std::vector<std::string> answers,
               std::function<void(Result<std::vector<JudgeVerdict>>)> done);
  // submit_result: the verifier on the answer text, in a fresh judge process.
  void DoSubmit(Session& session, toolsets::ToolCall call, std::function<void(ToolResult)> done);
  // Interpreter sessions: execute/interrupt/restart on the session's kernel thread.
  void CallKernel(Session& session, toolsets::ToolCall call, std::function<void(ToolResult)> done);
  void SolveInKernel(Session& session, std::function<void(Result<SolveOutput>)> done);
  // Code sessions: the working-copy tools, the gold patch, and submit_result (the working copy's
  // diff graded on a fresh copy with the test patch), on the session's code runner.
  void CallCode(Session& session, toolsets::ToolCall call, std::function<void(ToolResult)> done);
  void SolveInCode(Session& session, std::function<void(Result<SolveOutput>)> done);
  void SubmitCode(Session& session, toolsets::ToolCall call, std::function<void(ToolResult)> done);
  // Search sessions: search/open/find, the gold answer, and verdicts by normalised exact match
  // against the task's answer key (submit_result and JudgeAsync alike), on the session's search
  // runner: no judge process, no Python.
  void CallSearch(Session& session, toolsets::ToolCall call, std::function<void(ToolResult)> done);
  void SolveInSearch(Session& session, std::function<void(Result<SolveOutput>)> done);
  void SubmitSearch(Session& session, toolsets::ToolCall call, std::function<void(ToolResult)> done);
  void JudgeInSearch(Session& session, std::vector<std::string> answers,
                     std::function<void(Result<std::vector<JudgeVerdict>>)> done);
  // Judges `answers` in a judge process: a fork of the environment's zygote that runs nothing but
  // "judge" requests of `task_id` (a kept one when there is, else a fresh one). Not a session of
  // the caller's (no id, not counted in max_sessions); at most max_sessions of them at once
  // (ResourceExhausted).
  void JudgeInJudgeProcess(const std::shared_ptr<const Environment>& env, const std::string& task_id,
                           const SandboxLimits& limits, Judge judge, std::vector<std::string> answers,
                           std::function<void(Result<std::vector<JudgeVerdict>>)> done);
  void DoFork(SessionId id, std::function<void(Result<SessionId>)> done);
  void DoClose(SessionId id, std::function<void(Status)> done);
  void DoReset(SessionId id, std::function<void(Result<SessionId>)> done);
  Result<SessionInfo> DoInfo(SessionId id) const;
  std::vector<SessionId> DoList() const;
  std::vector<ZygoteInfo> DoZygotes() const;
  ManagerStats DoStats() const;
  void BeginShutdown(std::function<void()> done);

  const ManagerOptions& options() const { return options_; }

 private:
  Result<std::shared_ptr<ZygoteProcess>> EnsureZygote(const std::shared_ptr<const Environment>& env);
  // What a new session process is for. A judge process gets an id of its own range
  // (kFirstJudgeId + n), works in <scratch_root>/j<n>/s<n>, and is never counted in live_ nor
  // handed to a caller; a warm one waits in its environment's pool, not counted in live_, until
  // a create or a judgement takes it.
  enum class Role { kCaller, kJudge, kWarm };
  // A session object in the starting state with its channel started; `worker_end` receives the
  // session's end of the socket pair.
  Result<std::shared_ptr<Session>> NewSession(const std::shared_ptr<const Environment>& env, std::string task_id,
                                              SandboxLimits limits, const std::shared_ptr<ZygoteProcess>& zygote,
                                              const Session* parent, UniqueFd* worker_end, Role role = Role::kCaller);
  // Sends the spawn of a fresh session (a caller's or a judge process) to its zygote.
  void SpawnFresh(const std::shared_ptr<Session>& session, const std::shared_ptr<ZygoteProcess>& zygote,
                  UniqueFd worker_end);
  void OnSessionReady(const std::shared_ptr<Session>& session, Result<int> pid);
  // Warm sessions (ManagerOptions::warm_sessions): whether a session of `env` under `limits` may
  // come from a pool; a ready one out of the pool (dead ones are closed on the way) or null; the
  // pool's refill (at most kWarmStartsAtOnce starting at a time); a warm session that became
  // ready joins its pool, one that failed to start is dropped.
  bool Warmable(const Environment& env, const SandboxLimits& limits) const;
  std::shared_ptr<Session> TakeWarm(const std::shared_ptr<const Environment>& env);
  void RefillWarm(const std::shared_ptr<const Environment>& env);
  void ScheduleRefill(const std::shared_ptr<const Environment>& env);
  void AddWarm(const std::shared_ptr<Session>& session);
  void DropWarm(const std::shared_ptr<Session>& session, const Status& why);
  // A warm session becomes the caller's session of `task_id`.
  void HandOutWarm(const std::shared_ptr<Session>& session, const std::string& task_id,
                   std::function<void(Result<SessionId>)> done);
  // A session taken from a pool gets its task: bound (wire.h "bind") with its first request (a
  // call, solve, fork or judgement), not when taken, so a burst of creates wakes no session
  // process. SendPendingBind queues that bind ahead of the request; should the session refuse, it
  // is killed, and its calls answer why.
  static void AssignTask(Session& session, const std::string& task_id);
  void SendPendingBind(Session& session);
  // Sends a ready judge process a "judge" request; once it answered it is kept (KeepJudge) or
  // closed.
  void RunJudgement(const std::shared_ptr<Session>& process, Judge judge, const SandboxLimits& limits,
                    std::vector<std::string> answers, std::function<void(Result<std::vector<JudgeVerdict>>)> finish);
  // Kept judge processes (ManagerOptions::judgements_per_judge_process): whether judgements of
  // `env` under `limits` may use one; whether `process` may judge again after a batch whose
  // verdicts were `verdicts`; parking it (closing the environment's least recently used past
  // idle_judges_per_environment); a live kept process of `task_id`, or null.
  bool JudgeKeepable(const Environment& env, const SandboxLimits& limits) const;
  bool MayJudgeAgain(const Session& process, const Result<std::vector<JudgeVerdict>>& verdicts) const;
  void KeepJudge(const std::shared_ptr<Session>& process);
  std::shared_ptr<Session> TakeKeptJudge(const std::shared_ptr<const Environment>& env, const std::string& task_id);
  // Processes kept idle for reuse (judge processes, recycled sessions) of one environment, least
  // recently used first, and the timer set for the first of them to outstay
  // ManagerOptions::idle_judge_timeout.
  struct WaitingCreate {
    std::string task_id;
    std::function<void(Result<SessionId>)> done;
  };
  struct IdlePool {
    std::deque<std::shared_ptr<Session>> idle;
    std::unique_ptr<asio::steady_timer> timer;
    // Recycled sessions only: recycles under way, and the creates waiting for one of them (never
    // more than those under way; the first recycle to finish takes the first waiting create).
    size_t in_flight = 0;
    std::deque<WaitingCreate> waiting;
    // Judge pools only: judgements of the environment in judge processes now, and the most there
    // were at once since `peak_at` (KeepJudge keeps that many idle while it is recent).
    size_t judging = 0;
    size_t recent_peak = 0;
    std::chrono::steady_clock::time_point peak_at;
  };
  // Parks `process` last in `pool`, closing the least recently used past `cap`; the pool's timer
  // and what it does when it fires (closes those idle that long, counted in `*closed`).
  void Park(IdlePool& pool, const std::shared_ptr<Session>& process, size_t cap, uint64_t* closed);
  // A judgement of the pool's environment begins in a judge process: counted, and the recent peak
  // raised (or restarted once older than idle_judge_timeout).
  void CountJudging(IdlePool& pool);
  void ScheduleIdleExpiry(IdlePool& pool, uint64_t* closed);
  void CloseIdle(IdlePool& pool, uint64_t* closed);
  // Recycled sessions (ManagerOptions::episodes_per_session_process): whether sessions of `env`
  // under `limits` may come from its recycled processes; whether `session`, closed by its caller,
  // may serve another episode; the worker's "recycle", after which the process waits in its
  // environment's pool under a new id (or is closed, when it refused); a live recycled process,
  // the most recently parked, or null.
  bool Recyclable(const Environment& env, const SandboxLimits& limits) const;
  bool MayRecycle(const Session& session) const;
  void Recycle(const std::shared_ptr<Session>& session);
  void FinishRecycle(const std::shared_ptr<Session>& session, bool recycled, std::string why);
  std::shared_ptr<Session> TakeRecycled(const std::shared_ptr<const Environment>& env);
  // Creates waiting beyond the recycles still under way go on without one (CreateProcess).
  void ReleaseWaitingCreates(const std::shared_ptr<const Environment>& env);
  // ResourceExhausted for a create or fork past ManagerOptions::max_sessions.
  Status SessionLimitReached() const;
  // The rest of a create once no recycled process serves it: a warm session, else a fresh spawn.
  void CreateProcess(const std::shared_ptr<const Environment>& env, SessionOptions options, const SandboxLimits& limits,
                     std::function<void(Result<SessionId>)> done);
  // Interpreter sessions: takes a kernel from the environment's pool, beside the worker's start;
  // whichever of the two finishes last completes the create.
  void StartKernel(const std::shared_ptr<Session>& session);
  // Code sessions: extracts the task's repository on the session's code runner, beside the
  // worker's start; whichever finishes last completes the create.
  void StartCode(const std::shared_ptr<Session>& session);
  // A fork of a code session: its working copy starts as a copy of the parent's.
  void StartCodeFork(Session& parent, const std::shared_ptr<Session>& child);
  // What a code session's runner calls when its working copy is there (or could not be made).
  std::function<void(Status)> CodeStarted(const std::shared_ptr<Session>& session);
  // Search sessions: opens the backend on the session's search runner, beside the worker's start;
  // whichever finishes last completes the create. `recorded`: responses to serve first (replays).
  void StartSearch(const std::shared_ptr<Session>& session, std::vector<search::RecordedResponse> recorded);
  // The session's search runner; a fork (which copies no thread) gets its own on first use.
  internal::SearchRunner& SearchRunnerOf(Session& session);
  // Completes a fresh session's create once its worker and its kernel or working copy are ready.
  void MaybeFinishCreate(const std::shared_ptr<Session>& session);
  // The session's pid, from whichever answer names it first (spawned / fork reply / ready).
  void RecordPid(const std::shared_ptr<Session>& session, pid_t pid);
  void MaybeFinishFork(const std::shared_ptr<Session>& session);
  void FailCreate(const std::shared_ptr<Session>& session, const Status& status);
  // Moves a session from sessions_ to closing_ and closes it; `then` runs once it is reaped.
  void Forget(std::shared_ptr<Session> session, std::function<void()> then);
  void OnZygoteExited(const ExitReport& report);
  void OnZygoteDeath(const ZygoteKey& key, const std::shared_ptr<ZygoteProcess>& zygote, const Status& why);
  Session* FindCreated(SessionId id) const;
  // Its worker process runs, or, for a session created before its worker was ready (an
  // interpreter session, see MaybeFinishCreate), still starts.
  static bool SessionAlive(const Session& session);

  ManagerOptions options_;  // worker_path and scratch_root resolved by Create
  bool owns_scratch_root_;

  mutable std::mutex env_mu_;
  std::map<std::string, std::shared_ptr<const Environment>> envs_;  // guarded by env_mu_

  // Declared before every member holding Asio objects, so it is destroyed after them.
  mutable asio::io_context io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::thread thread_;
  std::thread::id io_thread_id_;

  // io thread only.
  std::map<SessionId, std::shared_ptr<Session>> sessions_;  // starting, or created and not closed
  std::map<SessionId, std::shared_ptr<Session>> closing_;   // closed (or failed), until reaped
  std::unordered_map<pid_t, std::weak_ptr<Session>> by_pid_;
  // By (environment id, shard): ManagerOptions::zygotes_per_environment per environment, each
  // environment's fresh spawns spread over them in turn (next_shard_).
  std::map<ZygoteKey, std::shared_ptr<ZygoteProcess>> zygotes_;
  std::map<std::string, size_t> next_shard_;
  SessionId next_id_ = 1;
  SessionId next_judge_id_ = kFirstJudgeId;
  uint64_t next_zygote_root_ = 1;             // <scratch_root>/e<n>, one per zygote launched
  std::vector<std::string> zygote_roots_;     // removed by the destructor
  std::atomic<uint64_t> next_search_env_{0};  // search environments' corpus directories, by opening
  std::atomic<uint64_t> next_code_pool_{0};   // code environments' working copy pools, by opening
  size_t live_ = 0;
  size_t judges_ = 0;  // judge processes starting or judging
  struct WarmPool {
    std::deque<std::shared_ptr<Session>> ready;  // ready, task-less, default limits
    size_t starting = 0;
    std::unique_ptr<asio::steady_timer> refill_timer;  // ScheduleRefill's
  };
  std::map<std::string, WarmPool> warm_pools_;  // by environment id
  // Idle judge processes (KeepJudge) and idle recycled sessions (Recycle), by environment id.
  // Entries are never erased before BeginShutdown: their timers' callbacks hold their address.
  std::map<std::string, IdlePool> kept_judges_;
  std::map<std::string, IdlePool> recycled_;
  // The call gate (ManagerOptions::max_running_calls): calls running in their processes, by
  // ticket (ascending: the oldest first) with when they were sent, and the calls waiting.
  struct GatedCall {
    SessionId session;
    toolsets::ToolCall call;
    std::function<void(ToolResult)> done;
  };
  std::map<uint64_t, std::chrono::steady_clock::time_point> running_calls_;
  uint64_t next_call_ticket_ = 1;
  std::deque<GatedCall> gated_calls_;
  bool admission_posted_ = false;
  std::unique_ptr<asio::steady_timer> gate_timer_;
  std::optional<std::chrono::steady_clock::time_point> gate_timer_expiry_;  // while it waits
  ManagerStats stats_;
  bool shutting_down_ = false;
};

struct SessionManager::Impl::Session {
  SessionId id = 0;
  std::shared_ptr<const Environment> env;
  std::string task_id;
  SandboxLimits limits;
  // <zygote's root>/f<family>/s<id>: a fresh session founds family f<id>; its forks get
  // siblings in the same family directory (the worker copies the scratch directory over).
  std::string scratch_dir;
  std::shared_ptr<SessionChannel> channel;
  std::weak_ptr<ZygoteProcess> zygote;
  pid_t zygote_pid = 0;
  SessionId parent = 0;
  pid_t pid = 0;
  uint64_t calls = 0;
  // Recycling (MayRecycle): the episodes this process served before the current one, the wall
  // time of its calls (a bound on the CPU time its RLIMIT_CPU counts), and what rules it out.
  size_t episodes_before = 0;
  std::chrono::steady_clock::duration busy{};
  bool limit_hit = false;  // a call stopped at a limit: the interpreter may be half way through anything
  bool forked = false;     // has copies: its family's uid is not its own alone
  bool solved = false;     // ran the gold solution
  bool judge = false;      // a judge process (JudgeInJudgeProcess), never a caller's session
  // A judge process's judgements so far, and the wall time they took (a bound on the CPU time
  // its RLIMIT_CPU counts: the process is single-threaded).
  size_t judgements = 0;
  std::chrono::steady_clock::duration judging{};
  std::chrono::steady_clock::time_point kept_at{};  // when KeepJudge last put it among the idle
  bool warm = false;                                // started ahead of demand: starting or waiting in its pool
  bool bind_pending = false;                        // taken from a pool: its task is bound before its first request
  bool live = true;                                 // counted in live_
  bool created = false;                             // handed to the caller
  bool closing = false;
  // Pending creation (fresh or fork).
  std::function<void(Result<SessionId>)> on_created;
  bool ready = false;  // its "ready" frame arrived
  // The session's socket failed before "ready" while the zygote (or the parent, for a fork) had
  // not answered yet: that answer says more (spawn_failed, the zygote's death), so it decides.
  std::optional<Status> start_error;
  bool fork_answered = false;
  bool adopted = false;
  // Interpreter sessions: the kernel's thread (destroyed with the session: kills the kernel),
  // started with the worker process; the session is created once both are ready.
  std::unique_ptr<internal::KernelRunner> kernel;
  bool kernel_started = false;
  // Code sessions: the working copy's thread (destroyed with the session: removes the copy),
  // started with the worker process; the session is created once both are ready.
  std::unique_ptr<internal::CodeRunner> code;
  bool code_started = false;
  // Search sessions: the search thread (destroyed with the session), started with the worker
  // process; the session is created once both are ready.
  std::unique_ptr<internal::SearchRunner> search;
  bool search_started = false;
};

SessionManager::Impl::Impl(ManagerOptions options, bool owns_scratch_root)
    : options_(std::move(options)), owns_scratch_root_(owns_scratch_root) {
  work_.emplace(asio::make_work_guard(io_));
  std::promise<std::thread::id> started;
  thread_ = std::thread([this, &started] {
    started.set_value(std::this_thread::get_id());
    RunIoLoop();
  });
  io_thread_id_ = started.get_future().get();
}

void SessionManager::Impl::RunIoLoop() {
  // After each handler the thread keeps looking for the next one for a moment (yielding the CPU
  // between looks) before it sleeps in epoll: a session's answer usually comes within that
  // moment, and waking a sleeping thread costs about as much as the answer took.
  auto last_work = std::chrono::steady_clock::now();
  while (!io_.stopped()) {
    if (io_.poll() > 0) {
      last_work = std::chrono::steady_clock::now();
    } else if (std::chrono::steady_clock::now() - last_work < kIoPollFor) {
      std::this_thread::yield();
    } else {
      io_.run_one();
      last_work = std::chrono::steady_clock::now();
    }
  }
}

SessionManager::Impl::~Impl() {
  std::promise<void> finished;
  Post([this, &finished] { BeginShutdown([&finished] { finished.set_value(); }); });
  finished.get_future().wait();
  work_.reset();
  io_.stop();
  thread_.join();
  // Destroyed here, with the io_context alive and stopped.
  for (auto* registry : {&sessions_, &closing_}) {
    for (auto& [id, session] : *registry) session->channel->Detach();
    registry->clear();
  }
  by_pid_.clear();
  zygotes_.clear();
  std::error_code ignored;
  if (owns_scratch_root_) {
    std::filesystem::remove_all(options_.scratch_root, ignored);
  } else {
    for (const std::string& root : zygote_roots_) std::filesystem::remove_all(root, ignored);
  }
}

template <typename T>
Result<T> SessionManager::Impl::RunOnIo(std::function<Result<T>()> fn) const {
  if (OnIoThread()) return fn();
  std::promise<Result<T>> answer;
  asio::post(io_, [&] { answer.set_value(fn()); });
  return answer.get_future().get();
}

Result<std::string> SessionManager::Impl::OpenEnvironment(const std::string& path) {
  ENVFORGE_ASSIGN_OR_RETURN(EnvBundle bundle, EnvBundle::Load(path));
  std::string id = bundle.manifest.content_hash;
  if (FindEnv(id)) return id;
  auto env = std::make_shared<Environment>();
  env->id = id;
  env->label = "environment " + bundle.manifest.name + " (" + id.substr(0, 8) + ")";
  for (const ToolRecord& tool : bundle.tools) {
    Result<toolsets::CompiledSchema> schema = toolsets::CompiledSchema::Compile(tool.spec.input_schema);
    if (!schema.ok()) {
      return InvalidArgumentError(path + ": tool '" + tool.spec.name + "': input schema: " + schema.status().message());
    }
    env->schemas.emplace(tool.spec.name, std::move(schema).value());
    if (!env->tool_names.empty()) env->tool_names += ", ";
    env->tool_names += tool.spec.name;
  }
  env->bundle = std::move(bundle);
  if (IsInterpreter(*env)) {
    ENVFORGE_ASSIGN_OR_RETURN(std::vector<jupyter::KernelFile> files, ReadBundleFiles(path));
    jupyter::KernelPoolOptions pool;
    pool.size = options_.kernel_pool_size;
    pool.launch.scratch_root = options_.kernel_scratch_root;
    pool.launch.files = std::move(files);
    pool.launch.limits = KernelLimitsFor(options_.limits);
    env->kernels = jupyter::KernelPool::Create(std::move(pool));
    env->kernel_serves_every_call = KernelServesEveryCall(*env);
  }
  if (IsCode(*env)) {
    code::WorkingCopyPoolOptions copies;
    copies.root = std::filesystem::path(options_.scratch_root) / ("code-copies-" + std::to_string(next_code_pool_++));
    copies.ready_per_task = static_cast<int>(options_.code_ready_copies);
    ENVFORGE_ASSIGN_OR_RETURN(env->code_copies, code::WorkingCopyPool::Create(std::move(copies)));
  }
  if (env->bundle.manifest.kind == "search") {
    const std::string work_dir = options_.scratch_root + "/search-env-" + std::to_string(next_search_env_++);
    ENVFORGE_ASSIGN_OR_RETURN(env->search, internal::SearchEnvironment::Open(path, work_dir));
  }
  std::lock_guard lock(env_mu_);
  envs_.emplace(id, std::move(env));  // a concurrent open of the same content keeps the first
  return id;
}

std::shared_ptr<const Environment> SessionManager::Impl::FindEnv(const std::string& env_id) const {
  std::lock_guard lock(env_mu_);
  auto it = envs_.find(env_id);
  return it == envs_.end() ? nullptr : it->second;
}

std::vector<std::string> SessionManager::Impl::EnvironmentIds() const {
  std::lock_guard lock(env_mu_);
  std::vector<std::string> ids;
  for (const auto& [id, env] : envs_) ids.push_back(id);
  return ids;
}

Result<std::shared_ptr<ZygoteProcess>> SessionManager::Impl::EnsureZygote(
    const std::shared_ptr<const Environment>& env) {
  const ZygoteKey key{env->id, next_shard_[env->id]++ % std::max<size_t>(1, options_.zygotes_per_environment)};
  if (auto it = zygotes_.find(key); it != zygotes_.end()) {
    auto state = it->second->state();
    if (state == ZygoteProcess::State::kStarting || state == ZygoteProcess::State::kReady) return it->second;
    zygotes_.erase(it);  // dead or stopping: start a fresh one
  }
  internal::ZygoteOptions zygote_options;
  zygote_options.worker_path = options_.worker_path;
  zygote_options.bundle_path = env->bundle.path;
  // A root of its own: its Landlock domain then covers no other environment's files.
  zygote_options.scratch_root = options_.scratch_root + "/e" + std::to_string(next_zygote_root_++);
  zygote_roots_.push_back(zygote_options.scratch_root);
  zygote_options.label = env->label;
  zygote_options.startup_timeout = options_.zygote_start_timeout;
  zygote_options.request_timeout = options_.spawn_timeout;
  auto holder = std::make_shared<std::weak_ptr<ZygoteProcess>>();
  internal::ZygoteProcess::Callbacks callbacks;
  callbacks.on_exited = [this](const ExitReport& report) { OnZygoteExited(report); };
  callbacks.on_death = [this, key, holder](const Status& why) { OnZygoteDeath(key, holder->lock(), why); };
  ENVFORGE_ASSIGN_OR_RETURN(auto zygote, ZygoteProcess::Launch(io_, std::move(zygote_options), std::move(callbacks)));
  *holder = zygote;
  ++stats_.zygote_starts;
  ENVFORGE_LOG(kInfo) << "started zygote " << zygote->pid() << " for " << env->label;
  zygotes_[key] = zygote;
  return zygote;
}

Result<std::shared_ptr<SessionManager::Impl::Session>> SessionManager::Impl::NewSession(
    const std::shared_ptr<const Environment>& env, std::string task_id, SandboxLimits limits,
    const std::shared_ptr<ZygoteProcess>& zygote, const Session* parent, UniqueFd* worker_end, Role role) {
  ENVFORGE_ASSIGN_OR_RETURN(auto sockets, MakeSocketPair());
  const bool judge = role == Role::kJudge;
  auto session = std::make_shared<Session>();
  session->id = judge ? next_judge_id_++ : next_id_++;
  session->judge = judge;
  session->warm = role == Role::kWarm;
  session->env = env;
  session->task_id = std::move(task_id);
  session->limits = limits;
  std::string number = std::to_string(judge ? session->id - kFirstJudgeId : session->id);
  std::string family_dir = parent != nullptr ? std::filesystem::path(parent->scratch_dir).parent_path().string()
                                             : zygote->scratch_root() + (judge ? "/j" : "/f") + number;
  session->scratch_dir = family_dir + "/s" + number;
  session->zygote = zygote;
  session->zygote_pid = zygote->pid();
  session->parent = parent != nullptr ? parent->id : 0;
  internal::SessionChannelOptions channel_options;
  // The worker keeps its replies under 48 MiB (content within max_output_bytes, stdout capped);
  // anything past the manager's limit is a protocol violation, seen on the frame's header.
  channel_options.max_frame_bytes = options_.max_frame_bytes;
  // A session spawned while its zygote starts waits for that start too.
  channel_options.ready_timeout = options_.spawn_timeout;
  if (zygote->state() == ZygoteProcess::State::kStarting)
    channel_options.ready_timeout += options_.zygote_start_timeout;
  channel_options.kill_grace = limits.kill_grace;
  channel_options.label = (judge ? "judge process " : "session ") + number;
  session->channel = SessionChannel::Create(io_, std::move(sockets.first), std::move(channel_options));
  *worker_end = std::move(sockets.second);
  std::weak_ptr<Session> weak = session;
  session->channel->Start(
      [this, weak](Result<int> pid) {
        if (auto s = weak.lock()) OnSessionReady(s, std::move(pid));
      },
      [this, weak] {
        auto s = weak.lock();
        if (!s || !s->live) return;
        s->live = false;
        --live_;
        if (s->created && !s->closing) ++stats_.sessions_died;
      });
  sessions_[session->id] = session;
  if (role == Role::kCaller) {
    ++live_;
  } else {
    session->live = false;
  }
  return session;
}

void SessionManager::Impl::OnSessionReady(const std::shared_ptr<Session>& session, Result<int> pid) {
  if (!pid.ok()) {
    if (session->pid == 0 && pid.status().code() == StatusCode::kUnavailable) {
      session->start_error = pid.status();
      return;
    }
    return FailCreate(session, pid.status());
  }
  session->ready = true;
  RecordPid(session, *pid);
  if (session->parent != 0) return MaybeFinishFork(session);
  if (session->judge) {
    if (auto done = std::move(session->on_created)) done(session->id);
    return;
  }
  if (session->closing) return;  // its create failed already (its kernel did not start)
  MaybeFinishCreate(session);
}

void SessionManager::Impl::MaybeFinishCreate(const std::shared_ptr<Session>& session) {
  if (session->created || session->closing) return;
  // No call of such a session needs its worker: the create does not wait for it (about 3-15 ms
  // of spawn on a busy machine). Should the worker fail to start, the session's calls answer
  // with its death, as after any later death.
  if (!session->ready && (!session->env->kernel_serves_every_call || session->start_error)) return;
  if (session->warm) return AddWarm(session);
  if (session->kernel && !session->kernel_started) return;  // StartKernel's answer completes it
  if (session->code && !session->code_started) return;      // StartCode's answer completes it
  if (session->search && !session->search_started) return;  // StartSearch's answer completes it
  session->created = true;
  ++stats_.sessions_created;
  if (auto done = std::move(session->on_created)) done(session->id);
}

void SessionManager::Impl::StartCode(const std::shared_ptr<Session>& session) {
  session->code = std::make_unique<internal::CodeRunner>();
  std::weak_ptr<Session> weak = session;
  const std::filesystem::path dir =
      std::filesystem::path(options_.scratch_root) / ("code-s" + std::to_string(session->id));
  session->code->Start(session->env->bundle.path, session->task_id, session->env->code_copies, dir,
                       CodeWorkspaceOptionsFor(session->limits, options_.kernel_scratch_root), CodeStarted(session));
}

void SessionManager::Impl::StartCodeFork(Session& parent, const std::shared_ptr<Session>& child) {
  child->code = std::make_unique<internal::CodeRunner>();
  const std::filesystem::path dir =
      std::filesystem::path(options_.scratch_root) / ("code-s" + std::to_string(child->id));
  code::CodeWorkspaceOptions options = CodeWorkspaceOptionsFor(child->limits, options_.kernel_scratch_root);
  options.discard = [copies = child->env->code_copies](const std::filesystem::path& used) { copies->Discard(used); };
  child->code->StartFork(*parent.code, child->env->code_copies, dir, std::move(options), CodeStarted(child));
}

std::function<void(Status)> SessionManager::Impl::CodeStarted(const std::shared_ptr<Session>& session) {
  std::weak_ptr<Session> weak = session;
  return [this, weak](Status started) {
    Post([this, weak, started] {
      auto s = weak.lock();
      if (!s || s->closing) return;
      if (!started.ok()) return FailCreate(s, started.WithContext("the session's working copy"));
      s->code_started = true;
      if (s->parent != 0) return MaybeFinishFork(s);
      MaybeFinishCreate(s);
    });
  };
}

void SessionManager::Impl::StartKernel(const std::shared_ptr<Session>& session) {
  session->kernel = std::make_unique<internal::KernelRunner>();
  std::weak_ptr<Session> weak = session;
  session->kernel->Start(*session->env->kernels, KernelSessionOptionsFor(session->limits),
                         [this, weak](Status started) {
                           Post([this, weak, started] {
                             auto s = weak.lock();
                             if (!s || s->closing) return;
                             if (!started.ok())
                               return FailCreate(s, started.WithContext("the session's kernel did not start"));
                             s->kernel_started = true;
                             MaybeFinishCreate(s);
                           });
                         });
}

void SessionManager::Impl::RecordPid(const std::shared_ptr<Session>& session, pid_t pid) {
  if (session->start_error) return FailCreate(session, *session->start_error);
  if (session->pid != 0) return;
  session->pid = pid;
  by_pid_[pid] = session;
  session->channel->SetPid(pid);
}

void SessionManager::Impl::MaybeFinishFork(const std::shared_ptr<Session>& session) {
  if (!session->ready || !session->fork_answered || !session->adopted || session->created) return;
  if (session->code && !session->code_started) return;  // StartFork's answer completes it
  session->created = true;
  ++stats_.sessions_forked;
  if (auto done = std::move(session->on_created)) done(session->id);
}

void SessionManager::Impl::FailCreate(const std::shared_ptr<Session>& session, const Status& status) {
  if (session->warm) return DropWarm(session, status);
  auto done = std::move(session->on_created);
  session->on_created = nullptr;
  if (session->created || !done) return;
  ENVFORGE_LOG(kInfo) << "session " << session->id << " failed to start: " << status.message();
  Forget(session, nullptr);
  done(status);
}

void SessionManager::Impl::Forget(std::shared_ptr<Session> session, std::function<void()> then) {
  sessions_.erase(session->id);
  closing_[session->id] = session;
  session->closing = true;
  session->kernel.reset();  // kills the kernel; a running execute ends within about 20 ms
  if (session->live) {
    // A closed session no longer counts against max_sessions, even while its process exits.
    session->live = false;
    --live_;
  }
  std::weak_ptr<Session> weak = session;
  session->channel->Close([this, weak, then = std::move(then)] {
    auto s = weak.lock();
    if (!s) return;
    if (s->pid != 0) {
      auto it = by_pid_.find(s->pid);
      if (it != by_pid_.end() && it->second.lock() == s) by_pid_.erase(it);
    }
    // The zygote removes a reaped session's directory (and its family's with the last member);
    // without a zygote, the manager does.
    auto zygote = s->zygote.lock();
    if (!zygote || zygote->state() == ZygoteProcess::State::kDead) {
      std::error_code ignored;
      std::filesystem::remove_all(s->scratch_dir, ignored);
      std::filesystem::remove(std::filesystem::path(s->scratch_dir).parent_path(), ignored);  // when empty
    }
    closing_.erase(s->id);
    if (then) then();
  });
}

void SessionManager::Impl::DoCreate(const std::string& env_id, SessionOptions options,
                                    std::function<void(Result<SessionId>)> done) {
  if (shutting_down_) return done(UnavailableError("the session manager is shutting down"));
  auto env = FindEnv(env_id);
  if (!env) return done(NotFoundError("unknown environment '" + env_id + "' (open it first)"));
  if (!options.task_id.empty() && env->bundle.FindTask(options.task_id) == nullptr) {
    return done(NotFoundError("no task '" + options.task_id + "' in " + env->label));
  }
  if (IsCode(*env) && options.task_id.empty()) {
    return done(FailedPreconditionError("a session of code " + env->label +
                                        " needs a task: its working copy is that task's repository"));
  }
  SandboxLimits limits = options.limits.value_or(options_.limits);
  if (Status valid = ValidateLimits(limits); !valid.ok()) return done(valid);
  if (live_ >= options_.max_sessions) {
    return done(SessionLimitReached());
  }
  if (Recyclable(*env, limits)) {
    if (std::shared_ptr<Session> recycled = TakeRecycled(env)) {
      ++stats_.recycled_taken;
      return HandOutWarm(recycled, options.task_id, std::move(done));
    }
    // A recycle under way ends within a few milliseconds; a warm session taken instead is
    // replaced by a fork, which under load costs far more. So the create waits for the recycle.
    IdlePool& pool = recycled_[env->id];
    if (pool.waiting.size() < pool.in_flight) {
      pool.waiting.push_back(WaitingCreate{options.task_id, std::move(done)});
      return;
    }
  }
  CreateProcess(env, std::move(options), limits, std::move(done));
}

void SessionManager::Impl::CreateProcess(const std::shared_ptr<const Environment>& env, SessionOptions options,
                                         const SandboxLimits& limits, std::function<void(Result<SessionId>)> done) {
  if (Warmable(*env, limits)) {
    std::shared_ptr<Session> warm = TakeWarm(env);
    ScheduleRefill(env);
    if (warm) return HandOutWarm(warm, options.task_id, std::move(done));
  }
  Result<std::shared_ptr<ZygoteProcess>> zygote = EnsureZygote(env);
  if (!zygote.ok()) return done(zygote.status());
  UniqueFd worker_end;
  Result<std::shared_ptr<Session>> created = NewSession(env, options.task_id, limits, *zygote, nullptr, &worker_end);
  if (!created.ok()) return done(created.status());
  std::shared_ptr<Session> session = *created;
  session->on_created = std::move(done);
  // An interpreter session's kernel is taken from the pool while its worker process starts.
  if (env->kernels) StartKernel(session);
  if (IsCode(*env)) StartCode(session);
  if (IsSearch(*env)) StartSearch(session, std::move(options.recorded_responses));
  SpawnFresh(session, *zygote, std::move(worker_end));
}

void SessionManager::Impl::SpawnFresh(const std::shared_ptr<Session>& session,
                                      const std::shared_ptr<ZygoteProcess>& zygote, UniqueFd worker_end) {
  std::weak_ptr<Session> weak = session;
  zygote->Spawn(session->id, session->task_id, ToWireLimits(session->limits, session->scratch_dir),
                std::move(worker_end), [this, weak](Result<int> pid) {
                  auto s = weak.lock();
                  if (!s) return;
                  if (!pid.ok()) return FailCreate(s, pid.status());
                  RecordPid(s, *pid);
                });
}

SessionManager::Impl::Session* SessionManager::Impl::FindCreated(SessionId id) const {
  auto it = sessions_.find(id);
  return it == sessions_.end() || !it->second->created ? nullptr : it->second.get();
}

bool SessionManager::Impl::SessionAlive(const Session& session) {
  if (session.channel->alive()) return true;
  return session.created && !session.closing && session.channel->state() == SessionChannel::State::kStarting;
}

std::optional<ToolResult> SessionManager::Impl::UnreachableSession(const Session* session, SessionId id,
                                                                   const std::string& call_id) {
  if (session == nullptr) {
    ToolResult result =
        ToolResult::Error(Outcome::kInvalidCall,
                          "unknown session " + std::to_string(id) + " (never created, or already closed)", call_id);
    result.session_alive = false;
    return result;
  }
  if (const auto& death = session->channel->death()) {
    ToolResult result = ToolResult::Error(death->outcome, death->message, call_id);
    result.limit = death->limit;
    result.session_alive = false;
    return result;
  }
  return std::nullopt;
}

void SessionManager::Impl::DoCall(SessionId id, toolsets::ToolCall call, std::function<void(ToolResult)> done) {
  Session* session = FindCreated(id);
  if (std::optional<ToolResult> unreachable = UnreachableSession(session, id, call.id)) {
    return done(std::move(*unreachable));
  }
  auto schema = session->env->schemas.find(call.name);
  if (schema == session->env->schemas.end()) {
    return done(ToolResult::Error(Outcome::kInvalidCall,
                                  "unknown tool '" + call.name + "'; tools: " + session->env->tool_names, call.id));
  }
  if (!JsonDepthWithin(call.arguments, kMaxJsonValueDepth)) {
    // Before the schema: validating walks the value, and the worker's envelope must still parse.
    return done(ToolResult::Error(Outcome::kInvalidCall,
                                  "arguments of '" + call.name + "' nest deeper than " +
                                      std::to_string(kMaxJsonValueDepth) + " levels of arrays and objects",
                                  call.id));
  }
  std::vector<toolsets::SchemaViolation> violations = schema->second.Validate(call.arguments);
  if (!violations.empty()) {
    return done(ToolResult::Error(Outcome::kInvalidCall, toolsets::DescribeViolations(violations), call.id));
  }
  if (call.name == toolsets::kSubmitResultTool && session->code)
    return SubmitCode(*session, std::move(call), std::move(done));
  if (call.name == toolsets::kSubmitResultTool && IsSearch(*session->env))
    return SubmitSearch(*session, std::move(call), std::move(done));
  if (call.name == toolsets::kSubmitResultTool) return DoSubmit(*session, std::move(call), std::move(done));
  if (session->kernel && toolsets::IsInterpreterTool(call.name))
    return CallKernel(*session, std::move(call), std::move(done));
  if (session->code && toolsets::IsCodeTool(call.name)) return CallCode(*session, std::move(call), std::move(done));
  if (IsSearch(*session->env) && toolsets::IsSearchTool(call.name))
    return CallSearch(*session, std::move(call), std::move(done));
  CallWorker(*session, std::move(call), std::move(done));
}

void SessionManager::Impl::CallWorker(Session& session, toolsets::ToolCall call, std::function<void(ToolResult)> done) {
  if (options_.max_running_calls > 0 && (!gated_calls_.empty() || GateIsFull())) {
    ++stats_.calls_gated;
    gated_calls_.push_back(GatedCall{session.id, std::move(call), std::move(done)});
    ArmGateTimer();
    return;
  }
  SendToWorker(session, std::move(call), std::move(done));
}

void SessionManager::Impl::SendToWorker(Session& session, toolsets::ToolCall call,
                                        std::function<void(ToolResult)> done) {
  const uint64_t ticket = options_.max_running_calls > 0 ? next_call_ticket_++ : 0;
  if (ticket != 0) running_calls_.emplace(ticket, std::chrono::steady_clock::now());
  Json request = {{"op", "call"}, {"name", std::move(call.name)}, {"arguments", std::move(call.arguments)}};
  std::weak_ptr<Session> weak = sessions_.at(session.id);
  SendPendingBind(session);
  session.channel->Request(std::move(request), HardDeadline(session.limits), {},
                           [this, weak, ticket, started = std::chrono::steady_clock::now(),
                            call_id = std::move(call.id), done = std::move(done)](SessionReply reply) mutable {
                             if (ticket != 0) EndRunningCall(ticket);
                             const bool answered = !reply.failure;
                             ToolResult result = ResultFromReply(std::move(reply), std::move(call_id));
                             if (auto s = weak.lock()) {
                               if (answered) ++s->calls;
                               s->busy += std::chrono::steady_clock::now() - started;
                               if (!result.limit.empty()) s->limit_hit = true;
                             }
                             ++stats_.calls;
                             done(std::move(result));
                           });
}

bool SessionManager::Impl::GateIsFull() {
  const auto old = std::chrono::steady_clock::now() - options_.running_call_grace;
  while (!running_calls_.empty() && running_calls_.begin()->second <= old) running_calls_.erase(running_calls_.begin());
  return running_calls_.size() >= options_.max_running_calls;
}

void SessionManager::Impl::EndRunningCall(uint64_t ticket) {
  running_calls_.erase(ticket);  // nothing when its grace had passed
  if (gated_calls_.empty() || admission_posted_) return;
  // Posted, not run here: a call's end is a channel's callback, and the admitted calls may go to
  // that same channel.
  admission_posted_ = true;
  Post([this] {
    admission_posted_ = false;
    AdmitGatedCalls();
  });
}

void SessionManager::Impl::AdmitGatedCalls() {
  while (!gated_calls_.empty() && !shutting_down_ && !GateIsFull()) {
    GatedCall next = std::move(gated_calls_.front());
    gated_calls_.pop_front();
    // The session may have died or been closed while the call waited (its arguments were checked).
    Session* session = FindCreated(next.session);
    if (std::optional<ToolResult> unreachable = UnreachableSession(session, next.session, next.call.id)) {
      next.done(std::move(*unreachable));
      continue;
    }
    SendToWorker(*session, std::move(next.call), std::move(next.done));
  }
  ArmGateTimer();
}

// While calls wait: wakes up when the oldest running call's grace ends (it then stops counting).
void SessionManager::Impl::ArmGateTimer() {
  if (gated_calls_.empty() || running_calls_.empty() || shutting_down_) return;
  const auto expiry = running_calls_.begin()->second + options_.running_call_grace;
  if (gate_timer_expiry_ == expiry) return;  // set already: re-arming would post a cancelled wait per call
  if (!gate_timer_) gate_timer_ = std::make_unique<asio::steady_timer>(io_);
  gate_timer_expiry_ = expiry;
  gate_timer_->expires_at(expiry);
  gate_timer_->async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;  // re-armed for another expiry, or the shutdown
    gate_timer_expiry_.reset();
    AdmitGatedCalls();
  });
}

void SessionManager::Impl::CallKernel(Session& session, toolsets::ToolCall call, std::function<void(ToolResult)> done) {
  const auto sent = std::chrono::steady_clock::now();
  session.kernel->Post(
      [this, call = std::move(call), done = std::move(done), sent](jupyter::KernelSession* kernel) mutable {
        ToolResult result =
            kernel ? kernel->Call(call) : ToolResult::Error(Outcome::kInfraError, "the session has no kernel", call.id);
        result.duration_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - sent).count();
        return [this, result = std::move(result), done = std::move(done)]() mutable {
          Post([this, result = std::move(result), done = std::move(done)]() mutable {
            ++stats_.calls;
            done(std::move(result));
          });
        };
      });
}

void SessionManager::Impl::CallCode(Session& session, toolsets::ToolCall call, std::function<void(ToolResult)> done) {
  const auto sent = std::chrono::steady_clock::now();
  session.code->Post([this, call = std::move(call), done = std::move(done),
                      sent](code::CodeWorkspace* workspace) mutable {
    ToolResult result = workspace ? workspace->Call(call)
                                  : ToolResult::Error(Outcome::kInfraError, "the session has no working copy", call.id);
    result.duration_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - sent).count();
    return [this, result = std::move(result), done = std::move(done)]() mutable {
      Post([this, result = std::move(result), done = std::move(done)]() mutable {
        ++stats_.calls;
        done(std::move(result));
      });
    };
  });
}

// The gold solution of a code task is its patch: applied to the working copy (answer_text: the
// patch), which submit_result then grades.
void SessionManager::Impl::SolveInCode(Session& session, std::function<void(Result<SolveOutput>)> done) {
  internal::CodeRunner* runner = session.code.get();
  runner->Post([this, runner, done = std::move(done)](code::CodeWorkspace* workspace) mutable {
    Result<SolveOutput> output = UnavailableError("the session has no working copy");
    if (workspace != nullptr) {
      ToolResult applied =
          workspace->Call({"solution", std::string(toolsets::kApplyPatchTool), {{"patch", runner->instance().patch}}});
      if (applied.ok()) {
        SolveOutput solved;
        solved.answer_text = runner->instance().patch;
        solved.answer = Json{{"answer_text", solved.answer_text}};
        output = std::move(solved);
      } else {
        output = FailedPreconditionError("gold patch: " + applied.message);
      }
    }
    return [this, output = std::move(output), done = std::move(done)]() mutable {
      Post([output = std::move(output), done = std::move(done)]() mutable { done(std::move(output)); });
    };
  });
}

void SessionManager::Impl::SubmitCode(Session& session, toolsets::ToolCall call, std::function<void(ToolResult)> done) {
  const TaskRecord* task = session.env->bundle.FindTask(session.task_id);
  std::string version = task != nullptr ? task->version : "";
  const auto sent = std::chrono::steady_clock::now();
  internal::CodeRunner* runner = session.code.get();
  code::CodeRunOptions grading;
  grading.scratch_root = options_.kernel_scratch_root;
  grading.limits = CodeWorkspaceOptionsFor(session.limits, options_.kernel_scratch_root).test_limits;
  runner->Post([this, runner, grading, version = std::move(version), call = std::move(call), done = std::move(done),
                sent](code::CodeWorkspace* workspace) mutable {
    ToolResult result;
    result.call_id = call.id;
    Result<std::string> diff = workspace ? workspace->Diff() : UnavailableError("the session has no working copy");
    Result<code::SubmissionGrade> grade =
        diff.ok() ? code::GradeSubmission(runner->repo(), runner->instance(), *diff, grading) : diff.status();
    if (grade.ok()) {
      result.content = CodeVerdict(*grade, version, diff->size());
    } else {
      result.outcome = Outcome::kInfraError;
      result.message = "grading the working copy failed: " + grade.status().message();
    }
    result.duration_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - sent).count();
    return [this, result = std::move(result), done = std::move(done)]() mutable {
      Post([this, result = std::move(result), done = std::move(done)]() mutable {
        ++stats_.calls;
        done(std::move(result));
      });
    };
  });
}

void SessionManager::Impl::StartSearch(const std::shared_ptr<Session>& session,
                                       std::vector<search::RecordedResponse> recorded) {
  session->search = std::make_unique<internal::SearchRunner>();
  std::weak_ptr<Session> weak = session;
  session->search->Start(session->env->search->backend(), std::move(recorded), [this, weak](Status started) {
    Post([this, weak, started] {
      auto s = weak.lock();
      if (!s || s->closing) return;
      if (!started.ok()) return FailCreate(s, started.WithContext("the session's search backend"));
      s->search_started = true;
      MaybeFinishCreate(s);
    });
  });
}

internal::SearchRunner& SessionManager::Impl::SearchRunnerOf(Session& session) {
  if (!session.search) StartSearch(sessions_.at(session.id), {});
  return *session.search;
}

void SessionManager::Impl::CallSearch(Session& session, toolsets::ToolCall call, std::function<void(ToolResult)> done) {
  const auto sent = std::chrono::steady_clock::now();
  SearchRunnerOf(session).Post([this, call = std::move(call), done = std::move(done),
                                sent](search::SearchToolbox* toolbox) mutable {
    ToolResult result =
        toolbox ? toolbox->Call(call)
                : ToolResult::Error(
                      Outcome::kInfraError,
                      "the session's search backend is not open (it failed to open, or the session closed)", call.id);
    result.duration_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - sent).count();
    return [this, result = std::move(result), done = std::move(done)]() mutable {
      Post([this, result = std::move(result), done = std::move(done)]() mutable {
        ++stats_.calls;
        done(std::move(result));
      });
    };
  });
}

// The gold solution of a search task is its answer, submitted as it stands.
void SessionManager::Impl::SolveInSearch(Session& session, std::function<void(Result<SolveOutput>)> done) {
  const search::AnswerKey* key = session.env->search->FindAnswer(session.task_id);
  if (key == nullptr) return done(InternalError("task '" + session.task_id + "' has no answer key"));
  SearchRunnerOf(session).Post([this, answer = key->answer, done = std::move(done)](search::SearchToolbox*) mutable {
    SolveOutput output;
    output.answer = Json(answer);
    output.answer_text = answer;
    return [this, output = std::move(output), done = std::move(done)]() mutable {
      Post([output = std::move(output), done = std::move(done)]() mutable { done(std::move(output)); });
    };
  });
}

void SessionManager::Impl::SubmitSearch(Session& session, toolsets::ToolCall call,
                                        std::function<void(ToolResult)> done) {
  if (session.task_id.empty()) {
    return done(ToolResult::Error(Outcome::kInvalidCall, "submit_result: this session has no task", call.id));
  }
  auto answer_text = call.arguments.find("answer_text");
  if (answer_text == call.arguments.end() || !answer_text->is_string()) {
    return done(ToolResult::Error(Outcome::kInvalidCall, "submit_result needs {\"answer_text\": string}", call.id));
  }
  const search::AnswerKey* key = session.env->search->FindAnswer(session.task_id);
  const TaskRecord* task = session.env->bundle.FindTask(session.task_id);
  if (key == nullptr || task == nullptr) {
    return done(ToolResult::Error(Outcome::kInfraError, "task '" + session.task_id + "' has no answer key", call.id));
  }
  ++session.calls;
  const auto sent = std::chrono::steady_clock::now();
  std::string answer = answer_text->get<std::string>();
  SearchRunnerOf(session).Post([this, env = session.env, key, task, answer = std::move(answer),
                                call_id = std::move(call.id), done = std::move(done),
                                sent](search::SearchToolbox*) mutable {
    ToolResult result;
    auto verdict = search::JudgeAnswer(answer, *key, task->prompt, options_.search_answer_judge.get());
    if (verdict.ok()) {
      result.call_id = std::move(call_id);
      result.content = SearchVerdictJson(*verdict, task->version);
    } else {
      result = ToolResult::Error(Outcome::kInfraError, verdict.status().message(), std::move(call_id));
    }
    result.duration_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - sent).count();
    return [this, result = std::move(result), done = std::move(done)]() mutable {
      Post([this, result = std::move(result), done = std::move(done)]() mutable {
        ++stats_.calls;
        done(std::move(result));
      });
    };
  });
}

void SessionManager::Impl::JudgeInSearch(Session& session, std::vector<std::string> answers,
                                         std::function<void(Result<std::vector<JudgeVerdict>>)> done) {
  const search::AnswerKey* key = session.env->search->FindAnswer(session.task_id);
  const TaskRecord* task = session.env->bundle.FindTask(session.task_id);
  if (key == nullptr || task == nullptr) return done(InternalError("task '" + session.task_id + "' has no answer key"));
  SearchRunnerOf(session).Post([this, env = session.env, key, task, answers = std::move(answers),
                                done = std::move(done)](search::SearchToolbox*) mutable {
    Result<std::vector<JudgeVerdict>> verdicts = std::vector<JudgeVerdict>();
    for (const std::string& answer : answers) {
      auto matched = search::JudgeAnswer(answer, *key, task->prompt, options_.search_answer_judge.get());
      if (!matched.ok()) {
        verdicts = matched.status();
        break;
      }
      JudgeVerdict verdict;
      verdict.passed = matched->passed;
      verdict.score = matched->score;
      verdict.reasons = std::move(matched->reasons);
      verdicts->push_back(std::move(verdict));
    }
    return [this, verdicts = std::move(verdicts), done = std::move(done)]() mutable {
      Post([verdicts = std::move(verdicts), done = std::move(done)]() mutable { done(std::move(verdicts)); });
    };
  });
}

// The gold solution of an interpreter task is notebook code: run it in the session's kernel,
// then read the variable `answer` it left, as JSON.
void SessionManager::Impl::SolveInKernel(Session& session, std::function<void(Result<SolveOutput>)> done) {
  const TaskRecord* task = session.env->bundle.FindTask(session.task_id);
  std::string solution = task != nullptr ? task->solution_source : std::string();
  session.kernel->Post(
      [this, solution = std::move(solution), done = std::move(done)](jupyter::KernelSession* kernel) mutable {
        Result<SolveOutput> output = RunKernelSolution(kernel, solution);
        return [this, output = std::move(output), done = std::move(done)]() mutable {
          Post([output = std::move(output), done = std::move(done)]() mutable { done(std::move(output)); });
        };
      });
}

void SessionManager::Impl::DoSolve(SessionId id, std::function<void(Result<SolveOutput>)> done) {
  Session* session = FindCreated(id);
  if (session == nullptr) return done(NotFoundError("unknown session " + std::to_string(id)));
  if (session->task_id.empty()) {
    return done(FailedPreconditionError("session " + std::to_string(id) + " has no task: nothing to solve"));
  }
  if (const auto& death = session->channel->death()) return done(UnavailableError(death->message));
  if (session->kernel) return SolveInKernel(*session, std::move(done));
  if (session->code) return SolveInCode(*session, std::move(done));
  if (IsSearch(*session->env)) return SolveInSearch(*session, std::move(done));
  session->solved = true;
  SendPendingBind(*session);
  session->channel->Request(Json{{"op", "solve"}}, HardDeadline(session->limits), {},
                            [done = std::move(done)](SessionReply reply) {
                              if (reply.failure) {
                                if (reply.failure->outcome == Outcome::kTimeout) {
                                  return done(DeadlineExceededError(reply.failure->message));
                                }
                                return done(UnavailableError(reply.failure->message));
                              }
                              Json& frame = reply.frame;
                              std::string outcome = frame["outcome"].get<std::string>();
                              std::string message = frame.value("message", std::string());
                              if (outcome == "ok") {
                                SolveOutput output;
                                if (auto it = frame.find("answer"); it != frame.end()) output.answer = std::move(*it);
                                output.answer_text = frame.value("answer_text", std::string());
                                return done(std::move(output));
                              }
                              if (outcome == "timeout") return done(DeadlineExceededError("gold solution: " + message));
                              if (outcome == "infra_error") return done(InternalError("gold solution: " + message));
                              return done(FailedPreconditionError("gold solution failed: " + message));
                            });
}

// Reads one entry of a judge reply's "verdicts" array (see wire.h, op "judge"). The judge process
// ran the environment's code: its reply is untrusted, so anything but the documented shapes is
// an error, and the texts are capped.
Result<JudgeVerdict> JudgeVerdictFromJson(const Json& entry) {
  if (!entry.is_object()) return InternalError("judge reply: a verdict is not an object");
  JudgeVerdict verdict;
  if (auto defect = entry.find("defect"); defect != entry.end()) {
    if (!defect->is_string()) return InternalError("judge reply: a defect that is not a string");
    verdict.defect = true;
    verdict.defect_message = Truncated(defect->get<std::string>(), kMaxDefectChars);
    if (auto limit = entry.find("limit"); limit != entry.end() && limit->is_string()) {
      verdict.limit = Truncated(limit->get<std::string>(), 32);
    }
    return verdict;
  }
  auto passed = entry.find("passed");
  auto score = entry.find("score");
  if (passed == entry.end() || !passed->is_boolean() || score == entry.end() || !score->is_number()) {
    return InternalError("judge reply: a verdict without a boolean passed and a numeric score");
  }
  verdict.passed = passed->get<bool>();
  verdict.score = score->get<double>();
  if (!std::isfinite(verdict.score)) return InternalError("judge reply: a verdict whose score is not finite");
  auto reasons = entry.find("reasons");
  if (reasons == entry.end() || !reasons->is_array() || reasons->size() > kMaxReasons) {
    return InternalError("judge reply: a verdict whose reasons are not a list of at most " +
                         std::to_string(kMaxReasons) + " strings");
  }
  for (const auto& reason : *reasons) {
    if (!reason.is_string()) return InternalError("judge reply: a reason that is not a string");
    verdict.reasons.push_back(Truncated(reason.get<std::string>(), kMaxReasonChars));
  }
  return verdict;
}

// The verdicts of a judge process's reply to {"op":"judge"} with `expected` answers.
Result<std::vector<JudgeVerdict>> VerdictsFromReply(SessionReply reply, size_t expected) {
  if (reply.failure) {
    if (reply.failure->outcome == Outcome::kTimeout) return DeadlineExceededError(reply.failure->message);
    return UnavailableError(reply.failure->message);
  }
  Json& frame = reply.frame;
  if (frame["outcome"] != "ok") {
    const Json& message = frame.value("message", Json());
    return InternalError("judge: " +
                         Truncated(message.is_string() ? message.get<std::string>() : "failed", kMaxDefectChars));
  }
  auto verdicts_json = frame.find("verdicts");
  if (verdicts_json == frame.end() || !verdicts_json->is_array() || verdicts_json->size() != expected) {
    return InternalError("judge reply: expected " + std::to_string(expected) + " verdicts");
  }
  std::vector<JudgeVerdict> verdicts;
  verdicts.reserve(expected);
  for (const auto& entry : *verdicts_json) {
    ENVFORGE_ASSIGN_OR_RETURN(JudgeVerdict verdict, JudgeVerdictFromJson(entry));
    verdicts.push_back(std::move(verdict));
  }
  return verdicts;
}

void SessionManager::Impl::DoJudge(SessionId id, Judge judge, std::vector<std::string> answers,
                                   std::function<void(Result<std::vector<JudgeVerdict>>)> done) {
  Session* session = FindCreated(id);
  if (session == nullptr) return done(NotFoundError("unknown session " + std::to_string(id)));
  if (session->task_id.empty()) {
    return done(FailedPreconditionError("session " + std::to_string(id) + " has no task: nothing to judge"));
  }
  if (const auto& death = session->channel->death()) return done(UnavailableError(death->message));
  if (judge == Judge::kOracle) {
    const TaskRecord* task = session->env ? session->env->bundle.FindTask(session->task_id) : nullptr;
    if (task == nullptr || task->oracle_source.empty()) {
      return done(FailedPreconditionError("task " + session->task_id + " has no oracle"));
    }
  }
  if (answers.empty()) return done(std::vector<JudgeVerdict>{});
  if (IsSearch(*session->env)) return JudgeInSearch(*session, std::move(answers), std::move(done));
  JudgeInJudgeProcess(session->env, session->task_id, session->limits, judge, std::move(answers), std::move(done));
}

void SessionManager::Impl::DoSubmit(Session& session, toolsets::ToolCall call, std::function<void(ToolResult)> done) {
  if (session.task_id.empty()) {
    return done(ToolResult::Error(Outcome::kInvalidCall, "submit_result: this session has no task", call.id));
  }
  auto answer_text = call.arguments.find("answer_text");
  if (!call.arguments.is_object() || answer_text == call.arguments.end() || !answer_text->is_string()) {
    return done(ToolResult::Error(Outcome::kInvalidCall, "submit_result needs {\"answer_text\": string}", call.id));
  }
  std::string answer = answer_text->get<std::string>();
  const TaskRecord* task = session.env->bundle.FindTask(session.task_id);
  std::string version = task != nullptr ? task->version : "";
  auto start = std::chrono::steady_clock::now();
  std::weak_ptr<Session> weak = sessions_.at(session.id);
  JudgeInJudgeProcess(session.env, session.task_id, session.limits, Judge::kVerifier, {std::move(answer)},
                      [this, weak, start, version = std::move(version), call_id = std::move(call.id),
                       done = std::move(done)](Result<std::vector<JudgeVerdict>> judged) mutable {
                        ++stats_.calls;
                        auto s = weak.lock();
                        ToolResult result;
                        result.call_id = std::move(call_id);
                        result.duration_us =
                            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
                        result.session_alive = s && SessionAlive(*s);
                        if (s) ++s->calls;
                        if (!judged.ok()) {
                          result.outcome = Outcome::kInfraError;
                          result.message = "the verifier's judge process failed: " + judged.status().message();
                          if (judged.status().code() == StatusCode::kDeadlineExceeded) result.limit = "wall_time";
                          return done(std::move(result));
                        }
                        const JudgeVerdict& verdict = judged->front();
                        if (verdict.defect) {
                          result.outcome = Outcome::kInfraError;
                          result.message = verdict.defect_message;
                          result.limit = verdict.limit;
                          return done(std::move(result));
                        }
                        result.outcome = Outcome::kOk;
                        result.content = Json{{"passed", verdict.passed},
                                              {"score", verdict.score},
                                              {"reasons", verdict.reasons},
                                              {"verifier_version", version}};
                        done(std::move(result));
                      });
}

void SessionManager::Impl::JudgeInJudgeProcess(const std::shared_ptr<const Environment>& env,
                                               const std::string& task_id, const SandboxLimits& limits, Judge judge,
                                               std::vector<std::string> answers,
                                               std::function<void(Result<std::vector<JudgeVerdict>>)> done) {
  if (shutting_down_) return done(UnavailableError("the session manager is shutting down"));
  if (judges_ >= options_.max_sessions) {
    return done(ResourceExhaustedError("too many judgements in flight: " + std::to_string(judges_) +
                                       " judge processes (max_sessions); retry"));
  }
  const bool keepable = JudgeKeepable(*env, limits);
  // Counted from here on; every path below ends through `finish` (`done` is moved into it).
  ++judges_;
  if (keepable) CountJudging(kept_judges_[env->id]);
  auto finish = [this, keepable, env_id = env->id, done = std::move(done)](Result<std::vector<JudgeVerdict>> verdicts) {
    --judges_;
    if (auto pool = kept_judges_.find(env_id); keepable && pool != kept_judges_.end()) {
      --pool->second.judging;
    }
    done(std::move(verdicts));
  };
  if (keepable) {
    if (std::shared_ptr<Session> kept = TakeKeptJudge(env, task_id)) {
      ++stats_.judgements_in_kept_process;
      return RunJudgement(kept, judge, limits, std::move(answers), std::move(finish));
    }
  }
  if (Warmable(*env, limits)) {
    std::shared_ptr<Session> warm = TakeWarm(env);
    ScheduleRefill(env);
    if (warm) {
      warm->judge = true;
      AssignTask(*warm, task_id);
      return RunJudgement(warm, judge, limits, std::move(answers), std::move(finish));
    }
  }
  Result<std::shared_ptr<ZygoteProcess>> zygote = EnsureZygote(env);
  if (!zygote.ok()) return finish(zygote.status());
  UniqueFd worker_end;
  Result<std::shared_ptr<Session>> created =
      NewSession(env, task_id, limits, *zygote, nullptr, &worker_end, Role::kJudge);
  if (!created.ok()) return finish(created.status());
  std::shared_ptr<Session> process = *created;
  std::weak_ptr<Session> weak = process;
  process->on_created = [this, weak, judge, limits, answers = std::move(answers),
                         finish = std::move(finish)](Result<SessionId> ready) mutable {
    if (!ready.ok()) return finish(ready.status());  // FailCreate already forgot the process
    auto judge_process = weak.lock();
    if (!judge_process) return finish(UnavailableError("the judge process is gone"));
    RunJudgement(judge_process, judge, limits, std::move(answers), std::move(finish));
  };
  SpawnFresh(process, *zygote, std::move(worker_end));
}

void SessionManager::Impl::RunJudgement(const std::shared_ptr<Session>& process, Judge judge,
                                        const SandboxLimits& limits, std::vector<std::string> answers,
                                        std::function<void(Result<std::vector<JudgeVerdict>>)> finish) {
  size_t expected = answers.size();
  auto deadline = limits.wall_time * static_cast<int64_t>(expected) + limits.kill_grace;
  Json request{
      {"op", "judge"}, {"judge", judge == Judge::kOracle ? "oracle" : "verifier"}, {"answers", std::move(answers)}};
  std::weak_ptr<Session> weak = process;
  SendPendingBind(*process);
  auto started = std::chrono::steady_clock::now();
  process->channel->Request(std::move(request), deadline, {},
                            [this, weak, expected, started, finish = std::move(finish)](SessionReply reply) mutable {
                              Result<std::vector<JudgeVerdict>> verdicts =
                                  VerdictsFromReply(std::move(reply), expected);
                              bool again = false;
                              if (auto p = weak.lock()) {
                                ++p->judgements;
                                p->judging += std::chrono::steady_clock::now() - started;
                                again = MayJudgeAgain(*p, verdicts);
                              }
                              // Kept or closed outside the channel's callback.
                              Post([this, weak, again] {
                                auto p = weak.lock();
                                if (!p || p->closing) return;
                                if (again) return KeepJudge(p);
                                Forget(p, nullptr);
                              });
                              finish(std::move(verdicts));
                            });
}

bool SessionManager::Impl::JudgeKeepable(const Environment& env, const SandboxLimits& limits) const {
  return options_.judgements_per_judge_process > 1 && options_.idle_judges_per_environment > 0 && !env.kernels &&
         !IsCode(env) && !IsSearch(env) && limits == options_.limits;
}

bool SessionManager::Impl::MayJudgeAgain(const Session& process,
                                         const Result<std::vector<JudgeVerdict>>& verdicts) const {
  if (shutting_down_ || !verdicts.ok() || !process.channel->alive()) return false;
  if (!JudgeKeepable(*process.env, process.limits)) return false;
  // A verifier stopped at a limit may have left its interpreter half way through anything.
  for (const JudgeVerdict& verdict : *verdicts) {
    if (!verdict.limit.empty()) return false;
  }
  auto cpu_budget = std::chrono::seconds(process.limits.cpu_seconds) / 2;
  return process.judgements < options_.judgements_per_judge_process && process.judging < cpu_budget;
}

void SessionManager::Impl::CountJudging(IdlePool& pool) {
  ++pool.judging;
  const auto now = std::chrono::steady_clock::now();
  const bool peak_stale = options_.idle_judge_timeout.count() > 0 && now - pool.peak_at > options_.idle_judge_timeout;
  if (pool.judging >= pool.recent_peak || peak_stale) {
    pool.recent_peak = pool.judging;
    pool.peak_at = now;
  }
}

void SessionManager::Impl::KeepJudge(const std::shared_ptr<Session>& process) {
  IdlePool& pool = kept_judges_[process->env->id];
  // As many as judged at once lately (a wave of verdicts finds its processes the next time), at
  // least the configured count, never more than max_sessions.
  const size_t cap = std::min(std::max(options_.idle_judges_per_environment, pool.recent_peak), options_.max_sessions);
  Park(pool, process, cap, &stats_.idle_judges_closed);
}

std::shared_ptr<SessionManager::Impl::Session> SessionManager::Impl::TakeKeptJudge(
    const std::shared_ptr<const Environment>& env, const std::string& task_id) {
  auto found = kept_judges_.find(env->id);
  if (found == kept_judges_.end()) return nullptr;
  std::deque<std::shared_ptr<Session>>& kept = found->second.idle;
  // The newest first; one that died while it waited is closed and the next one tried, so a dead
  // process never costs a fork while a live one of the task waits.
  for (;;) {
    auto match = std::find_if(kept.rbegin(), kept.rend(),
                              [&](const std::shared_ptr<Session>& idle) { return idle->task_id == task_id; });
    if (match == kept.rend()) return nullptr;
    std::shared_ptr<Session> process = *match;
    kept.erase(std::next(match).base());
    if (process->channel->AliveNow() && !process->closing) return process;
    if (!process->closing) Forget(process, nullptr);  // killed or crashed while it waited
  }
}

void SessionManager::Impl::Park(IdlePool& pool, const std::shared_ptr<Session>& process, size_t cap, uint64_t* closed) {
  process->kept_at = std::chrono::steady_clock::now();
  pool.idle.push_back(process);
  while (pool.idle.size() > cap) {
    std::shared_ptr<Session> oldest = std::move(pool.idle.front());
    pool.idle.pop_front();
    if (!oldest->closing) Forget(oldest, nullptr);
  }
  ScheduleIdleExpiry(pool, closed);
}

void SessionManager::Impl::ScheduleIdleExpiry(IdlePool& pool, uint64_t* closed) {
  if (options_.idle_judge_timeout.count() <= 0 || shutting_down_) return;
  if (pool.idle.empty()) return;  // a pending wait finds nothing to close
  if (!pool.timer) pool.timer = std::make_unique<asio::steady_timer>(io_);
  pool.timer->expires_at(pool.idle.front()->kept_at + options_.idle_judge_timeout);  // cancels a pending wait
  pool.timer->async_wait([this, pool = &pool, closed](const boost::system::error_code& ec) {
    if (!ec) CloseIdle(*pool, closed);
  });
}

void SessionManager::Impl::CloseIdle(IdlePool& pool, uint64_t* closed) {
  if (shutting_down_) return;
  const auto now = std::chrono::steady_clock::now();
  while (!pool.idle.empty() && pool.idle.front()->kept_at + options_.idle_judge_timeout <= now) {
    std::shared_ptr<Session> idle = std::move(pool.idle.front());
    pool.idle.pop_front();
    ++*closed;
    if (!idle->closing) Forget(idle, nullptr);
  }
  ScheduleIdleExpiry(pool, closed);
}

bool SessionManager::Impl::Recyclable(const Environment& env, const SandboxLimits& limits) const {
  return options_.episodes_per_session_process > 1 && !shutting_down_ && !env.kernels && !IsCode(env) &&
         !IsSearch(env) && limits == options_.limits;
}

bool SessionManager::Impl::MayRecycle(const Session& session) const {
  if (!Recyclable(*session.env, session.limits)) return false;
  if (session.judge || session.parent != 0 || session.forked || session.solved || session.limit_hit) return false;
  if (!session.ready || session.closing || !session.channel->alive()) return false;
  if (session.episodes_before + 1 >= options_.episodes_per_session_process) return false;
  return session.busy < std::chrono::seconds(session.limits.cpu_seconds) / 2;
}

void SessionManager::Impl::Recycle(const std::shared_ptr<Session>& session) {
  session->created = false;  // its id is unknown to callers from now on
  if (session->live) {
    session->live = false;
    --live_;
  }
  ++recycled_[session->env->id].in_flight;
  std::weak_ptr<Session> weak = session;
  session->channel->Request(
      Json{{"op", "recycle"}}, HardDeadline(session->limits), {}, [this, weak](SessionReply reply) {
        bool recycled = !reply.failure && reply.frame.value("outcome", "") == "ok";
        std::string why = reply.failure ? reply.failure->message : reply.frame.value("message", std::string());
        Post([this, weak, recycled, why = std::move(why)] {
          if (auto s = weak.lock()) FinishRecycle(s, recycled, why);
        });
      });
}

namespace {

// Threads of process `pid` (entries of /proc/<pid>/task); 0 when it cannot be read.
size_t ThreadsOf(pid_t pid) {
  std::error_code error;
  size_t threads = 0;
  for (std::filesystem::directory_iterator it("/proc/" + std::to_string(pid) + "/task", error), end;
       !error && it != end; it.increment(error)) {
    ++threads;
  }
  return error ? 0 : threads;
}

}  // namespace

void SessionManager::Impl::FinishRecycle(const std::shared_ptr<Session>& session, bool recycled, std::string why) {
  IdlePool& pool = recycled_[session->env->id];
  if (pool.in_flight > 0) --pool.in_flight;
  if (session->closing) return ReleaseWaitingCreates(session->env);
  // The worker cannot see its threads (/proc is outside its Landlock domain); the manager can.
  if (recycled && ThreadsOf(session->pid) != 1) {
    recycled = false;
    why = "a thread of its episode still runs";
  }
  if (!recycled) {
    ++stats_.recycles_refused;
    ENVFORGE_LOG(kDebug) << "session " << session->id << " of " << session->env->label << " not recycled: " << why;
  }
  if (!recycled || shutting_down_ || !session->channel->alive()) {
    Forget(session, nullptr);
    return ReleaseWaitingCreates(session->env);
  }
  sessions_.erase(session->id);
  session->id = next_id_++;
  sessions_[session->id] = session;
  session->task_id.clear();
  session->bind_pending = false;
  session->calls = 0;
  ++session->episodes_before;
  ++stats_.sessions_recycled;
  if (!pool.waiting.empty() && live_ < options_.max_sessions) {
    WaitingCreate next = std::move(pool.waiting.front());
    pool.waiting.pop_front();
    ++stats_.recycled_taken;
    return HandOutWarm(session, next.task_id, std::move(next.done));
  }
  Park(pool, session, options_.recycled_sessions_per_environment, &stats_.recycled_idle_closed);
  ReleaseWaitingCreates(session->env);
}

Status SessionManager::Impl::SessionLimitReached() const {
  return ResourceExhaustedError("session limit reached: " + std::to_string(live_) + " of max_sessions " +
                                std::to_string(options_.max_sessions) + " are live; retry after closing one");
}

void SessionManager::Impl::ReleaseWaitingCreates(const std::shared_ptr<const Environment>& env) {
  IdlePool& pool = recycled_[env->id];
  while (pool.waiting.size() > pool.in_flight) {
    WaitingCreate create = std::move(pool.waiting.back());
    pool.waiting.pop_back();
    if (shutting_down_) {
      create.done(UnavailableError("the session manager is shutting down"));
    } else if (live_ >= options_.max_sessions) {
      create.done(SessionLimitReached());
    } else {
      CreateProcess(env, SessionOptions{create.task_id, {}, {}}, options_.limits, std::move(create.done));
    }
  }
}

std::shared_ptr<SessionManager::Impl::Session> SessionManager::Impl::TakeRecycled(
    const std::shared_ptr<const Environment>& env) {
  auto found = recycled_.find(env->id);
  if (found == recycled_.end()) return nullptr;
  std::deque<std::shared_ptr<Session>>& idle = found->second.idle;
  while (!idle.empty()) {
    std::shared_ptr<Session> process = std::move(idle.back());
    idle.pop_back();
    if (process->channel->AliveNow() && !process->closing) return process;
    if (!process->closing) Forget(process, nullptr);  // killed or crashed while it waited
  }
  return nullptr;
}

Status SessionManager::Impl::DoPrewarm(const std::string& env_id) {
  auto env = FindEnv(env_id);
  if (!env) return NotFoundError("unknown environment '" + env_id + "' (open it first)");
  if (!Warmable(*env, options_.limits)) {
    return FailedPreconditionError("sessions of " + env->label + " are never warm (warm sessions " +
                                   std::to_string(options_.warm_sessions) +
                                   "; interpreter, code and search environments have none)");
  }
  // A zygote that cannot start is reported here, not only in the log of a later create.
  ENVFORGE_RETURN_IF_ERROR(EnsureZygote(env).status());
  RefillWarm(env);
  return Status::Ok();
}

bool SessionManager::Impl::Warmable(const Environment& env, const SandboxLimits& limits) const {
  return options_.warm_sessions > 0 && !shutting_down_ && !env.kernels && !IsCode(env) && !IsSearch(env) &&
         limits == options_.limits;
}

std::shared_ptr<SessionManager::Impl::Session> SessionManager::Impl::TakeWarm(
    const std::shared_ptr<const Environment>& env) {
  std::deque<std::shared_ptr<Session>>& ready = warm_pools_[env->id].ready;
  while (!ready.empty()) {
    std::shared_ptr<Session> session = std::move(ready.front());
    ready.pop_front();
    session->warm = false;
    if (session->channel->AliveNow()) {
      ++stats_.warm_taken;
      return session;
    }
    Forget(session, nullptr);  // killed or crashed while it waited
  }
  ++stats_.warm_missed;
  return nullptr;
}

void SessionManager::Impl::RefillWarm(const std::shared_ptr<const Environment>& env) {
  WarmPool& pool = warm_pools_[env->id];
  while (!shutting_down_ && pool.ready.size() + pool.starting < options_.warm_sessions &&
         pool.starting < kWarmStartsAtOnce) {
    Result<std::shared_ptr<ZygoteProcess>> zygote = EnsureZygote(env);
    if (!zygote.ok()) return;  // the caller's own create (or judgement) reports it
    UniqueFd worker_end;
    Result<std::shared_ptr<Session>> created =
        NewSession(env, "", options_.limits, *zygote, nullptr, &worker_end, Role::kWarm);
    if (!created.ok()) {
      ENVFORGE_LOG(kWarn) << "cannot start a warm session of " << env->label << ": " << created.status().message();
      return;
    }
    ++pool.starting;
    SpawnFresh(*created, *zygote, std::move(worker_end));
  }
}

void SessionManager::Impl::AddWarm(const std::shared_ptr<Session>& session) {
  WarmPool& pool = warm_pools_[session->env->id];
  if (pool.starting > 0) --pool.starting;
  if (shutting_down_) return;
  pool.ready.push_back(session);
  ScheduleRefill(session->env);
}

void SessionManager::Impl::ScheduleRefill(const std::shared_ptr<const Environment>& env) {
  WarmPool& pool = warm_pools_[env->id];
  if (pool.ready.size() + pool.starting < options_.warm_sessions / 4) return RefillWarm(env);
  if (!pool.refill_timer) pool.refill_timer = std::make_unique<asio::steady_timer>(io_);
  pool.refill_timer->expires_after(kWarmRefillQuiet);  // a wait still pending is cancelled
  pool.refill_timer->async_wait([this, env](const boost::system::error_code& ec) {
    if (!ec) RefillWarm(env);
  });
}

void SessionManager::Impl::DropWarm(const std::shared_ptr<Session>& session, const Status& why) {
  WarmPool& pool = warm_pools_[session->env->id];
  auto waiting = std::find(pool.ready.begin(), pool.ready.end(), session);
  if (waiting != pool.ready.end()) {
    pool.ready.erase(waiting);
  } else if (pool.starting > 0) {
    --pool.starting;  // not refilled here: a start that keeps failing must not spin
  }
  session->warm = false;
  ENVFORGE_LOG(kWarn) << "a warm session of " << session->env->label << " failed to start: " << why.message();
  if (!session->closing) Forget(session, nullptr);
}

void SessionManager::Impl::HandOutWarm(const std::shared_ptr<Session>& session, const std::string& task_id,
                                       std::function<void(Result<SessionId>)> done) {
  session->live = true;
  ++live_;
  session->created = true;
  ++stats_.sessions_created;
  AssignTask(*session, task_id);
  done(session->id);
}

void SessionManager::Impl::AssignTask(Session& session, const std::string& task_id) {
  session.task_id = task_id;
  session.bind_pending = !task_id.empty();
}

void SessionManager::Impl::SendPendingBind(Session& session) {
  if (!session.bind_pending) return;
  session.bind_pending = false;
  const std::string& task_id = session.task_id;
  std::weak_ptr<SessionChannel> weak = session.channel;
  session.channel->Request(Json{{"op", "bind"}, {"task", task_id}}, HardDeadline(session.limits), {},
                           [this, weak, task_id](SessionReply reply) {
                             if (!reply.failure && reply.frame.value("outcome", "") == "ok") return;
                             std::string why = reply.failure ? reply.failure->message
                                                             : reply.frame.value("message", "no reason given");
                             Post([weak, message = "the session could not take task '" + task_id + "': " + why] {
                               if (auto channel = weak.lock())
                                 channel->Abort(SessionFailure{Outcome::kInfraError, message, ""});
                             });
                           });
}

void SessionManager::Impl::DoFork(SessionId id, std::function<void(Result<SessionId>)> done) {
  if (shutting_down_) return done(UnavailableError("the session manager is shutting down"));
  Session* parent = FindCreated(id);
  if (parent == nullptr) return done(NotFoundError("unknown session " + std::to_string(id)));
  if (parent->kernel) {
    return done(FailedPreconditionError("session " + std::to_string(id) + " of " + parent->env->label +
                                        " cannot be forked: a Jupyter kernel's state cannot be copied (reset starts a "
                                        "fresh one)"));
  }
  if (const auto& death = parent->channel->death()) {
    return done(UnavailableError("cannot fork session " + std::to_string(id) + ": " + death->message));
  }
  auto zygote = parent->zygote.lock();
  if (!zygote || zygote->state() != ZygoteProcess::State::kReady) {
    return done(UnavailableError("cannot fork session " + std::to_string(id) + ": its zygote is gone"));
  }
  if (live_ >= options_.max_sessions) {
    return done(SessionLimitReached());
  }
  UniqueFd worker_end;
  Result<std::shared_ptr<Session>> created =
      NewSession(parent->env, parent->task_id, parent->limits, zygote, parent, &worker_end);
  if (!created.ok()) return done(created.status());
  std::shared_ptr<Session> child = *created;
  child->on_created = std::move(done);
  parent->forked = true;
  if (parent->code) StartCodeFork(*parent, child);
  std::weak_ptr<Session> weak_child = child;
  std::weak_ptr<ZygoteProcess> weak_zygote = zygote;
  SendPendingBind(*parent);  // the copy inherits the task
  parent->channel->Request(
      Json{{"op", "fork"}, {"scratch_dir", child->scratch_dir}}, HardDeadline(parent->limits), std::move(worker_end),
      [this, weak_child, weak_zygote, id](SessionReply reply) {
        auto forked = weak_child.lock();
        if (!forked || forked->on_created == nullptr) return;
        std::string prefix = "cannot fork session " + std::to_string(id) + ": ";
        if (reply.failure) return FailCreate(forked, UnavailableError(prefix + reply.failure->message));
        const Json& frame = reply.frame;
        auto pid = frame.find("pid");
        if (frame["outcome"] != "ok" || pid == frame.end() || !pid->is_number_integer()) {
          return FailCreate(forked,
                            UnavailableError(prefix + frame.value("message", std::string("no pid in the answer"))));
        }
        forked->fork_answered = true;
        RecordPid(forked, pid->get<int>());
        if (forked->on_created == nullptr) return;  // its socket had failed: FailCreate ran
        auto owner = weak_zygote.lock();
        if (!owner) return FailCreate(forked, UnavailableError(prefix + "its zygote is gone"));
        owner->Adopt(forked->id, pid->get<int>(), ToWireLimits(forked->limits, forked->scratch_dir),
                     [this, weak_child](Status adopted) {
                       auto c = weak_child.lock();
                       if (!c) return;
                       if (!adopted.ok()) return FailCreate(c, adopted);
                       c->adopted = true;
                       MaybeFinishFork(c);
                     });
        MaybeFinishFork(forked);
      });
}

void SessionManager::Impl::DoClose(SessionId id, std::function<void(Status)> done) {
  auto it = sessions_.find(id);
  if (it == sessions_.end() || !it->second->created)
    return done(NotFoundError("unknown session " + std::to_string(id)));
  if (MayRecycle(*it->second)) {
    Recycle(it->second);
    return done(Status::Ok());
  }
  Forget(it->second, [done = std::move(done)] { done(Status::Ok()); });
}

void SessionManager::Impl::DoReset(SessionId id, std::function<void(Result<SessionId>)> done) {
  auto it = sessions_.find(id);
  if (it == sessions_.end() || !it->second->created)
    return done(NotFoundError("unknown session " + std::to_string(id)));
  std::shared_ptr<Session> old = it->second;
  SessionOptions options{old->task_id, old->limits};
  std::string env_id = old->env->id;
  if (MayRecycle(*old)) {
    Recycle(old);  // ready for a later create, not this one: that waits for no recycle
  } else {
    Forget(old, nullptr);  // the old process exits (and is reaped) while the new one starts
  }
  DoCreate(env_id, std::move(options), std::move(done));
}

void SessionManager::Impl::OnZygoteExited(const ExitReport& report) {
  auto it = by_pid_.find(report.pid);
  if (it == by_pid_.end()) return;
  auto session = it->second.lock();
  by_pid_.erase(it);
  if (session) session->channel->OnExitReport(report);
}

void SessionManager::Impl::OnZygoteDeath(const ZygoteKey& key, const std::shared_ptr<ZygoteProcess>& zygote,
                                         const Status& why) {
  if (auto it = zygotes_.find(key); it != zygotes_.end() && it->second == zygote) zygotes_.erase(it);
  std::vector<std::shared_ptr<Session>> affected;
  for (const auto& [id, session] : sessions_) {
    if (session->zygote.lock() == zygote) affected.push_back(session);
  }
  for (const auto& [id, session] : closing_) {
    if (session->zygote.lock() == zygote) affected.push_back(session);
  }
  for (const auto& session : affected) {
    session->channel->Abort(SessionFailure{Outcome::kInfraError, "the session's zygote died: " + why.message(), ""});
  }
}

Result<SessionInfo> SessionManager::Impl::DoInfo(SessionId id) const {
  Session* session = FindCreated(id);
  if (session == nullptr) return NotFoundError("unknown session " + std::to_string(id));
  SessionInfo info;
  info.id = session->id;
  info.env_id = session->env->id;
  info.task_id = session->task_id;
  info.pid = session->pid;
  info.zygote_pid = session->zygote_pid;
  info.alive = SessionAlive(*session);
  info.calls = session->calls;
  info.parent = session->parent;
  info.scratch_dir = session->scratch_dir;
  info.limits = session->limits;
  info.stderr_bytes = session->channel->stderr_bytes();
  info.stderr_excerpt = session->channel->stderr_excerpt();
  if (session->kernel) info.kernel = session->kernel->info();
  return info;
}

std::vector<SessionManager::SessionId> SessionManager::Impl::DoList() const {
  std::vector<SessionId> ids;
  for (const auto& [id, session] : sessions_) {
    if (session->created) ids.push_back(id);
  }
  return ids;
}

std::vector<ZygoteInfo> SessionManager::Impl::DoZygotes() const {
  std::vector<ZygoteInfo> zygotes;
  for (const auto& [key, zygote] : zygotes_) {
    if (zygote->state() == ZygoteProcess::State::kDead) continue;
    zygotes.push_back(
        ZygoteInfo{key.first, zygote->pid(), zygote->state() == ZygoteProcess::State::kReady, zygote->isolation()});
  }
  return zygotes;
}

ManagerStats SessionManager::Impl::DoStats() const {
  ManagerStats stats = stats_;
  stats.live_sessions = live_;
  stats.sessions_open = DoList().size();
  stats.zygotes_running = DoZygotes().size();
  for (const auto& [env_id, pool] : warm_pools_) stats.warm_ready += pool.ready.size();
  stats.calls_waiting = gated_calls_.size();
  for (const auto& [env_id, kept] : kept_judges_) stats.idle_judges += kept.idle.size();
  for (const auto& [env_id, recycled] : recycled_) stats.recycled_idle += recycled.idle.size();
  return stats;
}

void SessionManager::Impl::BeginShutdown(std::function<void()> done) {
  shutting_down_ = true;
  warm_pools_.clear();   // their sessions are in sessions_, aborted below
  kept_judges_.clear();  // so are these judge processes
  for (auto& [env_id, pool] : recycled_) {
    for (WaitingCreate& create : pool.waiting) create.done(UnavailableError("the session manager is shutting down"));
  }
  recycled_.clear();  // and these recycled sessions
  if (gate_timer_) gate_timer_->cancel();
  for (GatedCall& waiting : gated_calls_) {
    ToolResult result =
        ToolResult::Error(Outcome::kInfraError, "the session manager is shutting down", std::move(waiting.call.id));
    result.session_alive = false;
    waiting.done(std::move(result));
  }
  gated_calls_.clear();
  // Sessions first: every pending callback gets its error now, every process is killed. They
  // stay registered until the destructor detaches them.
  std::vector<std::shared_ptr<Session>> all;
  for (auto& [id, session] : sessions_) all.push_back(session);
  for (auto& [id, session] : closing_) all.push_back(session);
  for (auto& session : all) {
    session->closing = true;
    auto created = std::move(session->on_created);
    session->on_created = nullptr;
    session->channel->Abort(SessionFailure{Outcome::kInfraError, "the session manager is shutting down", ""});
    if (created) created(UnavailableError("the session manager is shutting down"));
  }
  // Then the zygotes: each kills and reaps what is left of its sessions and exits.
  auto remaining = std::make_shared<size_t>(zygotes_.size());
  auto finish = std::make_shared<std::function<void()>>(std::move(done));
  if (*remaining == 0) return (*finish)();
  for (auto& [key, zygote] : zygotes_) {
    zygote->Shutdown(std::chrono::milliseconds(2000), [remaining, finish] {
      if (--*remaining == 0) (*finish)();
    });
  }
}

// ---------------------------------------------------------------------------------------------

namespace {

constexpr std::string_view kOwnScratchPrefix = "envforge-scratch-";

// The pid of "envforge-scratch-<pid>-<n>" (or of the older "envforge-scratch-<pid>"); nullopt
// for any other name.
std::optional<pid_t> OwnScratchRootOwner(std::string_view name) {
  return PidOfProcessName(name, kOwnScratchPrefix, /*bare_pid_too=*/true);
}

// /tmp/envforge-scratch-<pid>-<n>, n counting this process's managers: two managers alive at once
// in one process never share a root (each numbers its zygotes' and code pools' directories from 1
// and removes its whole root when destroyed). The roots of processes that no longer exist (a
// SIGKILLed server cannot remove its own, code environments' working copies included) are swept
// first.
std::string NewOwnScratchRoot() {
  static std::atomic<uint64_t> managers{0};
  SweepDeadProcessEntries("/tmp", OwnScratchRootOwner);
  return "/tmp/" + std::string(kOwnScratchPrefix) + std::to_string(::getpid()) + "-" + std::to_string(++managers);
}

}  // namespace

SessionManager::SessionManager(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SessionManager::~SessionManager() = default;

Result<std::unique_ptr<SessionManager>> SessionManager::Create(ManagerOptions options) {
  ENVFORGE_RETURN_IF_ERROR(ValidateLimits(options.limits));
  if (options.max_sessions == 0) return InvalidArgumentError("max_sessions must be at least 1");
  if (options.max_frame_bytes < 4096 || options.max_frame_bytes > wire::kMaxFrameBytes) {
    return InvalidArgumentError("max_frame_bytes must be between 4096 and " + std::to_string(wire::kMaxFrameBytes) +
                                ", not " + std::to_string(options.max_frame_bytes));
  }
  if (options.worker_path.empty()) {
    ENVFORGE_ASSIGN_OR_RETURN(options.worker_path, FindWorkerExecutable());
  } else if (::access(options.worker_path.c_str(), X_OK) != 0) {
    return NotFoundError("envforge-worker not executable: " + options.worker_path);
  }
  bool owns_scratch_root = options.scratch_root.empty();
  if (owns_scratch_root) options.scratch_root = NewOwnScratchRoot();
  std::error_code ec;
  std::filesystem::create_directories(options.scratch_root, ec);
  if (ec) return InternalError("cannot create the scratch root " + options.scratch_root + ": " + ec.message());
  // The worker accepts only clean absolute paths: no "..", no "//", no trailing slash.
  options.scratch_root = std::filesystem::absolute(options.scratch_root).lexically_normal().string();
  while (options.scratch_root.size() > 1 && options.scratch_root.back() == '/') options.scratch_root.pop_back();
  // The zygote creates each session's directory below it, owned by the session's uid; others
  // may traverse the root but not list it.
  if (owns_scratch_root) ::chmod(options.scratch_root.c_str(), 0711);
  return std::unique_ptr<SessionManager>(
      new SessionManager(std::make_unique<Impl>(std::move(options), owns_scratch_root)));
}

Result<std::string> SessionManager::OpenEnvironment(const std::string& envdb_path) {
  return impl_->OpenEnvironment(envdb_path);
}

const EnvBundle* SessionManager::FindEnvironment(const std::string& env_id) const {
  auto env = impl_->FindEnv(env_id);
  return env ? &env->bundle : nullptr;  // environments are never dropped before the manager
}

std::vector<std::string> SessionManager::EnvironmentIds() const { return impl_->EnvironmentIds(); }

Result<Json> SessionManager::KernelPoolStats(const std::string& env_id) const {
  auto env = impl_->FindEnv(env_id);
  if (!env) return NotFoundError("unknown environment '" + env_id + "'");
  if (!env->kernels)
    return FailedPreconditionError(env->label + " is not an interpreter environment: it has no kernels");
  return env->kernels->Stats().ToJson();
}

Result<Json> SessionManager::CodeCopyStats(const std::string& env_id) const {
  auto env = impl_->FindEnv(env_id);
  if (!env) return NotFoundError("unknown environment '" + env_id + "'");
  if (!env->code_copies)
    return FailedPreconditionError(env->label + " is not a code environment: it has no working copies");
  return env->code_copies->stats().ToJson();
}

void SessionManager::CreateSessionAsync(const std::string& env_id, SessionOptions options,
                                        std::function<void(Result<SessionId>)> done) {
  impl_->Post([impl = impl_.get(), env_id, options = std::move(options), done = std::move(done)]() mutable {
    impl->DoCreate(env_id, std::move(options), std::move(done));
  });
}

void SessionManager::CreateSessionAsync(const std::string& env_id, const std::string& task_id,
                                        std::function<void(Result<SessionId>)> done) {
  CreateSessionAsync(env_id, SessionOptions{task_id, std::nullopt}, std::move(done));
}

void SessionManager::CallToolAsync(SessionId session, toolsets::ToolCall call, std::function<void(ToolResult)> done) {
  impl_->Post([impl = impl_.get(), session, call = std::move(call), done = std::move(done)]() mutable {
    impl->DoCall(session, std::move(call), std::move(done));
  });
}

void SessionManager::SolveAsync(SessionId session, std::function<void(Result<SolveOutput>)> done) {
  impl_->Post(
      [impl = impl_.get(), session, done = std::move(done)]() mutable { impl->DoSolve(session, std::move(done)); });
}

void SessionManager::JudgeAsync(SessionId session, Judge judge, std::vector<std::string> answer_texts,
                                std::function<void(Result<std::vector<JudgeVerdict>>)> done) {
  impl_->Post(
      [impl = impl_.get(), session, judge, answers = std::move(answer_texts), done = std::move(done)]() mutable {
        impl->DoJudge(session, judge, std::move(answers), std::move(done));
      });
}

void SessionManager::ForkSessionAsync(SessionId session, std::function<void(Result<SessionId>)> done) {
  impl_->Post(
      [impl = impl_.get(), session, done = std::move(done)]() mutable { impl->DoFork(session, std::move(done)); });
}

void SessionManager::CloseSessionAsync(SessionId session, std::function<void(Status)> done) {
  impl_->Post(
      [impl = impl_.get(), session, done = std::move(done)]() mutable { impl->DoClose(session, std::move(done)); });
}

void SessionManager::ResetSessionAsync(SessionId session, std::function<void(Result<SessionId>)> done) {
  impl_->Post(
      [impl = impl_.get(), session, done = std::move(done)]() mutable { impl->DoReset(session, std::move(done)); });
}

namespace {

// An answer handed from the io thread to a waiting caller. The caller first polls for a moment,
// yielding the CPU between looks, and only then sleeps: most answers (a tool call's round trip is
// tens of microseconds) arrive within it, and a sleeping caller's wake-up (a futex, often on a
// core in a deep idle state) would cost as much again.
template <typename T>
class Handoff {
 public:
  void Set(T value) {
    std::lock_guard lock(mutex_);
    value_.emplace(std::move(value));
    ready_.store(true, std::memory_order_release);
    changed_.notify_one();
  }
  T Take() {
    const auto poll_until = std::chrono::steady_clock::now() + kPollFor;
    while (!ready_.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < poll_until) {
      std::this_thread::yield();
    }
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return ready_.load(std::memory_order_acquire); });
    return std::move(*value_);
  }

 private:
  static constexpr std::chrono::microseconds kPollFor{200};
  std::mutex mutex_;
  std::condition_variable changed_;
  std::atomic<bool> ready_{false};
  std::optional<T> value_;
};

// Blocks on an async form. `on_io` is what a call from the io thread gets instead of a deadlock.
template <typename T, typename Start>
T Wait(bool on_io_thread, T on_io, Start start) {
  if (on_io_thread) return on_io;
  Handoff<T> answer;
  start([&answer](T value) { answer.Set(std::move(value)); });
  return answer.Take();
}

const char kFromIoThread[] = "sync SessionManager calls must not be made from the manager's io thread (a callback)";

}  // namespace

Result<SessionManager::SessionId> SessionManager::CreateSession(const std::string& env_id, SessionOptions options) {
  return Wait<Result<SessionId>>(impl_->OnIoThread(), FailedPreconditionError(kFromIoThread),
                                 [&](auto done) { CreateSessionAsync(env_id, std::move(options), std::move(done)); });
}

Result<SessionManager::SessionId> SessionManager::CreateSession(const std::string& env_id, const std::string& task_id) {
  return CreateSession(env_id, SessionOptions{task_id, std::nullopt});
}

toolsets::ToolResult SessionManager::CallTool(SessionId session, toolsets::ToolCall call) {
  return Wait<ToolResult>(impl_->OnIoThread(), ToolResult::Error(Outcome::kInfraError, kFromIoThread, call.id),
                          [&](auto done) { CallToolAsync(session, std::move(call), std::move(done)); });
}

Result<SolveOutput> SessionManager::Solve(SessionId session) {
  return Wait<Result<SolveOutput>>(impl_->OnIoThread(), FailedPreconditionError(kFromIoThread),
                                   [&](auto done) { SolveAsync(session, std::move(done)); });
}

Result<std::vector<JudgeVerdict>> SessionManager::JudgeAnswers(SessionId session, Judge judge,
                                                               std::vector<std::string> answer_texts) {
  return Wait<Result<std::vector<JudgeVerdict>>>(
      impl_->OnIoThread(), FailedPreconditionError(kFromIoThread),
      [&](auto done) { JudgeAsync(session, judge, std::move(answer_texts), std::move(done)); });
}

Result<SessionManager::SessionId> SessionManager::ForkSession(SessionId session) {
  return Wait<Result<SessionId>>(impl_->OnIoThread(), FailedPreconditionError(kFromIoThread),
                                 [&](auto done) { ForkSessionAsync(session, std::move(done)); });
}

Status SessionManager::CloseSession(SessionId session) {
  return Wait<Status>(impl_->OnIoThread(), FailedPreconditionError(kFromIoThread),
                      [&](auto done) { CloseSessionAsync(session, std::move(done)); });
}

Result<SessionManager::SessionId> SessionManager::ResetSession(SessionId session) {
  return Wait<Result<SessionId>>(impl_->OnIoThread(), FailedPreconditionError(kFromIoThread),
                                 [&](auto done) { ResetSessionAsync(session, std::move(done)); });
}

Result<SessionInfo> SessionManager::GetSessionInfo(SessionId session) const {
  return impl_->RunOnIo<SessionInfo>([&] { return impl_->DoInfo(session); });
}

std::vector<SessionManager::SessionId> SessionManager::ListSessions() const {
  return std::move(
             impl_->RunOnIo<std::vector<SessionId>>([&] { return Result<std::vector<SessionId>>(impl_->DoList()); }))
      .value();
}

std::vector<ZygoteInfo> SessionManager::Zygotes() const {
  return std::move(impl_->RunOnIo<std::vector<ZygoteInfo>>(
                       [&] { return Result<std::vector<ZygoteInfo>>(impl_->DoZygotes()); }))
      .value();
}

Status SessionManager::Prewarm(const std::string& env_id) {
  return impl_
      ->RunOnIo<bool>([&]() -> Result<bool> {
        ENVFORGE_RETURN_IF_ERROR(impl_->DoPrewarm(env_id));
        return true;
      })
      .status();
}

ManagerStats SessionManager::Stats() const {
  return std::move(impl_->RunOnIo<ManagerStats>([&] { return Result<ManagerStats>(impl_->DoStats()); })).value();
}

const ManagerOptions& SessionManager::options() const { return impl_->options(); }

}  // namespace envforge::sandbox
