// The limits a sandboxed session runs under, and their JSON forms.
//
// Every field has a default fit for synthesized environments; a SessionManager takes one set as
// its default and a session may override it at create time. The worker enforces the soft limits
// (wall time per call, CPU seconds, memory, output size, process count, disk); the manager
// enforces the hard deadline of wall_time + kill_grace per call by killing the session.
//
// JSON forms:
//   ToJson           {"wall_time_ms", "kill_grace_ms", "cpu_seconds", "memory_bytes",
//                     "max_output_bytes", "max_processes", "max_file_bytes", "max_open_files",
//                     "disk_bytes"}
//                    (configuration; FromJson reads it back)
//   ToWireLimits     the LIMITS object of sandbox/internal/wire.h: the same fields without
//                    kill_grace_ms (the manager keeps that), plus "scratch_dir"
// This is the one definition of the limits and their defaults: the worker compiles this file
// and reads LIMITS with SandboxLimitsFromJson too (absent keys: these defaults).
//
// Thread safety: plain values.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "base/json.h"
#include "base/status.h"

namespace envforge::sandbox {

struct SandboxLimits {
  // Per tool call (and per gold-solution run): the session interrupts the tool past this and
  // answers outcome timeout, limit wall_time (the session lives on).
  std::chrono::milliseconds wall_time{10'000};
  // The manager's hard deadline is wall_time + kill_grace: past it the session is killed
  // (SIGKILL through its pidfd) and the call answers timeout with session_alive = false.
  std::chrono::milliseconds kill_grace{1'000};
  int64_t cpu_seconds = 60;  // RLIMIT_CPU of the session process (SIGXCPU: limit cpu_time)
  // The session's memory: cgroup memory.max, and RLIMIT_DATA a little below it so Python raises
  // MemoryError (tool_error, limit memory) before the cgroup OOM-kills (crashed, limit memory).
  // 0: unlimited.
  int64_t memory_bytes = int64_t{512} << 20;
  int64_t max_output_bytes = int64_t{1} << 20;  // a tool's JSON result (tool_error, limit output_size)
  int64_t max_processes = 16;                   // processes and threads of one session (pids.max); 0: unlimited
  int64_t max_file_bytes = int64_t{512} << 20;  // largest file a session may write (RLIMIT_FSIZE)
  int64_t max_open_files = 256;                 // RLIMIT_NOFILE
  // The disk budget of a session family (a fresh session and the copies forked from it, which
  // start as copies of its files): a tmpfs of this size mounted on the family's scratch
  // directory, in the zygote's private mount namespace (nothing is mounted on the host). Writing
  // past it (write, fallocate, sparse files made dense, many files: inodes are bounded too, one
  // per 4 KiB) fails with ENOSPC: tool_error, limit "disk". Freed when the family's last session
  // ends. The pages are also charged to the writing session's memory cgroup, so memory_bytes
  // bounds them too: a session whose interpreter plus files pass memory_bytes is OOM-killed
  // (crashed, limit "memory") before it meets a larger disk budget; keep disk_bytes well below
  // memory_bytes. 0: no budget of its own (the environment's shared scratch tmpfs, bounded only
  // by memory_bytes). Off (not enforced, reported "session_disk": "off: ..." in the zygote's
  // isolation report) when the worker is not root, has no Landlock or no mount namespace.
  int64_t disk_bytes = int64_t{256} << 20;

  bool operator==(const SandboxLimits&) const = default;
};

// InvalidArgument naming the field when one is out of range: wall_time >= 1 ms, kill_grace >= 0,
// cpu_seconds >= 1, memory_bytes 0 or >= 16 MiB, max_output_bytes >= 1, max_processes >= 0,
// max_file_bytes >= 1, max_open_files >= 16, disk_bytes 0 or >= 1 MiB.
Status ValidateLimits(const SandboxLimits& limits);

Json ToJson(const SandboxLimits& limits);
Json ToWireLimits(const SandboxLimits& limits, const std::string& scratch_dir);

// Reads a (possibly partial) limits object over `base`: absent fields keep base's values.
// Accepts the keys of ToJson plus "scratch_dir" (ignored; the manager assigns scratch
// directories), so ToWireLimits output reads back too. InvalidArgument names the offending field:
// "limits.memory_bytes: expected a positive integer, got \"lots\"", unknown keys included.
Result<SandboxLimits> SandboxLimitsFromJson(const Json& json, const SandboxLimits& base = {});

}  // namespace envforge::sandbox
