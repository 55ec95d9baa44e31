#include "sandbox/internal/session_channel.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>

#include <boost/asio/post.hpp>

#include "base/log.h"
#include "sandbox/internal/frame_channel.h"
#include "sandbox/internal/pidfd.h"
#include "sandbox/internal/pidfd_watch.h"
#include "sandbox/internal/stderr_capture.h"

namespace envforge::sandbox::internal {

namespace asio = boost::asio;
using toolsets::Outcome;

std::shared_ptr<SessionChannel> SessionChannel::Create(asio::io_context& io, UniqueFd socket,
                                                       SessionChannelOptions options) {
  return std::make_shared<SessionChannel>(io, std::move(socket), std::move(options));
}

SessionChannel::SessionChannel(asio::io_context& io, UniqueFd socket, SessionChannelOptions options)
    : io_(io),
      options_(std::move(options)),
      frames_(FrameChannel::Create(io, std::move(socket), options_.max_frame_bytes)),
      pidfd_(io),
      deadline_timer_(io),
      aux_timer_(io) {}

void SessionChannel::Start(std::function<void(Result<int>)> on_ready, std::function<void()> on_gone) {
  on_ready_ = std::move(on_ready);
  on_gone_ = std::move(on_gone);
  std::weak_ptr<SessionChannel> weak = weak_from_this();
  frames_->AllowDescriptors(2);  // "ready": the pidfd and the stderr pipe
  frames_->Start(
      [weak](std::string payload, std::vector<UniqueFd> fds) {
        if (auto self = weak.lock()) self->OnFrame(std::move(payload), std::move(fds));
      },
      [weak](const Status& why) {
        if (auto self = weak.lock()) self->OnSocketClosed(why);
      });
  aux_timer_.expires_after(options_.ready_timeout);
  aux_timer_.async_wait([weak](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (ec || !self || self->state_ != State::kStarting) return;
    self->Kill();
    self->FailStart(DeadlineExceededError(self->options_.label + " did not become ready within " +
                                          std::to_string(self->options_.ready_timeout.count()) + " ms"));
  });
}

void SessionChannel::SetPid(int pid) {
  if (pid_ != 0 || pid <= 0) return;
  pid_ = pid;
  if (pidfd_.is_open()) return;
  Result<UniqueFd> pidfd = PidfdOpen(pid);
  if (!pidfd.ok()) {
    // Already gone: the socket's end of stream tells the rest.
    process_exited_ = true;
    return;
  }
  pidfd_.assign(pidfd->Release());
  WatchPidfd();
}

bool SessionChannel::AliveNow() {
  return alive() && !process_exited_ && !(pidfd_.is_open() && PidfdExited(pidfd_.native_handle()));
}

void SessionChannel::WatchPidfd() {
  // Not on the completion alone: acting on one that was no exit killed healthy sessions ("exited
  // with code 0"; pidfd.h).
  WatchForExit(shared_from_this(), &SessionChannel::pidfd_, &SessionChannel::OnProcessExited);
}

void SessionChannel::OnFrame(std::string payload, std::vector<UniqueFd> fds) {
  if (state_ != State::kStarting && state_ != State::kReady) return;
  if (state_ == State::kReady && !fds.empty()) return ProtocolViolation("descriptors on a frame after \"ready\"");
  Result<Json> parsed = ParseJson(payload, "session frame");
  if (!parsed.ok() || !parsed->is_object()) {
    return ProtocolViolation(parsed.ok() ? "a frame that is not a JSON object" : parsed.status().message());
  }
  const Json& frame = *parsed;
  if (state_ == State::kStarting) {
    if (frame.value("op", std::string()) == "fatal") {
      // The session could not set itself up (isolation, assignment) and exits.
      return FailStart(
          UnavailableError(options_.label + " failed to start: " + frame.value("error", std::string("(no message)"))));
    }
    auto pid = frame.find("pid");
    if (frame.value("op", std::string()) != "ready" || pid == frame.end() || !pid->is_number_integer()) {
      return ProtocolViolation("expected {\"op\":\"ready\",\"pid\":P} as the first frame, got " +
                               payload.substr(0, 200));
    }
    if (!TakeReadyDescriptors(std::move(fds), pid->get<int>())) return;
    pid_ = pid->get<int>();
    state_ = State::kReady;
    aux_timer_.cancel();
    if (auto on_ready = std::move(on_ready_)) on_ready(pid_);
    return;
  }
  // kReady: the answer to the request in flight.
  auto id = frame.find("id");
  auto outcome = frame.find("outcome");
  if (!in_flight_ || id == frame.end() || !id->is_number_unsigned() || id->get<uint64_t>() != in_flight_->id) {
    return ProtocolViolation(in_flight_ ? "an answer whose id does not match the request in flight"
                                        : "an answer while no request was in flight");
  }
  if (outcome == frame.end() || !outcome->is_string() || !toolsets::ParseOutcome(outcome->get<std::string>()).ok()) {
    return ProtocolViolation("an answer without a valid \"outcome\"");
  }
  deadline_timer_.cancel();
  Pending done = std::move(*in_flight_);
  in_flight_.reset();
  SessionReply reply;
  reply.frame = std::move(parsed).value();
  reply.duration_us = ElapsedUs(done.sent);
  done.done(std::move(reply));
  if (state_ == State::kReady) SendNext();
}

bool SessionChannel::TakeReadyDescriptors(std::vector<UniqueFd> fds, int pid) {
  frames_->AllowDescriptors(0);  // no later frame carries any
  UniqueFd pidfd = fds.size() > 0 ? std::move(fds[0]) : UniqueFd();
  UniqueFd stderr_end = fds.size() > 1 ? std::move(fds[1]) : UniqueFd();
  if (stderr_end.valid()) {
    struct stat info {};
    int flags = ::fcntl(stderr_end.get(), F_GETFL);
    if (::fstat(stderr_end.get(), &info) != 0 || !S_ISFIFO(info.st_mode) || flags < 0 ||
        (flags & O_ACCMODE) != O_RDONLY) {
      ProtocolViolation("the second descriptor on \"ready\" is not the read end of a pipe");
      return false;
    }
  }
  if (pidfd.valid() && !IsPidfdOf(pidfd.get(), pid)) pidfd.Reset();  // unverifiable: open our own
  if (!pidfd_.is_open()) {
    if (pidfd.valid())
      pidfd_.assign(pidfd.Release());
    else if (Result<UniqueFd> opened = PidfdOpen(pid); opened.ok())
      pidfd_.assign(opened->Release());
    if (pidfd_.is_open()) WatchPidfd();
  }
  if (stderr_end.valid()) {
    StderrCaptureOptions capture;
    capture.head_bytes = options_.stderr_head_bytes;
    capture.tail_bytes = options_.stderr_tail_bytes;
    capture.log_level = LogLevel::kDebug;
    capture.label = options_.label;
    stderr_ = StderrCapture::Create(io_, std::move(stderr_end), std::move(capture));
    stderr_->Start();
  }
  return true;
}

uint64_t SessionChannel::stderr_bytes() const { return stderr_ ? stderr_->total_bytes() : 0; }

std::string SessionChannel::stderr_excerpt() const { return stderr_ ? stderr_->Excerpt() : std::string(); }

void SessionChannel::Request(Json request, std::chrono::milliseconds hard_deadline, UniqueFd attach,
                             ReplyCallback done) {
  if (state_ == State::kDying) {
    // Answered with the death once the exit report is in (or report_wait passed).
    queue_.push_back(Pending{0, {}, {}, hard_deadline, std::move(done), {}});
    return;
  }
  if (state_ != State::kReady) {
    SessionFailure failure = death_.value_or(SessionFailure{
        Outcome::kCrashed, options_.label + " is " + (state_ == State::kStarting ? "not ready yet" : "closed"), ""});
    asio::post(io_, [done = std::move(done), failure = std::move(failure)]() mutable {
      SessionReply reply;
      reply.failure = std::move(failure);
      done(std::move(reply));
    });
    return;
  }
  uint64_t id = next_id_++;
  request["id"] = id;
  queue_.push_back(Pending{id, DumpJson(request), std::move(attach), hard_deadline, std::move(done), {}});
  if (!in_flight_) SendNext();
}

void SessionChannel::SendNext() {
  if (in_flight_ || queue_.empty() || state_ != State::kReady) return;
  in_flight_ = std::move(queue_.front());
  queue_.pop_front();
  in_flight_->sent = std::chrono::steady_clock::now();
  frames_->Send(in_flight_->frame, std::move(in_flight_->attach));
  in_flight_->frame.clear();
  if (in_flight_->hard_deadline.count() > 0) {
    deadline_timer_.expires_after(in_flight_->hard_deadline);
    deadline_timer_.async_wait([weak = weak_from_this(), id = in_flight_->id](const boost::system::error_code& ec) {
      if (ec) return;
      if (auto self = weak.lock()) self->OnDeadline(id);
    });
  }
}

void SessionChannel::OnDeadline(uint64_t id) {
  if (state_ != State::kReady || !in_flight_ || in_flight_->id != id) return;
  Kill();
  std::string ms = std::to_string(in_flight_->hard_deadline.count());
  SessionFailure timeout{
      Outcome::kTimeout,
      "the call ran past its hard deadline of " + ms + " ms (wall-time limit + kill grace); the session was killed",
      "wall_time"};
  Die(SessionFailure{Outcome::kCrashed,
                     options_.label + " was killed: a call ran past its hard deadline of " + ms + " ms", "wall_time"},
      &timeout);
}

void SessionChannel::OnSocketClosed(const Status& why) {
  if (why.code() != StatusCode::kUnavailable) return ProtocolViolation(why.message());
  ProcessGone();
}

void SessionChannel::OnProcessExited() {
  process_exited_ = true;
  boost::system::error_code ignored;
  pidfd_.close(ignored);
  if (state_ == State::kClosing) {
    if (!awaiting_reports_) return FinishClose();
    aux_timer_.expires_after(options_.report_wait);
    aux_timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
      auto self = weak.lock();
      if (!ec && self && self->state_ == State::kClosing) self->FinishClose();
    });
    return;
  }
  if (state_ == State::kStarting && !frames_->closed()) {
    // A session that cannot set itself up writes a fatal frame, then exits; the pidfd may fire
    // before that frame is read. The socket's end of stream follows the frame, so let it arrive
    // (OnSocketClosed) and keep report_wait as the bound.
    aux_timer_.expires_after(options_.report_wait);
    aux_timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
      auto self = weak.lock();
      if (!ec && self && self->state_ == State::kStarting) self->ProcessGone();
    });
    return;
  }
  ProcessGone();
}

