// Session processes: warm wait, isolation, the frame loop and session fork (see session.h).
#include "sandbox/worker/session.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <memory>

#include "base/fd.h"
#include "base/json.h"
#include "sandbox/internal/wire.h"
#include "sandbox/sandbox_limits.h"
#include "sandbox/worker/limit_counters.h"
#include "sandbox/worker/python_host.h"
#include "sandbox/worker/scratch_dirs.h"

namespace envforge::sandbox::worker {
namespace {

// Byte offset of the tid in glibc's struct pthread, or -1 when it could not be found.
long g_tid_offset = -1;
pid_t g_zygote_pid = 0;
std::string g_family_dir;
std::string g_scratch_dir;
bool g_can_fork = false;  // the family directory is the session's own: copies get siblings

[[noreturn]] void Fatal(int session_fd, const std::string& error) {
  Json frame = {{"op", "fatal"}, {"error", error}};
  (void)wire::WriteFrame(session_fd, DumpJson(frame));
  _exit(1);
}

// Closes every descriptor except those in `keep` (sorted copy).
void CloseAllExcept(std::vector<int> keep) {
  std::sort(keep.begin(), keep.end());
  unsigned next = 0;
  for (int fd : keep) {
    if (fd < 0) continue;
    auto ufd = static_cast<unsigned>(fd);
    if (ufd > next) syscall(SYS_close_range, next, ufd - 1, 0);
    next = ufd + 1;
  }
  syscall(SYS_close_range, next, ~0u, 0);
}

void SetDeathSignal() {
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (getppid() != g_zygote_pid) _exit(1);  // the zygote died before the flag was set
}

// Frames from a stream socket, buffered; descriptors that ride on frames are queued in arrival
// order (only "fork" carries one, so the queue's head belongs to the next fork frame).
class FrameReader {
 public:
  explicit FrameReader(int fd) : fd_(fd) {}

  // False at the end of the stream or on a protocol error.
  bool Next(std::string* frame) {
    for (;;) {
      if (buffer_.size() - start_ >= 4) {
        auto length = wire::DecodeLength(buffer_.data() + start_);
        if (!length.ok()) return false;
        if (buffer_.size() - start_ - 4 >= *length) {
          frame->assign(buffer_.data() + start_ + 4, *length);
          start_ += 4 + *length;
          if (start_ == buffer_.size()) {
            buffer_.clear();
            start_ = 0;
          }
          return true;
        }
      }
      if (!Fill()) return false;
    }
  }

  UniqueFd TakeFd() {
    if (fds_.empty()) return UniqueFd();
    UniqueFd fd = std::move(fds_.front());
    fds_.pop_front();
    return fd;
  }

