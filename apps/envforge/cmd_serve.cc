// envforge serve: the JSON-RPC service (server/rpc_service.h) over HTTP + WebSocket
// (server/http_server.h) or over stdio (server/stdio_server.h).
//
//   envforge serve --envs DIR [options]   (ServeCommands() below declares them; `envforge serve --help` prints them)
//   envforge serve --stdio --envs DIR [--mcp] [...]
//   envforge serve --envs DIR --model MODEL_DIR [--model-name NAME] [--device cpu|cuda|auto]
//                                    (also the OpenAI-compatible /v1, server/openai_api.h)
//
// The token may also come from the environment variable ENVFORGE_SERVE_TOKEN (it then does not
// show in the process list). SIGTERM or SIGINT drains: the listener closes, new sessions and tool
// calls are refused (-32006), requests in flight finish and their answers are written (HTTP,
// WebSocket and stdio alike), every session is closed (recorded as "shutdown") and the
// trajectories are flushed; then the process exits 0. SIGUSR1 only stops new sessions (in a fleet,
// before the SIGTERM: session/create answers -32006 while the open sessions go on; see
// server/README.md, "A fleet behind HAProxy").
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <thread>

#include "apps/envforge/cli_args.h"
#include "apps/envforge/commands.h"
#include "apps/envforge/search_judge_option.h"
#include "apps/envforge/solve_task.h"
#include "base/fd.h"
#include "base/log.h"
#include "inference/backend.h"
#include "server/http_server.h"
#include "server/openai_api.h"
#include "server/rpc_service.h"
#include "server/stdio_server.h"
#include "server/ui_api.h"

