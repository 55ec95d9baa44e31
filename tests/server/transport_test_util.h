// Helpers of the transport suites: a real RpcService (the service suites' fixture environment,
// tests/server/service_test_util.h) behind a real HttpServer on an ephemeral 127.0.0.1 port; a raw
// blocking TCP connection for the clients that misbehave on purpose; and a child process for the
// CLI tests.
#pragma once

#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agents/trajectory_store.h"
#include "base/fd.h"
#include "base/json.h"
#include "server/http_server.h"
#include "server/rpc_client.h"
#include "tests/server/service_test_util.h"

extern char** environ;

namespace envforge::server::testing {

class TransportFixture {
 public:
  explicit TransportFixture(HttpServerOptions options = {}, ServiceFixtureOptions service_options = {})
      : service_fixture(service_options) {
    options.host = "127.0.0.1";
    options.port = 0;
    auto created = HttpServer::Create(*service_fixture.service, options);
    REQUIRE_MESSAGE(created.ok(), created.status().ToString());
    server = std::move(created).value();
    server->Start();
  }
  ~TransportFixture() { server->Stop(); }

  RpcService& service() { return *service_fixture.service; }
  uint16_t port() const { return server->port(); }
  std::string HttpUrl(const std::string& path = "/rpc") const {
    return "http://127.0.0.1:" + std::to_string(port()) + path;
  }
  std::string WsUrl() const { return "ws://127.0.0.1:" + std::to_string(port()) + "/ws"; }

  std::unique_ptr<RpcClient> Client(const std::string& url, const std::string& token = "") {
    RpcClientOptions options;
    options.token = token;
    options.timeout = std::chrono::seconds(30);
    auto client = RpcClient::Connect(url, options);
    REQUIRE_MESSAGE(client.ok(), client.status().ToString());
    return std::move(client).value();
  }

  // Declared first: destroyed last, after the server.
  ServiceFixture service_fixture;
  std::unique_ptr<HttpServer> server;
};

// Steps of an episode committed to the fixture's trajectory store so far (-1 when unknown).
inline int64_t StepsRecorded(TransportFixture& fixture, const std::string& trajectory) {
  auto* store = fixture.service().trajectories();
  if (store == nullptr || !store->Flush().ok()) return -1;
  auto episode = store->Get(trajectory);
  return episode.ok() ? static_cast<int64_t>(episode->steps.size()) : -1;
}

// A result that must be OK.
inline Json MustCall(RpcClient& client, const std::string& method, Json params = Json::object()) {
  auto result = client.Call(method, std::move(params));
  INFO(method << ": " << result.status().ToString());
  REQUIRE(result.ok());
  return *result;
}

struct RawResponse {
  int status = 0;
  std::string head;  // status line and headers, lower-cased header names kept as sent
  std::string body;
  bool Header(const std::string& needle) const {
    std::string lower_head, lower_needle;
    for (char c : head) lower_head += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (char c : needle) lower_needle += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return lower_head.find(lower_needle) != std::string::npos;
  }
};

// A blocking TCP connection to 127.0.0.1 for hand-written (and deliberately broken) requests.
// `source` picks the local address (any of 127.0.0.0/8), so that a test can play several peers.
class RawConnection {
 public:
  explicit RawConnection(uint16_t port, const char* source = nullptr) {
    fd_ = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    REQUIRE(fd_.valid());
    if (source != nullptr) {
      sockaddr_in local{};
      local.sin_family = AF_INET;
      REQUIRE(::inet_pton(AF_INET, source, &local.sin_addr) == 1);
      REQUIRE(::bind(fd_.get(), reinterpret_cast<sockaddr*>(&local), sizeof(local)) == 0);
    }
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
    int one = 1;
    ::setsockopt(fd_.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }

  bool Send(std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t sent = ::send(fd_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (sent <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(sent));
    }
    return true;
  }

  // Reads one response (Content-Length framed, or up to the close). nullopt when the connection
  // closed (or nothing came within `timeout`) before a whole response.
  std::optional<RawResponse> ReadResponse(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      size_t head_end = pending_.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        RawResponse response;
        response.head = pending_.substr(0, head_end);
        if (response.head.size() > 12) response.status = std::stoi(response.head.substr(9, 3));
        std::optional<size_t> length;
        size_t at = response.head.find("\r\n");
        while (at != std::string::npos) {
          size_t next = response.head.find("\r\n", at + 2);
          std::string line =
              response.head.substr(at + 2, next == std::string::npos ? std::string::npos : next - at - 2);
          std::string lower;
          for (char c : line) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
          if (lower.rfind("content-length:", 0) == 0) length = std::stoul(line.substr(15));
          at = next;
        }
        size_t body_start = head_end + 4;
        if (length && pending_.size() >= body_start + *length) {
          response.body = pending_.substr(body_start, *length);
          pending_.erase(0, body_start + *length);
          return response;
        }
        if (!length && (response.status == 204 || response.status == 101 || response.status == 100)) {
          pending_.erase(0, body_start);
          return response;
        }
      }
      if (!ReadMore(deadline)) return std::nullopt;
    }
  }

  // True when the connection is still open after `timeout` of silence (nothing arrived, no close).
  bool StaysOpen(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    size_t before = pending_.size();
    while (ReadMore(deadline)) {
    }
    return !closed_ && pending_.size() == before;
  }

  // True when the server closes the connection before `timeout` (data it sends first is kept).
  bool WaitForClose(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (ReadMore(deadline)) {
    }
    return closed_;
  }

  void Close() { fd_.Reset(); }
  const std::string& pending() const { return pending_; }

