// The wire between the sandbox manager and its worker processes (the zygote and the sessions).
//
// FRAMES. Every message is one frame: a 4-byte little-endian unsigned length N, then N bytes of
// UTF-8 JSON (one object). N must be 1..kMaxFrameBytes; a larger or zero length is a protocol
// error and the reader drops the peer. A descriptor may ride on a frame's first byte
// (SCM_RIGHTS; see SendFrameWithFd).
//
// PROCESSES. The manager starts one zygote per environment: `envforge-worker zygote --bundle
// PATH --control-fd 3 [--scratch-root DIR]` with fd 3 one end of a socket pair (the control
// channel). The zygote embeds CPython, loads the bundle, compiles tools.py and every task's
// solution and verifier once, enters an empty network namespace, then serves the control channel.
// A session is a fork() of the zygote; it talks to the manager over its own socket pair.
//
// CONTROL CHANNEL (manager <-> zygote)
//   zygote -> {"op":"ready","pid":P,"python":"3.11.2","isolation":{"network":S,"landlock":S,
//              "seccomp":S,"cgroup":S,"uid":S}}   S = "on" or "off: <why>" (logged by the manager)
//          or {"op":"fatal","error":"<what failed>"} and exit(1)
//   manager -> {"op":"spawn","id":K,"task":"<task id or empty>","limits":LIMITS}
//              with the session's socket end attached (SCM_RIGHTS)
//   zygote -> {"op":"spawned","id":K,"pid":P}  |  {"op":"spawn_failed","id":K,"error":"..."}
//   manager -> {"op":"adopt","id":K,"pid":P,"limits":LIMITS}  (a session forked from a session:
//              the zygote moves it into its own cgroup and scratch directory)
//   zygote -> {"op":"adopted","id":K,"pid":P} | {"op":"adopt_failed","id":K,"error":"..."}
//   zygote -> {"op":"exited","pid":P,"exit_code":C|null,"signal":S|null,"limit":L|null}
//              for every session process it reaps; L = "memory" (cgroup OOM / failcnt),
//              "cpu_time" (SIGXCPU or RLIMIT_CPU kill), "processes", or null.
//   manager -> {"op":"shutdown"}: the zygote kills every session, reaps them and exits(0).
//   The zygote also exits (killing its sessions) when the control channel closes.
//
//   LIMITS = {"wall_time_ms":10000,"cpu_seconds":60,"memory_bytes":536870912,
//             "max_output_bytes":1048576,"max_processes":16,"scratch_dir":"/abs/path"}
//
// SESSION CHANNEL (manager <-> one session)
//   session -> {"op":"ready","pid":P}  first frame, with a pidfd of the session attached, sent once
//              isolation is in place (cgroup joined, rlimits, uid, landlock, seccomp).
//   manager -> {"op":"call","id":K,"name":N,"arguments":{...}}   (arguments already validated
//              against the tool's schema by the manager; name may be "submit_result")
//   session -> {"id":K,"outcome":"ok","content":JSON,"stdout":"..."?}
//            | {"id":K,"outcome":"tool_error","message":"ValueError: unknown hotel 'X'","limit":L?}
//            | {"id":K,"outcome":"timeout","limit":"wall_time","message":"..."}  (soft timeout:
//              the session interrupted the tool itself and lives on)
//            | {"id":K,"outcome":"infra_error","message":"..."}  (e.g. the verifier raised or
//              returned something that is not a verdict)
//            | {"id":K,"outcome":"invalid_call","message":"..."}  (unknown tool)
//     submit_result's ok content: {"passed":bool,"score":float,"reasons":[str],"verifier_version":V}
//   manager -> {"op":"solve","id":K}  runs the task's gold solution with the tools proxy
//   session -> {"id":K,"outcome":"ok","answer":JSON,"answer_text":"<json text submitted>"}
//            | {"id":K,"outcome":"tool_error","message":"..."}  (solution raised or broke a rule)
//   manager -> {"op":"fork","id":K}  with a new socket end attached: the session clones itself
//              (CLONE_PARENT: the copy is the zygote's child) and the copy serves that socket,
//              starting with its own "ready" frame (with its pidfd).
//   session -> {"id":K,"outcome":"ok","pid":P}
//   manager -> {"op":"close"}: the session exits(0) at once, no reply.
//   The manager enforces a hard deadline of wall_time_ms + grace per call: past it, it kills the
//   session (pidfd) and the call's outcome is "timeout" with session_alive = false.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/fd.h"
#include "base/status.h"

namespace envforge::sandbox::wire {

inline constexpr uint32_t kMaxFrameBytes = 64u << 20;

// Encodes the 4-byte little-endian length prefix followed by the payload.
std::string EncodeFrame(std::string_view payload);
// Decodes a length prefix; 0 or > max_bytes is an error.
Result<uint32_t> DecodeLength(const char prefix[4], uint32_t max_bytes = kMaxFrameBytes);

// Blocking helpers for the worker side (and tests).
Status WriteFrame(int fd, std::string_view payload);
Status SendFrameWithFd(int socket, std::string_view payload, int fd_to_send);
// Reads one frame. Unavailable on a clean end of stream at a frame boundary.
Result<std::string> ReadFrame(int fd, uint32_t max_bytes = kMaxFrameBytes);
// Reads one frame, returning any descriptor that rode on its first byte in *fd.
Result<std::string> ReadFrameWithFd(int socket, UniqueFd* fd, uint32_t max_bytes = kMaxFrameBytes);

}  // namespace envforge::sandbox::wire
