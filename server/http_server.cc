// HttpServer: the listener, the io threads and the life cycle; connections live in
// server/internal/http_connection.cc.
#include "server/http_server.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "base/log.h"
#include "server/internal/http_connection.h"
#include "server/internal/http_shared.h"
#include "server/internal/request_policy.h"

namespace envforge::server {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using ErrorCode = boost::system::error_code;

class HttpServer::Impl {
 public:
  Impl(RpcService& service, HttpServerOptions options)
      : shared_(std::make_shared<internal::TransportShared>(service, std::move(options))),
        io_(shared_->options().io_threads),
        work_(net::make_work_guard(io_)),
        acceptor_(net::make_strand(io_)),
        retry_timer_(acceptor_.get_executor()) {}

  ~Impl() { Stop(); }

  Status Listen() {
    const HttpServerOptions& options = shared_->options();
    ErrorCode ec;
    tcp::resolver resolver(io_);
    auto endpoints = resolver.resolve(options.host, std::to_string(options.port),
                                      tcp::resolver::numeric_service | tcp::resolver::passive, ec);
    if (ec || endpoints.empty()) {
      return InvalidArgumentError("cannot resolve host '" + options.host + "': " + ec.message());
    }
    tcp::endpoint endpoint = endpoints.begin()->endpoint();
    std::string where = options.host + ":" + std::to_string(options.port);
    acceptor_.open(endpoint.protocol(), ec);
    if (ec) return UnavailableError("cannot open a socket for " + where + ": " + ec.message());
    acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    acceptor_.bind(endpoint, ec);
    if (ec) return UnavailableError("cannot bind " + where + ": " + ec.message());
    acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) return UnavailableError("cannot listen on " + where + ": " + ec.message());
    port_ = acceptor_.local_endpoint(ec).port();
    return Status::Ok();
  }

  void Start() {
    std::lock_guard<std::mutex> lock(lifecycle_mutex_);
    if (started_ || stopping_) return;
    started_ = true;
    net::post(acceptor_.get_executor(), [this] { DoAccept(); });
    for (int i = 0; i < shared_->options().io_threads; ++i) {
      threads_.emplace_back([this] { RunIo(); });
    }
  }

  void Run() {
    Start();
    std::unique_lock<std::mutex> lock(lifecycle_mutex_);
    stopped_cv_.wait(lock, [this] { return stopped_; });
  }

  void BeginDrain() {
    shared_->SetDraining();
    StopAccepting();
    shared_->service().BeginDrain();
  }

