// RpcClient: Beast HTTP/WebSocket client. Each call runs its asynchronous operations on the
// client's own io_context until they finish, with one deadline over the whole exchange (Beast's
// tcp_stream timeouts apply to asynchronous operations only). Writing and reading run
// concurrently, so a long pipeline never deadlocks on full socket buffers.
#include "server/rpc_client.h"

#include <sys/socket.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <cctype>
#include <cerrno>
#include <functional>
#include <map>

namespace envforge::server {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using ErrorCode = beast::error_code;
using Clock = std::chrono::steady_clock;

// A WebSocket connection idle this long is replaced before the next call: the server may have
// closed it (its idle timeout) while nobody was reading its pings.
constexpr std::chrono::seconds kWebSocketReuseLimit{20};

struct ParsedUrl {
  bool websocket = false;
  std::string host;  // without brackets
  std::string port;
  std::string path;
  std::string host_header;  // "host:port" as written
};

Result<ParsedUrl> ParseUrl(const std::string& url) {
  ParsedUrl parsed;
  std::string_view rest = url;
  if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
  } else if (rest.starts_with("ws://")) {
    parsed.websocket = true;
    rest.remove_prefix(5);
  } else {
    return InvalidArgumentError("url '" + url + "': expected http://HOST:PORT[/PATH] or ws://HOST:PORT[/PATH]");
  }
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  parsed.path = slash == std::string_view::npos ? std::string(parsed.websocket ? "/ws" : "/rpc")
                                                : std::string(rest.substr(slash));
  parsed.host_header = std::string(authority);
  std::string_view port;
  if (authority.starts_with("[")) {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return InvalidArgumentError("url '" + url + "': unterminated IPv6 literal");
    parsed.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (after.starts_with(":")) port = after.substr(1);
  } else {
    size_t colon = authority.rfind(':');
    parsed.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (parsed.host.empty()) return InvalidArgumentError("url '" + url + "': no host");
  if (port.empty()) port = "80";
  for (char c : port) {
    if (c < '0' || c > '9') return InvalidArgumentError("url '" + url + "': bad port '" + std::string(port) + "'");
  }
  parsed.port = std::string(port);
  return parsed;
}

// One answer as it came off the wire.
struct RawAnswer {
  Status status;  // transport failure for this slot
  unsigned http_status = 200;
  std::optional<std::string> body;  // nullopt: no body (HTTP 202/204)
};

Json RequestJson(const std::string& method, Json params, const std::optional<int64_t>& id) {
  Json request{{"jsonrpc", "2.0"}, {"method", method}};
  if (!params.is_null()) request["params"] = std::move(params);
  if (id) request["id"] = *id;
  return request;
}

// Reads a JSON-RPC response object into a reply; false when `json` is not one.
bool ReplyFromResponse(const Json& json, RpcReply* reply) {
  if (!json.is_object()) return false;
  if (json.contains("error") && json["error"].is_object()) {
    const Json& error = json["error"];
    RpcError rpc_error;
    rpc_error.code = error.value("code", 0);
    rpc_error.message =
        error.contains("message") && error["message"].is_string() ? error["message"].get<std::string>() : "";
    rpc_error.data = error.contains("data") ? error["data"] : Json();
    reply->error = std::move(rpc_error);
    return true;
  }
  if (json.contains("result")) {
    reply->result = json["result"];
    return true;
  }
  return false;
}

RpcReply TransportFailure(Status status) {
  RpcReply reply;
  reply.transport = std::move(status);
  return reply;
}

}  // namespace

Status RpcReply::status() const {
  if (!transport.ok()) return transport;
  if (error)
    return Status(StatusCodeForRpcError(error->code),
                  "rpc error " + std::to_string(error->code) + ": " + error->message);
  return Status::Ok();
}

class RpcClient::Impl {
 public:
  Impl(ParsedUrl url, RpcClientOptions options, std::string url_text)
      : url_(std::move(url)), options_(std::move(options)), url_text_(std::move(url_text)) {}

  ~Impl() { Close(); }

