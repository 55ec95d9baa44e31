// The zygote: start-up, the control channel poll loop, warm children, spawn/adopt, reaping.
//
// Invariants:
//  1. Single-threaded; every blocking call is on the control channel (whole frames from the
//     manager) or bounded (cgroup writes, kill rounds).
//  2. Every session process (spawned or adopted) is in sessions_ until reaped; every reaped
//     session produces exactly one {"op":"exited"}, after its cgroup was emptied.
//  3. A family (one spawn and the copies forked from it) owns one uid and one directory; both are
//     released when its last member is reaped.
//  4. Warm children are not sessions: they have no uid, no scratch directory and no limits until
//     assigned; they are killed when the zygote exits.
//  5. No environment code (tools.py's module body, solutions, verifiers) runs before the zygote
//     confined itself (Isolation::ConfineZygote). What needs more than the confined zygote may
//     do happens before: the stale sweeps of dead zygotes' cgroups and scratch directories, the
//     private IPC and mount namespaces (with the scratch tmpfs), forking the janitor, which
//     removes this zygote's cgroup directories after it is gone, and forking the mount helper,
//     which mounts the families' disk budgets.
#include "sandbox/worker/zygote.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "base/fd.h"
#include "base/json.h"
#include "base/log.h"
#include "sandbox/internal/wire.h"
#include "sandbox/sandbox_limits.h"
#include "sandbox/worker/bundle_image.h"
#include "sandbox/worker/cgroups.h"
#include "sandbox/worker/isolation.h"
#include "sandbox/worker/private_namespaces.h"
#include "sandbox/worker/python_host.h"
#include "sandbox/worker/scratch_dirs.h"
#include "sandbox/worker/scratch_mounter.h"
#include "sandbox/worker/session.h"

namespace envforge::sandbox::worker {
namespace {

constexpr size_t kWarmChildren = 3;
constexpr size_t kMaxDeferredCloses = 64;
constexpr size_t kRecentExits = 256;
constexpr int kIdleWorkDelayMs = 2;
constexpr int kReleaseRetryMs = 100;

// LIMITS (wire.h): the session's SandboxLimits, read by their one parser (absent keys keep the
// defaults of sandbox_limits.h), and the scratch directory the manager may have assigned.
struct SpawnLimits {
  SandboxLimits limits;
  std::string scratch_dir;  // empty: the zygote picks one
};

Result<SpawnLimits> ParseLimits(const Json& json) {
  SpawnLimits spawn;
  if (json.is_null()) return spawn;
  ENVFORGE_ASSIGN_OR_RETURN(spawn.limits, SandboxLimitsFromJson(json));
  // SandboxLimitsFromJson checked that scratch_dir, when present, is a string.
  if (auto it = json.find("scratch_dir"); it != json.end()) spawn.scratch_dir = it->get<std::string>();
  if (!spawn.scratch_dir.empty() && !IsCleanAbsolutePath(spawn.scratch_dir)) {
    return InvalidArgumentError("limits.scratch_dir must be a normalised absolute path: '" + spawn.scratch_dir + "'");
  }
  return spawn;
}

// <scratch-root>/z<pid> of zygotes that died without a shutdown.
void RemoveStaleScratch(const std::string& root) {
  DIR* dir = opendir(root.c_str());
  if (dir == nullptr) return;
  std::vector<std::string> stale;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != 'z' || entry->d_name[1] < '1' || entry->d_name[1] > '9') continue;
    long pid = std::strtol(entry->d_name + 1, nullptr, 10);
    if (pid > 0 && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) stale.push_back(root + "/" + entry->d_name);
  }
  closedir(dir);
  for (const std::string& path : stale) RemoveTree(path);
}

int64_t VmDataBytes() {
  auto status = ReadFileToString("/proc/self/status");
  if (!status.ok()) return 0;
  auto at = status->find("VmData:");
  return at == std::string::npos ? 0 : std::atoll(status->c_str() + at + 7) * 1024;
}

// The uid a helper must take to act on a process of a family with uid `family_uid` (cgroup v1
// migration, prlimit): the family's own, unless the zygote is still root (it may do both itself)
// or families have no uid of their own.
int AdoptHelperUid(int family_uid) { return family_uid >= 0 && geteuid() != 0 ? family_uid : -1; }

