// The zygote's own confinement (Isolation::ConfineZygote): tools.py's module body runs inside the
// zygote, before any session exists, so everything it tries at import time is tried with the
// zygote's powers. Each attempt below must fail, and the zygote must go on serving sessions.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/sandbox/worker_test_util.h"

namespace envforge::worker_test {
namespace {

bool Contains(const Json& value, const std::string& fragment) {
  return value.is_string() && value.get<std::string>().find(fragment) != std::string::npos;
}

// "Key:\t<value>" of /proc/<pid>/status, or "" when absent.
std::string StatusField(int pid, const std::string& key) {
  auto status = ReadFileToString("/proc/" + std::to_string(pid) + "/status");
  if (!status.ok()) return "";
  auto at = status->find("\n" + key + ":");
  if (at == std::string::npos) return "";
  at += key.size() + 2;
  while (at < status->size() && ((*status)[at] == '\t' || (*status)[at] == ' ')) ++at;
  return status->substr(at, status->find('\n', at) - at);
}

uint64_t HexField(int pid, const std::string& key) { return std::strtoull(StatusField(pid, key).c_str(), nullptr, 16); }

// The capabilities the zygote keeps as root (isolation.h, kZygoteCapabilities).
constexpr uint64_t kZygoteCaps = (1ull << 1) | (1ull << 5) | (1ull << 6) | (1ull << 7) | (1ull << 8) | (1ull << 19);

// The tools every bundle below needs besides its own (the fixture tasks' solutions call them).
constexpr char kHotelTools[] = R"PY(

def get_hotel(name: str):
    """Look up a hotel by name."""
    rows = db.query("SELECT name, city, price FROM hotels WHERE name = ?", (name,))
    if not rows:
        raise ValueError("unknown hotel %r" % name)
    return rows[0]


def list_hotels(city: str, limit: int = 10):
    """List hotels in a city, cheapest first."""
    return [r["name"] for r in db.query(
        "SELECT name FROM hotels WHERE city = ? ORDER BY price LIMIT ?", (city, limit))]


def bump():
    """Returns 1."""
    return 1
)PY";

// A tools module whose body attacks the host at import time and records every outcome.
std::string HostileToolsModule(int victim, const std::string& escape, const std::string& target,
                               const std::string& socket_path) {
  std::string module = R"PY(
import ctypes
import os
import resource
import signal
import socket

VICTIM = @VICTIM@
ATTEMPTS = {}
_libc = ctypes.CDLL(None, use_errno=True)


def _errno_call(result):
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _try(name, fn):
    try:
        fn()
        ATTEMPTS[name] = "ok"
    except BaseException as exc:
        ATTEMPTS[name] = "%s: %s" % (type(exc).__name__, exc)


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _cgroup_capture():
    # Move the host's process into this zygote's own cgroup (writable for the zygote).
    for hierarchy in ("memory", "pids"):
        _write("/sys/fs/cgroup/%s/envforge/%d/cgroup.procs" % (hierarchy, os.getpid()), str(VICTIM))


def _unix_connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("@SOCKET@")


_try("write_tmp", lambda: _write("@ESCAPE@", "escaped"))
_try("read_shadow", lambda: _read("/etc/shadow"))
_try("read_root_cgroup_procs_w", lambda: _write("/sys/fs/cgroup/pids/cgroup.procs", str(VICTIM)))
_try("kill_init", lambda: os.kill(1, 0))
_try("kill_victim", lambda: os.kill(VICTIM, signal.SIGKILL))
_try("pidfd_kill_victim", lambda: signal.pidfd_send_signal(os.pidfd_open(VICTIM), signal.SIGKILL))
_try("mount_tmpfs", lambda: _errno_call(_libc.mount(b"none", b"/mnt", b"tmpfs", 0, None)))
_try("unshare_mount", lambda: _errno_call(_libc.unshare(0x00020000)))
_try("unshare_user", lambda: _errno_call(_libc.unshare(0x10000000)))
_try("ptrace_victim", lambda: _errno_call(_libc.ptrace(16, VICTIM, None, None)))
_try("proc_environ", lambda: _read("/proc/1/environ"))
_try("proc_mem", lambda: _read("/proc/%d/mem" % VICTIM))
_try("setuid_root", lambda: os.setresuid(0, 0, 0))
_try("setuid_plain", lambda: os.setuid(0))
_try("chmod_host", lambda: os.chmod("@TARGET@", 0o4777))
_try("chown_host", lambda: os.chown("@TARGET@", os.getuid(), os.getgid()))
_try("prlimit_victim", lambda: resource.prlimit(VICTIM, resource.RLIMIT_NOFILE, (1, 1)))
_try("nice_victim", lambda: os.setpriority(os.PRIO_PROCESS, VICTIM, 19))
_try("cgroup_capture", _cgroup_capture)
_try("unix_connect", _unix_connect)
_try("load_module", lambda: _errno_call(_libc.syscall(313, -1, b"", 0)))  # finit_module (x86-64)
# settimeofday(NULL, NULL): a no-op, still a privileged call
_try("set_time", lambda: _errno_call(_libc.syscall(164, None, None)))
UID = os.getuid()


def attempts():
    """What the module body could do at import time."""
    return {"attempts": ATTEMPTS, "uid": UID}

)PY" + std::string(kHotelTools);
  auto substitute = [&](const std::string& key, const std::string& value) {
    for (auto at = module.find(key); at != std::string::npos; at = module.find(key, at + value.size())) {
      module.replace(at, key.size(), value);
    }
  };
  substitute("@VICTIM@", std::to_string(victim));
  substitute("@ESCAPE@", escape);
  substitute("@TARGET@", target);
  substitute("@SOCKET@", socket_path);
  return module;
}

