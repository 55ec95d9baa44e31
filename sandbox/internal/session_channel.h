// The manager's side of one session's socket (sandbox/internal/wire.h, "SESSION CHANNEL"):
// requests in FIFO order, one in flight at a time, a hard deadline per request, and everything
// that can happen to the session process (exit, crash, kill, protocol violation, close).
//
// Lifecycle:
//
//   kStarting --"ready" (+pidfd)--> kReady --EOF or pidfd exit--> kDying --exit report or
//       |                             |                             |       report_wait--> kDead
//       |                             +--hard deadline, protocol violation, Abort()-------> kDead
//       +--EOF, exit, ready_timeout, protocol violation----------------------------------> kDead
//   any state --Close()--> kClosing --exit report, or pidfd exit + report_wait--> kClosed
//
// Descriptors: only "ready" may carry any: its pidfd, then optionally the read end of its stderr
// pipe (wire.h). A pidfd that is not one of the pid the frame names is ignored (the channel opens
// its own); a second descriptor that is not a pipe's read end, and any descriptor on a later
// frame, is a protocol violation (FrameChannel closes such descriptors on arrival).
//
// Stderr: drained by a StderrCapture (bounded head and tail, the rest counted; logged escaped at
// debug level as "session N stderr: ..."). The death of a session that wrote to stderr names
// its last bytes: "session process killed by SIGSEGV; its stderr ended with: \"...\"".
//
// Before "ready" a session may send {"op":"fatal","error":...} (it could not set itself up) and
// exit: the start fails with that error.
//
// Invariants:
//   1. Every Request callback runs exactly once: with the session's answer, or with a
//      SessionFailure (timeout for the request that ran past its hard deadline; crashed for a
//      dead session; infra_error after Abort()). Requests after death fail at once with the
//      death (posted, never inline).
//   2. A request is written only when the previous one has been answered (FIFO).
//   3. The session is killed (SIGKILL through its pidfd) on a hard deadline, a protocol violation
//      (bad JSON, wrong id, oversized frame), Abort(), and on Close() when a request is in flight
//      or it has not exited kill_grace after {"op":"close"}.
//   4. on_gone runs once, when the process is known to be gone or has been killed.
//
// Thread safety: none; everything runs on the manager's io thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/json.h"
#include "base/status.h"
#include "sandbox/internal/zygote_process.h"
#include "toolsets/tool_protocol.h"