// The janitor: forked before the zygote confines itself, so it is outside the zygote's Landlock
// domain, which cannot reach envforge/ (the parent of the zygote's cgroup directories, shared
// with other zygotes). It waits for the end of `release` (the zygote closed it, or died), then
// removes whatever is left of those directories (rmdir only: a cgroup that still holds a
// process stays, for the next zygote's stale sweep). It reads nothing else, holds no
// capability, and the zygote's domain cannot signal it (Landlock scoping).
[[noreturn]] void RunJanitor(int release, const std::vector<std::string>& dirs, const Isolation& isolation) {
  for (int sig : {SIGINT, SIGHUP, SIGTERM, SIGPIPE}) signal(sig, SIG_IGN);  // outlive a ^C on the group
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  if (release > 0) syscall(SYS_close_range, 0u, static_cast<unsigned>(release) - 1, 0u);
  syscall(SYS_close_range, static_cast<unsigned>(release) + 1, ~0u, 0u);
  prctl(PR_SET_NAME, "envforge-janitor", 0, 0, 0);
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  (void)isolation.DropCapabilities();  // root owns envforge/: rmdir needs no capability
  char byte;
  for (;;) {
    ssize_t n = read(release, &byte, 1);
    if (n == 0 || (n < 0 && errno != EINTR)) break;
  }
  // Processes killed a moment ago may still hold their groups: retry for up to 2 s.
  for (int attempt = 0; attempt < 200; ++attempt) {
    bool left = false;
    for (const std::string& root : dirs) {
      if (DIR* dir = opendir(root.c_str())) {
        std::vector<std::string> slots;
        while (dirent* entry = readdir(dir)) {
          if (entry->d_type == DT_DIR && entry->d_name[0] != '.') slots.push_back(root + "/" + entry->d_name);
        }
        closedir(dir);
        for (const std::string& slot : slots) rmdir(slot.c_str());
      }
      if (rmdir(root.c_str()) != 0 && errno != ENOENT) left = true;
    }
    if (!left) break;
    poll(nullptr, 0, 10);
  }
  _exit(0);
}

struct Family {
  int slot = 0;
  int uid = -1;
  std::string dir;
  bool own_dir = false;
  bool mounted = false;  // dir is a tmpfs of the mounter's (the family's disk budget)
  int members = 0;
};

struct Session {
  Json id;
  int family = 0;
  std::optional<CgroupSlot> slot;
  std::string scratch_dir;
  int64_t cpu_seconds = 0;
};

struct WarmChild {
  pid_t pid = 0;
  UniqueFd channel;
  std::optional<CgroupSlot> slot;
};

class Zygote {
 public:
  explicit Zygote(ZygoteOptions options) : options_(std::move(options)), control_(options_.control_fd) {}
  int Run();

 private:
  [[noreturn]] void Fatal(const std::string& error);
  void StartJanitor();
  void ReleaseJanitor();
  void StartMounter();
  Json IsolationReport() const;
  void Send(const Json& frame);
  bool HandleControlFrame();
  void HandleSpawn(const Json& message, UniqueFd socket);
  void HandleAdopt(const Json& message);
  void Reap();
  void SessionExited(pid_t pid, int status, const rusage& usage);
  void ReleaseFamily(int family_slot);
  Result<WarmChild> ForkWarmChild();
  void Refill();
  [[noreturn]] void ShutdownAndExit(int code);

  ZygoteOptions options_;
  UniqueFd control_;
  UniqueFd signals_;
  std::string network_;                    // the network namespace's status
  std::string ipc_;                        // the IPC namespace's status
  std::string scratch_;                    // the private mount namespace and scratch tmpfs's status
  std::string disk_ = "off: not started";  // the families' disk budgets (the mounter)
  std::unique_ptr<ScratchMounter> mounter_;
  pid_t pid_ = getpid();
  std::optional<BundleImage> bundle_;
  std::set<std::string> task_ids_;
  Isolation isolation_;
  std::unique_ptr<Cgroups> cgroups_;
  std::string scratch_root_;  // --scratch-root
  std::string scratch_base_;  // <scratch-root>/z<pid>
  pid_t janitor_pid_ = 0;
  UniqueFd janitor_release_;  // closing it lets the janitor remove the cgroup directories
  int64_t data_base_ = 0;
  std::deque<WarmChild> warm_;
  std::map<pid_t, Session> sessions_;
  std::map<int, Family> families_;
  int next_family_ = 1;
  uint64_t spawn_count_ = 0;
  std::deque<std::pair<pid_t, int>> recent_exits_;     // reaped unknown children: pid, wait status
  std::map<pid_t, std::optional<CgroupSlot>> doomed_;  // killed before becoming sessions
  std::deque<UniqueFd> deferred_closes_;               // assignment channels, closed when idle
};

