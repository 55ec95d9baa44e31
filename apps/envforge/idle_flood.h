// The idle-connection flood of `envforge bench serve --idle-connections N`: N TCP connections to
// the server that never send a byte (an unauthenticated client holding sockets), kept open while
// the bench's authorized clients run, to show what the server's admission bounds do
// (server/http_server.h, "Connection admission").
//
// The connections come from `peers` loopback source addresses (127.0.0.2, 127.0.0.3, ...; only
// for a loopback server) so that the per-peer and the overall bounds can both be exercised. With
// `reopen`, a connection the server closes is opened again at once (a persistent attacker), so
// the pressure lasts for the whole run.
//
// Thread safety: Start, Stop and Report from one thread; the flood runs on its own thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "base/json.h"
#include "base/status.h"

namespace envforge::cli {

struct IdleFloodOptions {
  std::string host;  // an IPv4 literal
  uint16_t port = 0;
  size_t connections = 0;
  size_t peers = 1;  // source addresses 127.0.0.2 ... 127.0.0.(peers + 1); 0: the kernel picks
  bool reopen = false;
};

class IdleFlood {
 public:
  explicit IdleFlood(IdleFloodOptions options);
  ~IdleFlood();
  IdleFlood(const IdleFlood&) = delete;
  IdleFlood& operator=(const IdleFlood&) = delete;

  // Opens every connection (blocking until each connect has finished or failed), then keeps them
  // on the flood thread. InvalidArgument for a non-IPv4 host or peers > 250.
  Status Start();
  // Closes every connection and joins the thread.
  void Stop();
  // {"wanted", "connected", "connect_failed", "open_now", "closed_by_server", "answered_503",
  //  "reopened", "peers"}: counts since Start.
  Json Report() const;

 private:
  int Open(size_t index);  // a connected socket or -1
  void Run();

  IdleFloodOptions options_;
  std::vector<int> fds_;
  std::thread thread_;
  std::atomic<bool> running_{false};
  std::atomic<uint64_t> connected_{0}, connect_failed_{0}, closed_by_server_{0}, answered_503_{0}, reopened_{0};
  std::atomic<uint64_t> open_now_{0};
};

}  // namespace envforge::cli
