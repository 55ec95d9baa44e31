#include "sandbox/internal/zygote_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <cerrno>
#include <vector>

#include "base/log.h"
#include "base/subprocess.h"
#include "sandbox/internal/frame_channel.h"
#include "sandbox/internal/pidfd.h"
#include "sandbox/internal/pidfd_watch.h"
#include "sandbox/internal/stderr_capture.h"
#include "sandbox/internal/wire.h"

namespace envforge::sandbox::internal {
namespace {

namespace asio = boost::asio;

constexpr int kControlFd = 3;

}  // namespace

std::string ExitReport::Describe() const {
  std::string text = "session process ";
  if (!signal.empty())
    text += "killed by " + signal;
  else if (exit_code)
    text += "exited with code " + std::to_string(*exit_code);
  else
    text += "ended";
  if (!limit.empty()) text += " (" + limit + " limit)";
  return text;
}

Result<ExitReport> ParseExitReport(const Json& frame) {
  ExitReport report;
  auto pid = frame.find("pid");
  if (pid == frame.end() || !pid->is_number_integer()) return InvalidArgumentError("exited report without a pid");
  report.pid = pid->get<int>();
  if (auto code = frame.find("exit_code"); code != frame.end() && code->is_number_integer()) {
    report.exit_code = code->get<int>();
  }
  if (auto sig = frame.find("signal"); sig != frame.end()) {
    if (sig->is_number_integer()) {
      report.signal = SignalName(sig->get<int>());
    } else if (sig->is_string() && !sig->get<std::string>().empty()) {
      report.signal = sig->get<std::string>();
      if (report.signal.rfind("SIG", 0) != 0) report.signal = "SIG" + report.signal;
    }
  }
  if (auto limit = frame.find("limit"); limit != frame.end() && limit->is_string()) {
    report.limit = limit->get<std::string>();
  }
  return report;
}

Result<std::shared_ptr<ZygoteProcess>> ZygoteProcess::Launch(asio::io_context& io, ZygoteOptions options,
                                                             Callbacks callbacks) {
  ENVFORGE_ASSIGN_OR_RETURN(auto sockets, MakeSocketPair());
  int output[2];
  if (::pipe2(output, O_CLOEXEC) != 0) return ErrnoError("pipe2", errno);
  UniqueFd output_read(output[0]);
  UniqueFd output_write(output[1]);
  UniqueFd null_fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!null_fd.valid()) return ErrnoError("open /dev/null", errno);

  // The zygote gets the control socket as fd 3, stdin /dev/null, and stdout and stderr the write
  // end of the manager's pipe (a stdio JSON-RPC server must never see worker output on its
  // stdout, and the server's log never sees it raw); nothing else of the manager leaks into it.
  std::vector<std::string> argv = {
      options.worker_path,        "zygote",         "--bundle",          options.bundle_path, "--control-fd",
      std::to_string(kControlFd), "--scratch-root", options.scratch_root};
  auto spawned = SpawnProcess(
      argv, {{0, null_fd.get()}, {1, output_write.get()}, {2, output_write.get()}, {kControlFd, sockets.second.get()}});
  if (!spawned.ok()) {
    return UnavailableError("cannot start the zygote for " + options.label + ": " + spawned.status().message());
  }
  int pid = *spawned;  // reaped here, by pid, once its pidfd polls readable
  sockets.second.Reset();
  output_write.Reset();
  Result<UniqueFd> pidfd = PidfdOpen(pid);
  if (!pidfd.ok()) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return pidfd.status().WithContext("zygote pidfd");
  }
  auto control = FrameChannel::Create(io, std::move(sockets.first), wire::kMaxFrameBytes);
  auto zygote = std::make_shared<ZygoteProcess>(io, std::move(options), std::move(callbacks), pid,
                                                std::move(pidfd).value(), std::move(control), std::move(output_read));
  zygote->Start();
  return zygote;
}

ZygoteProcess::ZygoteProcess(asio::io_context& io, ZygoteOptions options, Callbacks callbacks, int pid, UniqueFd pidfd,
                             std::shared_ptr<FrameChannel> control, UniqueFd stderr_read)
    : io_(io),
      options_(std::move(options)),
      callbacks_(std::move(callbacks)),
      pid_(pid),
      pidfd_(io, pidfd.Release()),
      control_(std::move(control)),
      watchdog_(io),
      kill_timer_(io),
      started_(std::chrono::steady_clock::now()) {
  StderrCaptureOptions capture;
  capture.log_level = LogLevel::kWarn;
  capture.label = "zygote " + std::to_string(pid_) + " for " + options_.label;
  stderr_ = StderrCapture::Create(io, std::move(stderr_read), std::move(capture));
}