  Status Connect() {
    Close();
    auto deadline = Clock::now() + options_.timeout;
    ErrorCode ec;
    tcp::resolver resolver(io_);
    auto endpoints = resolver.resolve(url_.host, url_.port, tcp::resolver::numeric_service, ec);
    if (ec) return UnavailableError("cannot resolve '" + url_.host + "': " + ec.message());
    beast::tcp_stream stream(io_);
    stream.expires_at(deadline);
    ec = RunOp([&](auto handler) { stream.async_connect(endpoints, handler); });
    if (ec) return ConnectionError("cannot connect to " + url_text_, ec);
    stream.socket().set_option(tcp::no_delay(true), ec);
    if (!url_.websocket) {
      http_.emplace(std::move(stream));
      buffer_.clear();
      last_activity_ = Clock::now();
      return Status::Ok();
    }
    ws_.emplace(std::move(stream));
    ws_->set_option(websocket::stream_base::decorator([token = options_.token](websocket::request_type& request) {
      request.set(http::field::user_agent, "envforge-rpc-client");
      if (!token.empty()) request.set(http::field::authorization, "Bearer " + token);
    }));
    ws_->read_message_max(options_.max_message_bytes);
    ws_->auto_fragment(false);
    websocket::response_type response;
    beast::get_lowest_layer(*ws_).expires_at(deadline);
    const std::string target = pinned_session_.empty() ? url_.path : url_.path + "?session=" + pinned_session_;
    ec = RunOp([&](auto handler) { ws_->async_handshake(response, url_.host_header, target, handler); });
    if (ec) {
      ws_.reset();
      if (response.result() == http::status::unauthorized) {
        return UnauthenticatedError("WebSocket handshake with " + url_text_ +
                                    " refused: 401 unauthorized (wrong or missing token)");
      }
      if (response.result_int() != 0 && response.result() != http::status::switching_protocols) {
        return UnavailableError("WebSocket handshake with " + url_text_ + " refused: HTTP " +
                                std::to_string(response.result_int()) + " " + response.body());
      }
      return ConnectionError("WebSocket handshake with " + url_text_ + " failed", ec);
    }
    ws_->text(true);
    buffer_.clear();
    last_activity_ = Clock::now();
    return Status::Ok();
  }

  void PinSession(const std::string& handle) {
    // Handles are "s-" and hex digits; anything else is percent-encoded all the same.
    static constexpr char kHex[] = "0123456789ABCDEF";
    pinned_session_.clear();
    for (unsigned char ch : handle) {
      if (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
        pinned_session_ += static_cast<char>(ch);
      } else {
        pinned_session_ += '%';
        pinned_session_ += kHex[ch >> 4];
        pinned_session_ += kHex[ch & 15];
      }
    }
  }

  void Close() {
    ErrorCode ec;
    if (ws_) {
      auto& socket = beast::get_lowest_layer(*ws_).socket();
      socket.shutdown(tcp::socket::shutdown_both, ec);
      socket.close(ec);
      ws_.reset();
    }
    if (http_) {
      http_->socket().shutdown(tcp::socket::shutdown_both, ec);
      http_->socket().close(ec);
      http_.reset();
    }
    buffer_.clear();
  }

  // Sends the payloads, reads `answers_wanted` answers (HTTP: one per payload, always), reconnecting
  // first when the connection is gone. Every slot gets its status.
  std::vector<RawAnswer> Transfer(const std::vector<std::string>& payloads, size_t answers_wanted) {
    if (!url_.websocket) answers_wanted = payloads.size();
    Status ready = EnsureConnected();
    if (!ready.ok()) return std::vector<RawAnswer>(answers_wanted, RawAnswer{ready, 0, std::nullopt});

    std::vector<RawAnswer> answers;
    answers.reserve(answers_wanted);
    std::vector<http::request<http::string_body>> requests;
    if (!url_.websocket) {
      for (const auto& payload : payloads) requests.push_back(MakeHttpRequest(payload));
    }
    ErrorCode failure;
    auto fail = [&](const ErrorCode& ec) {
      if (!failure) failure = ec;
      ErrorCode ignored;
      LowestSocket().close(ignored);  // cancels the other direction's operation
    };
    auto deadline = Clock::now() + options_.timeout;
    if (ws_) beast::get_lowest_layer(*ws_).expires_at(deadline);
    if (http_) http_->expires_at(deadline);

    size_t written = 0;
    std::function<void()> write_next = [&] {
      if (written == payloads.size() || failure) return;
      auto on_written = [&](ErrorCode ec, size_t) {
        if (ec) return fail(ec);
        ++written;
        write_next();
      };
      if (ws_) {
        ws_->async_write(net::buffer(payloads[written]), on_written);
      } else {
        http::async_write(*http_, requests[written], on_written);
      }
    };
    std::optional<http::response_parser<http::string_body>> parser;
    std::function<void()> read_next = [&] {
      if (answers.size() == answers_wanted || failure) return;
      if (ws_) {
        ws_->async_read(buffer_, [&](ErrorCode ec, size_t) {
          if (ec) return fail(ec);
          answers.push_back(RawAnswer{Status::Ok(), 200, beast::buffers_to_string(buffer_.data())});
          buffer_.consume(buffer_.size());
          read_next();
        });
        return;
      }
      parser.emplace();
      parser->body_limit(options_.max_message_bytes);
      http::async_read(*http_, buffer_, *parser, [&](ErrorCode ec, size_t) {
        if (ec) return fail(ec);
        auto response = parser->release();
        RawAnswer answer{Status::Ok(), response.result_int(), std::nullopt};
        if (!response.body().empty() || response.result_int() == 200) answer.body = std::move(response.body());
        if (!response.keep_alive()) server_closes_ = true;
        answers.push_back(std::move(answer));
        read_next();
      });
    };
    write_next();
    read_next();
    io_.restart();
    io_.run();
    last_activity_ = Clock::now();

    if (failure || server_closes_) {
      Status lost = failure ? ConnectionError("connection to " + url_text_ + " lost", failure) : Status::Ok();
      Close();
      server_closes_ = false;
      while (answers.size() < answers_wanted)
        answers.push_back(RawAnswer{
            lost.ok() ? UnavailableError("the server closed the connection to " + url_text_) : lost, 0, std::nullopt});
    }
    return answers;
  }

