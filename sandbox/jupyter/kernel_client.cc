// The Jupyter client: sockets, the request/reply cycle, interrupts and the heartbeat.
#include "sandbox/jupyter/kernel_client.h"

#include <deque>
#include <iterator>
#include <unordered_set>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "base/log.h"
#include "sandbox/jupyter/jupyter_message.h"

namespace envforge::sandbox::jupyter {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kMaxFrameBytes = 32 << 20;
constexpr size_t kSignatureHistory = 4096;
constexpr std::chrono::milliseconds kPollSlice{20};

zmq::context_t& SharedContext() {
  static zmq::context_t context(1);
  return context;
}

zmq::socket_t OpenSocket(zmq::socket_type type, const std::string& address, const std::string& identity) {
  zmq::socket_t socket(SharedContext(), type);
  socket.set(zmq::sockopt::linger, 0);
  socket.set(zmq::sockopt::maxmsgsize, kMaxFrameBytes);
  if (!identity.empty()) socket.set(zmq::sockopt::routing_id, identity);
  if (type == zmq::socket_type::sub) socket.set(zmq::sockopt::subscribe, "");
  socket.connect(address);
  return socket;
}

int Milliseconds(Clock::duration duration) {
  return static_cast<int>(
      std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(duration).count()));
}

}  // namespace

std::string_view ExecuteOutcomeName(ExecuteOutcome outcome) {
  switch (outcome) {
    case ExecuteOutcome::kOk: return "ok";
    case ExecuteOutcome::kError: return "error";
    case ExecuteOutcome::kTimeout: return "timeout";
    case ExecuteOutcome::kCrashed: return "crashed";
  }
  return "?";
}

struct KernelClient::Impl {
  ConnectionInfo info;
  MessageSigner signer;
  std::string session = RandomHexId();
  zmq::socket_t shell, iopub, control, heartbeat;
  Json kernel_info;
  int64_t rejected = 0;
  std::unordered_set<std::string> seen_signatures;
  std::deque<std::string> signature_order;

  explicit Impl(const ConnectionInfo& connection) : info(connection), signer(connection.key) {}

  // Sends a request on `socket`; returns its msg_id.
  std::string Send(zmq::socket_t& socket, std::string_view type, Json content) {
    JupyterMessage message;
    message.header = NewHeader(type, session);
    message.content = std::move(content);
    std::vector<std::string> frames = EncodeMessage(message, signer);
    std::vector<zmq::const_buffer> buffers;
    for (const std::string& frame : frames) buffers.emplace_back(frame.data(), frame.size());
    zmq::send_multipart(socket, buffers);
    return message.id();
  }

  // One pending message of `socket`, or nothing when none is waiting or it was rejected.
  std::optional<JupyterMessage> Receive(zmq::socket_t& socket) {
    std::vector<zmq::message_t> parts;
    if (!zmq::recv_multipart(socket, std::back_inserter(parts), zmq::recv_flags::dontwait)) return std::nullopt;
    std::vector<std::string> frames;
    for (zmq::message_t& part : parts) frames.push_back(part.to_string());
    Result<JupyterMessage> message = DecodeMessage(std::move(frames), signer);
    if (!message.ok()) {
      ++rejected;
      ENVFORGE_LOG(kWarn) << "jupyter: dropped a kernel message: " << message.status().message();
      return std::nullopt;
    }
    if (!signer.key().empty() && !Remember(message->signature)) {
      ++rejected;
      ENVFORGE_LOG(kWarn) << "jupyter: dropped a replayed kernel message (signature seen before)";
      return std::nullopt;
    }
    return std::move(message).value();
  }

  // False when the signature was seen before.
  bool Remember(const std::string& signature) {
    if (!seen_signatures.insert(signature).second) return false;
    signature_order.push_back(signature);
    if (signature_order.size() > kSignatureHistory) {
      seen_signatures.erase(signature_order.front());
      signature_order.pop_front();
    }
    return true;
  }