ZygoteProcess::~ZygoteProcess() {
  if (stderr_) stderr_->Close();
  // Normally reaped already (Shutdown or death). If not (the manager is torn down abruptly), do
  // not leave a zombie or an orphan behind.
  if (!exited_ && pidfd_.is_open()) {
    (void)PidfdSignal(pidfd_.native_handle(), SIGKILL);
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
}

void ZygoteProcess::Start() {
  std::weak_ptr<ZygoteProcess> weak = weak_from_this();
  stderr_->Start();
  control_->Start(
      [weak](std::string payload, std::vector<UniqueFd>) {
        if (auto self = weak.lock()) self->OnFrame(payload);
      },
      [weak](const Status& why) {
        if (auto self = weak.lock()) self->OnControlClosed(why);
      });
  WatchPidfd();
  ArmWatchdog();
}

void ZygoteProcess::WatchPidfd() {
  // OnProcessExited blocks in waitpid: it must run for a real exit only (pidfd.h).
  WatchForExit(shared_from_this(), &ZygoteProcess::pidfd_, &ZygoteProcess::OnProcessExited);
}

void ZygoteProcess::Spawn(uint64_t id, const std::string& task_id, const Json& limits, UniqueFd session_end,
                          std::function<void(Result<int>)> done) {
  if (state_ != State::kStarting && state_ != State::kReady) {
    asio::post(io_, [done = std::move(done), label = options_.label] {
      done(UnavailableError("the zygote for " + label + " is not running"));
    });
    return;
  }
  pending_[id] = Pending{std::move(done), nullptr, std::chrono::steady_clock::now()};
  Json frame = {{"op", "spawn"}, {"id", id}, {"task", task_id}, {"limits", limits}};
  control_->Send(DumpJson(frame), std::move(session_end));
  ArmWatchdog();
}

void ZygoteProcess::Adopt(uint64_t id, int pid, const Json& limits, std::function<void(Status)> done) {
  if (state_ != State::kReady) {
    asio::post(io_, [done = std::move(done), label = options_.label] {
      done(UnavailableError("the zygote for " + label + " is not running"));
    });
    return;
  }
  pending_[id] = Pending{nullptr, std::move(done), std::chrono::steady_clock::now()};
  control_->Send(DumpJson(Json{{"op", "adopt"}, {"id", id}, {"pid", pid}, {"limits", limits}}));
  ArmWatchdog();
}

void ZygoteProcess::Shutdown(std::chrono::milliseconds grace, std::function<void()> done) {
  if (state_ == State::kDead && exited_) {
    done();
    return;
  }
  shutdown_done_ = std::move(done);
  if (state_ == State::kStopping) return;
  bool dying = state_ == State::kDead;  // failed, waiting for the process to go
  state_ = State::kStopping;
  watchdog_.cancel();
  FailPending(UnavailableError("the session manager is shutting down"));
  if (!dying) {
    control_->Send(R"({"op":"shutdown"})");
  }
  kill_timer_.expires_after(grace);
  kill_timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (ec || !self || self->exited_) return;
    ENVFORGE_LOG(kWarn) << "zygote " << self->pid_ << " for " << self->options_.label
                        << " did not exit after shutdown; killing it";
    (void)PidfdSignal(self->pidfd_.native_handle(), SIGKILL);
  });
}

void ZygoteProcess::OnFrame(const std::string& payload) {
  Result<Json> parsed = ParseJson(payload, "zygote control frame");
  if (!parsed.ok() || !parsed->is_object() || !parsed->contains("op") || !(*parsed)["op"].is_string()) {
    Fail("protocol violation on the control channel: " +
             (parsed.ok() ? std::string("a frame without \"op\"") : parsed.status().message()),
         std::chrono::milliseconds(0));
    return;
  }
  const Json& frame = *parsed;
  const std::string& op = frame["op"].get_ref<const std::string&>();
  if (op == "ready") {
    if (state_ != State::kStarting) return;
    state_ = State::kReady;
    ready_at_ = std::chrono::steady_clock::now();
    isolation_ = frame.value("isolation", Json::object());
    python_ = frame.value("python", std::string());
    for (auto it = isolation_.begin(); it != isolation_.end(); ++it) {
      std::string value = it->is_string() ? it->get<std::string>() : DumpJson(*it);
      if (value != "on") {
        ENVFORGE_LOG(kWarn) << "zygote " << pid_ << " for " << options_.label << ": isolation layer " << it.key()
                            << " is " << value;
      }
    }
    ENVFORGE_LOG(kInfo) << "zygote " << pid_ << " for " << options_.label << " ready in "
                        << std::chrono::duration_cast<std::chrono::milliseconds>(ready_at_ - started_).count()
                        << " ms (python " << python_ << ")";
    ArmWatchdog();
    return;
  }
  if (op == "fatal") {
    fatal_ = frame.value("error", std::string("(no message)"));
    Fail("zygote failed: " + fatal_, std::chrono::milliseconds(1000));
    return;
  }
  if (op == "exited") {
    Result<ExitReport> report = ParseExitReport(frame);
    if (!report.ok()) {
      ENVFORGE_LOG(kWarn) << "zygote " << pid_ << ": bad exited report " << payload;
      return;
    }
    if (callbacks_.on_exited) callbacks_.on_exited(*report);
    return;
  }
  if (op == "spawned" || op == "spawn_failed" || op == "adopted" || op == "adopt_failed") {
    uint64_t id = frame.value("id", uint64_t{0});
    auto it = pending_.find(id);
    if (it == pending_.end()) {
      ENVFORGE_LOG(kWarn) << "zygote " << pid_ << ": answer for unknown request " << payload;
      return;
    }
    Pending pending = std::move(it->second);
    pending_.erase(it);
    std::string error = frame.value("error", std::string("(no message)"));
    if (pending.spawn_done) {
      if (op == "spawned" && frame.contains("pid") && frame["pid"].is_number_integer()) {
        pending.spawn_done(frame["pid"].get<int>());
      } else {
        pending.spawn_done(UnavailableError("the zygote could not start the session: " +
                                            (op == "spawned" ? std::string("answer without a pid") : error)));
      }
    } else if (pending.adopt_done) {
      pending.adopt_done(op == "adopted" ? Status::Ok()
                                         : UnavailableError("the zygote could not adopt the forked session: " + error));
    }
    return;
  }
  ENVFORGE_LOG(kWarn) << "zygote " << pid_ << ": unexpected control frame " << payload;
}