 private:
  bool Fill() {
    if (start_ > 0) {
      buffer_.erase(0, start_);
      start_ = 0;
    }
    // Read into a chunk allocated once and append what came: growing buffer_ by the chunk's size
    // would zero 64 KiB on every read, most of it never written (a call's frame is ~100 bytes).
    iovec io{chunk_.get(), kChunkBytes};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
    msghdr message{};
    message.msg_iov = &io;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    ssize_t n;
    do {
      n = recvmsg(fd_, &message, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n > 0) buffer_.append(chunk_.get(), static_cast<size_t>(n));
    for (cmsghdr* c = CMSG_FIRSTHDR(&message); c != nullptr; c = CMSG_NXTHDR(&message, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        fds_.emplace_back(fd);
      }
    }
    return n > 0;
  }

  static constexpr size_t kChunkBytes = 65536;
  int fd_;
  std::unique_ptr<char[]> chunk_ = std::make_unique_for_overwrite<char[]>(kChunkBytes);
  std::string buffer_;
  size_t start_ = 0;
  std::deque<UniqueFd> fds_;
};

// "ready" carries a pidfd and the read end of a fresh pipe that becomes this process's stderr:
// the manager drains it per session, so nothing the session writes to fd 2 reaches the
// manager's (or the zygote's) stderr.
Status SendReady(int session_fd) {
  UniqueFd pidfd(static_cast<int>(syscall(SYS_pidfd_open, getpid(), 0)));
  if (!pidfd.valid()) return ErrnoError("pidfd_open", errno);
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return ErrnoError("pipe2", errno);
  UniqueFd stderr_read(pipe_fds[0]);
  int moved = dup2(pipe_fds[1], STDERR_FILENO);  // without O_CLOEXEC: children inherit it
  close(pipe_fds[1]);
  if (moved < 0) return ErrnoError("dup2", errno);
  Json ready = {{"op", "ready"}, {"pid", getpid()}, {"scratch_dir", g_scratch_dir}};
  return wire::SendFrameWithFds(session_fd, DumpJson(ready), {pidfd.get(), stderr_read.get()});
}

pid_t RawCloneParent() {
  unsigned long flags = CLONE_PARENT | SIGCHLD;
  int* tid = nullptr;
  if (g_tid_offset >= 0) {
    tid = reinterpret_cast<int*>(reinterpret_cast<char*>(pthread_self()) + g_tid_offset);
    flags |= CLONE_CHILD_SETTID;
  }
  // x86-64 and arm64 argument order: flags, stack, parent_tid, child_tid, tls.
  return static_cast<pid_t>(syscall(SYS_clone, flags, nullptr, nullptr, tid, nullptr));
}

// "fork": copy the scratch directory to a sibling, clone, let the copy serve `new_fd`.
// Returns the descriptor the calling process serves next (the same one in the parent).
int ForkSession(int fd, UniqueFd new_fd, const std::string& request) {
  auto parsed = ParseJson(request);
  Json id = parsed.ok() && parsed->is_object() ? parsed->value("id", Json()) : Json();
  auto fail = [&](const std::string& message) {
    (void)wire::WriteFrame(fd, ErrorReply(DumpJson(id), "infra_error", "fork failed: " + message));
    return fd;
  };
  if (!parsed.ok() || !parsed->is_object()) return fail("malformed fork frame");
  if (!new_fd.valid()) return fail("no socket attached to the fork frame");
  if (!g_can_fork) {
    return fail(
        "this session's scratch directory has no private family directory to hold a copy's "
        "(spawn it without scratch_dir, or with one whose parent does not exist yet)");
  }
  std::string target;
  if (parsed->contains("scratch_dir") && (*parsed)["scratch_dir"].is_string()) {
    target = (*parsed)["scratch_dir"].get<std::string>();
    if (!IsCleanAbsolutePath(target) || ParentDir(target) != g_family_dir) {
      return fail("scratch_dir must be a directory directly inside " + g_family_dir);
    }
  } else {
    static int copies = 0;
    target = g_family_dir + "/c" + std::to_string(getpid()) + "-" + std::to_string(++copies);
  }
  if (mkdir(target.c_str(), 0700) != 0) return fail(ErrnoError("mkdir " + target, errno).message());
  if (Status copied = CopyTree(g_scratch_dir, target); !copied.ok()) {
    RemoveTree(target);
    return fail("copying the scratch directory: " + copied.message());
  }
  BeforeFork();
  pid_t pid = RawCloneParent();
  if (pid < 0) {
    int error = errno;
    AfterForkParent();
    RemoveTree(target);
    return fail(ErrnoError("clone", error).message());
  }
  if (pid == 0) {
    AfterForkChild();
    close(fd);
    SetDeathSignal();
    // The inherited counter is the parent's cgroup's; the copy gets its own cgroup at adopt.
    SetPidsEventsFd(-1);
    g_scratch_dir = target;
    if (chdir(target.c_str()) != 0) _exit(1);
    int serve = new_fd.Release();
    if (!SendReady(serve).ok()) _exit(1);
    return serve;
  }
  AfterForkParent();
  new_fd.Reset();
  Json reply = {{"id", id}, {"outcome", "ok"}, {"pid", pid}, {"scratch_dir", target}};
  (void)wire::WriteFrame(fd, DumpJson(reply));
  return fd;
}

// Whether a process the episode started still runs. The session is its descendants' subreaper,
// so every one of them that lives is, or has an ancestor that is, a child of this process; exited
// children are reaped on the way. Ok when none runs. Threads are the manager's check: /proc is
// outside a session's Landlock domain.
Status CheckNoProcessLeft() {
  for (;;) {
    pid_t reaped = waitpid(-1, nullptr, WNOHANG);
    if (reaped > 0) continue;
    if (reaped == 0) return FailedPreconditionError("a process the episode started is still there");
    if (errno == EINTR) continue;
    if (errno == ECHILD) return Status::Ok();
    return ErrnoError("waitpid", errno);
  }
}

// "recycle": makes this session process ready for a new episode (python_host.h
// RecycleInterpreter), or says why it cannot be (the manager then closes it).
void RecycleProcess(int fd, const std::string& request) {
  auto parsed = ParseJson(request);
  Json id = parsed.ok() && parsed->is_object() ? parsed->value("id", Json()) : Json();
  Status recycled = CheckNoProcessLeft();
  if (recycled.ok()) recycled = EmptyDirectory(g_scratch_dir, 0700);
  if (recycled.ok() && chdir(g_scratch_dir.c_str()) != 0) recycled = ErrnoError("chdir " + g_scratch_dir, errno);
  if (recycled.ok()) recycled = RecycleInterpreter();
  if (!recycled.ok()) {
    (void)wire::WriteFrame(fd, ErrorReply(DumpJson(id), "invalid_call", "recycle refused: " + recycled.message()));
    return;
  }
  (void)wire::WriteFrame(fd, DumpJson(Json{{"id", id}, {"outcome", "ok"}}));
}

[[noreturn]] void Serve(int fd) {
  auto reader = std::make_unique<FrameReader>(fd);
  std::string frame;
  for (;;) {
    if (!reader->Next(&frame)) _exit(0);  // the manager closed the session
    FrameAction action = HandleFrame(frame);
    switch (action.kind) {
      case FrameAction::Kind::kReply:
        if (!wire::WriteFrame(fd, action.payload).ok()) _exit(0);
        break;
      case FrameAction::Kind::kClose: _exit(0);
      case FrameAction::Kind::kRecycle: RecycleProcess(fd, action.payload); break;
      case FrameAction::Kind::kFork: {
        int next = ForkSession(fd, reader->TakeFd(), action.payload);
        if (next != fd) {  // the copy: serve its own socket from a clean reader
          fd = next;
          reader = std::make_unique<FrameReader>(fd);
        }
        break;
      }
    }
  }
}

int64_t Int(const Json& json, const char* key, int64_t fallback) {
  auto it = json.find(key);
  return it != json.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}

}  // namespace

void PrepareRawClone() {
  // struct pthread holds the tid glibc's fork() refreshes; find it by value, and accept only a
  // single, unambiguous match (verified again in each session before use).
  auto* self = reinterpret_cast<const int*>(pthread_self());
  int tid = static_cast<int>(syscall(SYS_gettid));
  long found = -1;
  for (long i = 0; i < 1024 / static_cast<long>(sizeof(int)); ++i) {
    if (self[i] == tid) {
      if (found >= 0) return;
      found = i * static_cast<long>(sizeof(int));
    }
  }
  g_tid_offset = found;
}

void RunWarmChild(WarmChildContext context) {
  g_zygote_pid = context.zygote_pid;
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  signal(SIGTERM, SIG_DFL);
  signal(SIGINT, SIG_DFL);
  signal(SIGCHLD, SIG_DFL);
  std::vector<int> keep = context.keep_fds;
  keep.insert(keep.end(), {0, 1, 2, context.channel_fd});
  if (context.slot) {
    for (const UniqueFd& fd : context.slot->procs) keep.push_back(fd.get());
    keep.push_back(context.slot->pids_events.get());
  }
  CloseAllExcept(keep);
  SetDeathSignal();
  // The glibc tid must follow fork(); if it did not, raw clones go without CLONE_CHILD_SETTID.
  if (g_tid_offset >= 0 &&
      *reinterpret_cast<const int*>(reinterpret_cast<const char*>(pthread_self()) + g_tid_offset) != getpid()) {
    g_tid_offset = -1;
  }
  // The slow step (an RCU grace period on cgroup v1), done before anyone waits for this process.
  Status joined = context.slot ? Cgroups::JoinSelf(*context.slot) : Status::Ok();

  UniqueFd session;
  auto frame = wire::ReadFrameWithFd(context.channel_fd, &session);
  if (!frame.ok()) _exit(0);  // the zygote is shutting down
  close(context.channel_fd);
  if (!session.valid()) _exit(1);
  int fd = session.Release();
  if (!joined.ok()) Fatal(fd, joined.message());
  auto parsed = ParseJson(*frame);
  if (!parsed.ok()) Fatal(fd, "bad assignment: " + parsed.status().message());
  const Json& a = *parsed;

  // The limits the zygote parsed from the manager's LIMITS, in their one form (sandbox_limits.h).
  auto limits = SandboxLimitsFromJson(a.value("limits", Json::object()));
  if (!limits.ok()) Fatal(fd, "bad assignment: " + limits.status().message());
  SessionSettings settings;
  settings.task = a.value("task", "");
  settings.wall_time_ms = limits->wall_time.count();
  settings.max_output_bytes = limits->max_output_bytes;
  settings.memory_bytes = limits->memory_bytes;
  settings.disk_bytes = a.value("disk_mounted", false) ? limits->disk_bytes : 0;
  if (Status s = StartSession(settings); !s.ok()) Fatal(fd, s.message());

  int uid = static_cast<int>(Int(a, "uid", -1));
  g_scratch_dir = a.value("scratch_dir", "");
  g_family_dir = a.value("family_dir", "");
  bool create_family = a.value("create_family", false);
  std::string landlock_dir = a.value("landlock_dir", g_scratch_dir);
  g_can_fork = create_family;

  if (context.slot) {
    Status limited = Cgroups::SetLimits(*context.slot, limits->memory_bytes, limits->max_processes);
    if (!limited.ok()) Fatal(fd, "cannot set the session's cgroup limits: " + limited.message());
  }
  setsid();  // no controlling terminal: no TIOCSTI injection into the manager's tty
  // Orphans of the session's processes come back to it, not to the zygote: a recycle can then
  // see that nothing of an episode runs on (CheckNoProcessLeft). The zygote still kills and
  // reaps what is left of a family when the session ends.
  prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  const Isolation& isolation = *context.isolation;
  if (Status s = isolation.ApplyRlimits(*limits, context.data_base, context.slot.has_value()); !s.ok())
    Fatal(fd, s.message());
  if (context.slot) SetPidsEventsFd(context.slot->pids_events.Release());
  if (uid >= 0) {
    // The family's uid first, capabilities kept: the directories are then the family's own
    // (no chown), created with CAP_DAC_OVERRIDE in the scratch root, which is not.
    if (Status s = isolation.SwitchUser(static_cast<uid_t>(uid)); !s.ok()) Fatal(fd, s.message());
    SetDeathSignal();  // a credential change clears it
  }
  if (create_family) {
    if (Status s = MakeDirs(g_family_dir, 0700, -1); !s.ok()) Fatal(fd, s.message());
  }
  if (Status s = MakeDirs(g_scratch_dir, 0700, -1); !s.ok()) Fatal(fd, s.message());
  // From here on the session has no capability at all, in any set.
  if (Status s = isolation.DropCapabilities(); !s.ok()) Fatal(fd, "capabilities: " + s.message());
  if (Status s = isolation.ApplyLandlock(landlock_dir); !s.ok()) Fatal(fd, "landlock: " + s.message());
  for (int kept : context.keep_fds) close(kept);
  if (Status s = isolation.ApplySeccomp(); !s.ok()) Fatal(fd, "seccomp: " + s.message());
  if (chdir(g_scratch_dir.c_str()) != 0) Fatal(fd, ErrnoError("chdir " + g_scratch_dir, errno).message());
  if (Status s = SendReady(fd); !s.ok()) _exit(1);
  Serve(fd);
}

}  // namespace envforge::sandbox::worker