namespace envforge::cli {
namespace {

using server::Dialect;
using server::HttpServer;
using server::HttpServerOptions;
using server::RpcService;
using server::RpcServiceOptions;
using server::StdioServer;
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
  ::sigaction(SIGUSR1, &action, nullptr);
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

// Waits for SIGTERM or SIGINT (returned; 0 when the pipe said "done"); each SIGUSR1 meanwhile
// stops new sessions and waiting goes on.
int WaitForStopSignal(int fd, RpcService& service) {
  for (;;) {
    int signal_number = WaitOnPipe(fd);
    if (signal_number != SIGUSR1) return signal_number;
    service.StopCreatingSessions();
    std::fprintf(stderr, "envforge serve: SIGUSR1, no new sessions; the open ones go on until SIGTERM\n");
  }
}

Result<RpcServiceOptions> ServiceOptionsFrom(const ParsedArgs& parsed) {
  RpcServiceOptions options;
  auto envs = parsed.Option("--envs");  // required by serve's declaration
  options.envs_dir = *envs;
  ENVFORGE_ASSIGN_OR_RETURN(options.manager, ManagerOptionsFromLimitsOption(parsed.Option("--limits")));
  ENVFORGE_ASSIGN_OR_RETURN(long long max_sessions, parsed.IntOption("--max-sessions", 1, 100'000));
  ENVFORGE_ASSIGN_OR_RETURN(long long ttl_seconds, parsed.IntOption("--session-ttl", 1, 30LL * 24 * 3600));
  options.max_sessions = static_cast<size_t>(max_sessions);
  // The service bounds sessions itself; the manager's cap only needs room for them and their
  // processes still exiting.
  options.manager.max_sessions = std::max(options.manager.max_sessions, options.max_sessions + 64);
  options.session_ttl = std::chrono::seconds(ttl_seconds);
  ENVFORGE_ASSIGN_OR_RETURN(long long warm_sessions, parsed.IntOption("--warm-sessions", 0, 100'000));
  options.manager.warm_sessions = static_cast<size_t>(warm_sessions);
  ENVFORGE_ASSIGN_OR_RETURN(long long zygotes, parsed.IntOption("--zygotes-per-env", 1, 64));
  options.manager.zygotes_per_environment = static_cast<size_t>(zygotes);
  ENVFORGE_ASSIGN_OR_RETURN(long long judgements, parsed.IntOption("--judgements-per-judge", 1, 100'000));
  options.manager.judgements_per_judge_process = static_cast<size_t>(judgements);
  ENVFORGE_ASSIGN_OR_RETURN(long long idle_judges, parsed.IntOption("--idle-judges", 0, 100'000));
  options.manager.idle_judges_per_environment = static_cast<size_t>(idle_judges);
  ENVFORGE_ASSIGN_OR_RETURN(long long idle_judge_seconds, parsed.IntOption("--idle-judge-seconds", 0, 86'400));
  options.manager.idle_judge_timeout = std::chrono::seconds(idle_judge_seconds);
  ENVFORGE_ASSIGN_OR_RETURN(long long episodes, parsed.IntOption("--episodes-per-session", 1, 100'000));
  options.manager.episodes_per_session_process = static_cast<size_t>(episodes);
  ENVFORGE_ASSIGN_OR_RETURN(long long running_calls, parsed.IntOption("--max-running-calls", 0, 100'000));
  options.manager.max_running_calls = static_cast<size_t>(running_calls);
  ENVFORGE_ASSIGN_OR_RETURN(long long kernel_pool, parsed.IntOption("--kernel-pool", 0, 1024));
  options.manager.kernel_pool_size = static_cast<size_t>(kernel_pool);
  ENVFORGE_ASSIGN_OR_RETURN(long long ready_copies, parsed.IntOption("--code-ready-copies", 0, 4096));
  options.manager.code_ready_copies = static_cast<size_t>(ready_copies);
  ENVFORGE_ASSIGN_OR_RETURN(options.manager.search_answer_judge, SearchJudgeFrom(parsed));
  options.trajectories_path = parsed.OptionOr("--trajectories");
  options.server_id = parsed.OptionOr("--server-id");
  ENVFORGE_RETURN_IF_ERROR(server::ValidateServerId(options.server_id).WithContext("--server-id"));
  return options;
}

int ServeStdio(RpcService& service, bool mcp, int signal_fd) {
  StdioServerOptions options;
  options.dialect = mcp ? Dialect::kMcp : Dialect::kNative;
  std::fprintf(stderr, "envforge serve: serving JSON-RPC (%s dialect) on stdin/stdout\n", mcp ? "MCP" : "native");
  StdioServer server(service, std::cout, options);
  // stdin is read on its own thread so that a signal can end the server while it blocks there.
  Status served;
  std::thread reader([&] {
    served = server.Run(std::cin);
    char done = 0;
    [[maybe_unused]] ssize_t ignored = ::write(g_signal_pipe_write, &done, 1);
  });
  int signal_number = WaitForStopSignal(signal_fd, service);
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
  // Calls that outlived the grace answer as their sessions close: their lines go out too.
  if (!server.WaitIdle(kDrainGrace)) std::fprintf(stderr, "envforge serve: some answers were not written in time\n");
  std::cout.flush();
  if (!shutdown.ok()) std::fprintf(stderr, "envforge serve: shutdown: %s\n", shutdown.message().c_str());
  // The reader thread may sit in a blocking read of stdin forever; the service is shut down and
  // the trajectories are flushed, so leave without waiting for it.
  std::fflush(stderr);
  std::_Exit(shutdown.ok() ? kExitOk : kExitInfra);
}

// The default connection bound: 4096, or half the descriptor limit when that is lower, so that
// the bounded connections can never take every descriptor (an accept failing with EMFILE would
// lock everyone out, authorized clients included). RaiseFileLimit has run already.
long long DefaultMaxConnections() {
  constexpr long long kDefault = 4096;
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return kDefault;
  return std::clamp(static_cast<long long>(limit.rlim_cur) / 2, 1LL, kDefault);
}

// The default network threads: one per two usable cores (at least one). The session manager's io
// thread and the session processes need the other cores: on 2 cores with 64 clients, a second
// network thread gave the same calls/s but left some session processes waiting 60-200 ms to be
// scheduled (the first tools/call of an episode at p99 64-173 ms against 23-38 ms with one).
long long DefaultIoThreads() {
  cpu_set_t usable;
  CPU_ZERO(&usable);
  long long cores = ::sched_getaffinity(0, sizeof usable, &usable) == 0 ? CPU_COUNT(&usable) : 2;
  return std::clamp(cores / 2, 1LL, 64LL);
}

// The admission bounds: each default is a share of the bound above it.
Status AdmissionOptionsFrom(const ParsedArgs& parsed, HttpServerOptions* options) {
  ENVFORGE_ASSIGN_OR_RETURN(long long connections,
                            parsed.ComputedIntOption("--max-connections", DefaultMaxConnections(), 1, 1'000'000));
  ENVFORGE_ASSIGN_OR_RETURN(
      long long unauthenticated,
      parsed.ComputedIntOption("--max-unauthenticated", std::max(1LL, connections / 4), 1, connections));
  ENVFORGE_ASSIGN_OR_RETURN(
      long long per_peer, parsed.ComputedIntOption("--max-unauthenticated-per-peer", std::max(1LL, unauthenticated / 4),
                                                   1, unauthenticated));
  ENVFORGE_ASSIGN_OR_RETURN(long long header_ms, parsed.IntOption("--header-timeout-ms", 1, 600'000));
  options->max_connections = static_cast<size_t>(connections);
  options->max_unauthenticated_connections = static_cast<size_t>(unauthenticated);
  options->max_unauthenticated_per_peer = static_cast<size_t>(per_peer);
  options->header_timeout = std::chrono::milliseconds(header_ms);
  options->allowed_origins = parsed.Values("--allow-origin");
  return Status::Ok();
}

// Every connection is a descriptor: say so when the limit cannot hold max_connections beside the
// sessions' own (RaiseFileLimit has already lifted the soft limit to the hard one).
void WarnIfFewDescriptors(size_t max_connections) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return;
  if (limit.rlim_cur < max_connections + 256) {
    std::fprintf(stderr,
                 "envforge serve: warning: the descriptor limit (%llu) is below --max-connections (%zu) plus room for "
                 "sessions; accepts will fail before the bound (raise ulimit -n)\n",
                 static_cast<unsigned long long>(limit.rlim_cur), max_connections);
  }
}

Result<HttpServerOptions> HttpOptionsFrom(const ParsedArgs& parsed) {
  HttpServerOptions options;
  options.host = parsed.OptionOr("--host");
  ENVFORGE_ASSIGN_OR_RETURN(long long port, parsed.IntOption("--port", 0, 65535));
  ENVFORGE_ASSIGN_OR_RETURN(long long max_payload, parsed.IntOption("--max-payload", 1024, 1LL << 32));
  ENVFORGE_ASSIGN_OR_RETURN(long long io_threads, parsed.ComputedIntOption("--io-threads", DefaultIoThreads(), 1, 64));
  options.port = static_cast<uint16_t>(port);
  options.max_payload_bytes = static_cast<size_t>(max_payload);
  options.io_threads = static_cast<int>(io_threads);
  if (auto token = parsed.Option("--token")) {
    options.token = *token;
  } else if (const char* from_env = std::getenv("ENVFORGE_SERVE_TOKEN"); from_env != nullptr) {
    options.token = from_env;
  }
  ENVFORGE_RETURN_IF_ERROR(AdmissionOptionsFrom(parsed, &options));
  ENVFORGE_RETURN_IF_ERROR(server::ValidateHttpServerOptions(&options));
  return options;
}

// The backend behind /v1: --model DIR is --backend embedded:DIR. nullptr when neither is given.
Result<std::unique_ptr<inference::Backend>> BackendFrom(const ParsedArgs& parsed) {
  auto model = parsed.Option("--model");
  auto spec = parsed.Option("--backend");
  if (model && spec) return InvalidArgumentError("give --model DIR or --backend SPEC, not both");
  if (!model && !spec) {
    for (const char* option : {"--model-name", "--device", "--context-window"}) {
      if (parsed.Given(option)) return InvalidArgumentError(std::string(option) + " needs --model or --backend");
    }
    return std::unique_ptr<inference::Backend>();
  }
  inference::BackendOptions options;
  options.model_name = parsed.OptionOr("--model-name");
  options.device = parsed.OptionOr("--device");
  if (options.device != "cpu" && options.device != "cuda" && options.device != "auto") {
    return InvalidArgumentError("--device must be cpu, cuda or auto, got '" + options.device + "'");
  }
  ENVFORGE_ASSIGN_OR_RETURN(long long window, parsed.ComputedIntOption("--context-window", 0, 0, 1LL << 24));
  options.context_window = window;
  return inference::OpenBackend(model ? "embedded:" + *model : *spec, options);
}

Result<server::OpenAiApiOptions> OpenAiOptionsFrom(const ParsedArgs& parsed) {
  server::OpenAiApiOptions options;
  ENVFORGE_ASSIGN_OR_RETURN(long long workers, parsed.IntOption("--v1-workers", 1, 4096));
  ENVFORGE_ASSIGN_OR_RETURN(long long queued, parsed.IntOption("--v1-max-queue", 0, 1'000'000));
  options.workers = static_cast<size_t>(workers);
  options.max_queued = static_cast<size_t>(queued);
  options.model_name = parsed.OptionOr("--model-name");
  return options;
}

int ServeHttp(RpcService& service, const ParsedArgs& parsed, HttpServerOptions options, int signal_fd) {
  WarnIfFewDescriptors(options.max_connections);
  auto backend = BackendFrom(parsed);
  if (!backend.ok()) return Fail(backend.status().WithContext("envforge serve"), ExitCodeFor(backend.status()));
  auto api_options = OpenAiOptionsFrom(parsed);
  if (!api_options.ok()) return Fail(api_options.status().WithContext("envforge serve"), kExitUsage);
  api_options->metrics = &service.metrics();
  // Declared before the server: destroyed after it (the server calls into it until Stop).
  server::OpenAiApi api(backend->get(), std::move(*api_options));
  options.openai = &api;
  // The viewer reads the store the service records into (declared before the server, like api).
  std::unique_ptr<server::UiApi> ui;
  if (auto trajectories = parsed.Option("--trajectories")) {
    auto opened = server::UiApi::Open(*trajectories, {.runs_dir = parsed.OptionOr("--runs")});
    if (!opened.ok())
      return Fail(opened.status().WithContext("envforge serve: the viewer"), ExitCodeFor(opened.status()));
    ui = std::move(opened).value();
    ui->EnableReplay(&service.manager(), parsed.OptionOr("--envs"));
    options.ui = ui.get();
  }
  auto server = HttpServer::Create(service, options);
  if (!server.ok()) return Fail(server.status().WithContext("envforge serve"), ExitCodeFor(server.status()));
  (*server)->Start();
  std::string address = options.host.find(':') != std::string::npos ? "[" + options.host + "]" : options.host;
  std::fprintf(stderr,
               "envforge serve: listening on http://%s:%u (POST /rpc, POST /mcp, WebSocket /ws, GET /health, GET "
               "/metrics%s), %d network thread%s%s\n",
               address.c_str(), static_cast<unsigned>((*server)->port()), ui ? ", the viewer at GET /ui/" : "",
               options.io_threads, options.io_threads == 1 ? "" : "s", options.token.empty() ? "" : ", token required");
  if (api.has_backend()) {
    std::fprintf(stderr, "envforge serve: /v1 serves model '%s' (%s)\n", api.model_name().c_str(),
                 (*backend)->info().spec.c_str());
  }
  // The port file comes last: a script that waits for it finds the listening line already written.
  if (auto port_file = parsed.Option("--port-file")) {
    Status written = WriteFileAtomically(*port_file, std::to_string((*server)->port()) + "\n");
    if (!written.ok()) return Fail(written.WithContext("envforge serve: --port-file"), kExitInfra);
  }

  int signal_number = WaitForStopSignal(signal_fd, service);
  std::fprintf(stderr, "envforge serve: signal %d, draining\n", signal_number);
  (*server)->BeginDrain();
  if (!(*server)->WaitIdle(kDrainGrace)) {
    std::fprintf(stderr, "envforge serve: %zu requests still in flight after %lld ms; closing their sessions\n",
                 (*server)->in_flight(), static_cast<long long>(kDrainGrace.count()));
  }
  Status shutdown = service.Shutdown(kDrainGrace);
  // Calls that outlived the grace answer as Shutdown closes their sessions: write those too.
  if (!(*server)->WaitIdle(kDrainGrace)) {
    std::fprintf(stderr, "envforge serve: %zu answers not written after the shutdown; dropping them\n",
                 (*server)->in_flight());
  }
  (*server)->Stop();
  if (!shutdown.ok()) return Fail(shutdown.WithContext("envforge serve: shutdown"), kExitInfra);
  std::fprintf(stderr, "envforge serve: stopped\n");
  return kExitOk;
}

// --prewarm: starts every served environment's zygote and fills its warm pool, then waits (up to
// kPrewarmWait) until the pools are full, so that once the server listens the first burst of
// creates forks nothing. Environments whose sessions are never warm (interpreter, code, search)
// are skipped; a zygote that cannot start is an error.
constexpr std::chrono::seconds kPrewarmWait{60};

Status PrewarmEnvironments(sandbox::SessionManager& manager) {
  const auto start = std::chrono::steady_clock::now();
  size_t prewarmed = 0;
  for (const std::string& id : manager.EnvironmentIds()) {
    Status begun = manager.Prewarm(id);
    if (begun.code() == StatusCode::kFailedPrecondition) continue;  // a kind with no warm sessions
    ENVFORGE_RETURN_IF_ERROR(begun);
    ++prewarmed;
  }
  const size_t target = prewarmed * manager.options().warm_sessions;
  size_t ready = manager.Stats().warm_ready;
  while (ready < target && std::chrono::steady_clock::now() - start < kPrewarmWait) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ready = manager.Stats().warm_ready;
  }
  auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  std::fprintf(stderr, "envforge serve: prewarmed %zu environments: %zu of %zu warm sessions ready in %lld ms\n",
               prewarmed, ready, target, static_cast<long long>(elapsed.count()));
  return Status::Ok();
}

int Serve(const ParsedArgs& parsed) {
  bool stdio = parsed.Has("--stdio");
  if (parsed.Has("--mcp") && !stdio) {
    return Fail(InvalidArgumentError("envforge serve: --mcp selects the stdio dialect; over HTTP use POST /mcp"),
                kExitUsage);
  }
  if (parsed.Option("--runs") && (stdio || !parsed.Option("--trajectories"))) {
    return Fail(
        InvalidArgumentError("envforge serve: --runs DIR is shown by the viewer: it needs --trajectories, over HTTP"),
        kExitUsage);
  }
  if (stdio && (parsed.Option("--model") || parsed.Option("--backend"))) {
    return Fail(InvalidArgumentError("envforge serve: /v1 (--model, --backend) is served over HTTP, not with --stdio"),
                kExitUsage);
  }
  RaiseFileLimit();  // before the HTTP options: the connection bound's default depends on it
  auto options = ServiceOptionsFrom(parsed);
  if (!options.ok()) return Fail(options.status(), kExitUsage);
  if (parsed.Has("--prewarm") && options->manager.warm_sessions == 0) {
    return Fail(
        InvalidArgumentError("envforge serve: --prewarm fills the warm pools: it needs --warm-sessions 1 or more"),
        kExitUsage);
  }
  std::optional<HttpServerOptions> http_options;
  if (!stdio) {
    auto checked = HttpOptionsFrom(parsed);
    if (!checked.ok()) return Fail(checked.status().WithContext("envforge serve"), kExitUsage);
    http_options = std::move(checked).value();
  }

  auto signal_fd = InstallSignalPipe();
  if (!signal_fd.ok()) return Fail(signal_fd.status(), kExitInfra);
  auto service = RpcService::Create(*options);
  if (!service.ok()) return Fail(service.status().WithContext("envforge serve"), ExitCodeFor(service.status()));
  if (parsed.Has("--prewarm")) {
    Status prewarmed = PrewarmEnvironments((*service)->manager());
    if (!prewarmed.ok()) return Fail(prewarmed.WithContext("envforge serve: --prewarm"), ExitCodeFor(prewarmed));
  }
  if (stdio) return ServeStdio(**service, parsed.Has("--mcp"), signal_fd->get());
  return ServeHttp(**service, parsed, std::move(*http_options), signal_fd->get());
}

std::vector<OptionDecl> ServeOptions();

// envforge view F.sqlite: the viewer alone, over a store no one needs to be recording into. The
// service behind it opens no environment and records nothing: the store is only read.
int View(const ParsedArgs& parsed) {
  // view accepts only the listener's options; the rest HttpOptionsFrom reads (--max-payload,
  // --io-threads, the admission bounds) are never given here and take serve's declared defaults.
  static const CommandDecl kServeDecl = {.name = "serve", .options = ServeOptions()};
  ParsedArgs http_args = parsed;
  http_args.command = &kServeDecl;
  // The service first: the viewer's replays use its session manager until the viewer goes.
  auto service = RpcService::Create(RpcServiceOptions{});
  if (!service.ok()) return Fail(service.status().WithContext("envforge view"), ExitCodeFor(service.status()));
  auto ui = server::UiApi::Open(parsed.positional[0], {.runs_dir = parsed.OptionOr("--runs")});
  if (!ui.ok()) return Fail(ui.status().WithContext("envforge view"), ExitCodeFor(ui.status()));
  auto http_options = HttpOptionsFrom(http_args);
  if (!http_options.ok()) return Fail(http_options.status().WithContext("envforge view"), kExitUsage);
  http_options->ui = ui->get();
  auto signal_fd = InstallSignalPipe();
  if (!signal_fd.ok()) return Fail(signal_fd.status(), kExitInfra);
  if (auto envs = parsed.Option("--envs")) (*ui)->EnableReplay(&(*service)->manager(), *envs);
  auto server = HttpServer::Create(**service, *http_options);
  if (!server.ok()) return Fail(server.status().WithContext("envforge view"), ExitCodeFor(server.status()));
  (*server)->Start();
  std::string address =
      http_options->host.find(':') != std::string::npos ? "[" + http_options->host + "]" : http_options->host;
  std::fprintf(stderr, "envforge view: http://%s:%u/ui/%s\n", address.c_str(), static_cast<unsigned>((*server)->port()),
               http_options->token.empty() ? "" : "#token=... (the token is required)");
  if (auto port_file = parsed.Option("--port-file")) {
    Status written = WriteFileAtomically(*port_file, std::to_string((*server)->port()) + "\n");
    if (!written.ok()) return Fail(written.WithContext("envforge view: --port-file"), kExitInfra);
  }
  WaitForStopSignal(signal_fd->get(), **service);
  (*server)->Stop();
  return kExitOk;
}

}  // namespace

namespace {

// The listener's options, shared by serve and view (HttpOptionsFrom reads them).
std::vector<OptionDecl> ListenerOptions(const std::string& section) {
  return {{.name = "--host",
           .metavar = "ADDR",
           .help = "address to listen on",
           .default_text = "127.0.0.1",
           .section = section},
          {.name = "--port", .metavar = "P", .help = "port (0 picks one)", .default_text = "8080", .section = section},
          {.name = "--port-file", .metavar = "F", .help = "write the port there once listening", .section = section},
          {.name = "--token",
           .metavar = "T",
           .help = "require Authorization: Bearer T (or ENVFORGE_SERVE_TOKEN); the viewer then opens at /ui/#token=T",
           .section = section},
          {.name = "--allow-origin",
           .metavar = "ORIGIN",
           .help = "a browser Origin allowed besides loopback ones, e.g. https://app.example.com; others get 403",
           .repeated = true,
           .section = section}};
}

std::vector<OptionDecl> ServeOptions() {
  const std::string service = "service", stdio = "stdio", http = "http",
                    v1 = "OpenAI-compatible /v1 (GET /v1/models, POST /v1/chat/completions, POST /v1/completions)";
  std::vector<OptionDecl> options = {
      {.name = "--envs",
       .metavar = "DIR",
       .help = "every *.envdb in DIR is served",
       .required = true,
       .section = service},
      {.name = "--max-sessions",
       .metavar = "N",
       .help = "open sessions at most; past it -32003",
       .default_text = "1024",
       .section = service},
      {.name = "--zygotes-per-env",
       .metavar = "N",
       .help = "zygote processes per environment, spawning its sessions in turn (spawns and reaps on N cores)",
       .default_text = "2",
       .section = service},
      {.name = "--warm-sessions",
       .metavar = "N",
       .help = "per environment, sessions forked and isolated ahead of demand (from its first create; about "
               "one session's memory each): a create or a verdict takes one instead of forking; 0: none",
       .default_text = "64",
       .section = service},
      {.name = "--prewarm",
       .help = "before listening, start every environment's zygote and fill its warm pool (--warm-sessions; "
               "waits up to 60 s): the first burst of creates then forks nothing",
       .section = service},
      {.name = "--judgements-per-judge",
       .metavar = "N",
       .help = "verdicts one judge process gives (all of one task, each batch's verifier run afresh) before it "
               "closes; 1: a fresh process per verdict (about half the calls/s at 20 calls per episode)",
       .default_text = "64",
       .section = service},
      {.name = "--idle-judges",
       .metavar = "N",
       .help = "judge processes kept per environment between verdicts, at least: as many as judged at once "
               "within the last --idle-judge-seconds when that is more (the least recently used closed past "
               "it); a verdict that finds none idle forks one; 0: none kept",
       .default_text = "64",
       .section = service},
      {.name = "--idle-judge-seconds",
       .metavar = "SECONDS",
       .help = "a kept judge process (or recycled session process) nothing took for this long is closed (up "
               "to --idle-judges judges and 256 sessions per environment wait otherwise); 0: kept until needed",
       .default_text = "60",
       .section = service},
      {.name = "--max-running-calls",
       .metavar = "N",
       .help = "tool calls running in session processes at once; the rest wait, first come first served (a call "
               "running 10 ms stops counting): on few cores this shortens the tail the kernel's scheduler makes, "
               "for somewhat fewer calls/s (2 cores, 64 clients, 8: p99 halved, about 8% fewer calls/s); 0: "
               "no bound",
       .default_text = "0",
       .section = service},
      {.name = "--episodes-per-session",
       .metavar = "N",
       .help = "episodes one session process serves, one after another: a closed session's process is put "
               "back to the zygote's state (data, scratch files, tools.py's globals; refused when a thread, a "
               "process, a PRAGMA or a TEMP object of the episode remains) and serves the next create; 1: a "
               "fresh process per session. 1 for tools that keep state in closures or other modules",
       .default_text = "64",
       .section = service},
      {.name = "--session-ttl",
       .metavar = "SECONDS",
       .help = "a session idle this long is closed as \"expired\"",
       .default_text = "600",
       .section = service},
      {.name = "--trajectories",
       .metavar = "FILE.sqlite",
       .help = "record every episode; over HTTP the viewer reads them at /ui/",
       .section = service},
      {.name = "--runs",
       .metavar = "DIR",
       .help = "with --trajectories, over HTTP: the viewer also shows the synthesis runs in DIR (envforge synth's run "
               "databases) at /ui/#/runs",
       .section = service},
      {.name = "--server-id",
       .metavar = "ID",
       .help =
           "this server's name in a fleet behind a load balancer (letters, digits, '_'): handles become "
           "s-ID-<hex> and session/create answers \"server\": ID; SIGUSR1 then stops new sessions (server/README.md)",
       .section = service},
      {.name = "--limits", .metavar = "JSON", .help = LimitsOption().help, .section = service},
      {.name = "--kernel-pool",
       .metavar = "N",
       .help = "interpreter environments: ready Jupyter kernels kept per environment, refilled in the background; 0: "
               "each session waits for one to start",
       .default_text = "2",
       .section = service},
      {.name = "--code-ready-copies",
       .metavar = "N",
       .help = "code environments: working copies of a task's repository made ahead once it has had a session; 0: each "
               "session copies its own",
       .default_text = "2",
       .section = service},
      {.name = "--stdio", .help = "one JSON-RPC message per line on stdin/stdout instead of HTTP", .section = stdio},
      {.name = "--mcp", .help = "the MCP dialect (with --stdio; over HTTP use POST /mcp)", .section = stdio}};
  for (OptionDecl& option : ListenerOptions(http)) options.push_back(std::move(option));
  const std::vector<OptionDecl> rest = {
      {.name = "--max-payload",
       .metavar = "BYTES",
       .help = "request body / WebSocket message limit; past it 413",
       .default_text = "16777216",
       .section = http},
      {.name = "--io-threads",
       .metavar = "N",
       .help = "network threads",
       .default_text = "one per two usable cores, at least 1",
       .section = http,
       .computed = true},
      {.name = "--max-connections",
       .metavar = "N",
       .help = "open connections at most; past it 503",
       .default_text = "4096, or half the descriptor limit when that is lower",
       .section = http,
       .computed = true},
      {.name = "--max-unauthenticated",
       .metavar = "N",
       .help = "of those, connections not yet authenticated; a new one past it evicts the oldest, so the rest stays "
               "for clients with the token",
       .default_text = "max-connections/4",
       .section = http,
       .computed = true},
      {.name = "--max-unauthenticated-per-peer",
       .metavar = "N",
       .help = "of those, from one address",
       .default_text = "max-unauthenticated/4",
       .section = http,
       .computed = true},
      {.name = "--header-timeout-ms",
       .metavar = "MS",
       .help = "an unauthenticated connection's request header must arrive whole within this",
       .default_text = "5000",
       .section = http},
      {.name = "--model",
       .metavar = "MODEL_DIR",
       .help = "serve this model with the embedded engine (= --backend embedded:DIR); without --model or --backend, "
               "/v1 answers 503; --token also guards /v1",
       .section = v1},
      {.name = "--backend",
       .metavar = "SPEC",
       .help = "embedded:DIR | openai:URL | scripted:FILE.jsonl",
       .section = v1},
      {.name = "--model-name",
       .metavar = "NAME",
       .help = "the name clients use",
       .default_text = "the model directory's name",
       .section = v1,
       .computed = true},
      {.name = "--device",
       .metavar = "cpu|cuda|auto",
       .help = "where the embedded engine runs",
       .default_text = "cpu",
       .section = v1},
      {.name = "--context-window",
       .metavar = "N",
       .help = "tokens",
       .default_text = "the model's max_position_embeddings",
       .section = v1,
       .computed = true},
      {.name = "--v1-workers",
       .metavar = "N",
       .help = "completions running at once, batched together by the engine",
       .default_text = "64",
       .section = v1},
      {.name = "--v1-max-queue",
       .metavar = "N",
       .help = "completions waiting beyond those; past it 429 + Retry-After",
       .default_text = "256",
       .section = v1}};
  options.insert(options.end(), rest.begin(), rest.end());
  const std::vector<OptionDecl> judge = SearchJudgeOptions("search environments");
  options.insert(options.end(), judge.begin(), judge.end());
  return options;
}

}  // namespace

std::vector<Command> ServeCommands() {
  std::vector<OptionDecl> view_options = ListenerOptions("");
  view_options.push_back({.name = "--runs",
                          .metavar = "DIR",
                          .help = "also the synthesis runs in DIR (envforge synth's run databases) at /ui/#/runs"});
  view_options.push_back(
      {.name = "--envs",
       .metavar = "DIR|X.envdb",
       .help = "the environments an episode is replayed against from its page (envforge replay's --envs)"});
  return {
      {{.name = "serve",
        .summary =
            "JSON-RPC 2.0 over HTTP (POST /rpc), WebSocket (/ws) and MCP (POST /mcp), or over stdio; GET /health, "
            "GET /metrics (Prometheus); an OpenAI-compatible /v1 with --model or --backend",
        .details =
            "Every session is recorded with --trajectories. SIGTERM or SIGINT drains: calls in flight are answered "
            "and recorded, sessions closed, exit 0. SIGUSR1 stops new sessions only (a fleet's drain; --server-id).",
        .options = ServeOptions()},
       Serve},
      {{.name = "view",
        .positionals = "TRAJECTORIES.sqlite",
        .summary = "the trajectory viewer alone, read-only, at http://HOST:PORT/ui/",
        .details = "With a token, open http://HOST:PORT/ui/#token=T. SIGINT or SIGTERM stops it.",
        .options = std::move(view_options),
        .min_positional = 1,
        .max_positional = 1},
       View},
  };
}

}  // namespace envforge::cli