  void Stop() {
    {
      std::unique_lock<std::mutex> lock(lifecycle_mutex_);
      if (stopping_) {
        stopped_cv_.wait(lock, [this] { return stopped_; });
        return;
      }
      stopping_ = true;
    }
    // From here no service callback posts to a strand: late answers are dropped.
    shared_->CloseGate();
    StopAccepting();
    shared_->CloseAll();
    // Give the connections a moment to run their close handlers on the io threads, so sockets
    // are shut down cleanly before the io_context stops.
    for (int i = 0; i < 100 && shared_->open_connections() > 0 && !threads_.empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    work_.reset();
    io_.stop();
    for (auto& thread : threads_) {
      if (thread.joinable()) thread.join();
    }
    threads_.clear();
    shared_->ClearRegistry();
    std::lock_guard<std::mutex> lock(lifecycle_mutex_);
    stopped_ = true;
    stopped_cv_.notify_all();
  }

  uint16_t port() const { return port_; }
  internal::TransportShared& shared() { return *shared_; }

 private:
  // An exception escaping a handler must not end an io thread (nor the process): log it and run
  // on (the Asio-documented pattern).
  void RunIo() {
    for (;;) {
      try {
        io_.run();
        return;
      } catch (const std::exception& e) {
        ENVFORGE_LOG(kError) << "http server: a handler threw: " << e.what();
      } catch (...) {
        ENVFORGE_LOG(kError) << "http server: a handler threw a non-standard exception";
      }
    }
  }

  void StopAccepting() {
    net::post(acceptor_.get_executor(), [this] {
      accepting_ = false;
      ErrorCode ec;
      retry_timer_.cancel();
      acceptor_.close(ec);
    });
    // When the io threads never ran, close here (no handler would).
    std::lock_guard<std::mutex> lock(lifecycle_mutex_);
    if (!started_) {
      ErrorCode ec;
      acceptor_.close(ec);
    }
  }

  void DoAccept() {
    if (!accepting_) return;
    acceptor_.async_accept(net::make_strand(io_), [this](ErrorCode ec, tcp::socket socket) {
      if (!accepting_ || ec == net::error::operation_aborted) return;
      if (ec) {
        // Out of descriptors (EMFILE) and the like: back off instead of spinning.
        ENVFORGE_LOG(kWarn) << "http server: accept failed: " << ec.message();
        retry_timer_.expires_after(std::chrono::milliseconds(50));
        retry_timer_.async_wait([this](ErrorCode wait_ec) {
          if (!wait_ec) DoAccept();
        });
        return;
      }
      internal::StartHttpConnection(shared_, std::move(socket));
      DoAccept();
    });
  }

  std::shared_ptr<internal::TransportShared> shared_;
  net::io_context io_;
  // Keeps io_.run() from returning while no connection has I/O pending (one whose request waits
  // for the service has none, and the acceptor is closed while draining): the service's answer
  // is then still posted and written. Only Stop ends the io threads.
  net::executor_work_guard<net::io_context::executor_type> work_;
  tcp::acceptor acceptor_;
  net::steady_timer retry_timer_;
  bool accepting_ = true;  // on the acceptor's strand
  uint16_t port_ = 0;
  std::vector<std::thread> threads_;
  std::mutex lifecycle_mutex_;
  std::condition_variable stopped_cv_;
  bool started_ = false;
  bool stopping_ = false;  // Stop has begun
  bool stopped_ = false;   // Stop has finished
};

Status ValidateHttpServerOptions(HttpServerOptions* options) {
  if (options->io_threads < 1 || options->io_threads > 256) {
    return InvalidArgumentError("io_threads must be within [1, 256], got " + std::to_string(options->io_threads));
  }
  if (options->max_payload_bytes == 0) return InvalidArgumentError("max_payload_bytes must be positive");
  if (options->read_timeout.count() <= 0 || options->idle_timeout.count() <= 0 ||
      options->header_timeout.count() <= 0) {
    return InvalidArgumentError("read_timeout, idle_timeout and header_timeout must be positive");
  }
  if (options->max_in_flight_per_connection == 0)
    return InvalidArgumentError("max_in_flight_per_connection must be positive");
  if (options->max_unauthenticated_per_peer < 1 ||
      options->max_unauthenticated_per_peer > options->max_unauthenticated_connections ||
      options->max_unauthenticated_connections > options->max_connections) {
    return InvalidArgumentError("connection bounds must satisfy 1 <= max_unauthenticated_per_peer (" +
                                std::to_string(options->max_unauthenticated_per_peer) +
                                ") <= max_unauthenticated_connections (" +
                                std::to_string(options->max_unauthenticated_connections) + ") <= max_connections (" +
                                std::to_string(options->max_connections) + ")");
  }
  for (std::string& origin : options->allowed_origins) {
    ENVFORGE_ASSIGN_OR_RETURN(origin, internal::NormalizeAllowedOrigin(origin));
  }
  return Status::Ok();
}

Result<std::unique_ptr<HttpServer>> HttpServer::Create(RpcService& service, HttpServerOptions options) {
  ENVFORGE_RETURN_IF_ERROR(ValidateHttpServerOptions(&options));
  try {
    auto impl = std::make_unique<Impl>(service, std::move(options));
    ENVFORGE_RETURN_IF_ERROR(impl->Listen());
    return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
  } catch (const std::exception& e) {
    return InternalError(std::string("cannot create the http server: ") + e.what());
  }
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() = default;

uint16_t HttpServer::port() const { return impl_->port(); }
const HttpServerOptions& HttpServer::options() const { return impl_->shared().options(); }
void HttpServer::Start() { impl_->Start(); }
void HttpServer::Run() { impl_->Run(); }
void HttpServer::BeginDrain() { impl_->BeginDrain(); }
bool HttpServer::WaitIdle(std::chrono::milliseconds timeout) { return impl_->shared().WaitIdle(timeout); }
void HttpServer::Stop() { impl_->Stop(); }
size_t HttpServer::in_flight() const { return impl_->shared().in_flight(); }
size_t HttpServer::open_connections() const { return impl_->shared().open_connections(); }

}  // namespace envforge::server