void Zygote::Send(const Json& frame) {
  if (!wire::WriteFrame(control_.get(), DumpJson(frame)).ok()) ShutdownAndExit(0);  // manager gone
}

void Zygote::Fatal(const std::string& error) {
  (void)wire::WriteFrame(control_.get(), DumpJson(Json{{"op", "fatal"}, {"error", error}}));
  ENVFORGE_LOG(kError) << "envforge-worker zygote: " << error;
  ShutdownAndExit(1);  // removes what start-up created (cgroups, scratch directory)
}

void Zygote::StartJanitor() {
  if (!cgroups_->enabled() || isolation_.landlock_abi() < 1) return;  // the zygote can remove them itself
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return;
  pid_t pid = fork();
  if (pid == 0) RunJanitor(pipe_fds[0], cgroups_->roots(), isolation_);
  close(pipe_fds[0]);
  if (pid < 0) {
    close(pipe_fds[1]);
    return;
  }
  janitor_pid_ = pid;
  janitor_release_.Reset(pipe_fds[1]);
}

void Zygote::ReleaseJanitor() {
  if (janitor_pid_ <= 0) return;
  janitor_release_.Reset();
  timespec start{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    pid_t reaped = waitpid(janitor_pid_, nullptr, WNOHANG);
    if (reaped == janitor_pid_ || (reaped < 0 && errno != EINTR)) break;
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - start.tv_sec > 3) break;  // it goes on alone
    poll(nullptr, 0, 1);
  }
  janitor_pid_ = 0;
}

// The mounter needs the private scratch tmpfs (its mounts must not reach the host), root (it
// keeps CAP_SYS_ADMIN) and Landlock (without it, the zygote's CAP_SYS_PTRACE reaches the
// helper's memory through /proc).
void Zygote::StartMounter() {
  if (scratch_ != "on") {
    disk_ = "off: no private scratch tmpfs (" + scratch_ + ")";
  } else if (!isolation_.can_switch_uid()) {
    disk_ = "off: the worker does not run as root";
  } else if (isolation_.landlock_abi() < 1) {
    disk_ = "off: no Landlock to keep the zygote away from the mount helper";
  } else if (auto started =
                 ScratchMounter::Start(scratch_root_, SessionUidBlock(pid_) + 1, SessionUidBlock(pid_) + kMaxFamilies);
             !started.ok()) {
    disk_ = "off: " + started.status().message();
  } else {
    mounter_ = std::move(*started);
    disk_ = "on";
  }
}

Json Zygote::IsolationReport() const {
  return {{"network", network_},
          {"landlock", isolation_.landlock_status()},
          {"seccomp", isolation_.seccomp_status()},
          {"cgroup", cgroups_->status()},
          {"uid", isolation_.uid_status()},
          {"zygote_caps", isolation_.zygote_caps_status()},
          {"zygote_uid", isolation_.zygote_uid_status()},
          {"zygote_landlock", isolation_.zygote_landlock_status()},
          {"zygote_scope", isolation_.zygote_scope_status()},
          {"zygote_seccomp", isolation_.zygote_seccomp_status()},
          {"zygote_ipc", ipc_},
          {"zygote_scratch", scratch_},
          {"session_disk", disk_}};
}