 private:
  bool ReadMore(std::chrono::steady_clock::time_point deadline) {
    if (closed_) return false;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd poll_fd{fd_.get(), POLLIN, 0};
    if (::poll(&poll_fd, 1, static_cast<int>(left.count())) <= 0) return false;
    char buffer[65536];
    ssize_t got = ::recv(fd_.get(), buffer, sizeof(buffer), 0);
    if (got <= 0) {
      closed_ = true;
      return false;
    }
    pending_.append(buffer, static_cast<size_t>(got));
    return true;
  }

  UniqueFd fd_;
  std::string pending_;
  bool closed_ = false;
};

inline std::string HttpRequestText(const std::string& method, const std::string& path, const std::string& body,
                                   const std::vector<std::string>& headers = {}) {
  std::string text = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (const auto& header : headers) text += header + "\r\n";
  if (!body.empty() || method == "POST") {
    text += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  return text + "\r\n" + body;
}

inline std::string RpcText(const std::string& method, Json params = Json::object(), Json id = 1) {
  Json request{{"jsonrpc", "2.0"}, {"method", method}, {"params", std::move(params)}};
  if (!id.is_null()) request["id"] = std::move(id);
  return DumpJson(request);
}

// A child process started with posix_spawn; stderr goes to a file for the failure messages.
// With a stdout path, stdin is a pipe (WriteStdin) and stdout goes to that file (the stdio
// transport); otherwise stdin is /dev/null and stdout is inherited.
class ChildProcess {
 public:
  ChildProcess(const std::vector<std::string>& argv, const std::string& stderr_path,
               const std::string& stdout_path = "")
      : stderr_path_(stderr_path) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int stdin_pipe[2] = {-1, -1};
    if (stdout_path.empty()) {
      posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    } else {
      REQUIRE(::pipe2(stdin_pipe, O_CLOEXEC) == 0);
      posix_spawn_file_actions_adddup2(&actions, stdin_pipe[0], 0);
      posix_spawn_file_actions_addopen(&actions, 1, stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    }
    std::vector<char*> args;
    for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    int error = posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (stdin_pipe[0] >= 0) {
      ::close(stdin_pipe[0]);
      stdin_.Reset(stdin_pipe[1]);
    }
    REQUIRE_MESSAGE(error == 0, "cannot start " << argv[0]);
  }

  // Writes to the child's stdin (a pipe when a stdout path was given).
  bool WriteStdin(std::string_view text) {
    while (!text.empty()) {
      ssize_t wrote = ::write(stdin_.get(), text.data(), text.size());
      if (wrote <= 0) return false;
      text.remove_prefix(static_cast<size_t>(wrote));
    }
    return true;
  }
  ~ChildProcess() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  void Signal(int signal_number) { ::kill(pid_, signal_number); }
  // The exit status (WEXITSTATUS) or -signal; nullopt when still running after `timeout`.
  std::optional<int> Wait(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      pid_t done = ::waitpid(pid_, &status, WNOHANG);
      if (done == pid_) {
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return std::nullopt;
  }
  std::string StderrText() const {
    auto text = ReadFileToString(stderr_path_);
    return text.ok() ? *text : std::string();
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = 0;
  bool exited_ = false;
  std::string stderr_path_;
  UniqueFd stdin_;
};

inline std::string Envforge() { return ExecutableDirectory() + "/envforge"; }

// `envforge bench serve` at `url` on the fixture bundle's episodes (sum_task: `steps` incr calls,
// then the answer 5, --json), `extra` options after them.
inline std::vector<std::string> BenchServeFixture(const std::string& url, int sessions, int steps, int concurrency,
                                                  const std::vector<std::string>& extra) {
  std::vector<std::string> command = {Envforge(),
                                      "bench",
                                      "serve",
                                      "--url",
                                      url,
                                      "--env",
                                      "manager_fixture",
                                      "--task",
                                      "sum_task",
                                      "--tool",
                                      "incr",
                                      "--answer",
                                      "5",
                                      "--sessions",
                                      std::to_string(sessions),
                                      "--steps",
                                      std::to_string(steps),
                                      "--concurrency",
                                      std::to_string(concurrency),
                                      "--json"};
  command.insert(command.end(), extra.begin(), extra.end());
  return command;
}

// `envforge serve` over a directory holding the fixture environment, on an ephemeral port.
class ServeProcess {
 public:
  explicit ServeProcess(std::vector<std::string> extra = {}) {
    std::filesystem::create_directories(dir / "envs");
    sandbox::testing::WriteFixtureBundle(dir / "envs/fixture.envdb");
    trajectories = dir / "trajectories.sqlite";
    std::vector<std::string> argv = {Envforge(),       "serve",      "--envs",      dir / "envs",
                                     "--port",         "0",          "--port-file", dir / "port",
                                     "--trajectories", trajectories, "--limits",    R"({"wall_time_ms": 3000})"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    child.emplace(argv, dir / "serve.stderr");
    bool listening = WaitFor([&] { return ReadFileToString(dir / "port").ok(); }, std::chrono::seconds(60));
    INFO(child->StderrText());
    REQUIRE(listening);
    port = static_cast<uint16_t>(std::stoi(*ReadFileToString(dir / "port")));
  }

  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port); }

  // The recorded episode, after the server exited (its store flushed).
  agents::Episode Episode(const std::string& id) const {
    auto reader = agents::TrajectoryReader::Open(trajectories);
    REQUIRE_MESSAGE(reader.ok(), reader.status().ToString());
    auto episode = (*reader)->Get(id);
    REQUIRE_MESSAGE(episode.ok(), episode.status().ToString());
    return *episode;
  }

  TempDir dir;
  std::string trajectories;
  std::optional<ChildProcess> child;
  uint16_t port = 0;
};

}  // namespace envforge::server::testing
