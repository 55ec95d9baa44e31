// A Python HTTP test server (a script under tests/ that binds an ephemeral port and writes it to
// the file named by its first argument), started for a test binary and SIGKILLed with the object.
// Shared by the suites that talk to recorded-response servers (the openai backend, search APIs).
#pragma once

#include <doctest/doctest.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "base/fd.h"
#include "base/json.h"
#include "tests/temp_dir.h"

extern char** environ;

namespace envforge::testing {

class PythonTestServer {
 public:
  explicit PythonTestServer(const std::string& script) {
    const std::string port_file = dir_ / "port";
    const std::string stderr_file = dir_ / "server.stderr";
    std::vector<std::string> argv = {"/usr/bin/python3", script, port_file};
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, stderr_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<char*> args;
    for (auto& arg : argv) args.push_back(arg.data());
    args.push_back(nullptr);
    const int error = posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    REQUIRE_MESSAGE(error == 0, "cannot start " << script);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!std::filesystem::exists(port_file) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    Result<std::string> port = ReadFileToString(port_file);
    Result<std::string> server_stderr = ReadFileToString(stderr_file);
    INFO("server stderr: " << (server_stderr.ok() ? *server_stderr : std::string()));
    REQUIRE(port.ok());
    port_ = std::stoi(*port);
  }
  ~PythonTestServer() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  PythonTestServer(const PythonTestServer&) = delete;
  PythonTestServer& operator=(const PythonTestServer&) = delete;

  int port() const { return port_; }

  // GET path over a plain socket (not through the code under test); the body parsed as JSON.
  Json GetJson(const std::string& path) const {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    UniqueFd socket(fd);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port_));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
    std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    REQUIRE(WriteFull(fd, request).ok());
    std::string reply;
    char buffer[4096];
    for (ssize_t got; (got = ::read(fd, buffer, sizeof(buffer))) > 0;) reply.append(buffer, static_cast<size_t>(got));
    size_t body = reply.find("\r\n\r\n");
    REQUIRE(body != std::string::npos);
    Result<Json> json = ParseJson(reply.substr(body + 4), "test server reply");
    REQUIRE(json.ok());
    return *json;
  }

 private:
  TempDir dir_;
  pid_t pid_ = 0;
  int port_ = 0;
};

}  // namespace envforge::testing