int Zygote::Run() {
  (void)SetCloseOnExec(control_.get(), true);
  signal(SIGPIPE, SIG_IGN);  // a closed socket is an error return, never a death
  network_ = EnterEmptyNetworkNamespace();
  ipc_ = EnterPrivateIpcNamespace();
  int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd >= 0) {
    dup2(null_fd, STDIN_FILENO);
    dup2(null_fd, STDOUT_FILENO);
    close(null_fd);
  }

  // Everything that needs more than the confined zygote may do (invariant 5).
  scratch_root_ = options_.scratch_root.empty() ? "/tmp/envforge-scratch" : options_.scratch_root;
  if (!IsCleanAbsolutePath(scratch_root_)) {
    Fatal("--scratch-root must be a normalised absolute path: '" + scratch_root_ + "'");
  }
  isolation_ = Isolation::Prepare();
  cgroups_ = Cgroups::Create(pid_);   // also sweeps dead zygotes' cgroups
  RemoveStaleScratch(scratch_root_);  // the host's directory, before the tmpfs hides it
  scratch_ = EnterPrivateScratch(scratch_root_);
  scratch_base_ = scratch_root_ + "/z" + std::to_string(pid_);
  if (Status s = MakeDirs(scratch_base_, 0711, -1); !s.ok()) Fatal("scratch root: " + s.message());
  StartJanitor();
  StartMounter();
  prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);  // orphans of sessions come back here to be reaped

  auto bundle = LoadBundleImage(options_.bundle_path);
  if (!bundle.ok()) Fatal(bundle.status().message());
  bundle_ = std::move(*bundle);
  for (const RuntimeTask& task : bundle_->environment.tasks) task_ids_.insert(task.id);
  if (Status s = StartPython(); !s.ok()) Fatal(s.message());
  PrepareRawClone();

  // Confined from here on: tools.py's module body is the first environment code to run.
  // Relative paths it writes land in the zygote's own scratch directory.
  if (chdir(scratch_base_.c_str()) != 0) Fatal(ErrnoError("chdir " + scratch_base_, errno).message());
  ZygoteConfinement confinement;
  confinement.scratch_root = scratch_root_;
  confinement.cgroup_dirs = cgroups_->roots();
  confinement.read_only = PythonImportPaths();
  confinement.uid = SessionUidBlock(pid_);  // slot 0 of the block: no family uses it
  confinement.family_uid_first = SessionUidBlock(pid_) + 1;
  confinement.family_uid_last = SessionUidBlock(pid_) + kMaxFamilies;
  isolation_.ConfineZygote(confinement);

  if (Status s = LoadEnvironment(bundle_->environment, bundle_->session_db.handle(), bundle_->verifier_db.handle());
      !s.ok()) {
    Fatal(s.message());
  }
  size_t tool_count = bundle_->environment.tools.size();
  // Sources are compiled; the zygote keeps no copy of them.
  bundle_->environment = RuntimeEnvironment{};
  data_base_ = VmDataBytes();

  sigset_t mask;
  sigemptyset(&mask);
  for (int sig : {SIGCHLD, SIGTERM, SIGINT, SIGHUP}) sigaddset(&mask, sig);
  sigprocmask(SIG_BLOCK, &mask, nullptr);
  signals_.Reset(signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!signals_.valid()) Fatal(ErrnoError("signalfd", errno).message());

  Json ready = {{"op", "ready"},
                {"pid", pid_},
                {"python", PythonVersion()},
                {"isolation", IsolationReport()},
                {"landlock_abi", isolation_.landlock_abi()},
                {"cgroup_version", cgroups_->enabled() ? cgroups_->version() : ""},
                {"tools", tool_count},
                {"tasks", task_ids_.size()},
                {"data_bytes", bundle_->data_bytes}};
  Send(ready);

  for (;;) {
    pollfd fds[2] = {{control_.get(), POLLIN, 0}, {signals_.get(), POLLIN, 0}};
    // Idle work runs only when the control channel has been quiet for a moment: a queued spawn
    // never waits behind it, and a session that was just assigned finishes its set-up without
    // competing with a fork for the CPU. With no prepared process left, the next spawn would
    // fork on its own path: refill at once.
    int timeout = -1;
    if (warm_.empty()) {
      timeout = 0;
    } else if (warm_.size() < kWarmChildren || !deferred_closes_.empty()) {
      timeout = kIdleWorkDelayMs;
    } else if (cgroups_->has_pending_releases()) {
      timeout = kReleaseRetryMs;
    }
    int n = poll(fds, 2, timeout);
    if (n < 0 && errno != EINTR) Fatal(ErrnoError("poll", errno).message());
    if (n > 0 && (fds[1].revents & POLLIN)) {
      signalfd_siginfo info;
      bool stop = false;
      while (read(signals_.get(), &info, sizeof info) == sizeof info) {
        if (info.ssi_signo != SIGCHLD) stop = true;
      }
      Reap();
      if (stop) ShutdownAndExit(0);
    }
    if (n > 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
      if (!HandleControlFrame()) ShutdownAndExit(0);
      continue;
    }
    if (n == 0) {
      if (warm_.empty()) {
        Refill();
      } else if (!deferred_closes_.empty()) {
        deferred_closes_.clear();
      } else if (warm_.size() < kWarmChildren) {
        Refill();
      } else {
        cgroups_->RetryReleases();
      }
    }
  }
}

