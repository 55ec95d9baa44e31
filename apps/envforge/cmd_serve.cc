// envforge serve: the JSON-RPC service (server/rpc_service.h) over HTTP + WebSocket
// (server/http_server.h) or over stdio (server/stdio_server.h).
//
//   envforge serve --envs DIR [--host 127.0.0.1] [--port P] [--token T] [--max-sessions N]
//                  [--session-ttl SECONDS] [--trajectories FILE.sqlite] [--limits JSON]
//                  [--max-payload BYTES] [--io-threads N] [--port-file F]
//   envforge serve --stdio --envs DIR [--mcp] [...]
//
// The token may also come from the environment variable ENVFORGE_SERVE_TOKEN (it then does not
// show in the process list). SIGTERM or SIGINT drains: the listener closes, new sessions and tool
// calls are refused (-32006), requests in flight finish, every session is closed (recorded as
// "shutdown") and the trajectories are flushed; then the process exits 0.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "apps/envforge/cli_args.h"
#include "apps/envforge/commands.h"
#include "apps/envforge/solve_task.h"
#include "base/fd.h"
#include "base/log.h"
#include "server/http_server.h"
#include "server/rpc_service.h"
#include "server/stdio_server.h"

namespace envforge::cli {
namespace {

using server::Dialect;
using server::HttpServer;
using server::HttpServerOptions;
using server::RpcService;
using server::RpcServiceOptions;
using server::StdioServerOptions;

constexpr std::chrono::milliseconds kDrainGrace{10'000};

// The self-pipe: the signal handler only writes one byte, the main thread waits for it.
int g_signal_pipe_write = -1;

void OnTerminateSignal(int signal_number) {
  int saved_errno = errno;
  char byte = static_cast<char>(signal_number);
  [[maybe_unused]] ssize_t ignored = ::write(g_signal_pipe_write, &byte, 1);
  errno = saved_errno;
}

// Installs the SIGTERM/SIGINT handlers; returns the read end of the pipe.
Result<UniqueFd> InstallSignalPipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoError("pipe2", errno);
  g_signal_pipe_write = fds[1];
  struct sigaction action {};
  action.sa_handler = OnTerminateSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGTERM, &action, nullptr);
  ::sigaction(SIGINT, &action, nullptr);
  // A client closing its end of a pipe must never kill the server (stdio mode writes to one).
  ::signal(SIGPIPE, SIG_IGN);
  return UniqueFd(fds[0]);
}

// Blocks until a byte arrives on the pipe; returns it (the signal number, or 0 for "done").
int WaitOnPipe(int fd) {
  char byte = 0;
  for (;;) {
    ssize_t got = ::read(fd, &byte, 1);
    if (got == 1) return static_cast<unsigned char>(byte);
    if (got < 0 && errno == EINTR) continue;
    return 0;
  }
}

Result<RpcServiceOptions> ServiceOptionsFrom(const ParsedArgs& parsed) {
  RpcServiceOptions options;
  auto envs = parsed.Option("--envs");
  if (!envs) return InvalidArgumentError("envforge serve: --envs DIR is required (a directory of *.envdb bundles)");
  options.envs_dir = *envs;
  ENVFORGE_ASSIGN_OR_RETURN(options.manager, ManagerOptionsFromLimitsOption(parsed.Option("--limits")));
  ENVFORGE_ASSIGN_OR_RETURN(long long max_sessions, parsed.IntOption("--max-sessions", 1024, 1, 100'000));
  ENVFORGE_ASSIGN_OR_RETURN(long long ttl_seconds, parsed.IntOption("--session-ttl", 600, 1, 30LL * 24 * 3600));
  options.max_sessions = static_cast<size_t>(max_sessions);
  // The service bounds sessions itself; the manager's cap only needs room for them and their
  // processes still exiting.
  options.manager.max_sessions = std::max(options.manager.max_sessions, options.max_sessions + 64);
  options.session_ttl = std::chrono::seconds(ttl_seconds);
  options.trajectories_path = parsed.OptionOr("--trajectories", "");
  return options;
}

int ServeStdio(RpcService& service, bool mcp, int signal_fd) {
  StdioServerOptions options;
  options.dialect = mcp ? Dialect::kMcp : Dialect::kNative;
  std::fprintf(stderr, "envforge serve: serving JSON-RPC (%s dialect) on stdin/stdout\n", mcp ? "MCP" : "native");
  // stdin is read on its own thread so that a signal can end the server while it blocks there.
  Status served;
  std::thread reader([&] {
    served = RunStdioServer(service, std::cin, std::cout, options);
    char done = 0;
    [[maybe_unused]] ssize_t ignored = ::write(g_signal_pipe_write, &done, 1);
  });
  int signal_number = WaitOnPipe(signal_fd);
  if (signal_number == 0) {
    reader.join();
    Status shutdown = service.Shutdown(kDrainGrace);
    if (!served.ok()) return Fail(served.WithContext("envforge serve --stdio"), kExitInfra);
    if (!shutdown.ok()) return Fail(shutdown.WithContext("envforge serve: shutdown"), kExitInfra);
    return kExitOk;
  }
  std::fprintf(stderr, "envforge serve: signal %d, draining\n", signal_number);
  service.BeginDrain();
  Status shutdown = service.Shutdown(kDrainGrace);
  std::cout.flush();
  if (!shutdown.ok()) std::fprintf(stderr, "envforge serve: shutdown: %s\n", shutdown.message().c_str());
  // The reader thread may sit in a blocking read of stdin forever; the service is shut down and
  // the trajectories are flushed, so leave without waiting for it.
  std::fflush(stderr);
  std::_Exit(shutdown.ok() ? kExitOk : kExitInfra);
}

int ServeHttp(RpcService& service, const ParsedArgs& parsed, int signal_fd) {
  HttpServerOptions options;
  options.host = parsed.OptionOr("--host", "127.0.0.1");
  auto port = parsed.IntOption("--port", 8080, 0, 65535);
  auto max_payload = parsed.IntOption("--max-payload", 16LL << 20, 1024, 1LL << 32);
  auto io_threads = parsed.IntOption("--io-threads", 2, 1, 64);
  for (const auto* r : {&port, &max_payload, &io_threads}) {
    if (!r->ok()) return Fail(r->status(), kExitUsage);
  }
  options.port = static_cast<uint16_t>(*port);
  options.max_payload_bytes = static_cast<size_t>(*max_payload);
  options.io_threads = static_cast<int>(*io_threads);
  if (auto token = parsed.Option("--token")) {
    options.token = *token;
  } else if (const char* from_env = std::getenv("ENVFORGE_SERVE_TOKEN"); from_env != nullptr) {
    options.token = from_env;
  }

  auto server = HttpServer::Create(service, options);
  if (!server.ok()) return Fail(server.status().WithContext("envforge serve"), ExitCodeFor(server.status()));
  (*server)->Start();
  std::string address = options.host.find(':') != std::string::npos ? "[" + options.host + "]" : options.host;
  std::fprintf(stderr, "envforge serve: listening on http://%s:%u (POST /rpc, POST /mcp, WebSocket /ws, GET /health, GET /metrics)%s\n",
               address.c_str(), static_cast<unsigned>((*server)->port()), options.token.empty() ? "" : ", token required");
  // The port file comes last: a script that waits for it finds the listening line already written.
  if (auto port_file = parsed.Option("--port-file")) {
    Status written = WriteFileAtomically(*port_file, std::to_string((*server)->port()) + "\n");
    if (!written.ok()) return Fail(written.WithContext("envforge serve: --port-file"), kExitInfra);
  }

  int signal_number = WaitOnPipe(signal_fd);
  std::fprintf(stderr, "envforge serve: signal %d, draining\n", signal_number);
  (*server)->BeginDrain();
  if (!(*server)->WaitIdle(kDrainGrace)) {
    std::fprintf(stderr, "envforge serve: %zu requests still in flight after %lld ms; dropping them\n",
                 (*server)->in_flight(), static_cast<long long>(kDrainGrace.count()));
  }
  Status shutdown = service.Shutdown(kDrainGrace);
  (*server)->Stop();
  if (!shutdown.ok()) return Fail(shutdown.WithContext("envforge serve: shutdown"), kExitInfra);
  std::fprintf(stderr, "envforge serve: stopped\n");
  return kExitOk;
}

}  // namespace

int RunServeCommand(const std::vector<std::string>& args) {
  auto parsed = ParseArgs("envforge serve", args,
                          {.value_options = {"--envs", "--host", "--port", "--token", "--max-sessions", "--session-ttl",
                                             "--trajectories", "--limits", "--max-payload", "--port-file", "--io-threads"},
                           .flags = {"--stdio", "--mcp"}});
  if (!parsed.ok()) return Fail(parsed.status(), kExitUsage);
  bool stdio = parsed->Has("--stdio");
  if (parsed->Has("--mcp") && !stdio) {
    return Fail(InvalidArgumentError("envforge serve: --mcp selects the stdio dialect; over HTTP use POST /mcp"), kExitUsage);
  }
  auto options = ServiceOptionsFrom(*parsed);
  if (!options.ok()) return Fail(options.status(), kExitUsage);

  RaiseFileLimit();
  auto signal_fd = InstallSignalPipe();
  if (!signal_fd.ok()) return Fail(signal_fd.status(), kExitInfra);
  auto service = RpcService::Create(*options);
  if (!service.ok()) return Fail(service.status().WithContext("envforge serve"), ExitCodeFor(service.status()));
  if (stdio) return ServeStdio(**service, parsed->Has("--mcp"), signal_fd->get());
  return ServeHttp(**service, *parsed, signal_fd->get());
}

}  // namespace envforge::cli