  // Waits until shell or iopub (or control) has something or `slice` passed.
  void PollReadable(std::chrono::milliseconds slice) {
    std::array<zmq::pollitem_t, 3> items = {zmq::pollitem_t{shell.handle(), 0, ZMQ_POLLIN, 0},
                                            zmq::pollitem_t{iopub.handle(), 0, ZMQ_POLLIN, 0},
                                            zmq::pollitem_t{control.handle(), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items.data(), items.size(), slice);
  }

  void ResetHeartbeat() { heartbeat = OpenSocket(zmq::socket_type::req, info.Address(Channel::kHeartbeat), ""); }
};

KernelClient::KernelClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KernelClient::~KernelClient() = default;

Result<std::unique_ptr<KernelClient>> KernelClient::Connect(const ConnectionInfo& info) {
  auto impl = std::make_unique<Impl>(info);
  try {
    const std::string identity = impl->session;
    impl->shell = OpenSocket(zmq::socket_type::dealer, info.Address(Channel::kShell), identity);
    impl->iopub = OpenSocket(zmq::socket_type::sub, info.Address(Channel::kIopub), "");
    impl->control = OpenSocket(zmq::socket_type::dealer, info.Address(Channel::kControl), identity);
    impl->ResetHeartbeat();
  } catch (const zmq::error_t& error) {
    return InvalidArgumentError("jupyter: cannot connect to " + info.Address(Channel::kShell) + ": " + error.what());
  }
  return std::unique_ptr<KernelClient>(new KernelClient(std::move(impl)));
}

Status KernelClient::WaitReady(std::chrono::milliseconds timeout, const KernelProbe& probe) {
  Impl& s = *impl_;
  const auto deadline = Clock::now() + timeout;
  std::unordered_set<std::string> requests;
  bool replied = false, iopub_joined = false;
  try {
    auto next_request = Clock::now();
    while (!(replied && iopub_joined)) {
      const auto now = Clock::now();
      if (now >= deadline)
        return DeadlineExceededError("jupyter: the kernel did not answer kernel_info_request in time");
      if (probe.alive && !probe.alive()) return UnavailableError("jupyter: the kernel process died while starting");
      if (now >= next_request && !iopub_joined) {
        requests.insert(s.Send(s.shell, "kernel_info_request", Json::object()));
        next_request = now + std::chrono::milliseconds(100);
      }
      s.PollReadable(kPollSlice);
      while (auto message = s.Receive(s.shell)) {
        if (message->type() == "kernel_info_reply" && requests.count(message->parent_id())) {
          s.kernel_info = message->content;
          replied = true;
        }
      }
      while (auto message = s.Receive(s.iopub)) {
        if (message->type() == "status" && requests.count(message->parent_id())) iopub_joined = true;
      }
      while (s.Receive(s.control)) {
      }
    }
  } catch (const zmq::error_t& error) {
    return UnavailableError(std::string("jupyter: ") + error.what());
  }
  return Status::Ok();
}

Result<ExecuteResult> KernelClient::Execute(std::string_view code, const ExecuteLimits& limits,
                                            const KernelProbe& probe) {
  Impl& s = *impl_;
  ExecuteResult result;
  OutputCollector collector(limits.caps);
  const auto start = Clock::now();
  auto deadline = start + limits.wall;
  const double cpu_start = limits.cpu_seconds > 0 && probe.cpu_seconds ? probe.cpu_seconds() : 0;
  auto next_cpu_check = start + kPollSlice;
  bool replied = false, idle = false, interrupted = false;
  Json reply;  // the execute_reply's content
  try {
    const std::string request = s.Send(s.shell, "execute_request",
                                       {{"code", code},
                                        {"silent", false},
                                        {"store_history", true},
                                        {"user_expressions", Json::object()},
                                        {"allow_stdin", false},
                                        // One execute at a time: nothing is queued behind it, and
                                        // ipykernel would abort the next request if it came
                                        // within its stop_on_error window.
                                        {"stop_on_error", false}});
    while (!(replied && idle)) {
      if (probe.alive && !probe.alive()) {
        result.outcome = ExecuteOutcome::kCrashed;
        break;
      }
      const auto now = Clock::now();
      // The CPU probe reads a cgroup file: once per poll slice, not once per message.
      bool cpu_over = false;
      if (limits.cpu_seconds > 0 && probe.cpu_seconds && now >= next_cpu_check) {
        cpu_over = probe.cpu_seconds() - cpu_start > limits.cpu_seconds;
        next_cpu_check = now + kPollSlice;
      }
      if (!interrupted && (now >= deadline || cpu_over)) {
        interrupted = true;
        result.limit = cpu_over ? "cpu_time" : "wall_time";
        s.Send(s.control, "interrupt_request", Json::object());
        deadline = now + limits.interrupt_grace;
      } else if (interrupted && now >= deadline) {
        result.needs_restart = true;
        break;
      }
      s.PollReadable(std::min(kPollSlice, std::chrono::milliseconds(Milliseconds(deadline - now) + 1)));
      while (auto message = s.Receive(s.shell)) {
        if (message->parent_id() != request || message->type() != "execute_reply") continue;
        replied = true;
        reply = message->content;
        result.execution_count = reply.value("execution_count", 0);
      }
      while (auto message = s.Receive(s.iopub)) {
        if (message->parent_id() != request) continue;
        if (message->type() == "status") {
          idle |= message->content.value("execution_state", "") == "idle";
        } else {
          collector.Add(*message);
        }
      }
      while (s.Receive(s.control)) {
      }
    }
  } catch (const zmq::error_t& error) {
    return UnavailableError(std::string("jupyter: execute failed on the channel: ") + error.what());
  } catch (const Json::exception& error) {
    return InternalError(std::string("jupyter: malformed kernel message: ") + error.what());
  }
  if (interrupted) {
    result.outcome = result.outcome == ExecuteOutcome::kCrashed ? ExecuteOutcome::kCrashed : ExecuteOutcome::kTimeout;
  } else if (result.outcome != ExecuteOutcome::kCrashed) {
    result.outcome = collector.error().is_null() ? ExecuteOutcome::kOk : ExecuteOutcome::kError;
  }
  result.outputs = collector.outputs();
  result.error = collector.error();
  // A reply that is not "ok" without an iopub error (an aborted request, a kernel that reports
  // the error only in the reply) is an error all the same, never a clean run.
  const std::string reply_status = reply.is_object() ? reply.value("status", "") : "";
  if (result.outcome == ExecuteOutcome::kOk && !reply_status.empty() && reply_status != "ok") {
    result.outcome = ExecuteOutcome::kError;
    result.error = {{"ename", reply.value("ename", reply_status == "aborted" ? "ExecutionAborted" : "ExecutionError")},
                    {"evalue", reply.value("evalue", "the kernel answered status '" + reply_status + "'")},
                    {"traceback", Json::array()}};
    Json output = result.error;
    output["output_type"] = "error";
    result.outputs.push_back(std::move(output));
  }
  result.truncated = collector.truncated();
  result.wall_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  return result;
}

Status KernelClient::Interrupt(std::chrono::milliseconds timeout) {
  Impl& s = *impl_;
  const auto deadline = Clock::now() + timeout;
  try {
    const std::string request = s.Send(s.control, "interrupt_request", Json::object());
    while (Clock::now() < deadline) {
      s.PollReadable(kPollSlice);
      while (auto message = s.Receive(s.control)) {
        if (message->type() == "interrupt_reply" && message->parent_id() == request) return Status::Ok();
      }
    }
  } catch (const zmq::error_t& error) {
    return UnavailableError(std::string("jupyter: ") + error.what());
  }
  return DeadlineExceededError("jupyter: no interrupt_reply in time");
}

bool KernelClient::Heartbeat(std::chrono::milliseconds timeout) {
  Impl& s = *impl_;
  try {
    const std::string ping = RandomHexId();
    s.heartbeat.send(zmq::buffer(ping), zmq::send_flags::dontwait);
    std::array<zmq::pollitem_t, 1> items = {zmq::pollitem_t{s.heartbeat.handle(), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items.data(), items.size(), timeout);
    zmq::message_t echo;
    if ((items[0].revents & ZMQ_POLLIN) && s.heartbeat.recv(echo, zmq::recv_flags::dontwait) &&
        echo.to_string() == ping) {
      return true;
    }
    s.ResetHeartbeat();  // a REQ socket without its reply cannot send again
  } catch (const zmq::error_t&) {
    s.ResetHeartbeat();
  }
  return false;
}

Status KernelClient::Shutdown(std::chrono::milliseconds timeout) {
  Impl& s = *impl_;
  const auto deadline = Clock::now() + timeout;
  try {
    const std::string request = s.Send(s.control, "shutdown_request", {{"restart", false}});
    while (Clock::now() < deadline) {
      s.PollReadable(kPollSlice);
      while (auto message = s.Receive(s.control)) {
        if (message->type() == "shutdown_reply" && message->parent_id() == request) return Status::Ok();
      }
      while (s.Receive(s.shell) || s.Receive(s.iopub)) {
      }
    }
  } catch (const zmq::error_t& error) {
    return UnavailableError(std::string("jupyter: ") + error.what());
  }
  return DeadlineExceededError("jupyter: no shutdown_reply in time");
}

const Json& KernelClient::kernel_info() const { return impl_->kernel_info; }
int64_t KernelClient::rejected_messages() const { return impl_->rejected; }
const std::string& KernelClient::session_id() const { return impl_->session; }

}  // namespace envforge::sandbox::jupyter