bool Zygote::HandleControlFrame() {
  UniqueFd fd;
  auto frame = wire::ReadFrameWithFd(control_.get(), &fd);
  if (!frame.ok()) return false;
  auto message = ParseJson(*frame, "control frame");
  if (!message.ok() || !message->is_object()) {
    ENVFORGE_LOG(kWarn) << "envforge-worker zygote: ignoring a malformed control frame";
    return true;
  }
  std::string op = message->value("op", "");
  if (op == "spawn") {
    HandleSpawn(*message, std::move(fd));
  } else if (op == "adopt") {
    HandleAdopt(*message);
  } else if (op == "shutdown") {
    ShutdownAndExit(0);
  } else {
    ENVFORGE_LOG(kWarn) << "envforge-worker zygote: unknown op '" << op << "'";
  }
  return true;
}

Result<WarmChild> Zygote::ForkWarmChild() {
  WarmChild child;
  if (cgroups_->enabled()) {
    auto slot = cgroups_->NewSlot();
    if (!slot.ok()) return slot.status();
    child.slot = std::move(*slot);
  }
  ENVFORGE_ASSIGN_OR_RETURN(auto pair, MakeSocketPair());
  BeforeFork();
  pid_t pid = fork();
  if (pid < 0) {
    int error = errno;
    AfterForkParent();
    if (child.slot) cgroups_->Release(std::move(*child.slot));
    return ErrnoError("fork", error);
  }
  if (pid == 0) {
    AfterForkChild();
    WarmChildContext context;
    context.channel_fd = pair.second.Release();
    context.slot = std::move(child.slot);
    context.isolation = &isolation_;
    context.zygote_pid = pid_;
    context.data_base = data_base_;
    context.keep_fds = isolation_.kept_fds();
    RunWarmChild(std::move(context));
  }
  AfterForkParent();
  child.pid = pid;
  child.channel = std::move(pair.first);
  if (child.slot) {
    // The child has its own copies; the zygote only needs the directories.
    child.slot->procs.clear();
    child.slot->pids_events.Reset();
  }
  return child;
}

void Zygote::Refill() {
  auto child = ForkWarmChild();
  if (!child.ok()) {
    ENVFORGE_LOG(kWarn) << "envforge-worker zygote: cannot prepare a session process: " << child.status().message();
    poll(nullptr, 0, 50);  // do not spin on a persistent failure
    return;
  }
  warm_.push_back(std::move(*child));
}

void Zygote::HandleSpawn(const Json& message, UniqueFd socket) {
  Json id = message.value("id", Json());
  auto failed = [&](const std::string& error) { Send({{"op", "spawn_failed"}, {"id", id}, {"error", error}}); };
  if (!socket.valid()) return failed("no session socket attached to the spawn frame");
  std::string task = message.contains("task") && message["task"].is_string() ? message["task"].get<std::string>() : "";
  if (!task.empty() && !task_ids_.count(task)) return failed("unknown task '" + task + "'");
  auto limits = ParseLimits(message.value("limits", Json()));
  if (!limits.ok()) return failed(limits.status().message());

  Family family;
  family.slot = next_family_;
  if (isolation_.can_switch_uid()) {
    // uids 200000 + slot; a slot is reused only after its family is gone.
    for (int tries = 0; tries < kMaxFamilies && families_.count(family.slot); ++tries) {
      family.slot = family.slot % kMaxFamilies + 1;
    }
    if (families_.count(family.slot)) return failed("too many live session families");
    family.uid = static_cast<int>(SessionUidBlock(pid_)) + family.slot;
  } else {
    while (families_.count(family.slot)) ++family.slot;
  }
  next_family_ = family.slot % kMaxFamilies + 1;
  if (!limits->scratch_dir.empty() && isolation_.zygote_landlocked() &&
      limits->scratch_dir.rfind(scratch_root_ + "/", 0) != 0) {
    return failed("limits.scratch_dir must be inside the zygote's scratch root " + scratch_root_ + ": '" +
                  limits->scratch_dir + "'");
  }
  uint64_t n = ++spawn_count_;
  std::string scratch = limits->scratch_dir;
  if (scratch.empty()) {
    family.dir = scratch_base_ + "/f" + std::to_string(n);
    scratch = family.dir + "/s" + std::to_string(n);
  } else {
    family.dir = ParentDir(scratch);
  }
  struct stat info {};
  family.own_dir = lstat(family.dir.c_str(), &info) != 0 && errno == ENOENT;

  WarmChild child;
  if (!warm_.empty()) {
    child = std::move(warm_.front());
    warm_.pop_front();
  } else {
    auto forked = ForkWarmChild();
    if (!forked.ok()) return failed("cannot start a session process: " + forked.status().message());
    child = std::move(*forked);
  }
  auto discard = [&](WarmChild& doomed) {
    kill(doomed.pid, SIGKILL);
    doomed_[doomed.pid] = std::move(doomed.slot);
  };
  if (family.own_dir && limits->limits.disk_bytes > 0 && mounter_ && family.uid >= 0) {
    std::string parent = ParentDir(family.dir);
    Status mounted = lstat(parent.c_str(), &info) != 0 ? MakeDirs(parent, 0711, -1) : Status::Ok();
    if (mounted.ok()) mounted = mounter_->Mount(family.dir, static_cast<uid_t>(family.uid), limits->limits.disk_bytes);
    if (!mounted.ok()) {
      warm_.push_front(std::move(child));
      return failed("cannot mount the session's disk budget: " + mounted.message());
    }
    family.mounted = true;
  }
  Json assignment = {{"task", task},
                     {"limits", ToJson(limits->limits)},
                     {"disk_mounted", family.mounted},
                     {"uid", family.uid},
                     {"scratch_dir", scratch},
                     {"family_dir", family.dir},
                     {"create_family", family.own_dir},
                     {"landlock_dir", family.own_dir ? family.dir : scratch}};
  Status sent = wire::SendFrameWithFd(child.channel.get(), DumpJson(assignment), socket.get());
  socket.Reset();
  if (!sent.ok()) {
    discard(child);
    if (family.mounted) (void)mounter_->Unmount(family.dir);
    return failed("the session process died before its assignment: " + sent.message());
  }
  family.members = 1;
  families_[family.slot] = family;
  sessions_[child.pid] = Session{id, family.slot, std::move(child.slot), scratch, limits->limits.cpu_seconds};
  // Closing a unix socket while a passed descriptor may still be in flight runs the kernel's
  // SCM_RIGHTS garbage collector (up to milliseconds): close the channel later, when idle.
  deferred_closes_.push_back(std::move(child.channel));
  // Under a load that never leaves the zygote idle they would pile up until the descriptor limit
  // (a spawn then fails with EMFILE): past a bound the oldest go now, long since read.
  while (deferred_closes_.size() > kMaxDeferredCloses) deferred_closes_.pop_front();
  Send({{"op", "spawned"}, {"id", id}, {"pid", child.pid}});
}