  std::vector<RpcReply> Calls(const std::vector<std::pair<std::string, Json>>& calls) {
    std::vector<std::string> payloads;
    std::vector<int64_t> ids;
    for (const auto& [method, params] : calls) {
      int64_t id = next_id_++;
      ids.push_back(id);
      payloads.push_back(DumpJson(RequestJson(method, params, id)));
    }
    std::vector<RawAnswer> answers = Transfer(payloads, payloads.size());
    std::vector<RpcReply> replies(calls.size());
    if (!url_.websocket) {
      for (size_t i = 0; i < calls.size(); ++i) replies[i] = FromHttpAnswer(answers[i]);
      return replies;
    }
    // WebSocket answers arrive in completion order: match them by id.
    std::map<int64_t, size_t> slot_by_id;
    for (size_t i = 0; i < ids.size(); ++i) slot_by_id[ids[i]] = i;
    std::vector<bool> filled(calls.size(), false);
    std::vector<RpcReply> unmatched;
    for (auto& answer : answers) {
      if (!answer.status.ok()) {
        unmatched.push_back(TransportFailure(answer.status));
        continue;
      }
      auto parsed = ParseJson(answer.body.value_or(""), "answer");
      RpcReply reply;
      if (!parsed.ok() || !ReplyFromResponse(*parsed, &reply)) {
        unmatched.push_back(TransportFailure(DataLossError("not a JSON-RPC response from " + url_text_ + ": " +
                                                           answer.body.value_or("").substr(0, 200))));
        continue;
      }
      const Json& id = (*parsed)["id"];
      if (id.is_number_integer() && slot_by_id.count(id.get<int64_t>()) && !filled[slot_by_id[id.get<int64_t>()]]) {
        size_t slot = slot_by_id[id.get<int64_t>()];
        replies[slot] = std::move(reply);
        filled[slot] = true;
      } else {
        unmatched.push_back(std::move(reply));  // e.g. a parse error answered with id null
      }
    }
    size_t next_unmatched = 0;
    for (size_t i = 0; i < replies.size(); ++i) {
      if (filled[i]) continue;
      replies[i] = next_unmatched < unmatched.size()
                       ? std::move(unmatched[next_unmatched++])
                       : TransportFailure(DataLossError("no answer for request " + std::to_string(ids[i])));
    }
    return replies;
  }

  Status Notify(const std::string& method, Json params) {
    std::vector<RawAnswer> answers = Transfer({DumpJson(RequestJson(method, std::move(params), std::nullopt))}, 0);
    if (url_.websocket) return answers.empty() ? Status::Ok() : answers[0].status;
    if (!answers[0].status.ok()) return answers[0].status;
    unsigned code = answers[0].http_status;
    if (code == 202 || code == 204 || code == 200) return Status::Ok();
    return FromHttpAnswer(answers[0]).status();
  }

  Result<std::optional<std::string>> SendRaw(const std::string& payload) {
    std::vector<RawAnswer> answers = Transfer({payload}, 1);
    if (!answers[0].status.ok()) return answers[0].status;
    return answers[0].body;
  }

  bool websocket() const { return url_.websocket; }
  const std::string& url() const { return url_text_; }

 private:
  template <typename Start>
  ErrorCode RunOp(Start start) {
    ErrorCode result = net::error::would_block;
    start([&result](ErrorCode ec, auto&&...) { result = ec; });
    io_.restart();
    io_.run();
    return result;
  }

  Status ConnectionError(const std::string& what, const ErrorCode& ec) {
    if (ec == beast::error::timeout) {
      return DeadlineExceededError(what + ": no answer within " + std::to_string(options_.timeout.count()) + " ms");
    }
    return UnavailableError(what + ": " + ec.message());
  }

  tcp::socket& LowestSocket() { return ws_ ? beast::get_lowest_layer(*ws_).socket() : http_->socket(); }