void SessionChannel::ProtocolViolation(const std::string& what) {
  if (state_ != State::kStarting && state_ != State::kReady) return;
  ENVFORGE_LOG(kWarn) << options_.label << ": protocol violation (" << what << "); killing it";
  Kill();
  if (state_ == State::kStarting) return FailStart(UnavailableError(options_.label + ": protocol violation: " + what));
  Die(SessionFailure{Outcome::kCrashed,
                     "protocol violation by " + options_.label + ": " + what + "; the session was killed", ""},
      nullptr);
}

void SessionChannel::ProcessGone() {
  if (state_ == State::kStarting) {
    return FailStart(UnavailableError(options_.label + " exited before it became ready" +
                                      (exit_report_ ? " (" + exit_report_->Describe() + ")" : std::string())));
  }
  if (state_ != State::kReady) return;
  state_ = State::kDying;
  frames_->Close();
  deadline_timer_.cancel();
  Gone();
  if (exit_report_ || !awaiting_reports_) return Finalize();
  aux_timer_.expires_after(options_.report_wait);
  aux_timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (!ec && self && self->state_ == State::kDying) self->Finalize();
  });
}

void SessionChannel::Finalize() {
  SessionFailure death{Outcome::kCrashed, "", ""};
  if (exit_report_) {
    death.message = exit_report_->Describe();
    death.limit = exit_report_->limit;
  } else {
    death.message = "session process ended (its connection closed; no exit report from the zygote)";
  }
  if (stderr_) {
    stderr_->DrainNow();  // its last words may still sit in the pipe
    if (stderr_->total_bytes() > 0) death.message += "; its stderr ended with: \"" + stderr_->Tail(400) + "\"";
  }
  Die(std::move(death), nullptr);
}

