// The session manager: environments, their worker zygotes, and the sessions (episodes) forked
// from them (ARCHITECTURE.md, "Sessions").
//
// One SessionManager owns one Boost.Asio io_context and one background thread running it; every
// session socket and zygote control channel is driven there (no thread per session). Zygotes are
// started lazily, one per environment content hash, on the first CreateSession, and reused; a
// zygote that dies is restarted by the next CreateSession of its environment.
//
// Async and sync forms. Every XxxAsync method may be called from any thread, including from a
// callback; its callback runs on the manager's io thread, exactly once, never inline in the
// caller (even for an immediate error). Callbacks must not block (no sync wrappers inside them);
// they may call other XxxAsync methods. The sync wrappers (CreateSession, CallTool, ...) block
// the calling thread until the answer; called on the io thread they return FailedPrecondition
// (or an infra_error ToolResult) instead of deadlocking. For latency, a waiting caller polls for
// about 200 us before it sleeps, and the io thread polls for about 100 us after each handler
// before it sleeps in epoll (both yield the CPU between looks): a tool call's round trip is then
// not doubled by the wake-ups of sleeping threads.
//
// Tool calls. CallToolAsync checks, in order: the session exists (else invalid_call,
// session_alive false, "unknown session N"); the session is alive (else the outcome of its death:
// crashed, timeout's follow-up crashed, or infra_error when its zygote died); the tool exists
// (else invalid_call); the arguments nest at most kMaxJsonValueDepth levels (base/json.h; else
// invalid_call); the arguments satisfy the tool's input schema (else invalid_call with
// toolsets::DescribeViolations text) -- all before anything is sent. Calls on one session are
// serialised FIFO; duration_us is measured here, from writing the call to reading its result.
// Each call has a hard deadline of limits.wall_time + limits.kill_grace: past it the session is
// killed and the call answers timeout, limit wall_time, session_alive false. When a session dies
// (crash, memory limit, ...) the call in flight, every queued call and every later call answer
// crashed, session_alive false, with the zygote's exit report folded into the message and limit
// ("session process killed by SIGSEGV", limit "memory"); the manager waits up to 200 ms for that
// report. A session that breaks the wire protocol is killed and its calls answer crashed,
// "protocol violation by session N: <what>": a malformed frame, a frame whose 4-byte header
// announces more than ManagerOptions::max_frame_bytes (killed on the header, before any of the
// body is read), a descriptor (SCM_RIGHTS) on any frame but its "ready", or any other ancillary
// data. Descriptors the protocol does not expect are closed on arrival. When a zygote dies, its
// sessions' calls answer infra_error.
//
// Memory per session: the manager allocates for a frame only as its bytes arrive (never what
// its header announces), so a session holds at most one partial frame of up to max_frame_bytes
// in the manager, plus its captured stderr (below).
//
// Stderr: each session's stderr (fd 2, what os.write(2, ...), C code and child processes write;
// Python's sys.stderr is captured into the reply's "stdout") is a pipe the manager drains as
// fast as it is written, per session: it keeps the first and last 4 KiB (SessionInfo's
// stderr_excerpt, escaped) and counts the rest (stderr_bytes), logs lines only at debug level,
// escaped and prefixed "session N stderr: " (20 lines a second at most), and names the last
// bytes in the crash message of a session that dies ("...; its stderr ended with: \"...\"").
// A zygote's own stderr is drained the same way and logged at warn level, escaped and
// prefixed "zygote P for <environment> stderr: ". Nothing a worker writes reaches the manager's
// stderr raw.
//
// Verdicts. submit_result, JudgeAsync (and so `session solve`, `env check`, the audit and
// replays) never run in the episode's session: code there (a tool, a solution, an agent's code
// in a code environment) could have rewritten its runtime. Each verdict is computed in a JUDGE
// PROCESS: a fresh spawn of the environment's zygote, with the session's task and limits, that
// runs nothing but {"op":"judge"} requests (sandbox/internal/wire.h) of that one task: never a
// tool, a solution or an agent's code. Such a process may judge several batches of its task, one
// after another (ManagerOptions::judgements_per_judge_process): each batch runs the verifier's
// module afresh in a new restricted namespace on the read-only view of the pristine data, so a
// later verdict depends on an earlier answer no more than the answers of one batch already do on
// each other (worker/README.md, "Verdicts").
// The manager validates its reply as untrusted input and caps its texts. Judge processes are no
// sessions of the caller's: they have no id, do not count against max_sessions, and at most
// max_sessions of them run at once (beyond: ResourceExhausted / infra_error, retryable).
// submit_result (checked like any call: the session exists, is alive, the arguments satisfy
// {"answer_text": string}; a session without a task answers invalid_call) is not queued behind
// the session's calls: its verdict depends only on the answer and the pristine data. Its ok
// content is {"passed","score","reasons","verifier_version"}; a verifier that raises, runs past
// the wall time, breaks a rule or returns a non-verdict answers infra_error (the message names
// the task's verifier; limit "wall_time" when it ran out of time), session_alive unchanged.
// Search environments (kind "search") are the exception that proves the rule: their tasks have no
// verifier code; submit_result and JudgeAsync compare the answer with the task's answer key by
// normalised exact match (toolsets/search/answer_match.h; ManagerOptions::search_answer_judge adds a
// rubric judge for near misses) in the manager, on the session's search
// thread, which also answers search/open/find (toolsets/search_tools.h) -- never the session
// process, never the io thread.
//
// Session lifecycle, as callers see it:
//
//   CreateSession / ForkSession / ResetSession --> alive --crash, kill, zygote death--> dead
//                                                    |                                  |
//                                                    +----------- CloseSession ---------+--> unknown
//
//   alive: calls run. dead: every call answers the death (see above); the session no longer
//   counts against max_sessions but keeps its id until closed. unknown: after CloseSession (or
//   ResetSession) every call answers invalid_call "unknown session N".
//
// Reset = close + create: a fresh fork of the environment's zygote (ResetSession does both,
// without waiting for the old process to be reaped). Session ids are never reused within one
// SessionManager.
//
// Carried beside a result: the "stdout" a tool printed (its sys.stdout and sys.stderr, at most
// min(max_output_bytes, 4 MiB), with any outcome but infra_error, whose replies the worker sends
// without it) and the "where" of a tool_error, which the worker sends with them, land in
// toolsets::ToolResult stdout_text and where. Calls that a kernel answers (interpreter sessions)
// leave both empty: what the code printed is in the execute result's content.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/json.h"
#include "base/status.h"
#include "sandbox/env_bundle.h"
#include "sandbox/sandbox_limits.h"
#include "toolsets/search/answer_judge.h"
#include "toolsets/search/search_toolbox.h"
#include "toolsets/tool_protocol.h"