void ZygoteProcess::OnControlClosed(const Status& why) {
  if (state_ == State::kStopping || state_ == State::kDead) return;
  bool protocol = why.code() != StatusCode::kUnavailable;
  Fail(protocol ? "protocol violation on the control channel: " + why.message()
                : "the zygote closed its control channel",
       protocol ? std::chrono::milliseconds(0) : std::chrono::milliseconds(500));
}

void ZygoteProcess::ArmWatchdog() {
  if (state_ != State::kStarting && (state_ != State::kReady || pending_.empty())) return;
  watchdog_.expires_after(std::chrono::milliseconds(250));
  watchdog_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->OnWatchdog();
  });
}

void ZygoteProcess::OnWatchdog() {
  auto now = std::chrono::steady_clock::now();
  if (state_ == State::kStarting) {
    if (now - started_ > options_.startup_timeout) {
      Fail("the zygote did not report ready within " + std::to_string(options_.startup_timeout.count()) + " ms",
           std::chrono::milliseconds(0));
      return;
    }
  } else if (state_ == State::kReady) {
    for (const auto& [id, pending] : pending_) {
      // A request sent before "ready" waited for the zygote's start, not for its answer.
      if (now - std::max(pending.sent, ready_at_) > options_.request_timeout) {
        Fail("the zygote did not answer request " + std::to_string(id) + " within " +
                 std::to_string(options_.request_timeout.count()) + " ms",
             std::chrono::milliseconds(0));
        return;
      }
    }
  }
  ArmWatchdog();
}

void ZygoteProcess::Fail(std::string why, std::chrono::milliseconds wait) {
  if (state_ == State::kDead || state_ == State::kStopping) return;
  state_ = State::kDead;
  failure_ = std::move(why);
  watchdog_.cancel();
  control_->Close();
  if (exited_) {
    OnProcessExited();
    return;
  }
  if (wait.count() == 0) {
    (void)PidfdSignal(pidfd_.native_handle(), SIGKILL);
    return;
  }
  kill_timer_.expires_after(wait);
  kill_timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (ec || !self || self->exited_) return;
    (void)PidfdSignal(self->pidfd_.native_handle(), SIGKILL);
  });
}

void ZygoteProcess::OnProcessExited() {
  if (!exited_) {
    exited_ = true;
    int status = 0;
    pid_t reaped;
    while ((reaped = ::waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
    }
    std::string how = reaped != pid_        ? "ended"
                      : WIFSIGNALED(status) ? "was killed by " + SignalName(WTERMSIG(status))
                                            : "exited with code " + std::to_string(WEXITSTATUS(status));
    if (state_ == State::kReady || state_ == State::kStarting) {
      state_ = State::kDead;
      failure_ = "the zygote " + how;
      control_->Close();
      watchdog_.cancel();
    } else if (state_ == State::kDead) {
      failure_ += " (the zygote " + how + ")";
    }
  }
  kill_timer_.cancel();
  boost::system::error_code ignored;
  pidfd_.close(ignored);
  if (state_ == State::kStopping) {
    FailPending(UnavailableError("the session manager is shutting down"));
    control_->Close();
    if (auto done = std::move(shutdown_done_)) done();
    return;
  }
  Status status = UnavailableError("zygote " + std::to_string(pid_) + " for " + options_.label + ": " + failure_);
  ENVFORGE_LOG(kWarn) << status.message();
  FailPending(status);
  if (auto on_death = std::move(callbacks_.on_death)) on_death(status);
}

void ZygoteProcess::FailPending(const Status& status) {
  auto pending = std::move(pending_);
  pending_.clear();
  for (auto& [id, request] : pending) {
    if (request.spawn_done) request.spawn_done(status);
    if (request.adopt_done) request.adopt_done(status);
  }
}

}  // namespace envforge::sandbox::internal