void Zygote::HandleAdopt(const Json& message) {
  Json id = message.value("id", Json());
  auto failed = [&](const std::string& error) { Send({{"op", "adopt_failed"}, {"id", id}, {"error", error}}); };
  if (!message.contains("pid") || !message["pid"].is_number_integer()) return failed("adopt needs an integer pid");
  auto pid = static_cast<pid_t>(message["pid"].get<int64_t>());
  auto limits = ParseLimits(message.value("limits", Json()));
  if (!limits.ok()) return failed(limits.status().message());
  if (sessions_.count(pid)) return failed("process " + std::to_string(pid) + " is already a session");
  for (auto& [gone, status] : recent_exits_) {
    if (gone == pid) {
      return failed("process " + std::to_string(pid) + " already exited (" +
                    (WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                         : "exit code " + std::to_string(WEXITSTATUS(status))) +
                    ")");
    }
  }
  // Only a copy cloned by one of this zygote's sessions qualifies: our child, in a family's dir.
  auto status = ReadFileToString("/proc/" + std::to_string(pid) + "/status");
  if (!status.ok()) return failed("no process " + std::to_string(pid));
  auto ppid_at = status->find("\nPPid:");
  if (ppid_at == std::string::npos || std::atoi(status->c_str() + ppid_at + 6) != pid_) {
    return failed("process " + std::to_string(pid) + " is not a child of this zygote");
  }
  char cwd[4096];
  ssize_t len = readlink(("/proc/" + std::to_string(pid) + "/cwd").c_str(), cwd, sizeof cwd - 1);
  if (len <= 0) return failed("cannot read the working directory of process " + std::to_string(pid));
  std::string scratch(cwd, static_cast<size_t>(len));
  Family* family = nullptr;
  for (auto& [slot, candidate] : families_) {
    if (ParentDir(scratch) == candidate.dir) family = &candidate;
  }
  if (family == nullptr) return failed("process " + std::to_string(pid) + " is not a session copy");
  if (family->uid >= 0) {
    auto uid_at = status->find("\nUid:");
    if (uid_at == std::string::npos || std::atoi(status->c_str() + uid_at + 5) != family->uid) {
      return failed("process " + std::to_string(pid) + " does not run as its family's uid");
    }
  }
  std::optional<CgroupSlot> slot;
  if (cgroups_->enabled()) {
    auto made = cgroups_->NewSlot();
    if (!made.ok()) return failed("cannot create the copy's cgroup: " + made.status().message());
    made->procs.clear();
    made->pids_events.Reset();
    Status s = cgroups_->SetLimits(*made, limits->limits.memory_bytes, limits->limits.max_processes);
    if (s.ok()) s = cgroups_->Move(*made, pid, AdoptHelperUid(family->uid));
    if (!s.ok()) {
      cgroups_->Release(std::move(*made));
      return failed("cannot move process " + std::to_string(pid) + " into its cgroup: " + s.message());
    }
    slot = std::move(*made);
  }
  // Best effort, as the copy already has its parent's limit: raising the hard limit needs
  // CAP_SYS_RESOURCE, which the zygote does not keep.
  struct CpuLimit {
    pid_t pid;
    rlimit cpu;
  } cpu_limit{pid,
              {static_cast<rlim_t>(limits->limits.cpu_seconds), static_cast<rlim_t>(limits->limits.cpu_seconds + 1)}};
  if (int helper_uid = AdoptHelperUid(family->uid); helper_uid >= 0) {
    // prlimit() on another process needs the same uid (or CAP_SYS_RESOURCE).
    (void)RunAsUid(
        static_cast<uid_t>(helper_uid),
        [](void* arg) -> int {
          auto* limit = static_cast<CpuLimit*>(arg);
          long rc = syscall(SYS_prlimit64, static_cast<long>(limit->pid), static_cast<long>(RLIMIT_CPU), &limit->cpu,
                            nullptr);
          return rc == 0 ? 0 : errno;
        },
        &cpu_limit);
  } else {
    prlimit(pid, RLIMIT_CPU, &cpu_limit.cpu, nullptr);
  }
  family->members++;
  sessions_[pid] = Session{id, family->slot, std::move(slot), scratch, limits->limits.cpu_seconds};
  Send({{"op", "adopted"}, {"id", id}, {"pid", pid}});
}