namespace envforge::sandbox {

struct ManagerOptions {
  SandboxLimits limits;  // default limits of every session (a session may override them)
  // Parent of the scratch directories. Every zygote (one per environment, a fresh one after a
  // restart) gets a scratch root of its own, <scratch_root>/eZ (its --scratch-root): a fresh
  // session N works in <scratch_root>/eZ/fN/sN (fN is its family's directory), a fork M of it
  // in <scratch_root>/eZ/fN/sM, starting as a copy of its parent's. The zygote creates them
  // (owned by the session's uid) and removes each when its session is reaped. Empty: a fresh
  // /tmp/envforge-scratch-<pid>-<n> (n: this process's nth manager), removed by the destructor
  // (otherwise the destructor removes only the eZ directories); Create first removes the roots
  // that processes no longer alive left behind (a SIGKILLed server cannot remove its own). Each zygote mounts its own
  // tmpfs on its eZ inside its private mount namespace (isolation "zygote_scratch"): session files exist only there,
  // not on the host's file system (read them from the host as /proc/<zygote pid>/root<scratch_dir>), and each family's
  // directory is a tmpfs of its limits.disk_bytes. The zygote's Landlock domain grants its eZ only, so even without
  // that mount namespace a zygote reaches no other environment's files, nor the code and search directories kept beside
  // them.
  std::string scratch_root;
  // Sessions alive or starting at once (closed ones no longer count, even while their processes
  // exit); creating or forking beyond it is ResourceExhausted (retryable).
  size_t max_sessions = 4096;
  // Empty: sandbox/worker_locator.h's FindWorkerExecutable().
  std::string worker_path;
  std::chrono::milliseconds zygote_start_timeout{60'000};  // launch -> "ready"
  std::chrono::milliseconds spawn_timeout{15'000};         // spawn sent -> session "ready"
  // The largest frame a session may send (its replies; see wire.h): a header announcing more
  // kills the session at once. 4 KiB .. wire::kMaxFrameBytes (64 MiB, the default). Replies of
  // the worker stay under 48 MiB with the largest max_output_bytes; with the default 1 MiB
  // output limit they are far smaller, so a manager holding many sessions may lower it.
  uint32_t max_frame_bytes = 64u << 20;
  // Interpreter environments (kind "interpreter", sandbox/jupyter/): each session owns a
  // sandboxed Jupyter kernel taken from its environment's warm pool of this many ready kernels
  // (refilled in the background; 0: every session waits for a kernel to start, about a second).
  // The kernels run under `limits` (memory, disk, file size; at least 64 processes), each
  // execute under the session's wall_time and cpu_seconds. Their sockets and files live in
  // kernel_scratch_root/k<id>. When the environment's tools.py defines no tool, no call of a
  // session goes to its worker process, and a create completes as soon as the kernel is taken:
  // the worker goes on starting (pid 0 and alive true meanwhile); should it fail, the session's
  // calls answer with that death.
  size_t kernel_pool_size = 2;
  std::string kernel_scratch_root = "/tmp/envforge-kernels";
  // Code environments (kind "code"): working copies of a task's repository made ahead, per task
  // once it has had a session, so a session takes one with a rename (sandbox/code/
  // working_copy_pool.h; 0: each session copies the task's template while it starts). They live
  // under scratch_root on the host.
  size_t code_ready_copies = 2;
  // Warm sessions (environments whose sessions are plain worker processes: not interpreter, code
  // or search): per environment, up to this many sessions forked, isolated and "ready" ahead of
  // demand, with the default `limits` and no task. A create with the default limits takes one
  // and binds its task (wire.h "bind"): no fork on the caller's path; so does a judge process
  // (a warm session has run nothing). The pool starts with the environment's first create and
  // refills in the background, a few spawns at a time so that a caller's own spawn never queues
  // behind many refills. Warm sessions are not counted in max_sessions; each costs about one
  // session's memory (`envforge bench sandbox` prints the PSS per session). 0: every create and
  // every judgement forks.
  size_t warm_sessions = 0;
  // Zygotes per environment: its fresh sessions (callers', warm ones, judge processes) are spawned
  // by each in turn, so that the spawns and reaps (the serial part of a session's life) of one
  // environment run on as many cores; a fork goes to its parent's zygote. Each is one more
  // process holding the environment's image (about 30 MB resident for a small environment).
  size_t zygotes_per_environment = 1;
  // Judge processes (see "Verdicts" above): how many judgements one may serve, all of the task it
  // was bound to, before it is closed (1: a fresh process per judgement). A process is kept for
  // the next judgement only when its batch came back whole with no verdict at a limit, while its
  // judgements' wall time stays under half of limits.cpu_seconds (its RLIMIT_CPU), for plain
  // environments under the default limits. Each new process costs a fork and its copy-on-write
  // faults, about as much as a session's whole life (the audit judges thousands of batches).
  size_t judgements_per_judge_process = 64;
  // Idle judge processes kept per environment, the least recently used closed first: at least
  // this many, and as many as the environment had judging at once within the last
  // idle_judge_timeout (ever, when that timeout is zero or less; so the next wave of verdicts
  // finds its processes instead of forking), at most max_sessions.
  size_t idle_judges_per_environment = 8;
  // An idle judge process (or recycled session, below) not taken for this long is closed (its
  // memory back to the machine); a server of many environments otherwise holds up to
  // idle_judges_per_environment processes for each environment ever judged. Zero or less: kept
  // until taken, pushed out or shut down.
  std::chrono::milliseconds idle_judge_timeout = std::chrono::seconds(60);
  // Recycled sessions: how many episodes one session process may serve, one after another (1: a
  // fresh process per session, as forks always were). A session its caller closes (or resets) is
  // recycled instead of killed when it is a plain worker session (not interpreter, code or
  // search) under the default limits, was created (not forked) and never forked, never ran the
  // gold solution, no call of it stopped at a limit, its calls' wall time stays under half of
  // limits.cpu_seconds (its RLIMIT_CPU counts on), and it has served fewer episodes than this.
  // The worker then checks that nothing of the episode runs (no other thread; no process of the
  // family's uid, so only sessions that switched to one recycle), empties the scratch directory
  // and puts the interpreter back to the zygote's state (sandbox/worker/python_host.h
  // RecycleInterpreter: the data copied back from the pristine image; tools.py's globals, lru
  // caches, default arguments and class attributes; random, decimal, environ, signal handlers,
  // umask; it refuses after a PRAGMA was set or a TEMP object created). The process then waits,
  // under a new id, for a create of its environment with the default limits, which takes it
  // before a warm session (its task bound with its first request, as a warm one's). A recycled
  // process never judges. What recycling cannot undo: state tools.py keeps inside closures or in
  // other modules it changed; leave this at 1 for environments whose tools do that. The cost it
  // saves is a fork and its copy-on-write faults per episode (`envforge bench serve`).
  size_t episodes_per_session_process = 1;
  // Idle recycled session processes kept per environment, the least recently used closed first.
  size_t recycled_sessions_per_environment = 256;
  // The call gate: at most this many tool calls of plain worker sessions run in their processes
  // at once; the others wait here, first come first served. Without it, every call in flight is a
  // runnable process, and on few cores the kernel's scheduler leaves some of them waiting for
  // hundreds of milliseconds while others run (`envforge serve`, 64 clients on 2 cores: p99
  // 44-68 ms, max 314-992 ms; with 8, p99 23-27 ms, max 124-391 ms, and 0.3-20% fewer calls/s).
  // A call that has run for running_call_grace without answering (it sleeps, waits on I/O, or is
  // long) stops counting, so slow tools cannot hold the gate shut: they delay the calls behind
  // them by the grace at most.
  // Verdicts, binds, recycles and interpreter, code and search calls pass outside it. 0: no gate.
  size_t max_running_calls = 0;
  std::chrono::milliseconds running_call_grace{10};
  // Search environments: a rubric judge (toolsets/search/answer_judge.h; agents/rubric_judge.h asks
  // a model) for answers the exact match rejects that are near misses of the key. It runs on the
  // session's search thread, for submit_result and JudgeAsync alike; when it cannot decide, the
  // call answers infra_error naming it. Null: exact match only.
  std::shared_ptr<search::AnswerJudge> search_answer_judge;
};

struct SessionOptions {
  std::string task_id;                  // empty: a session with no task (Solve unavailable)
  std::optional<SandboxLimits> limits;  // overrides ManagerOptions::limits for this session
  // Search sessions (kind "search") only: responses to answer search/open/find calls with before
  // asking the backend -- a call whose tool and arguments equal an unused recorded one gets that
  // response verbatim (toolsets/search/search_toolbox.h). agents/replay.h passes an episode's
  // recorded responses so that a replay observes what the episode observed.
  std::vector<search::RecordedResponse> recorded_responses;
};

// The gold solution's answer: answer_text is what the solution submitted, answer its JSON.
struct SolveOutput {
  Json answer;
  std::string answer_text;
};

// One judgment of an answer by a task's verifier or oracle (SessionManager::JudgeAnswers).
struct JudgeVerdict {
  // The judge raised, ran past the wall-time limit, broke a sandbox rule or returned something
  // that is not a verdict: a defect of the task, never a "fail" of the answer.
  bool defect = false;
  std::string defect_message;  // "the verifier of task 'x' raised TypeError: ... at verifier.py:12"
  std::string limit;           // the limit behind a defect ("wall_time", "memory"), if any
  bool passed = false;         // the verdict, when !defect
  double score = 0;
  std::vector<std::string> reasons;
};

enum class Judge { kVerifier, kOracle };

struct SessionInfo {
  uint64_t id = 0;
  std::string env_id;
  std::string task_id;
  pid_t pid = 0;         // the session process (0 until known)
  pid_t zygote_pid = 0;  // the zygote it was forked from
  bool alive = false;    // false once the process is gone or killed
  uint64_t calls = 0;    // tool calls answered by the session (validation failures excluded)
  uint64_t parent = 0;   // the session it was forked from, 0 for a fresh one
  std::string scratch_dir;
  SandboxLimits limits;
  uint64_t stderr_bytes = 0;   // bytes the session wrote to its stderr (fd 2) so far
  std::string stderr_excerpt;  // their first and last 4 KiB, escaped ("[... N bytes not kept ...]")
  // Interpreter sessions: {"pid", "memory_bytes", "memory": {"cgroup_bytes", "rss_bytes",
  // "pss_bytes", "processes"}, "cpu_seconds", "executes", "restarts", "crashed", "isolation"} of
  // the kernel, read when asked (about a millisecond of /proc reads); null for other sessions.
  Json kernel;
};

struct ZygoteInfo {
  std::string env_id;
  pid_t pid = 0;
  bool ready = false;  // false while it starts
  Json isolation;      // the ready report's isolation object ({"network": "on", ...})
};

struct ManagerStats {
  size_t live_sessions = 0;  // starting or alive (what max_sessions bounds)
  size_t sessions_open = 0;  // not closed yet (dead ones included)
  uint64_t sessions_created = 0;
  uint64_t sessions_forked = 0;
  uint64_t sessions_died = 0;  // died or were killed before being closed
  uint64_t calls = 0;          // tool calls sent to a session (answered, timed out or failed)
  uint64_t zygote_starts = 0;
  size_t zygotes_running = 0;
  size_t warm_ready = 0;                    // warm sessions waiting in their pools (ManagerOptions::warm_sessions)
  uint64_t warm_taken = 0;                  // creates and judgements served by a warm session
  uint64_t warm_missed = 0;                 // ... that found their pool empty and forked
  uint64_t judgements_in_kept_process = 0;  // judgements served by a judge process that had judged before
  size_t idle_judges = 0;                   // judge processes kept idle for their task's next judgement
  uint64_t idle_judges_closed = 0;          // ... closed after idle_judge_timeout
  uint64_t sessions_recycled = 0;           // closed sessions whose process waits for another episode
  uint64_t recycles_refused = 0;            // ... whose worker refused (something of the episode ran on)
  uint64_t recycled_taken = 0;              // creates served by a recycled process
  size_t recycled_idle = 0;                 // recycled processes waiting for a create
  uint64_t recycled_idle_closed = 0;        // ... closed after idle_judge_timeout
  uint64_t calls_gated = 0;                 // calls that waited at the call gate (max_running_calls)
  size_t calls_waiting = 0;                 // ... waiting there now
};

class SessionManager {
 public:
  using SessionId = uint64_t;

  // Finds the worker, creates the scratch root and starts the io thread. InvalidArgument for bad
  // limits; NotFound when no envforge-worker can be found; Internal when the scratch root cannot
  // be created.
  static Result<std::unique_ptr<SessionManager>> Create(ManagerOptions options);
  // Closes every session (SIGKILL), shuts every zygote down (it reaps its sessions; SIGKILL
  // after 2 s), reaps the zygotes, joins the io thread and removes the scratch directories it
  // created. Pending callbacks run first with an error (Unavailable / infra_error). Must not be
  // called from a callback, nor concurrently with other methods.
  ~SessionManager();
  SessionManager(const SessionManager&) = delete;
  SessionManager& operator=(const SessionManager&) = delete;

  // Loads an *.envdb (EnvBundle::Load) and registers it; returns its id, the content hash.
  // Opening the same content again (any path) returns the same id. Errors are EnvBundle::Load's
  // (NotFound, DataLoss, InvalidArgument), or InvalidArgument when a tool's input schema does not
  // compile. Blocking (reads the file on the calling thread); any thread.
  Result<std::string> OpenEnvironment(const std::string& envdb_path);
  // nullptr when unknown. The bundle lives as long as the manager. Any thread.
  const EnvBundle* FindEnvironment(const std::string& env_id) const;
  std::vector<std::string> EnvironmentIds() const;
  // Starts env_id's zygote(s) and fills its warm pool (ManagerOptions::warm_sessions) now instead
  // of at its first create, so that the first burst of creates finds ready sessions and no
  // zygote start. Returns once the fill has begun; the pool fills in the background
  // (Stats().warm_ready). NotFound for an unknown environment; FailedPrecondition when sessions
  // of this manager or environment are never warm (warm_sessions 0; interpreter, code and search
  // environments) or the manager is shutting down; the zygote's launch error when it cannot
  // start. Any thread, callbacks included.
  Status Prewarm(const std::string& env_id);

  // A new session of env_id (a fork of its zygote, started on first use). Errors: NotFound
  // (unknown environment or task), InvalidArgument (bad limits), ResourceExhausted (max_sessions
  // reached; retryable), Unavailable (the zygote or the session failed to start; the message
  // says why), DeadlineExceeded (the session did not become ready within spawn_timeout).
  void CreateSessionAsync(const std::string& env_id, SessionOptions options,
                          std::function<void(Result<SessionId>)> done);
  void CreateSessionAsync(const std::string& env_id, const std::string& task_id,
                          std::function<void(Result<SessionId>)> done);
  // See the file comment for the checks and outcomes. call.id is echoed as call_id.
  void CallToolAsync(SessionId session, toolsets::ToolCall call, std::function<void(toolsets::ToolResult)> done);
  // Runs the task's gold solution in the session (its tool calls go to this session's state).
  // Errors: NotFound (unknown session), FailedPrecondition (the session has no task, or the
  // solution raised / broke a rule: the message says which), DeadlineExceeded (hard deadline; the
  // session was killed), Unavailable (the session is dead or died), Internal (infra error).
  void SolveAsync(SessionId session, std::function<void(Result<SolveOutput>)> done);
  // A copy of a live session, mid-episode: same task, limits and state (database, Python
  // globals), diverging from then on. Queued behind the session's pending calls. Errors:
  // NotFound, ResourceExhausted (max_sessions), Unavailable (the parent is dead, or the fork or
  // its adoption failed).
  void ForkSessionAsync(SessionId session, std::function<void(Result<SessionId>)> done);
  // Runs the session's task's verifier (or oracle) on each answer text -- parsed as JSON when it
  // is JSON, else the raw string, exactly as submit_result does -- in order, each under the
  // session's wall-time limit, in one fresh judge process (see "Verdicts" above): the session
  // only names the task and the limits, and is neither used nor changed. The judge's module is
  // executed once per batch, so module-level state persists across the answers of one batch
  // (and nondeterminism can show); the data it reads cannot change. The hard deadline of a
  // batch is answer_texts.size() * wall_time + kill_grace; when the judge process dies or hits
  // it the whole batch fails with that Status (DeadlineExceeded or Unavailable; re-judge its
  // answers one by one to pinpoint the one), and Internal when its reply is malformed.
  // FailedPrecondition for a session without a task, or kOracle on a task without an oracle;
  // Unavailable for a dead session; ResourceExhausted past max_sessions judge processes.
  void JudgeAsync(SessionId session, Judge judge, std::vector<std::string> answer_texts,
                  std::function<void(Result<std::vector<JudgeVerdict>>)> done);
  // Ends a session: {"op":"close"} to an idle one, SIGKILL to a busy one (its pending calls answer
  // crashed); done once the zygote has reaped it. The id is unknown afterwards. NotFound for an
  // unknown id. Closing a dead session only forgets it (OK).
  void CloseSessionAsync(SessionId session, std::function<void(Status)> done);
  // Reset: closes the session (as CloseSessionAsync, but without waiting for the reap) and creates
  // a fresh one of the same environment, task and limits; done(new id). Errors: NotFound for an
  // unknown id, then CreateSessionAsync's. The old id is unknown afterwards even on error.
  void ResetSessionAsync(SessionId session, std::function<void(Result<SessionId>)> done);

  // Sync wrappers: block until the async form answers. Not from the io thread (callbacks).
  Result<SessionId> CreateSession(const std::string& env_id, SessionOptions options);
  Result<SessionId> CreateSession(const std::string& env_id, const std::string& task_id = {});
  toolsets::ToolResult CallTool(SessionId session, toolsets::ToolCall call);
  Result<SolveOutput> Solve(SessionId session);
  Result<SessionId> ForkSession(SessionId session);
  Result<std::vector<JudgeVerdict>> JudgeAnswers(SessionId session, Judge judge, std::vector<std::string> answer_texts);
  Status CloseSession(SessionId session);
  Result<SessionId> ResetSession(SessionId session);

  // Introspection: sync, from any thread (callbacks included: on the io thread they run inline).
  Result<SessionInfo> GetSessionInfo(SessionId session) const;
  std::vector<SessionId> ListSessions() const;  // every session not closed yet, ascending
  std::vector<ZygoteInfo> Zygotes() const;
  ManagerStats Stats() const;
  // An interpreter environment's kernel pool: {"ready", "starting", "waiting", "launched",
  // "failed", "acquired_warm", "acquired_cold", "last_error", "start_ms": [launch -> ready of the
  // last 256 kernels]}. NotFound for an unknown environment, FailedPrecondition for one of
  // another kind. Any thread.
  Result<Json> KernelPoolStats(const std::string& env_id) const;
  // A code environment's working copies (sandbox/code/working_copy_pool.h's stats: "templates",
  // "ready_checkouts", "copied_checkouts", "copies_made_ahead", "discarded"). NotFound for an
  // unknown environment, FailedPrecondition for one of another kind. Any thread.
  Result<Json> CodeCopyStats(const std::string& env_id) const;
  const ManagerOptions& options() const;

 private:
  class Impl;
  explicit SessionManager(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace envforge::sandbox
