// The mounter helper and its client (see scratch_mounter.h).
#include "sandbox/worker/scratch_mounter.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/mount.h>
#include <linux/openat2.h>
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
#include <set>

#include "sandbox/worker/isolation.h"
#include "sandbox/worker/scratch_dirs.h"

namespace envforge::sandbox::worker {
namespace {

constexpr size_t kPathBytes = 4096;
constexpr int kDetach = 2;  // MNT_DETACH (<sys/mount.h> clashes with <linux/mount.h> here)

struct MountRequest {
  char op;  // 'm' mount, 'u' unmount
  uint32_t uid;
  int64_t bytes;
  char path[kPathBytes];
};

int OpenBeneath(int dir_fd, const std::string& relative, uint64_t resolve) {
  open_how how{};
  how.flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  how.resolve = resolve;
  return static_cast<int>(syscall(SYS_openat2, dir_fd, relative.c_str(), &how, sizeof how));
}

constexpr uint64_t kStrict = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;

class Helper {
 public:
  Helper(std::string root, uid_t first, uid_t last) : root_(std::move(root)), first_(first), last_(last) {}

  [[noreturn]] void Serve(int channel) {
    root_fd_.Reset(open(root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    for (;;) {
      MountRequest request{};
      ssize_t n = recv(channel, &request, sizeof request, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) _exit(0);  // the zygote closed its end or died
      int32_t error = n != static_cast<ssize_t>(sizeof request) ? EINVAL : Handle(request);
      if (send(channel, &error, sizeof error, MSG_NOSIGNAL) != sizeof error) _exit(0);
    }
  }

 private:
  int Handle(const MountRequest& request) {
    if (!root_fd_.valid()) return ENOENT;
    std::string path(request.path, strnlen(request.path, sizeof request.path));
    if (!IsCleanAbsolutePath(path) || path.rfind(root_ + "/", 0) != 0) return EINVAL;
    std::string relative = path.substr(root_.size() + 1);
    auto slash = relative.rfind('/');
    std::string parent_path = slash == std::string::npos ? "" : relative.substr(0, slash);
    std::string name = slash == std::string::npos ? relative : relative.substr(slash + 1);
    UniqueFd parent(parent_path.empty() ? fcntl(root_fd_.get(), F_DUPFD_CLOEXEC, 0)
                                        : OpenBeneath(root_fd_.get(), parent_path, kStrict));
    if (!parent.valid()) return errno;
    if (request.op == 'm') return MountOn(parent.get(), name, path, request.uid, request.bytes);
    if (request.op == 'u') return UnmountFrom(parent.get(), name, path);
    return EINVAL;
  }

  int MountOn(int parent, const std::string& name, const std::string& path, uid_t uid, int64_t bytes) {
    if (uid < first_ || uid > last_ || bytes < 1) return EINVAL;
    if (mounted_.size() >= static_cast<size_t>(kMaxFamilies)) return EMFILE;
    if (mkdirat(parent, name.c_str(), 0700) != 0) return errno;  // never an existing directory
    int error = 0;
    UniqueFd target(OpenBeneath(parent, name, kStrict));
    UniqueFd fs(target.valid() ? static_cast<int>(syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC)) : -1);
    if (!fs.valid()) error = errno;
    int64_t inodes = std::clamp<int64_t>(bytes / 4096, 1024, int64_t{1} << 30);
    auto set = [&](const char* key, const std::string& value) {
      if (error == 0 && syscall(SYS_fsconfig, fs.get(), FSCONFIG_SET_STRING, key, value.c_str(), 0) != 0) {
        error = errno;
      }
    };
    set("size", std::to_string(bytes));
    set("nr_inodes", std::to_string(inodes));
    set("uid", std::to_string(uid));
    set("gid", std::to_string(uid));
    set("mode", "0700");
    if (error == 0 && syscall(SYS_fsconfig, fs.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0) error = errno;
    UniqueFd mount_fd;
    if (error == 0) {
      mount_fd.Reset(
          static_cast<int>(syscall(SYS_fsmount, fs.get(), FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)));
      if (!mount_fd.valid()) error = errno;
    }
    if (error == 0 && syscall(SYS_move_mount, mount_fd.get(), "", target.get(), "",
                              MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0) {
      error = errno;
    }
    if (error != 0) {
      unlinkat(parent, name.c_str(), AT_REMOVEDIR);
      return error;
    }
    mounted_.insert(path);
    return 0;
  }

  int UnmountFrom(int parent, const std::string& name, const std::string& path) {
    if (!mounted_.count(path)) return EINVAL;
    // The mount's root, reached from the checked parent (crossing into the mount on purpose).
    UniqueFd target(openat(parent, name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!target.valid()) return errno;
    std::string self = "/proc/self/fd/" + std::to_string(target.get());
    if (syscall(SYS_umount2, self.c_str(), kDetach) != 0) return errno;
    mounted_.erase(path);
    target.Reset();
    unlinkat(parent, name.c_str(), AT_REMOVEDIR);
    return 0;
  }

  std::string root_;
  uid_t first_;
  uid_t last_;
  UniqueFd root_fd_;
  std::set<std::string> mounted_;
};

// Everything but CAP_SYS_ADMIN dropped, from every set; raw system calls.
void KeepOnlySysAdmin() {
  for (int cap = 0; cap <= 63; ++cap) {
    if (cap != CAP_SYS_ADMIN) prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
  }
  if (SetCapabilitySets(uint64_t{1} << CAP_SYS_ADMIN, uint64_t{1} << CAP_SYS_ADMIN) != 0) _exit(1);
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
}

}  // namespace

Result<std::unique_ptr<ScratchMounter>> ScratchMounter::Start(const std::string& scratch_root, uid_t family_uid_first,
                                                              uid_t family_uid_last) {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) return ErrnoError("socketpair", errno);
  UniqueFd ours(pair[0]);
  UniqueFd theirs(pair[1]);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return ErrnoError("fork", errno);
  if (pid == 0) {
    int channel = theirs.get();
    for (int sig : {SIGINT, SIGHUP, SIGTERM, SIGPIPE}) signal(sig, SIG_IGN);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (channel > 0) syscall(SYS_close_range, 0u, static_cast<unsigned>(channel) - 1, 0u);
    syscall(SYS_close_range, static_cast<unsigned>(channel) + 1, ~0u, 0u);
    prctl(PR_SET_NAME, "envforge-mount", 0, 0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (getppid() != parent) _exit(0);
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    KeepOnlySysAdmin();
    Helper(scratch_root, family_uid_first, family_uid_last).Serve(channel);
  }
  return std::unique_ptr<ScratchMounter>(new ScratchMounter(pid, std::move(ours)));
}

ScratchMounter::~ScratchMounter() {
  channel_.Reset();
  if (pid_ > 0) {
    while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
}

Status ScratchMounter::Request(char op, const std::string& dir, uid_t uid, int64_t bytes) {
  if (!channel_.valid()) return UnavailableError("the mount helper is gone");
  MountRequest request{};
  request.op = op;
  request.uid = uid;
  request.bytes = bytes;
  if (dir.size() >= sizeof request.path) return InvalidArgumentError("path too long: " + dir);
  std::memcpy(request.path, dir.data(), dir.size());
  if (send(channel_.get(), &request, sizeof request, MSG_NOSIGNAL) != sizeof request) {
    return ErrnoError("the mount helper", errno);
  }
  int32_t error = 0;
  ssize_t n;
  do {
    n = recv(channel_.get(), &error, sizeof error, 0);
  } while (n < 0 && errno == EINTR);
  if (n != sizeof error) return UnavailableError("the mount helper died");
  if (error != 0) return ErrnoError(dir, error);
  return Status::Ok();
}

Status ScratchMounter::Mount(const std::string& dir, uid_t uid, int64_t bytes) { return Request('m', dir, uid, bytes); }

Status ScratchMounter::Unmount(const std::string& dir) { return Request('u', dir, 0, 0); }

}  // namespace envforge::sandbox::worker