void SessionChannel::Die(SessionFailure death, const SessionFailure* in_flight) {
  state_ = State::kDead;
  death_ = std::move(death);
  frames_->Close();
  deadline_timer_.cancel();
  aux_timer_.cancel();
  Gone();
  std::optional<Pending> current = std::move(in_flight_);
  in_flight_.reset();
  std::deque<Pending> queued = std::move(queue_);
  queue_.clear();
  if (current) {
    SessionReply reply;
    reply.failure = in_flight ? *in_flight : *death_;
    reply.duration_us = ElapsedUs(current->sent);
    current->done(std::move(reply));
  }
  for (Pending& pending : queued) {
    SessionReply reply;
    reply.failure = *death_;
    pending.done(std::move(reply));
  }
}

void SessionChannel::FailStart(const Status& why) {
  state_ = State::kDead;
  death_ = SessionFailure{Outcome::kCrashed, why.message(), ""};
  frames_->Close();
  aux_timer_.cancel();
  Gone();
  if (auto on_ready = std::move(on_ready_)) on_ready(why);
}

void SessionChannel::OnExitReport(const ExitReport& report) {
  exit_report_ = report;
  if (state_ == State::kDying)
    Finalize();
  else if (state_ == State::kClosing)
    FinishClose();
}

void SessionChannel::Abort(SessionFailure failure) {
  awaiting_reports_ = false;
  if (state_ == State::kClosing || state_ == State::kClosed) {
    Kill();
    if (state_ == State::kClosing && process_exited_) FinishClose();
    return;
  }
  Kill();
  if (state_ == State::kStarting) return FailStart(UnavailableError(failure.message));
  if (state_ == State::kDead) return;
  Die(std::move(failure), nullptr);
}

