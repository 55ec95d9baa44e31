// Idle connections held against a server (contract in idle_flood.h).
#include "apps/envforge/idle_flood.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace envforge::cli {

IdleFlood::IdleFlood(IdleFloodOptions options) : options_(std::move(options)) {}

IdleFlood::~IdleFlood() { Stop(); }

int IdleFlood::Open(size_t index) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (options_.peers > 0) {
    sockaddr_in local{};
    local.sin_family = AF_INET;
    local.sin_addr.s_addr = htonl(0x7F000002u + static_cast<uint32_t>(index % options_.peers));
    if (::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0) {
      ::close(fd);
      return -1;
    }
  }
  sockaddr_in remote{};
  remote.sin_family = AF_INET;
  remote.sin_port = htons(options_.port);
  ::inet_pton(AF_INET, options_.host.c_str(), &remote.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&remote), sizeof(remote)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

Status IdleFlood::Start() {
  in_addr parsed{};
  if (::inet_pton(AF_INET, options_.host.c_str(), &parsed) != 1) {
    return InvalidArgumentError("--idle-connections needs an IPv4 server address, got '" + options_.host + "'");
  }
  if (options_.peers > 250) return InvalidArgumentError("--idle-peers must be at most 250");
  if (options_.peers > 0 && (ntohl(parsed.s_addr) >> 24) != 127) {
    return InvalidArgumentError("--idle-peers needs a loopback server (127.0.0.0/8); use --idle-peers 0 otherwise");
  }
  fds_.assign(options_.connections, -1);
  for (size_t i = 0; i < fds_.size(); ++i) {
    fds_[i] = Open(i);
    ++(fds_[i] >= 0 ? connected_ : connect_failed_);
  }
  running_.store(true);
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

// Watches every socket: a close by the server (EOF or reset, maybe after a 503) is counted and,
// with reopen, replaced by a new connection.
void IdleFlood::Run() {
  std::vector<pollfd> polled;
  std::vector<size_t> slots;
  while (running_.load()) {
    polled.clear();
    slots.clear();
    for (size_t i = 0; i < fds_.size(); ++i) {
      if (fds_[i] < 0) continue;
      polled.push_back(pollfd{fds_[i], POLLIN, 0});
      slots.push_back(i);
    }
    open_now_.store(polled.size());
    if (::poll(polled.data(), polled.size(), 50) > 0) {
      for (size_t k = 0; k < polled.size(); ++k) {
        if (polled[k].revents == 0) continue;
        char buffer[512];
        ssize_t got = ::recv(polled[k].fd, buffer, sizeof(buffer), MSG_DONTWAIT);
        if (got > 0) {
          if (got >= 12 && std::memcmp(buffer + 9, "503", 3) == 0) ++answered_503_;
          continue;  // the close follows
        }
        if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        ++closed_by_server_;
        ::close(polled[k].fd);
        fds_[slots[k]] = -1;
      }
    }
    if (!options_.reopen) continue;
    for (size_t i = 0; i < fds_.size() && running_.load(); ++i) {
      if (fds_[i] >= 0) continue;
      fds_[i] = Open(i);
      if (fds_[i] >= 0) ++reopened_;
    }
  }
}

void IdleFlood::Stop() {
  running_.store(false);
  if (thread_.joinable()) thread_.join();
  for (int& fd : fds_) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
}

Json IdleFlood::Report() const {
  return Json{{"wanted", options_.connections},       {"peers", options_.peers},
              {"connected", connected_.load()},       {"connect_failed", connect_failed_.load()},
              {"open_now", open_now_.load()},         {"closed_by_server", closed_by_server_.load()},
              {"answered_503", answered_503_.load()}, {"reopened", reopened_.load()}};
}

}  // namespace envforge::cli