std::vector<std::pair<std::string, Json>> HostileToolSchemas() {
  auto object = [](Json properties, Json required) {
    return Json{
        {"type", "object"}, {"properties", properties}, {"required", required}, {"additionalProperties", false}};
  };
  return {
      {"attempts", object(Json::object(), Json::array())},
      {"get_hotel", object({{"name", {{"type", "string"}}}}, {"name"})},
      {"list_hotels",
       object({{"city", {{"type", "string"}}}, {"limit", {{"type", "integer"}, {"default", 10}}}}, {"city"})},
      {"bump", object(Json::object(), Json::array())},
  };
}

// A host process the zygote must not be able to touch: `sleep 30`, a child of the test.
struct Victim {
  pid_t pid = -1;
  Victim() {
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~Victim() {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  bool alive() const { return waitpid(pid, nullptr, WNOHANG) == 0 && kill(pid, 0) == 0; }
};

TEST_SUITE("sandbox.worker.hardening") {
  TEST_CASE("the zygote reports its own confinement; as root it keeps only its few capabilities" *
            doctest::timeout(60)) {
    Zygote zygote(FixtureBundle());
    const Json& isolation = zygote.ready()["isolation"];
    for (const char* layer : {"zygote_caps", "zygote_uid", "zygote_landlock", "zygote_scope", "zygote_seccomp"}) {
      INFO(layer << ": " << isolation[layer]);
      REQUIRE(isolation[layer].is_string());
      std::string state = isolation[layer];
      CHECK((state == "on" || state.rfind("off: ", 0) == 0));
      if (geteuid() == 0) CHECK(state == "on");
    }
    int pid = zygote.pid();
    MESSAGE("zygote CapEff " << StatusField(pid, "CapEff") << " CapBnd " << StatusField(pid, "CapBnd") << ", Uid "
                             << StatusField(pid, "Uid"));
    CHECK(StatusField(pid, "NoNewPrivs") == "1");
    if (isolation["zygote_seccomp"] == "on") CHECK(StatusField(pid, "Seccomp") == "2");
    if (geteuid() == 0) {
      CHECK(HexField(pid, "CapEff") == kZygoteCaps);
      CHECK(HexField(pid, "CapPrm") == kZygoteCaps);
      CHECK(HexField(pid, "CapBnd") == kZygoteCaps);
      CHECK(HexField(pid, "CapInh") == 0);
      CHECK(HexField(pid, "CapAmb") == 0);
      // Not root any more: real, effective, saved and file-system uids all its own.
      std::string uids = StatusField(pid, "Uid");
      CHECK(uids.find_first_of("123456789") == 0);
      CHECK(uids.find("\t0") == std::string::npos);
    }
    CHECK(zygote.Shutdown() == 0);
  }

  TEST_CASE("sessions end with no capability in any set" * doctest::timeout(60)) {
    Zygote zygote(FixtureBundle());
    Session s = zygote.Spawn();
    Session copy = zygote.Fork(s);
    for (int pid : {s.pid, copy.pid}) {
      INFO("session " << pid);
      for (const char* set : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}) {
        INFO(set << ": " << StatusField(pid, set));
        CHECK(HexField(pid, set) == 0);
      }
      CHECK(StatusField(pid, "NoNewPrivs") == "1");
    }
    CHECK(s.Call("bump")["outcome"] == "ok");
    CHECK(copy.Call("bump")["outcome"] == "ok");
  }

  TEST_CASE("tools.py's module body cannot reach the host, and the zygote still serves sessions" *
            doctest::timeout(120)) {
    std::string base = "/tmp/envforge_hardening_" + std::to_string(getpid());
    std::string escape = base + "_escape.txt";
    std::string target = base + "_target";
    std::string socket_path = base + ".sock";
    std::string bundle = ExecutableDirectory() + "/worker_hardening_" + std::to_string(getpid()) + ".envdb";
    struct Cleanup {
      std::vector<std::string> paths;
      ~Cleanup() {
        for (const std::string& path : paths) std::filesystem::remove(path);
      }
    } cleanup{{escape, target, socket_path, bundle}};
    std::filesystem::remove(escape);
    REQUIRE(WriteFileAtomically(target, "host file").ok());
    REQUIRE(chmod(target.c_str(), 0644) == 0);
    // A root-only unix socket on the file system, listening.
    UniqueFd listener(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    REQUIRE(listener.valid());
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::snprintf(address.sun_path, sizeof address.sun_path, "%s", socket_path.c_str());
    unlink(socket_path.c_str());
    REQUIRE(bind(listener.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(chmod(socket_path.c_str(), 0600) == 0);
    REQUIRE(listen(listener.get(), 4) == 0);

    Victim victim;
    WriteFixtureBundle(bundle, HostileToolsModule(victim.pid, escape, target, socket_path), HostileToolSchemas());
    {
      Zygote zygote(bundle);
      const Json& isolation = zygote.ready()["isolation"];
      Session s = zygote.Spawn("cheapest");
      Json reply = s.Call("attempts");
      REQUIRE_MESSAGE(reply["outcome"] == "ok", reply.dump());
      const Json& attempts = reply["content"]["attempts"];
      MESSAGE("import-time attempts: " << attempts.dump(2));
      REQUIRE(attempts.size() == 22);
      for (auto it = attempts.begin(); it != attempts.end(); ++it) {
        INFO(it.key() << ": " << it.value());
        CHECK(it.value() != "ok");
      }
      bool root = geteuid() == 0;
      bool landlock = isolation["zygote_landlock"] == "on";
      bool scope = isolation["zygote_scope"] == "on";
      bool seccomp = isolation["zygote_seccomp"] == "on";
      if (root) CHECK(reply["content"]["uid"].get<int>() >= 200000);
      // (a) files outside the scratch root, (b) secrets
      if (landlock) {
        CHECK(Contains(attempts["write_tmp"], "PermissionError"));
        CHECK(Contains(attempts["read_shadow"], "PermissionError"));
        CHECK(Contains(attempts["read_root_cgroup_procs_w"], "PermissionError"));
        CHECK(Contains(attempts["proc_environ"], "PermissionError"));
        CHECK(Contains(attempts["proc_mem"], "PermissionError"));
      }
      // (c) signals to host processes: Landlock scoping, though the zygote keeps CAP_KILL
      if (scope) {
        CHECK(Contains(attempts["kill_init"], "PermissionError"));
        CHECK(Contains(attempts["kill_victim"], "PermissionError"));
        CHECK(Contains(attempts["pidfd_kill_victim"], "PermissionError"));
      }
      // (d) mounts, namespaces, ptrace, modules, clocks, credentials: seccomp
      if (seccomp) {
        for (const char* name : {"mount_tmpfs", "unshare_mount", "unshare_user", "ptrace_victim", "load_module",
                                 "set_time", "setuid_root", "setuid_plain", "unix_connect"}) {
          INFO(name << ": " << attempts[name]);
          CHECK((Contains(attempts[name], "Operation not permitted") || Contains(attempts[name], "Permission denied")));
        }
      }
      // Capabilities and uid: no CAP_FOWNER/CAP_CHOWN/CAP_SYS_RESOURCE/CAP_SYS_NICE, not root.
      if (root) {
        for (const char* name : {"chmod_host", "chown_host", "prlimit_victim", "nice_victim", "cgroup_capture"}) {
          INFO(name << ": " << attempts[name]);
          CHECK(Contains(attempts[name], "PermissionError"));
        }
      }

      CHECK(victim.alive());
      CHECK_FALSE(std::filesystem::exists(escape));
      struct stat info {};
      REQUIRE(stat(target.c_str(), &info) == 0);
      CHECK((info.st_mode & 07777) == 0644);
      CHECK(info.st_uid == 0);
      auto victim_cgroups = ReadFileToString("/proc/" + std::to_string(victim.pid) + "/cgroup");
      REQUIRE(victim_cgroups.ok());
      CHECK(victim_cgroups->find("envforge") == std::string::npos);
      CHECK(HexField(victim.pid, "CapEff") != 0);  // untouched

      // The zygote still does its job: tool calls, judging, fork, sessions it kills on close.
      CHECK(s.Call("get_hotel", {{"name", "Alpha"}})["content"]["price"] == 100);
      Json verdict = zygote.Spawn("cheapest").Judge({R"({"cheapest": "Alpha"})"});
      CHECK(verdict["outcome"] == "ok");
      CHECK(verdict["verdicts"][0]["passed"] == true);
      Session copy = zygote.Fork(s);
      CHECK(copy.Call("bump")["content"] == 1);
      Session other = zygote.Spawn();
      REQUIRE(wire::WriteFrame(other.fd.get(), R"({"op":"close"})").ok());
      CHECK(zygote.Exited(other.pid)["exit_code"] == 0);
      CHECK(zygote.Shutdown() == 0);
    }
    CHECK(victim.alive());
  }

  TEST_CASE("a scratch_dir outside the zygote's scratch root is refused at spawn" * doctest::timeout(60)) {
    Zygote zygote(FixtureBundle());
    if (zygote.ready()["isolation"]["zygote_landlock"] != "on") return;
    Json limits = Limits();
    limits["scratch_dir"] = "/tmp/envforge_hardening_elsewhere/f1/s1";
    Json failed = zygote.SpawnExpectingFailure("", limits);
    CHECK(failed["op"] == "spawn_failed");
    CHECK(Contains(failed["error"], "scratch root /tmp/envforge-worker-test"));
    limits["scratch_dir"] = "/tmp/envforge-worker-test/f-inside/s1";
    Session s = zygote.Spawn("", limits);
    CHECK(s.scratch_dir == "/tmp/envforge-worker-test/f-inside/s1");
    CHECK(s.Call("bump")["outcome"] == "ok");
  }

  TEST_CASE("the janitor removes the cgroup directories of a zygote that was killed" * doctest::timeout(60)) {
    auto zygote = std::make_unique<Zygote>(FixtureBundle());
    if (zygote->ready()["isolation"]["cgroup"] != "on") return;
    Session s = zygote->Spawn();
    int pid = zygote->pid();
    std::string pids_dir = "/sys/fs/cgroup/pids/envforge/" + std::to_string(pid);
    std::string memory_dir = "/sys/fs/cgroup/memory/envforge/" + std::to_string(pid);
    CHECK(std::filesystem::exists(pids_dir));
    REQUIRE(kill(pid, SIGKILL) == 0);
    REQUIRE(waitpid(pid, nullptr, 0) == pid);
    zygote->Reaped();
    CHECK(s.AtEnd());  // the session died with its zygote
    bool gone = false;
    for (int attempt = 0; attempt < 500 && !gone; ++attempt) {
      gone = !std::filesystem::exists(pids_dir) && !std::filesystem::exists(memory_dir);
      if (!gone) usleep(10000);
    }
    CHECK(gone);
  }

  // ---------------------------------------------------------------------------------------------
  // Nothing outlives a session, nothing crosses environments: SysV IPC, other environments'
  // scratch files, disk.

  std::vector<std::pair<std::string, Json>> SchemasWith(std::vector<std::pair<std::string, Json>> extra) {
    auto object = [](Json properties, Json required) {
      return Json{
          {"type", "object"}, {"properties", properties}, {"required", required}, {"additionalProperties", false}};
    };
    std::vector<std::pair<std::string, Json>> tools = {
        {"get_hotel", object({{"name", {{"type", "string"}}}}, {"name"})},
        {"list_hotels",
         object({{"city", {{"type", "string"}}}, {"limit", {{"type", "integer"}, {"default", 10}}}}, {"city"})},
        {"bump", object(Json::object(), Json::array())},
    };
    for (auto& [name, properties] : extra) {
      Json required = Json::array();
      for (auto it = properties.begin(); it != properties.end(); ++it) required.push_back(it.key());
      tools.emplace_back(name, object(properties, required));
    }
    return tools;
  }

  std::string WriteBundle(const std::string& name, const std::string& module,
                          const std::vector<std::pair<std::string, Json>>& schemas) {
    std::string path = ExecutableDirectory() + "/worker_hardening_" + name + "_" + std::to_string(getpid()) + ".envdb";
    WriteFixtureBundle(path, module + kHotelTools, schemas);
    return path;
  }

  struct RemoveOnExit {
    std::vector<std::string> paths;
    ~RemoveOnExit() {
      for (const std::string& path : paths) std::filesystem::remove(path);
    }
  };

  // SysV IPC objects and a POSIX message queue, by key, through libc: created with mode 0666 so
  // only namespaces (not permissions) can keep another uid away from them.
  constexpr char kIpcTools[] = R"PY(
import ctypes
import os

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mq_open.restype = ctypes.c_int
IPC_CREAT = 0o1000


def _errno_of(result):
    return "ok" if result >= 0 else os.strerror(ctypes.get_errno())


def ipc_create(key: int):
    """Creates a shared memory segment, a message queue, a semaphore set and an mqueue."""
    shm = _libc.shmget(key, 1 << 20, IPC_CREAT | 0o666)
    msg = _libc.msgget(key, IPC_CREAT | 0o666)
    sem = _libc.semget(key, 1, IPC_CREAT | 0o666)
    mq = _libc.mq_open(b"/envforge-%d" % key, os.O_CREAT | os.O_RDWR, 0o666, None)
    return {"shm": _errno_of(shm), "msg": _errno_of(msg), "sem": _errno_of(sem), "mq": _errno_of(mq)}


def ipc_probe(key: int):
    """Looks the objects of ipc_create up by key."""
    return {"shm": _errno_of(_libc.shmget(key, 0, 0)), "msg": _errno_of(_libc.msgget(key, 0)),
            "sem": _errno_of(_libc.semget(key, 0, 0)),
            "mq": _errno_of(_libc.mq_open(b"/envforge-%d" % key, os.O_RDWR))}

IMPORT_TIME = ipc_create(@IMPORT_KEY@)


def import_time():
    """What the zygote created at import time."""
    return IMPORT_TIME
)PY";

  // The host's SysV tables (the test's IPC namespace): lines holding `key` (hex, as /proc prints it
  // in decimal: compared as a number in the first column).
  int HostIpcObjectsWithKey(long key) {
    int found = 0;
    for (const char* table : {"shm", "msg", "sem"}) {
      auto text = ReadFileToString(std::string("/proc/sysvipc/") + table);
      REQUIRE(text.ok());
      std::istringstream lines(*text);
      std::string line;
      std::getline(lines, line);
      while (std::getline(lines, line)) {
        if (std::strtol(line.c_str(), nullptr, 10) == key) ++found;
      }
    }
    return found;
  }

  std::string IpcModule(long import_key) {
    std::string module = kIpcTools;
    module.replace(module.find("@IMPORT_KEY@"), 12, std::to_string(import_key));
    return module;
  }

  std::vector<std::pair<std::string, Json>> IpcSchemas() {
    return SchemasWith({{"ipc_create", {{"key", {{"type", "integer"}}}}},
                        {"ipc_probe", {{"key", {{"type", "integer"}}}}},
                        {"import_time", Json::object()}});
  }

  TEST_CASE("SysV IPC and mqueues stay in the environment's own namespace and go with their session" *
            doctest::timeout(120)) {
    long key = 0x5EF00000L + getpid() % 0xFFFF * 4;
    long import_key = key + 1;
    RemoveOnExit cleanup{{WriteBundle("ipc_a", IpcModule(import_key), IpcSchemas()),
                          WriteBundle("ipc_b", IpcModule(import_key + 2) + "\n# b\n", IpcSchemas())}};
    {
      Zygote a(cleanup.paths[0]);
      Zygote b(cleanup.paths[1]);
      std::string layer = a.ready()["isolation"].value("zygote_ipc", "");
      if (geteuid() == 0) CHECK(layer == "on");
      if (geteuid() != 0 && layer != "on") return;  // off here: nothing below holds
      Session creator = a.Spawn();
      // (POSIX mqueues are files of the mqueue file system: Landlock, when on, denies them outright.)
      Json import_time = creator.Call("import_time");
      Json created = creator.Call("ipc_create", {{"key", key}});
      REQUIRE_MESSAGE(created["outcome"] == "ok", created.dump());
      MESSAGE("import time: " << import_time["content"].dump() << "; session: " << created["content"].dump());
      for (const Json* made : {&import_time["content"], &created["content"]}) {
        CHECK((*made)["shm"] == "ok");
        CHECK((*made)["msg"] == "ok");
        CHECK((*made)["sem"] == "ok");
      }
      // The host sees none of it: neither the session's objects nor the zygote's.
      CHECK(HostIpcObjectsWithKey(key) == 0);
      CHECK(HostIpcObjectsWithKey(import_key) == 0);
      // Another environment, under another uid, does not find them by key.
      Session stranger = b.Spawn();
      Json probed = stranger.Call("ipc_probe", {{"key", key}});
      REQUIRE_MESSAGE(probed["outcome"] == "ok", probed.dump());
      for (const char* kind : {"shm", "msg", "sem"}) {
        INFO(kind << ": " << probed["content"][kind]);
        CHECK(probed["content"][kind] == "No such file or directory");
      }
      CHECK(probed["content"]["mq"] != "ok");
      // A session of the same environment does (same namespace, mode 0666) ...
      Session neighbour = a.Spawn();
      Json seen = neighbour.Call("ipc_probe", {{"key", key}});
      CHECK(seen["content"]["shm"] == "ok");
      CHECK(seen["content"]["msg"] == "ok");
      CHECK(seen["content"]["sem"] == "ok");
      // ... until the creator's session ends: its SysV objects go with it.
      REQUIRE(wire::WriteFrame(creator.fd.get(), R"({"op":"close"})").ok());
      CHECK(a.Exited(creator.pid)["exit_code"] == 0);
      Json after = neighbour.Call("ipc_probe", {{"key", key}});
      CHECK(after["content"]["shm"] == "No such file or directory");
      CHECK(after["content"]["msg"] == "No such file or directory");
      CHECK(after["content"]["sem"] == "No such file or directory");
      CHECK(a.Shutdown() == 0);
      CHECK(b.Shutdown() == 0);
    }
    CHECK(HostIpcObjectsWithKey(key) == 0);
    CHECK(HostIpcObjectsWithKey(import_key) == 0);
    CHECK(HostIpcObjectsWithKey(import_key + 2) == 0);
  }

  // Environment A attacks environment B's session files: from its zygote at import time and from
  // one of its sessions.
  constexpr char kTrespasserTools[] = R"PY(
import os
import time

VICTIM_FILE = "@VICTIM_FILE@"
VICTIM_DIR = os.path.dirname(VICTIM_FILE)
VICTIM_FAMILY = os.path.dirname(VICTIM_DIR)
VICTIM_ZYGOTE_ROOT = "/proc/@VICTIM_ZYGOTE@/root"


def _describe(fn):
    try:
        result = fn()
        return "ok: %r" % (result,)
    except BaseException as exc:
        return "%s: %s" % (type(exc).__name__, exc)


def _write(path):
    with open(path, "w") as f:
        f.write("trespassed")


def _read(path):
    with open(path) as f:
        return f.read()


def trespass():
    return {
        "read": _describe(lambda: _read(VICTIM_FILE)),
        "write": _describe(lambda: _write(VICTIM_FILE)),
        "create": _describe(lambda: _write(VICTIM_DIR + "/planted.txt")),
        "list_dir": _describe(lambda: os.listdir(VICTIM_DIR)),
        "list_family": _describe(lambda: os.listdir(VICTIM_FAMILY)),
        "stat": _describe(lambda: os.stat(VICTIM_FILE).st_size),
        "proc_root_read": _describe(lambda: _read(VICTIM_ZYGOTE_ROOT + VICTIM_FILE)),
        "proc_root_write": _describe(lambda: _write(VICTIM_ZYGOTE_ROOT + VICTIM_FILE)),
    }


IMPORT_TIME = trespass()


def attempts():
    """At import time (in the zygote) and now, in a session."""
    return {"import_time": IMPORT_TIME, "session": trespass()}
)PY";

  TEST_CASE(
      "one environment's zygote and its sessions cannot reach another environment's "
      "session files" *
      doctest::timeout(120)) {
    std::string victim_bundle =
        ExecutableDirectory() + "/worker_hardening_victim_" + std::to_string(getpid()) + ".envdb";
    RemoveOnExit cleanup{{victim_bundle}};
    WriteFixtureBundle(victim_bundle);
    Zygote b(victim_bundle);
    Session owner = b.Spawn();
    Json wrote = owner.Call("write_scratch", {{"text", "secret of B"}});
    REQUIRE_MESSAGE(wrote["outcome"] == "ok", wrote.dump());
    std::string victim_file = owner.scratch_dir + "/note.txt";

    std::string module = kTrespasserTools;
    module.replace(module.find("@VICTIM_FILE@"), 13, victim_file);
    module.replace(module.find("@VICTIM_ZYGOTE@"), 15, std::to_string(b.pid()));
    cleanup.paths.push_back(WriteBundle("trespasser", module, SchemasWith({{"attempts", Json::object()}})));
    Zygote a(cleanup.paths.back());
    if (geteuid() == 0) CHECK(a.ready()["isolation"].value("zygote_scratch", "") == "on");
    Session trespasser = a.Spawn();
    Json reply = trespasser.Call("attempts");
    REQUIRE_MESSAGE(reply["outcome"] == "ok", reply.dump());
    MESSAGE("attempts on B's files: " << reply["content"].dump(2));
    // The private tmpfs hides B's files; Landlock keeps /proc/<B>/root (ptrace-mode access) away.
    bool isolated = geteuid() == 0 || (a.ready()["isolation"].value("zygote_scratch", "") == "on" &&
                                       a.ready()["isolation"].value("zygote_landlock", "") == "on");
    if (isolated) {
      for (const char* where : {"import_time", "session"}) {
        const Json& attempts = reply["content"][where];
        REQUIRE(attempts.size() == 8);
        for (auto it = attempts.begin(); it != attempts.end(); ++it) {
          INFO(where << " " << it.key() << ": " << it.value());
          CHECK(it.value().get<std::string>().rfind("ok", 0) != 0);
        }
      }
    }
    // B's file is untouched, nothing was planted, and B's sessions still work.
    CHECK(owner.Call("read_scratch")["content"] == "secret of B");
    Json listing = owner.Call("whoami");
    CHECK(listing["outcome"] == "ok");
    Session fresh = b.Spawn();
    CHECK(fresh.Call("write_scratch", {{"text", "again"}})["outcome"] == "ok");
    CHECK(fresh.Call("read_scratch")["content"] == "again");
    CHECK(a.Shutdown() == 0);
    CHECK(owner.Call("read_scratch")["content"] == "secret of B");
  }

  // Fills the scratch directory in one of several ways, past a budget.
  constexpr char kDiskTools[] = R"PY(
import os


def fill(how: str, mib: int):
    """Writes `mib` MiB into the scratch directory: "write", "fallocate", "sparse" or "files"."""
    size = mib << 20
    if how == "write":
        with open("big.bin", "wb") as f:
            for _ in range(mib):
                f.write(b"\x01" * (1 << 20))
    elif how == "fallocate":
        fd = os.open("alloc.bin", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            os.posix_fallocate(fd, 0, size)
        finally:
            os.close(fd)
    elif how == "sparse":
        # A sparse file costs nothing until its holes are written.
        fd = os.open("sparse.bin", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            os.ftruncate(fd, size)
            for offset in range(0, size, 1 << 20):
                os.pwrite(fd, b"\x02" * (1 << 20), offset)
        finally:
            os.close(fd)
    elif how == "files":
        os.makedirs("many", exist_ok=True)
        for i in range(mib * 64):
            with open("many/%d" % i, "wb") as f:
                f.write(b"\x03" * 16384)
    return size


def clean():
    """Removes what fill wrote."""
    for name in ("big.bin", "alloc.bin", "sparse.bin"):
        if os.path.exists(name):
            os.remove(name)
    if os.path.isdir("many"):
        for name in os.listdir("many"):
            os.remove("many/" + name)
        os.rmdir("many")
    return sorted(os.listdir("."))
)PY";

  // The mount points under `root` in /proc/<pid>/mountinfo ("self" for the test's own).
  std::vector<std::string> MountsUnder(const std::string& pid, const std::string& root) {
    std::vector<std::string> found;
    auto text = ReadFileToString("/proc/" + pid + "/mountinfo");
    if (!text.ok()) return found;
    std::istringstream lines(*text);
    for (std::string line; std::getline(lines, line);) {
      std::istringstream fields(line);
      std::string id, parent, device, source, mount_point;
      fields >> id >> parent >> device >> source >> mount_point;
      if (mount_point == root || mount_point.rfind(root + "/", 0) == 0) found.push_back(mount_point);
    }
    return found;
  }

  TEST_CASE(
      "a session's disk budget: writing past it fails with limit disk, other sessions go on, the host "
      "sees no mount" *
      doctest::timeout(120)) {
    const std::string root = "/tmp/envforge-worker-test";
    RemoveOnExit cleanup{
        {WriteBundle("disk", kDiskTools,
                     SchemasWith({{"fill", {{"how", {{"type", "string"}}}, {"mib", {{"type", "integer"}}}}},
                                  {"clean", Json::object()}}))}};
    {
      Zygote zygote(cleanup.paths[0]);
      const Json& isolation = zygote.ready()["isolation"];
      std::string layer = isolation.value("session_disk", "");
      if (geteuid() == 0) CHECK(layer == "on");
      if (geteuid() != 0 && layer != "on") return;  // off here: nothing below holds
      Json limits = Limits(5000);
      limits["disk_bytes"] = 8 << 20;
      Session s = zygote.Spawn("", limits);
      // The family's tmpfs is mounted in the zygote's namespace, not on the host.
      std::string family = s.scratch_dir.substr(0, s.scratch_dir.rfind('/'));
      auto in_zygote = MountsUnder(std::to_string(zygote.pid()), root);
      CHECK(std::find(in_zygote.begin(), in_zygote.end(), family) != in_zygote.end());
      CHECK(MountsUnder("self", root).empty());

      for (const char* how : {"write", "fallocate", "sparse", "files"}) {
        INFO(how);
        Json reply = s.Call("fill", {{"how", how}, {"mib", 32}});
        CHECK(reply["outcome"] == "tool_error");
        CHECK(reply["limit"] == "disk");
        CHECK(reply["message"].get<std::string>().find("disk budget is 8388608 bytes") != std::string::npos);
        CHECK(s.Call("clean")["outcome"] == "ok");
      }
      // Within the budget it works, and another session has a budget of its own.
      CHECK(s.Call("fill", {{"how", "write"}, {"mib", 6}})["outcome"] == "ok");
      Session other = zygote.Spawn("", limits);
      Json other_fill = other.Call("fill", {{"how", "fallocate"}, {"mib", 6}});
      CHECK_MESSAGE(other_fill["outcome"] == "ok", other_fill.dump());
      CHECK(other.Call("fill", {{"how", "write"}, {"mib", 1}})["outcome"] == "ok");
      // A session without a budget of its own is not limited by the others'.
      Json unlimited = Limits(5000);
      unlimited["disk_bytes"] = 0;
      Session plain = zygote.Spawn("", unlimited);
      CHECK(plain.Call("fill", {{"how", "write"}, {"mib", 16}})["outcome"] == "ok");
      // Its tmpfs goes with the family's last session.
      REQUIRE(wire::WriteFrame(s.fd.get(), R"({"op":"close"})").ok());
      CHECK(zygote.Exited(s.pid)["exit_code"] == 0);
      in_zygote = MountsUnder(std::to_string(zygote.pid()), root);
      CHECK(std::find(in_zygote.begin(), in_zygote.end(), family) == in_zygote.end());
      CHECK(MountsUnder("self", root).empty());
      CHECK(zygote.Shutdown() == 0);
    }
    CHECK(MountsUnder("self", root).empty());
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::worker_test
