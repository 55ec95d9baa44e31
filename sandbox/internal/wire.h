// The wire between the sandbox manager and its worker processes (the zygote and the sessions).
//
// FRAMES. Every message is one frame: a 4-byte little-endian unsigned length N, then N bytes of
// UTF-8 JSON (one object). N must be 1..kMaxFrameBytes; a larger or zero length is a protocol
// error and the reader drops the peer. Descriptors may ride on a frame's first byte
// (SCM_RIGHTS; see SendFrameWithFd), on the frames that say so below and on no other: the
// manager closes any other descriptor on arrival, and one from a session or the zygote is a
// protocol violation (the session, or the zygote, is killed), as is any other ancillary data.
// The manager allocates for a frame as its bytes arrive, never what a header announces; a
// session's limit is the manager's max_frame_bytes (default kMaxFrameBytes).
//
// PROCESSES. The manager starts one zygote per environment: `envforge-worker zygote --bundle
// PATH --control-fd 3 [--scratch-root DIR]` with fd 3 one end of a socket pair (the control
// channel). The zygote embeds CPython, loads the bundle, compiles tools.py and every task's
// solution and verifier once, enters an empty network namespace, then serves the control channel.
// A session is a fork() of the zygote; it talks to the manager over its own socket pair.
// The zygote drops the reserved tables (_env, _tools, _tasks, _files) from its in-memory copy
// of the data before any tool code runs: tools never see verifiers, solutions or prompts.
// tools.py's module body runs once, in the zygote, after the zygote confined itself (ISOLATION
// of the zygote below): bundles must come from `envforge env pack`, which analyzes it, but the
// zygote does not rely on that.
//
// CONTROL CHANNEL (manager <-> zygote)
//   zygote -> {"op":"ready","pid":P,"python":"3.11.2","isolation":{"network":S,"landlock":S,
//              "seccomp":S,"cgroup":S,"uid":S,"zygote_caps":S,"zygote_uid":S,
//              "zygote_landlock":S,"zygote_scope":S,"zygote_seccomp":S},"landlock_abi":N,
//              "cgroup_version":"v1"|"v2"|"","tools":N,"tasks":N,"data_bytes":N}
//              S = "on" or "off: <why>" (logged by the manager); a layer is never skipped silently.
//              network..uid: the sessions' layers; zygote_*: the zygote's own (see below).
//          or {"op":"fatal","error":"<what failed, naming the bundle file>"} and exit(1)
//   manager -> {"op":"spawn","id":K,"task":"<task id or empty>","limits":LIMITS}
//              with the session's socket end attached (SCM_RIGHTS)
//   zygote -> {"op":"spawned","id":K,"pid":P}  |  {"op":"spawn_failed","id":K,"error":"..."}
//              (spawn_failed: no socket attached, unknown task, malformed LIMITS, no process)
//   manager -> {"op":"adopt","id":K,"pid":P,"limits":LIMITS}  (a session forked from a session:
//              the zygote moves it into its own cgroup with LIMITS' memory_bytes/max_processes
//              and sets its RLIMIT_CPU to cpu_seconds (best effort: it cannot raise the hard
//              limit the copy inherited); wall_time_ms and max_output_bytes stay the parent's,
//              and scratch_dir is ignored: the copy already has its own)
//   zygote -> {"op":"adopted","id":K,"pid":P} | {"op":"adopt_failed","id":K,"error":"..."}
//              Adopt before closing the parent: a copy not yet adopted still sits in its parent's
//              cgroup and dies with the parent.
//   zygote -> {"op":"exited","id":K,"pid":P,"exit_code":C|null,"signal":S|null,"limit":L|null,
//              "cpu_ms":N,"max_rss_kb":N} for every session process it reaps (K: the spawn's or
//              adopt's id); L = "memory" (cgroup OOM kill), "cpu_time" (SIGXCPU or the SIGKILL
//              of RLIMIT_CPU's hard limit), "processes" (pids.max was hit and the session died of
//              a signal other than SIGKILL), or null. Before reporting, the zygote kills whatever
//              is left in the session's cgroup and removes its scratch directory.
//   manager -> {"op":"shutdown"}: the zygote kills every session, reaps them and exits(0).
//   No zygote frame carries a descriptor. The zygote's stdout and stderr are a pipe the manager
//   drains and logs escaped, at warn level, rate-limited (zygote_process.h).
//   The zygote also exits (killing its sessions) when the control channel closes, and on
//   SIGTERM/SIGINT/SIGHUP. Sessions die with the zygote (PR_SET_PDEATHSIG), whatever the cause.
//
//   LIMITS = ToWireLimits of sandbox/sandbox_limits.h: {"wall_time_ms","cpu_seconds",
//             "memory_bytes","max_output_bytes","max_processes","max_file_bytes" (RLIMIT_FSIZE),
//             "max_open_files" (RLIMIT_NOFILE),"disk_bytes" (the family's tmpfs size, see
//             "scratch" below),"scratch_dir":"/abs/path"}. Every key is optional: the zygote
//             reads LIMITS with SandboxLimitsFromJson, the one parser, so an absent key takes
//             SandboxLimits' default and a bad value is a spawn_failed naming the field.
//   0 for memory_bytes or max_processes means unlimited; for disk_bytes, no budget of its own.
//
// ISOLATION of the zygote (before it runs any environment code; every process below inherits it):
//   zygote_caps      bounding/permitted/effective = CAP_SETUID, CAP_SETGID, CAP_DAC_OVERRIDE,
//                    CAP_KILL, CAP_SYS_PTRACE, CAP_SETPCAP (none when not root); no_new_privs.
//   zygote_uid       as root it becomes its own uid (its uid block's slot 0, see "uid" below).
//   zygote_landlock  read-only /usr, /lib*, /bin, /sbin, /etc/ld.so.cache, /proc; read-write
//                    /dev/null, the scratch root (--scratch-root) and its envforge/<pid> cgroup
//                    directories; nothing else; TCP denied.
//   zygote_scope     Landlock ABI >= 6: signals and abstract unix sockets only within its own
//                    domain: it kills its sessions, no other process.
//   zygote_seccomp   the sessions' deny-list (below) plus: set*id calls other than setresuid/
//                    setresgid to its families' uids, setgroups with groups, socket(AF_UNIX),
//                    socket(AF_VSOCK), inotify_add_watch, xattr writes.
//   zygote_ipc       its own IPC namespace (SysV shm/msg/sem, POSIX mqueues): invisible to the
//                    host and other zygotes, gone with the zygote; a family's SysV objects are
//                    removed when the family's last session is reaped.
//   zygote_scratch   its own mount namespace (a slave of the host's) with a tmpfs on the scratch
//                    root: every session file lives there, out of other zygotes' and the host's
//                    reach, and nothing is mounted on the host.
//   session_disk     the mount helper that gives each family a disk budget (disk_bytes).
//   Threat model and what the zygote can still do: sandbox/worker/README.md.
//
// ISOLATION of a session (worker side; applied before "ready", in this order):
//   cgroup     joined first: <cgroup mount>/{memory,pids}/envforge/<zygote pid>/s<N> on v1
//              (memory.limit_in_bytes = memory_bytes, pids.max = max_processes), or
//              /sys/fs/cgroup/envforge/<zygote pid>/s<N> on v2 (memory.max, memory.swap.max=0,
//              pids.max). The zygote forks session processes ahead of demand ("warm", 2 of them)
//              so the cgroup join, slow on v1, is off the spawn path.
//   rlimits    RLIMIT_CPU cpu_seconds (hard: +1 s), RLIMIT_CORE 0, RLIMIT_FSIZE max_file_bytes,
//              RLIMIT_NOFILE max_open_files, RLIMIT_DATA = the zygote's data + 7/8 of
//              memory_bytes: Python raises MemoryError (tool_error, limit "memory", the session
//              lives on) before the cgroup, which also counts copy-on-write copies, OOM-kills.
//              Without a pids cgroup: RLIMIT_NPROC = 8 * max_processes (per uid: per family).
//   scratch    A fork FAMILY is one spawned session and the copies forked from it. Its
//              directory is scratch_dir's parent; the session works in scratch_dir (its cwd).
//              Without scratch_dir: <scratch-root>/z<zygote pid>/f<N>/s<N> (--scratch-root,
//              default /tmp/envforge-scratch). When the family directory does not exist yet the
//              zygote creates it (mode 0700, owned by the family uid), grants Landlock
//              read-write on it, and removes it with the family's last member; copies then get
//              sibling scratch directories in it. When it already exists, only scratch_dir is
//              granted and "fork" fails (infra_error): give every spawn its own family
//              directory, e.g. <root>/f<id>/s<id>, and its forks <root>/f<id>/s<fork id>.
//              scratch_dir must be inside --scratch-root (spawn_failed otherwise, when the
//              zygote's Landlock is on). The session creates both as its family's uid.
//              With disk_bytes > 0 (and "session_disk" on) a new family directory is a tmpfs of
//              disk_bytes (inodes: one per 4 KiB), owned by the family uid, shared by the family's
//              copies: writing past it is ENOSPC, a tool_error with limit "disk".
//   uid        one per family, 200000 + (zygote pid % 32768) * 65536 + family slot (gid the
//              same, no supplementary groups): families cannot signal or read each other, across
//              zygotes too; copies share their family's uid.
//   caps       then every capability set is emptied (bounding included).
//   landlock   no_new_privs, then read-only /usr, /lib*, /bin, /sbin, read-write /dev/null and
//              the family directory, nothing else (/etc, /tmp, /proc, /root: denied); TCP bind
//              and connect denied (ABI >= 4); abstract unix sockets and signals scoped to the
//              session (ABI >= 6). A domain nested in the zygote's.
//   seccomp    default allow; EPERM for ptrace, process_vm_*, mount family, pivot_root, chroot,
//              io_uring_*, bpf, perf_event_open, keyctl/add_key/request_key, module and kexec
//              calls, unshare, setns, userfaultfd, personality, clone with any CLONE_NEW* flag
//              (masked compare), ioctl TIOCSTI/TIOCLINUX; ENOSYS for clone3; other
//              architectures' syscalls kill the process. Stacked on the zygote's filter.
//   network    the zygote unshares an empty network namespace once at start (loopback down).
//   Python-level rules for solutions and verifiers (restricted builtins, import allow-list,
//   read-only proxies of the allowed modules, formatters refusing underscore fields, the static
//   checks of `envforge-worker analyze`) are defence in depth, not a security boundary; the layers
//   above are, and so is the process boundary of VERDICTS below.
//
// VERDICTS. No verdict is computed in a process that ran episode code (a tool call, a solution):
// whoever runs code there can rewrite the runtime. The manager judges every answer (submit_result,
// session solve, env check, the audit, replays) in a JUDGE PROCESS: a fresh spawn of the pristine
// zygote (whose only Python code so far is tools.py's module body, the environment's own) that is
// sent one "judge" request and then closed. The episode's session only hands the answer out
// (submit_result's argument, or solve's answer_text); it never receives submit_result nor judge.
//
// SESSION CHANNEL (manager <-> one session)
//   session -> {"op":"ready","pid":P,"scratch_dir":D}  first frame, with two descriptors attached:
//              a pidfd of the session, then the read end of a pipe whose write end the session
//              made its stderr (fd 2); sent once isolation is in place (cgroup joined, rlimits,
//              uid, landlock, seccomp). The only session frame that carries descriptors; the
//              manager drains the pipe (bounded, per session; session_manager.h "Stderr").
//              A failure before that: {"op":"fatal","error":"..."}, then exit(1).
//   The session answers requests one at a time, in order.
//   manager -> {"op":"call","id":K,"name":N,"arguments":{...}}   (arguments already validated
//              against the tool's schema by the manager; never "submit_result", which the
//              manager judges itself: a session answers it invalid_call)
//   session -> {"id":K,"outcome":"ok","content":JSON,"stdout":"..."?}
//            | {"id":K,"outcome":"tool_error","message":"ValueError: unknown hotel 'X'","limit":L?,
//               "where":"tools.py:12 (get_hotel)"?}
//            | {"id":K,"outcome":"timeout","limit":"wall_time","message":"..."}  (soft timeout:
//              the session interrupted the tool itself and lives on)
//            | {"id":K,"outcome":"infra_error","message":"..."}  (e.g. the verifier raised or
//              returned something that is not a verdict)
//            | {"id":K,"outcome":"invalid_call","message":"..."}  (unknown tool, submit_result)
//     stdout: what the call printed (sys.stdout and sys.stderr), at most 4 MiB, marked when cut.
//     tool_error limits: "memory" (MemoryError), "output_size" (the JSON result is larger than
//     max_output_bytes; the message gives both sizes), "processes" (a fork refused at pids.max),
//     "disk" (ENOSPC/EDQUOT with a disk budget: the message gives the budget).
//     A result that is not JSON (a set, NaN) is a tool_error saying so.
//     Wall time: SIGALRM raises a BaseException in the running tool, verifier or solution (so
//     `except Exception` cannot swallow it) and interrupts a running SQLite statement; a call that
//     swallowed it anyway is still reported as a timeout. Code stuck in C is the manager's hard
//     deadline's job.
//   manager -> {"op":"solve","id":K}  runs the task's gold solution with the tools proxy
//   session -> {"id":K,"outcome":"ok","answer":JSON,"answer_text":"<json text submitted>",
//               "stdout":"..."?}
//            | {"id":K,"outcome":"tool_error","message":"..."}  (solution raised or broke a rule)
//            | {"id":K,"outcome":"timeout","limit":"wall_time","message":"..."}
//     The solution runs in a restricted namespace: safe builtins only (no open, eval, exec,
//     compile, getattr, globals, vars, input, ...), imports limited to json, math, itertools,
//     functools, collections, re, datetime, statistics, heapq, bisect; sources that break the
//     static rules of `envforge-worker analyze` are refused before they run. `tools.name(...)`
//     takes keyword or positional arguments (mapped by the tool's parameter order), validates
//     them against the tool's schema like an agent's call (ToolCallError otherwise), raises
//     ToolError("name: ExcType: message") when the tool raises, and returns the result JSON
//     round-tripped. A rule violation fails the solve even when the solution caught it.
//     answer_text = the answer itself when it is a str, else its compact JSON.
//   manager -> {"op":"judge","id":K,"judge":"verifier"|"oracle","answers":["<answer text>",...]}
//   session -> {"id":K,"outcome":"ok","verdicts":[V,...]}  one V per answer, in order:
//              {"passed":b,"score":f,"reasons":[...]} or {"defect":"<what the judge did>",
//              "limit":L?}. Served only by a session that never ran a tool or a solution (else
//              invalid_call): the manager's judge process. Each answer text is parsed as JSON
//              when it is valid JSON, else passed as the raw string, and judged under the wall
//              time per answer on the verifiers' read-only view of the pristine data (reads only:
//              no write, no PRAGMA but the schema ones, no TEMP object, no ATTACH, no transaction;
//              see db_module.h). A bool is {"passed":b,"score":1.0|0.0,"reasons":[]}; a dict
//              needs a bool "passed" (score defaults from it, reasons a list of strings). A judge
//              that raises, times out, breaks a rule or returns anything else is a defect naming
//              the task's verifier or oracle; its prints are discarded (they could reveal the
//              expected answer). The judge's module is executed once per batch (module-level
//              state persists across one batch's answers; the data cannot change). Reasons are
//              capped (16 and "... N more", 400 characters each). A task without the requested
//              judge -> invalid_call. The manager parses this reply as untrusted input (the
//              process ran the environment's code): anything but these shapes is an error.
//   manager -> {"op":"fork","id":K,"scratch_dir":D?}  with a new socket end attached: the session
//              copies its scratch directory to D (default <family dir>/c<pid>-<n>; D must be
//              directly in the family directory), clones itself (CLONE_PARENT: the copy is the
//              zygote's child) and the copy serves that socket, starting with its own "ready"
//              frame (with its pidfd and a stderr pipe of its own). Then send "adopt" to the
//              zygote.
//   session -> {"id":K,"outcome":"ok","pid":P,"scratch_dir":D} | {"id":K,"outcome":"infra_error",...}
//   manager -> {"op":"bind","id":K,"task":T}  gives a session spawned with no task (a warm one,
//              started ahead of demand: session_manager.h "Warm sessions") its task, before its
//              first call or judgement. Refused (invalid_call) for an unknown task, a session that
//              has a task already or that ran a tool or a solution.
//   session -> {"id":K,"outcome":"ok"} | {"id":K,"outcome":"invalid_call","message":"..."}
//   manager -> {"op":"close"}: the session exits(0) at once, no reply. So does the end of stream.
//   The manager enforces a hard deadline of wall_time_ms + grace per call: past it, it kills the
//   session (pidfd) and the call's outcome is "timeout" with session_alive = false.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/fd.h"
#include "base/status.h"