void Zygote::Reap() {
  for (;;) {
    int status = 0;
    rusage usage{};
    pid_t pid = wait4(-1, &status, WNOHANG, &usage);
    if (pid <= 0) return;
    if (mounter_ && pid == mounter_->pid()) {
      ENVFORGE_LOG(kWarn) << "envforge-worker zygote: the mount helper died (status " << status
                          << "); sessions with a disk budget can no longer start";
      mounter_->Forget();
      continue;
    }
    if (pid == janitor_pid_) {
      ENVFORGE_LOG(kWarn) << "envforge-worker zygote: the janitor died (status " << status
                          << "); the next zygote will remove this one's cgroup directories";
      janitor_pid_ = 0;
      continue;
    }
    if (sessions_.count(pid)) {
      SessionExited(pid, status, usage);
      continue;
    }
    if (auto doomed = doomed_.find(pid); doomed != doomed_.end()) {
      if (doomed->second) {
        cgroups_->KillAll(*doomed->second);
        cgroups_->Release(std::move(*doomed->second));
      }
      doomed_.erase(doomed);
      continue;
    }
    auto warm = std::find_if(warm_.begin(), warm_.end(), [&](const WarmChild& c) { return c.pid == pid; });
    if (warm != warm_.end()) {
      ENVFORGE_LOG(kWarn) << "envforge-worker zygote: a prepared session process died (status " << status << ")";
      if (warm->slot) {
        cgroups_->KillAll(*warm->slot);
        cgroups_->Release(std::move(*warm->slot));
      }
      warm_.erase(warm);
      continue;
    }
    // An orphan of a session, or a fork copy that died before it was adopted.
    recent_exits_.emplace_back(pid, status);
    if (recent_exits_.size() > kRecentExits) recent_exits_.pop_front();
  }
}