namespace envforge::sandbox::internal {

class FrameChannel;
class StderrCapture;

// Why a request got no answer from the session.
struct SessionFailure {
  toolsets::Outcome outcome = toolsets::Outcome::kCrashed;  // kTimeout, kCrashed or kInfraError
  std::string message;
  std::string limit;  // "wall_time", "memory", "cpu_time", "processes" or empty
};

struct SessionReply {
  Json frame;                             // the session's answer when !failure
  std::optional<SessionFailure> failure;  // set when the request got no answer
  double duration_us = 0;                 // written -> answered (or failed)
};

struct SessionChannelOptions {
  uint32_t max_frame_bytes = 0;
  std::chrono::milliseconds ready_timeout{15'000};
  std::chrono::milliseconds kill_grace{1'000};
  // How long a dead session waits for the zygote's exit report before answering.
  std::chrono::milliseconds report_wait{200};
  std::string label;                // "session 12", for messages
  size_t stderr_head_bytes = 4096;  // of the session's stderr, kept for SessionInfo
  size_t stderr_tail_bytes = 4096;
};

class SessionChannel : public std::enable_shared_from_this<SessionChannel> {
 public:
  enum class State { kStarting, kReady, kDying, kDead, kClosing, kClosed };
  using ReplyCallback = std::function<void(SessionReply)>;

  static std::shared_ptr<SessionChannel> Create(boost::asio::io_context& io, UniqueFd socket,
                                                SessionChannelOptions options);
  SessionChannel(boost::asio::io_context& io, UniqueFd socket, SessionChannelOptions options);

  // on_ready(pid) once the session's "ready" frame arrived, or an error (Unavailable, or
  // DeadlineExceeded after ready_timeout) when it never does.
  void Start(std::function<void(Result<int>)> on_ready, std::function<void()> on_gone);
  // The pid the zygote (or the parent session, for a fork) reported: lets the manager kill a
  // session that hangs before its "ready" frame.
  void SetPid(int pid);
  // Queues a request (an object; "id" is added here). `attach` rides on the frame. A zero
  // hard_deadline means none.
  void Request(Json request, std::chrono::milliseconds hard_deadline, UniqueFd attach, ReplyCallback done);
  void OnExitReport(const ExitReport& report);
  // Kills the session and fails every request with `failure` (the zygote died; shutdown). Exit
  // reports are no longer awaited.
  void Abort(SessionFailure failure);
  // Ends the session: {"op":"close"} when idle, SIGKILL when busy; done() once the zygote
  // reported the process reaped (or, without a report, report_wait after the pidfd polled
  // exited; or 2 x kill_grace at the most).
  void Close(std::function<void()> done);
  // Teardown after the io thread stopped: closes every descriptor and drops every callback
  // without calling it (breaks reference cycles through them).
  void Detach();

  State state() const { return state_; }
  bool alive() const { return state_ == State::kReady; }
  // alive(), and the kernel agrees (the pidfd does not poll readable): alive() learns of an exit
  // only when the io loop next runs the pidfd's or the socket's handler, so an idle session reused
  // in the loop's turn that its death ended in looks alive to it. Check this before reusing one.
  bool AliveNow();
  int pid() const { return pid_; }
  // Set once the session is dead: what every later request is answered with.
  const std::optional<SessionFailure>& death() const { return death_; }
  // What the session wrote to its stderr: bytes in all, and an escaped excerpt (head, tail).
  uint64_t stderr_bytes() const;
  std::string stderr_excerpt() const;

 private:
  struct Pending {
    uint64_t id = 0;
    std::string frame;
    UniqueFd attach;
    std::chrono::milliseconds hard_deadline{0};
    ReplyCallback done;
    std::chrono::steady_clock::time_point sent;
  };

  void OnFrame(std::string payload, std::vector<UniqueFd> fds);
  // The descriptors of "ready": false after a protocol violation.
  bool TakeReadyDescriptors(std::vector<UniqueFd> fds, int pid);
  void OnSocketClosed(const Status& why);
  void WatchPidfd();
  void OnProcessExited();
  void SendNext();
  void OnDeadline(uint64_t id);
  void ProtocolViolation(const std::string& what);
  void ProcessGone();
  void Finalize();
  // Becomes kDead with `death`: closes the socket, fails the in-flight request with
  // `in_flight` (or `death` when null) and every queued one with `death`.
  void Die(SessionFailure death, const SessionFailure* in_flight);
  void FailStart(const Status& why);
  void FinishClose();
  void Kill();
  void Gone();
  double ElapsedUs(std::chrono::steady_clock::time_point since) const;

  boost::asio::io_context& io_;
  SessionChannelOptions options_;
  std::shared_ptr<FrameChannel> frames_;
  std::shared_ptr<StderrCapture> stderr_;
  boost::asio::posix::stream_descriptor pidfd_;
  boost::asio::steady_timer deadline_timer_;
  boost::asio::steady_timer aux_timer_;  // ready timeout, report wait, close grace

  State state_ = State::kStarting;
  int pid_ = 0;
  uint64_t next_id_ = 1;
  bool process_exited_ = false;
  bool awaiting_reports_ = true;
  bool gone_reported_ = false;
  bool close_killed_ = false;
  std::optional<Pending> in_flight_;
  std::deque<Pending> queue_;
  std::optional<SessionFailure> death_;
  std::optional<ExitReport> exit_report_;
  std::function<void(Result<int>)> on_ready_;
  std::function<void()> on_gone_;
  std::function<void()> close_done_;
};

}  // namespace envforge::sandbox::internal
