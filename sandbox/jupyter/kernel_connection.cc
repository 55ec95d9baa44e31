// Connection files.
#include "sandbox/jupyter/kernel_connection.h"

namespace envforge::sandbox::jupyter {
namespace {

int PortOf(const ConnectionInfo& info, Channel channel) {
  switch (channel) {
    case Channel::kShell: return info.shell_port;
    case Channel::kIopub: return info.iopub_port;
    case Channel::kStdin: return info.stdin_port;
    case Channel::kControl: return info.control_port;
    case Channel::kHeartbeat: return info.hb_port;
  }
  return 0;
}

}  // namespace

Json ConnectionInfo::ToJson() const {
  return {{"transport", transport},
          {"ip", ip},
          {"shell_port", shell_port},
          {"iopub_port", iopub_port},
          {"stdin_port", stdin_port},
          {"control_port", control_port},
          {"hb_port", hb_port},
          {"key", key},
          {"signature_scheme", "hmac-sha256"},
          {"kernel_name", "python3"}};
}

Result<ConnectionInfo> ConnectionInfo::FromJson(const Json& value) {
  if (!value.is_object()) return InvalidArgumentError("connection file: not a JSON object");
  ConnectionInfo info;
  auto text = [&](const char* name, std::string* out) -> Status {
    auto it = value.find(name);
    if (it == value.end() || !it->is_string()) {
      return InvalidArgumentError(std::string("connection file: '") + name + "' must be a string");
    }
    *out = it->get<std::string>();
    return Status::Ok();
  };
  auto port = [&](const char* name, int* out) -> Status {
    auto it = value.find(name);
    if (it == value.end() || !it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 65535) {
      return InvalidArgumentError(std::string("connection file: '") + name + "' must be a port number");
    }
    *out = it->get<int>();
    return Status::Ok();
  };
  ENVFORGE_RETURN_IF_ERROR(text("transport", &info.transport));
  ENVFORGE_RETURN_IF_ERROR(text("ip", &info.ip));
  ENVFORGE_RETURN_IF_ERROR(text("key", &info.key));
  ENVFORGE_RETURN_IF_ERROR(port("shell_port", &info.shell_port));
  ENVFORGE_RETURN_IF_ERROR(port("iopub_port", &info.iopub_port));
  ENVFORGE_RETURN_IF_ERROR(port("stdin_port", &info.stdin_port));
  ENVFORGE_RETURN_IF_ERROR(port("control_port", &info.control_port));
  ENVFORGE_RETURN_IF_ERROR(port("hb_port", &info.hb_port));
  if (info.transport != "ipc" && info.transport != "tcp") {
    return InvalidArgumentError("connection file: transport '" + info.transport + "' is neither ipc nor tcp");
  }
  auto scheme = value.find("signature_scheme");
  if (scheme != value.end() && *scheme != "hmac-sha256") {
    return InvalidArgumentError("connection file: signature_scheme " + scheme->dump() + " is not hmac-sha256");
  }
  return info;
}

std::string ConnectionInfo::Address(Channel channel) const {
  const int port = PortOf(*this, channel);
  if (transport == "ipc") return "ipc://" + ip + "-" + std::to_string(port);
  return "tcp://" + ip + ":" + std::to_string(port);
}

std::string ConnectionInfo::AddressFrom(Channel channel, const std::string& inside, const std::string& outside) const {
  if (transport != "ipc" || ip.compare(0, inside.size(), inside) != 0) return Address(channel);
  return "ipc://" + outside + ip.substr(inside.size()) + "-" + std::to_string(PortOf(*this, channel));
}

}  // namespace envforge::sandbox::jupyter