  // A kept-alive HTTP connection the server has closed (idle timeout, restart) reads as end of
  // file; finding that out before sending avoids both a failed call and a resend.
  bool StillUsable() {
    if (ws_) return Clock::now() - last_activity_ < kWebSocketReuseLimit;
    if (!http_) return false;
    char byte;
    ssize_t got = ::recv(http_->socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }

  Status EnsureConnected() {
    if ((ws_ || http_) && StillUsable()) return Status::Ok();
    return Connect();
  }

  http::request<http::string_body> MakeHttpRequest(const std::string& payload) {
    http::request<http::string_body> request{http::verb::post, url_.path, 11};
    request.set(http::field::host, url_.host_header);
    request.set(http::field::user_agent, "envforge-rpc-client");
    request.set(http::field::content_type, "application/json");
    request.set(http::field::accept, "application/json");
    if (!options_.token.empty()) request.set(http::field::authorization, "Bearer " + options_.token);
    request.keep_alive(true);
    request.body() = payload;
    request.prepare_payload();
    return request;
  }

  RpcReply FromHttpAnswer(RawAnswer& answer) {
    if (!answer.status.ok()) return TransportFailure(answer.status);
    RpcReply reply;
    if (answer.body) {
      auto parsed = ParseJson(*answer.body, "answer");
      if (parsed.ok() && ReplyFromResponse(*parsed, &reply)) return reply;
    }
    std::string what =
        answer.http_status == 200 ? "not a JSON-RPC response" : "HTTP " + std::to_string(answer.http_status);
    return TransportFailure((answer.http_status == 200 ? DataLossError : UnavailableError)(
        what + " from " + url_text_ + (answer.body ? ": " + answer.body->substr(0, 200) : std::string())));
  }

  ParsedUrl url_;
  RpcClientOptions options_;
  std::string url_text_;
  net::io_context io_{1};
  std::optional<beast::tcp_stream> http_;
  std::optional<websocket::stream<beast::tcp_stream>> ws_;
  beast::flat_buffer buffer_;
  bool server_closes_ = false;
  int64_t next_id_ = 1;
  Clock::time_point last_activity_;
  std::string pinned_session_;  // percent-encoded; empty: none (PinSession)
};

Result<std::unique_ptr<RpcClient>> RpcClient::Connect(const std::string& url, RpcClientOptions options) {
  ENVFORGE_ASSIGN_OR_RETURN(ParsedUrl parsed, ParseUrl(url));
  if (options.timeout.count() <= 0) return InvalidArgumentError("RpcClient: timeout must be positive");
  try {
    auto impl = std::make_unique<Impl>(std::move(parsed), std::move(options), url);
    ENVFORGE_RETURN_IF_ERROR(impl->Connect());
    return std::unique_ptr<RpcClient>(new RpcClient(std::move(impl)));
  } catch (const std::exception& e) {
    return InternalError(std::string("RpcClient: ") + e.what());
  }
}

RpcClient::RpcClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RpcClient::~RpcClient() = default;

Result<Json> RpcClient::Call(const std::string& method, Json params) {
  RpcReply reply = CallDetailed(method, std::move(params));
  if (!reply.ok()) return reply.status();
  return std::move(reply.result);
}

RpcReply RpcClient::CallDetailed(const std::string& method, Json params) {
  try {
    return std::move(impl_->Calls({{method, std::move(params)}})[0]);
  } catch (const std::exception& e) {
    impl_->Close();
    return TransportFailure(InternalError(std::string("RpcClient: ") + e.what()));
  }
}

std::vector<RpcReply> RpcClient::CallPipelined(const std::vector<std::pair<std::string, Json>>& calls) {
  if (calls.empty()) return {};
  try {
    return impl_->Calls(calls);
  } catch (const std::exception& e) {
    impl_->Close();
    return std::vector<RpcReply>(calls.size(), TransportFailure(InternalError(std::string("RpcClient: ") + e.what())));
  }
}

Status RpcClient::Notify(const std::string& method, Json params) {
  try {
    return impl_->Notify(method, std::move(params));
  } catch (const std::exception& e) {
    impl_->Close();
    return InternalError(std::string("RpcClient: ") + e.what());
  }
}

Result<std::optional<std::string>> RpcClient::SendRaw(const std::string& payload) {
  try {
    return impl_->SendRaw(payload);
  } catch (const std::exception& e) {
    impl_->Close();
    return InternalError(std::string("RpcClient: ") + e.what());
  }
}

void RpcClient::PinSession(const std::string& handle) { impl_->PinSession(handle); }
void RpcClient::Close() { impl_->Close(); }
bool RpcClient::websocket() const { return impl_->websocket(); }
const std::string& RpcClient::url() const { return impl_->url(); }

}  // namespace envforge::server