void Zygote::SessionExited(pid_t pid, int status, const rusage& usage) {
  Session session = std::move(sessions_[pid]);
  sessions_.erase(pid);
  Json exit_code = WIFEXITED(status) ? Json(WEXITSTATUS(status)) : Json();
  int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  double cpu = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
               static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  CgroupUsage cg = session.slot ? cgroups_->Inspect(*session.slot) : CgroupUsage{};
  Json limit;
  if (cg.oom_killed && (sig == SIGKILL || sig == 0)) {
    limit = "memory";
  } else if (sig == SIGXCPU ||
             (sig == SIGKILL && session.cpu_seconds > 0 && cpu >= static_cast<double>(session.cpu_seconds))) {
    limit = "cpu_time";
  } else if (cg.pids_limited && sig != SIGKILL && sig != 0) {
    limit = "processes";
  }
  if (session.slot) {
    cgroups_->KillAll(*session.slot);
    cgroups_->Release(std::move(*session.slot));
  }
  auto family = families_.find(session.family);
  if (family != families_.end()) {
    // A session's scratch directory goes with it; the family's directory with its last member.
    if (!session.scratch_dir.empty() && ParentDir(session.scratch_dir) == family->second.dir) {
      RemoveTree(session.scratch_dir);
    }
    if (--family->second.members <= 0) ReleaseFamily(session.family);
  }
  Send({{"op", "exited"},
        {"id", session.id},
        {"pid", pid},
        {"exit_code", exit_code},
        {"signal", sig ? Json(sig) : Json()},
        {"limit", limit},
        {"cpu_ms", static_cast<int64_t>(cpu * 1000)},
        {"max_rss_kb", usage.ru_maxrss}});
}

// Without cgroups, the family's uid is the handle on what its sessions left running: a helper
// that takes that uid can signal exactly those processes (kill(-1) spares the caller).
// The helper drops the capabilities it kept from the zygote (CAP_KILL) first: kill(-1) must only
// reach processes of that uid.
void KillEveryProcessOf(int uid) {
  (void)RunAsUid(
      static_cast<uid_t>(uid),
      [](void*) -> int {
        if (SetCapabilitySets(0, 0) != 0) return EPERM;
        syscall(SYS_kill, -1L, static_cast<long>(SIGKILL));
        return 0;
      },
      nullptr);
}

void Zygote::ReleaseFamily(int family_slot) {
  auto it = families_.find(family_slot);
  if (it == families_.end()) return;
  if (!cgroups_->enabled() && it->second.uid >= 0) KillEveryProcessOf(it->second.uid);
  // The family's SysV objects die with it, not with the zygote (its uid is reused later).
  if (ipc_ == "on" && it->second.uid >= 0) RemoveIpcObjectsOf(static_cast<uid_t>(it->second.uid));
  if (it->second.mounted && mounter_) {
    if (Status s = mounter_->Unmount(it->second.dir); !s.ok()) {
      ENVFORGE_LOG(kWarn) << "envforge-worker zygote: cannot unmount a family's disk budget: " << s.message();
    }
  }
  if (it->second.own_dir) RemoveTree(it->second.dir);
  families_.erase(it);
}

void Zygote::ShutdownAndExit(int code) {
  mounter_.reset();  // outside the zygote's Landlock domain: it leaves when its channel closes
  for (auto& [pid, session] : sessions_) kill(pid, SIGKILL);
  for (WarmChild& child : warm_) kill(child.pid, SIGKILL);
  if (cgroups_) cgroups_->Shutdown();
  // Whatever is left of our children (orphans re-parented here; sessions without a cgroup),
  // all but the janitor, which goes last.
  timespec start{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    bool others = false;
    auto children = ReadFileToString("/proc/self/task/" + std::to_string(pid_) + "/children");
    if (children.ok()) {
      const char* p = children->c_str();
      char* end = nullptr;
      for (long child = std::strtol(p, &end, 10); end != p; p = end, child = std::strtol(p, &end, 10)) {
        if (child == janitor_pid_) continue;
        others = true;
        kill(static_cast<pid_t>(child), SIGKILL);
      }
    }
    int status = 0;
    pid_t reaped = waitpid(-1, &status, WNOHANG);
    if (reaped > 0 && reaped == janitor_pid_) janitor_pid_ = 0;
    if (reaped < 0 && errno == ECHILD) break;
    if (reaped <= 0) {
      if (children.ok() && !others) break;  // only the janitor is left
      timespec now{};
      clock_gettime(CLOCK_MONOTONIC, &now);
      if (now.tv_sec - start.tv_sec > 5) break;  // something is stuck in the kernel: give up
      poll(nullptr, 0, 1);
    }
  }
  if (cgroups_) cgroups_->RetryReleases();
  for (auto& [slot, family] : families_) {
    if (family.own_dir) RemoveTree(family.dir);
  }
  if (!scratch_base_.empty()) RemoveTree(scratch_base_);
  ReleaseJanitor();  // the cgroup directories' parent is outside the zygote's domain
  std::_Exit(code);
}

}  // namespace

int RunZygote(const ZygoteOptions& options) {
  // Owned for the process's lifetime: the zygote never returns (it exits from ShutdownAndExit),
  // and its databases must outlive the interpreter.
  auto* zygote = new Zygote(options);
  return zygote->Run();
}

}  // namespace envforge::sandbox::worker