namespace envforge::sandbox::wire {

inline constexpr uint32_t kMaxFrameBytes = 64u << 20;
inline constexpr size_t kMaxFdsPerFrame = 4;

// Encodes the 4-byte little-endian length prefix followed by the payload.
std::string EncodeFrame(std::string_view payload);
// Decodes a length prefix; 0 or > max_bytes is an error.
Result<uint32_t> DecodeLength(const char prefix[4], uint32_t max_bytes = kMaxFrameBytes);

// Blocking helpers for the worker side (and tests).
Status WriteFrame(int fd, std::string_view payload);
Status SendFrameWithFd(int socket, std::string_view payload, int fd_to_send);
// Like SendFrameWithFd with 1..kMaxFdsPerFrame descriptors, in order, in one SCM_RIGHTS message.
Status SendFrameWithFds(int socket, std::string_view payload, const std::vector<int>& fds);
// Reads one frame. Unavailable on a clean end of stream at a frame boundary.
Result<std::string> ReadFrame(int fd, uint32_t max_bytes = kMaxFrameBytes);
// Reads one frame, returning any descriptor that rode on its first byte in *fd.
Result<std::string> ReadFrameWithFd(int socket, UniqueFd* fd, uint32_t max_bytes = kMaxFrameBytes);

}  // namespace envforge::sandbox::wire
