// A kernel's connection file (Jupyter kernels.rst): transport, address, the five channel ports
// and the signing key.
//
// envforge's kernels use transport "ipc": `ip` is a path prefix and channel P's socket is the
// file "<ip>-<port>" (a sandboxed kernel has no reachable TCP loopback). "tcp" is accepted too
// (a kernel started by hand for debugging).
#pragma once

#include <string>

#include "base/json.h"
#include "base/status.h"

namespace envforge::sandbox::jupyter {

enum class Channel { kShell, kIopub, kStdin, kControl, kHeartbeat };

struct ConnectionInfo {
  std::string transport = "ipc";  // "ipc" or "tcp"
  std::string ip;                 // ipc: socket path prefix; tcp: an address
  int shell_port = 1;
  int iopub_port = 2;
  int stdin_port = 3;
  int control_port = 4;
  int hb_port = 5;
  std::string key;  // HMAC-SHA256 key; empty disables signing

  // The connection file's JSON (signature_scheme "hmac-sha256").
  Json ToJson() const;
  // Reads a connection file's JSON; InvalidArgument names a missing or mistyped field, an
  // unknown transport or signature scheme.
  static Result<ConnectionInfo> FromJson(const Json& value);
  // "ipc://<ip>-<port>" or "tcp://<ip>:<port>".
  std::string Address(Channel channel) const;
  // The same as seen from outside a sandbox whose `inside` prefix of ip is bind-mounted from
  // `outside` (ipc only; tcp addresses are returned as they are).
  std::string AddressFrom(Channel channel, const std::string& inside, const std::string& outside) const;
};

}  // namespace envforge::sandbox::jupyter