void SessionChannel::Close(std::function<void()> done) {
  if (state_ == State::kClosing || state_ == State::kClosed) {
    asio::post(io_, std::move(done));
    return;
  }
  close_done_ = std::move(done);
  if (state_ == State::kStarting) {
    Kill();
    FailStart(UnavailableError(options_.label + " was closed before it became ready"));
  } else if (state_ == State::kReady) {
    if (in_flight_ || !queue_.empty()) {
      Kill();
      Die(SessionFailure{Outcome::kCrashed, options_.label + " was closed while a call was in flight", ""}, nullptr);
    } else {
      frames_->Send(R"({"op":"close"})");
    }
  } else if (state_ == State::kDying) {
    Finalize();
  }
  state_ = State::kClosing;
  // The reply-less {"op":"close"} is written already (or the socket is gone): stop reading.
  frames_->Close();
  deadline_timer_.cancel();
  if (exit_report_ || (process_exited_ && !awaiting_reports_) || (!pidfd_.is_open() && !process_exited_)) {
    // Reaped and reported, or nothing to wait for (no pidfd: the session never got that far).
    return FinishClose();
  }
  if (process_exited_) {
    aux_timer_.expires_after(options_.report_wait);
  } else {
    aux_timer_.expires_after(options_.kill_grace);
  }
  aux_timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (ec || !self || self->state_ != State::kClosing) return;
    if (self->process_exited_ || self->close_killed_) return self->FinishClose();
    // Still running kill_grace after {"op":"close"}: kill it and give it one more grace.
    self->close_killed_ = true;
    self->Kill();
    self->aux_timer_.expires_after(self->options_.kill_grace);
    self->aux_timer_.async_wait([weak = self->weak_from_this()](const boost::system::error_code& ec2) {
      auto again = weak.lock();
      if (!ec2 && again && again->state_ == State::kClosing) again->FinishClose();
    });
  });
}

void SessionChannel::FinishClose() {
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  frames_->Close();
  if (stderr_) stderr_->Close();
  deadline_timer_.cancel();
  aux_timer_.cancel();
  boost::system::error_code ignored;
  pidfd_.close(ignored);
  Gone();
  if (auto done = std::move(close_done_)) done();
}

void SessionChannel::Detach() {
  state_ = State::kClosed;
  frames_->Close();
  if (stderr_) stderr_->Close();
  deadline_timer_.cancel();
  aux_timer_.cancel();
  boost::system::error_code ignored;
  pidfd_.close(ignored);
  in_flight_.reset();
  queue_.clear();
  on_ready_ = nullptr;
  on_gone_ = nullptr;
  close_done_ = nullptr;
}

void SessionChannel::Kill() {
  if (pidfd_.is_open() && !process_exited_) (void)PidfdSignal(pidfd_.native_handle(), SIGKILL);
}

void SessionChannel::Gone() {
  if (gone_reported_) return;
  gone_reported_ = true;
  if (auto on_gone = std::move(on_gone_)) on_gone();
}

double SessionChannel::ElapsedUs(std::chrono::steady_clock::time_point since) const {
  if (since.time_since_epoch().count() == 0) return 0;
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace envforge::sandbox::internal
