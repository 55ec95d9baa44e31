// envforge bench serve: drives a running `envforge serve` through real sockets and reconciles
// what the clients saw with what the server recorded.
//
// `--concurrency` asynchronous clients (Boost.Beast over one io_context and one or two threads,
// not a thread per client) each run whole episodes in turn: session/create, `--steps` tools/call,
// session/submit, session/close, one request at a time per connection (an agent waits for each
// observation). Latency is measured per method from writing the request to reading its answer.
//
// --chaos adds two faults while the load runs: (1) a killer thread SIGKILLs a random session
// process of the server every --chaos-interval-ms (found through /proc: the server is the process
// listening on the URL's port, its zygotes are its envforge-worker children, the sessions are
// theirs), so those episodes end as crashed; (2) clients drop their connection right after writing
// a tools/call (about --chaos-drop-rate of them), reconnect and go on with the same session. The
// server must stay up and still record every call it answered.
//
// --idle-connections N holds N connections that never send a byte (from --idle-peers loopback
// source addresses; --idle-reopen opens each again when the server closes it) for the whole run,
// and reports what the server did with them and its descriptors and memory (apps/envforge/
// idle_flood.h): the load's latencies are then those of authorized clients under that pressure.
//
// Reconciliation (--trajectories FILE, the server's store): once the server's store queue is
// empty, every episode the clients created must be recorded and ended, and each must hold at
// least the steps the clients saw answered (tools/call results and submits that reached the
// session). "lost" counts answered steps missing from the store and must be 0; calls whose
// connection was dropped are "uncertain" (the server ran them, the client never saw the answer)
// and may add recorded steps. Exit code 1 when lost > 0 or an episode is missing or open.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agents/trajectory_store.h"
#include "apps/envforge/cli_args.h"
#include "apps/envforge/commands.h"
#include "apps/envforge/percentiles.h"
#include "apps/envforge/idle_flood.h"
#include "base/json.h"
#include "server/rpc_client.h"

namespace envforge::cli {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using ErrorCode = beast::error_code;
using Clock = std::chrono::steady_clock;

constexpr std::chrono::seconds kRequestTimeout{60};

// A string member, or "" when it is absent or null (a server without --trajectories answers
// "trajectory": null).
std::string StringMember(const Json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}
const std::string kToolsCall = "tools/call";

struct BenchConfig {
  std::string url;  // as given
  bool websocket = true;
  std::string host, port, path, host_header;
  std::string token;
  std::string env, task;
  size_t sessions = 1000;
  size_t steps = 20;
  size_t concurrency = 256;
  int io_threads = 1;
  std::string tool;
  Json arguments = Json::object();
  std::string answer = "0";
  bool chaos = false;
  double drop_rate = 0.01;
  std::chrono::milliseconds kill_interval{100};
};

// What the clients know about one episode.
struct EpisodeTally {
  std::string handle;
  std::string trajectory;
  bool created = false;
  bool closed = false;
  bool crashed = false;
  int64_t answered_steps = 0;   // answers the client saw for calls the server records as steps
  int64_t uncertain_steps = 0;  // calls written whose answer never came (dropped connection)
};

struct ClientStats {
  std::map<std::string, std::vector<double>> latency_ms;
  std::map<std::string, uint64_t> errors;
  std::map<std::string, uint64_t> outcomes;
  uint64_t dropped = 0;
  uint64_t reconnects = 0;

  void MergeInto(ClientStats& total) const {
    for (const auto& [method, samples] : latency_ms) {
      auto& all = total.latency_ms[method];
      all.insert(all.end(), samples.begin(), samples.end());
    }
    for (const auto& [kind, n] : errors) total.errors[kind] += n;
    for (const auto& [kind, n] : outcomes) total.outcomes[kind] += n;
    total.dropped += dropped;
    total.reconnects += reconnects;
  }
};

struct LoadRun {
  const BenchConfig& config;
  net::io_context io;
  tcp::resolver::results_type endpoints;
  std::vector<EpisodeTally> episodes;
  std::atomic<size_t> next_episode{0};
  std::atomic<uint64_t> tool_calls_answered{0};
  std::atomic<uint64_t> episodes_done{0};
  std::atomic<size_t> active_clients{0};

  explicit LoadRun(const BenchConfig& c) : config(c), io(c.io_threads) { episodes.resize(c.sessions); }
};

// The answer to one request as a client sees it.
struct Reply {
  bool transport_ok = true;
  bool dropped = false;  // the client dropped the connection on purpose (chaos)
  std::string transport_error;
  Json response;  // the JSON-RPC response object
  bool ok() const { return transport_ok && response.contains("result"); }
  const Json& result() const { return response["result"]; }
  Json error() const { return response.is_object() ? response.value("error", Json::object()) : Json::object(); }
  int code() const { return error().is_object() ? error().value("code", 0) : 0; }
  std::string kind() const {
    if (!transport_ok) return dropped ? "dropped_by_chaos" : "transport";
    Json error = this->error();
    if (!error.is_object()) return "malformed_error";
    if (error.contains("data") && error["data"].is_object() && error["data"].contains("kind")) {
      return error["data"]["kind"].get<std::string>();
    }
    return "rpc_" + std::to_string(code());
  }
};

class LoadClient : public std::enable_shared_from_this<LoadClient> {
 public:
  LoadClient(LoadRun& run, uint32_t seed) : run_(run), strand_(net::make_strand(run.io)), timer_(strand_), rng_(seed) {}

  void Start() {
    ++run_.active_clients;
    net::post(strand_, [self = shared_from_this()] { self->Reconnect([self] { self->NextEpisode(); }); });
  }

  const ClientStats& stats() const { return stats_; }

 private:
  using Then = std::function<void()>;
  using OnReply = std::function<void(Reply)>;

  void Reconnect(Then then) {
    CloseStream();
    ++stats_.reconnects;
    beast::tcp_stream stream(strand_);
    stream.expires_after(kRequestTimeout);
    http_.emplace(std::move(stream));
    http_->async_connect(run_.endpoints, [self = shared_from_this(), then](ErrorCode ec, const tcp::endpoint&) {
      if (ec) return self->ConnectFailed(ec, then);
      ErrorCode ignored;
      self->http_->socket().set_option(tcp::no_delay(true), ignored);
      if (!self->run_.config.websocket) return then();
      self->ws_.emplace(std::move(*self->http_));
      self->http_.reset();
      self->ws_->set_option(websocket::stream_base::decorator([token = self->run_.config.token](websocket::request_type& request) {
        if (!token.empty()) request.set(http::field::authorization, "Bearer " + token);
      }));
      self->ws_->read_message_max(64u << 20);
      self->ws_->async_handshake(self->run_.config.host_header, self->run_.config.path, [self, then](ErrorCode handshake_ec) {
        if (handshake_ec) return self->ConnectFailed(handshake_ec, then);
        self->ws_->text(true);
        then();
      });
    });
  }

  void ConnectFailed(const ErrorCode& ec, Then then) {
    ++stats_.errors["connect: " + ec.message()];
    if (++connect_failures_ > 20) return Done();  // the server is gone: stop this client
    timer_.expires_after(std::chrono::milliseconds(100));
    timer_.async_wait([self = shared_from_this(), then](ErrorCode) { self->Reconnect(then); });
  }

  void CloseStream() {
    ErrorCode ignored;
    if (ws_) {
      beast::get_lowest_layer(*ws_).socket().shutdown(tcp::socket::shutdown_both, ignored);
      beast::get_lowest_layer(*ws_).socket().close(ignored);
      ws_.reset();
    }
    if (http_) {
      http_->socket().shutdown(tcp::socket::shutdown_both, ignored);
      http_->socket().close(ignored);
      http_.reset();
    }
    buffer_.clear();
  }

  // One request: write, then read its answer. With `may_drop`, chaos may close the connection
  // right after the write.
  void Send(const std::string& method, Json params, bool may_drop, OnReply on_reply) {
    std::string payload =
        DumpJson(Json{{"jsonrpc", "2.0"}, {"id", ++next_id_}, {"method", method}, {"params", std::move(params)}});
    SendPayload(method, std::move(payload), may_drop, std::move(on_reply));
  }

  // tools/call, its text assembled around the pre-serialised name and arguments: the client
  // shares the machine with the server it measures, so it keeps its own per-call work small.
  void SendToolCall(OnReply on_reply) {
    if (tool_call_tail_.empty()) {
      tool_call_tail_ = ",\"name\":" + DumpJson(run_.config.tool) + ",\"arguments\":" + DumpJson(run_.config.arguments) + "}}";
    }
    std::string payload = "{\"jsonrpc\":\"2.0\",\"id\":" + std::to_string(++next_id_) +
                          ",\"method\":\"tools/call\",\"params\":{\"session\":" + DumpJson(episode_->handle) + tool_call_tail_;
    SendPayload(kToolsCall, std::move(payload), true, std::move(on_reply));
  }

  void SendPayload(const std::string& method, std::string payload, bool may_drop, OnReply on_reply) {
    method_ = method;
    on_reply_ = std::move(on_reply);
    payload_ = std::move(payload);
    drop_after_write_ = may_drop && run_.config.chaos && std::uniform_real_distribution<double>(0, 1)(rng_) < run_.config.drop_rate;
    sent_at_ = Clock::now();
    auto self = shared_from_this();
    if (ws_) {
      beast::get_lowest_layer(*ws_).expires_after(kRequestTimeout);
      ws_->async_write(net::buffer(payload_), [self](ErrorCode ec, size_t) { self->OnWritten(ec); });
      return;
    }
    request_ = {http::verb::post, run_.config.path, 11};
    request_.set(http::field::host, run_.config.host_header);
    request_.set(http::field::content_type, "application/json");
    if (!run_.config.token.empty()) request_.set(http::field::authorization, "Bearer " + run_.config.token);
    request_.keep_alive(true);
    request_.body() = payload_;
    request_.prepare_payload();
    http_->expires_after(kRequestTimeout);
    http::async_write(*http_, request_, [self](ErrorCode ec, size_t) { self->OnWritten(ec); });
  }

  void OnWritten(const ErrorCode& ec) {
    if (ec) return Finish(Reply{false, false, "write: " + ec.message(), {}});
    if (drop_after_write_) {
      // Chaos: the client vanishes with its request in flight.
      CloseStream();
      ++stats_.dropped;
      return Finish(Reply{false, true, "dropped", {}});
    }
    auto self = shared_from_this();
    if (ws_) {
      ws_->async_read(buffer_, [self](ErrorCode read_ec, size_t) { self->OnAnswerText(read_ec, true); });
      return;
    }
    parser_.emplace();
    parser_->body_limit(64u << 20);
    http::async_read(*http_, buffer_, *parser_, [self](ErrorCode read_ec, size_t) { self->OnAnswerText(read_ec, false); });
  }

  void OnAnswerText(const ErrorCode& ec, bool websocket_answer) {
    if (ec) return Finish(Reply{false, false, "read: " + ec.message(), {}});
    std::string text;
    bool keep_alive = true;
    if (websocket_answer) {
      text = beast::buffers_to_string(buffer_.data());
      buffer_.consume(buffer_.size());
    } else {
      auto response = parser_->release();
      keep_alive = response.keep_alive();
      text = std::move(response.body());
    }
    stats_.latency_ms[method_].push_back(std::chrono::duration<double, std::milli>(Clock::now() - sent_at_).count());
    // The bulky members of a result (a tool's content, a new session's tools and prompt) are
    // never read here: skipping them keeps the client's parse cheap.
    Json parsed = Json::parse(
        text,
        [](int depth, Json::parse_event_t event, Json& parsed_value) {
          return !(event == Json::parse_event_t::key && depth == 2 &&
                   (parsed_value == "content" || parsed_value == "tools" || parsed_value == "prompt"));
        },
        /*allow_exceptions=*/false);
    if (!keep_alive) CloseStream();  // e.g. 413, or the server draining
    if (parsed.is_discarded() || !parsed.is_object()) return Finish(Reply{false, false, "not JSON-RPC: " + text.substr(0, 120), {}});
    Finish(Reply{true, false, {}, std::move(parsed)});
  }

  // Hands the reply over, reconnecting first when the connection is gone.
  void Finish(Reply reply) {
    if (!reply.transport_ok && !reply.dropped) ++stats_.errors["transport (" + method_ + "): " + reply.transport_error];
    if (!reply.ok() && reply.transport_ok) ++stats_.errors[method_ + ": " + reply.kind()];
    OnReply on_reply = std::move(on_reply_);
    if (!ws_ && !http_) {
      return Reconnect([on_reply, reply = std::move(reply)]() mutable { on_reply(std::move(reply)); });
    }
    if (!reply.transport_ok) {
      CloseStream();
      return Reconnect([on_reply, reply = std::move(reply)]() mutable { on_reply(std::move(reply)); });
    }
    on_reply(std::move(reply));
  }

  void NextEpisode() {
    size_t index = run_.next_episode++;
    if (index >= run_.episodes.size()) return Done();
    episode_ = &run_.episodes[index];
    create_attempts_ = 0;
    Create();
  }

  void Create() {
    Send("session/create", Json{{"env", run_.config.env}, {"task", run_.config.task}}, false, [this](Reply reply) {
      if (reply.ok()) {
        episode_->created = true;
        episode_->handle = StringMember(reply.result(), "session");
        episode_->trajectory = StringMember(reply.result(), "trajectory");
        step_ = 0;
        return Step();
      }
      if (reply.transport_ok && reply.code() == -32003 && ++create_attempts_ < 200) {
        // Server full: back off as told, then retry.
        int64_t wait_ms = 20;
        Json data = reply.error().value("data", Json::object());
        if (data.is_object() && data.contains("retry_after_ms") && data["retry_after_ms"].is_number()) {
          wait_ms = std::clamp<int64_t>(data["retry_after_ms"].get<int64_t>(), 1, 1000);
        }
        timer_.expires_after(std::chrono::milliseconds(wait_ms));
        return timer_.async_wait([self = shared_from_this()](ErrorCode) { self->Create(); });
      }
      ++run_.episodes_done;
      NextEpisode();
    });
  }

  void Step() {
    if (step_ >= run_.config.steps || episode_->crashed) return Submit();
    SendToolCall([this](Reply reply) {
      ++step_;
      if (!reply.transport_ok) {
        ++episode_->uncertain_steps;
      } else if (reply.ok()) {
        ++episode_->answered_steps;
        ++run_.tool_calls_answered;
        std::string outcome = reply.result().value("outcome", "?");
        ++stats_.outcomes[outcome];
        if (outcome == "crashed" || !reply.result().value("session_alive", true)) episode_->crashed = true;
      }
      Step();
    });
  }

  void Submit() {
    Send("session/submit", Json{{"session", episode_->handle}, {"answer", run_.config.answer}}, false, [this](Reply reply) {
      if (!reply.transport_ok) {
        ++episode_->uncertain_steps;
      } else if (reply.ok()) {
        ++episode_->answered_steps;
      } else {
        // A submit that reached the session (it died, or the verdict failed) carries the outcome
        // in error.data and is recorded as a step.
        Json error = reply.error();
        if (error.is_object() && error.contains("data") && error["data"].is_object() && error["data"].contains("outcome")) {
          ++episode_->answered_steps;
        }
      }
      Close();
    });
  }

  void Close() {
    Send("session/close", Json{{"session", episode_->handle}}, false, [this](Reply reply) {
      episode_->closed = reply.ok();
      ++run_.episodes_done;
      NextEpisode();
    });
  }

  void Done() {
    if (done_) return;
    done_ = true;
    CloseStream();
    timer_.cancel();
    --run_.active_clients;
  }

  LoadRun& run_;
  net::strand<net::io_context::executor_type> strand_;
  net::steady_timer timer_;
  std::mt19937 rng_;
  std::optional<beast::tcp_stream> http_;
  std::optional<websocket::stream<beast::tcp_stream>> ws_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> request_;
  std::optional<http::response_parser<http::string_body>> parser_;
  std::string payload_;
  std::string method_;
  std::string tool_call_tail_;  // ,"name":...,"arguments":...}} of every tools/call
  OnReply on_reply_;
  Clock::time_point sent_at_;
  bool drop_after_write_ = false;
  int64_t next_id_ = 0;
  EpisodeTally* episode_ = nullptr;
  size_t step_ = 0;
  int create_attempts_ = 0;
  int connect_failures_ = 0;
  bool done_ = false;
  ClientStats stats_;
};

// ------------------------------------------------------------------------------------------------
// Chaos: the server's session processes, found through /proc.

struct ProcEntry {
  pid_t pid = 0;
  pid_t ppid = 0;
  std::string comm;
};

std::vector<ProcEntry> ListProcesses() {
  std::vector<ProcEntry> all;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return all;
  while (dirent* entry = ::readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0') continue;
    std::ifstream stat("/proc/" + std::string(entry->d_name) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    size_t open = line.find('('), close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    ProcEntry process;
    process.pid = static_cast<pid_t>(pid);
    process.comm = line.substr(open + 1, close - open - 1);
    std::istringstream rest(line.substr(close + 2));
    char state;
    rest >> state >> process.ppid;
    all.push_back(process);
  }
  ::closedir(proc);
  return all;
}

// The process with a listening TCP socket on `port` (IPv4 or IPv6), or 0.
pid_t ListeningProcess(uint16_t port) {
  std::set<std::string> inodes;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
      if (state != "0A") continue;  // LISTEN
      size_t colon = local.rfind(':');
      if (colon == std::string::npos) continue;
      if (std::stoul(local.substr(colon + 1), nullptr, 16) == port) inodes.insert("socket:[" + inode + "]");
    }
  }
  if (inodes.empty()) return 0;
  for (const ProcEntry& process : ListProcesses()) {
    std::string fd_dir = "/proc/" + std::to_string(process.pid) + "/fd";
    DIR* fds = ::opendir(fd_dir.c_str());
    if (fds == nullptr) continue;
    pid_t found = 0;
    while (dirent* entry = ::readdir(fds)) {
      char target[256];
      ssize_t n = ::readlink((fd_dir + "/" + entry->d_name).c_str(), target, sizeof(target) - 1);
      if (n <= 0) continue;
      target[n] = '\0';
      if (inodes.count(target)) {
        found = process.pid;
        break;
      }
    }
    ::closedir(fds);
    if (found != 0) return found;
  }
  return 0;
}

// Session processes: children of the server's envforge-worker children (its zygotes), without
// the zygotes' janitors.
std::vector<pid_t> SessionProcesses(pid_t server) {
  std::vector<ProcEntry> all = ListProcesses();
  std::set<pid_t> zygotes;
  for (const auto& process : all) {
    if (process.ppid == server && process.comm == "envforge-worker") zygotes.insert(process.pid);
  }
  std::vector<pid_t> sessions;
  for (const auto& process : all) {
    if (zygotes.count(process.ppid) && process.comm == "envforge-worker") sessions.push_back(process.pid);
  }
  return sessions;
}

// A local process's open descriptors and resident memory (from /proc), for the idle flood.
Json ProcessFootprint(pid_t pid) {
  if (pid == 0) return nullptr;
  std::string base = "/proc/" + std::to_string(pid);
  size_t fds = 0;
  if (DIR* dir = ::opendir((base + "/fd").c_str())) {
    while (dirent* entry = ::readdir(dir)) {
      if (entry->d_name[0] != '.') ++fds;
    }
    ::closedir(dir);
  }
  long long rss_kb = -1;
  std::ifstream status(base + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) rss_kb = std::atoll(line.c_str() + 6);
  }
  return Json{{"fds", fds}, {"rss_kb", rss_kb}};
}

// ------------------------------------------------------------------------------------------------

Status ParseUrlInto(const std::string& url, const std::string& transport, BenchConfig* config) {
  std::string_view rest = url;
  bool ws_url = false;
  if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
  } else if (rest.starts_with("ws://")) {
    rest.remove_prefix(5);
    ws_url = true;
  } else {
    return InvalidArgumentError("envforge bench serve: --url must be http://HOST:PORT or ws://HOST:PORT/ws, got '" + url + "'");
  }
  if (transport != "ws" && transport != "http") {
    return InvalidArgumentError("envforge bench serve: --transport is ws or http, got '" + transport + "'");
  }
  config->websocket = transport == "ws";
  if (ws_url && !config->websocket) return InvalidArgumentError("envforge bench serve: --transport http needs an http:// URL");
  size_t slash = rest.find('/');
  config->host_header = std::string(rest.substr(0, slash));
  std::string explicit_path = slash == std::string_view::npos ? "" : std::string(rest.substr(slash));
  config->path = config->websocket ? (ws_url && !explicit_path.empty() ? explicit_path : "/ws")
                                   : (explicit_path.empty() ? "/rpc" : explicit_path);
  size_t colon = config->host_header.rfind(':');
  if (colon == std::string::npos) return InvalidArgumentError("envforge bench serve: --url needs a port: '" + url + "'");
  config->host = config->host_header.substr(0, colon);
  config->port = config->host_header.substr(colon + 1);
  if (config->host.size() > 2 && config->host.front() == '[') config->host = config->host.substr(1, config->host.size() - 2);
  return Status::Ok();
}

// The first tool of the environment that needs no arguments (not submit_result).
Result<std::string> DefaultTool(server::RpcClient& client, const std::string& env) {
  ENVFORGE_ASSIGN_OR_RETURN(Json described, client.Call("envs/get", Json{{"env", env}}));
  for (const auto& tool : described.value("tools", Json::array())) {
    std::string name = tool.value("name", "");
    if (name.empty() || name == "submit_result") continue;
    Json schema = tool.contains("inputSchema") ? tool["inputSchema"] : tool.value("input_schema", Json::object());
    if (!schema.is_object() || !schema.contains("required") || schema["required"].empty()) return name;
  }
  return InvalidArgumentError("envforge bench serve: environment '" + env + "' has no tool without required arguments; pass --tool and --arguments");
}

// Waits until the server's trajectory queue is drained (server/stats), up to 60 s.
void WaitForTrajectoryFlush(server::RpcClient& client) {
  auto deadline = Clock::now() + std::chrono::seconds(60);
  int quiet_polls = 0;
  while (Clock::now() < deadline && quiet_polls < 2) {
    auto stats = client.Call("server/stats");
    if (!stats.ok()) return;
    const Json& trajectories = stats->value("trajectories", Json::object());
    bool drained = trajectories.value("queue_depth", 1) == 0 &&
                   trajectories.value("records_written", 0) == trajectories.value("records_enqueued", 1);
    quiet_polls = drained ? quiet_polls + 1 : 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

Json Reconcile(const std::string& path, const std::vector<EpisodeTally>& episodes, bool* ok) {
  *ok = false;
  auto reader = agents::TrajectoryReader::Open(path);
  if (!reader.ok()) return Json{{"error", reader.status().message()}};
  std::map<std::string, agents::EpisodeSummary> recorded;
  agents::ListFilter filter;
  filter.limit = 1'000'000'000;
  auto listed = (*reader)->List(filter);
  if (!listed.ok()) return Json{{"error", listed.status().message()}};
  for (auto& summary : *listed) recorded.emplace(summary.id, std::move(summary));
  int64_t expected = 0, found = 0, open = 0, missing = 0, answered = 0, uncertain = 0, steps_recorded = 0, lost = 0,
          extra = 0;
  std::map<std::string, int64_t> outcomes;
  for (const EpisodeTally& episode : episodes) {
    if (!episode.created) continue;
    ++expected;
    answered += episode.answered_steps;
    uncertain += episode.uncertain_steps;
    auto it = recorded.find(episode.trajectory);
    if (it == recorded.end()) {
      ++missing;
      lost += episode.answered_steps;
      continue;
    }
    ++found;
    const agents::EpisodeSummary& summary = it->second;
    if (!summary.outcome) {
      ++open;
    } else {
      ++outcomes[std::string(agents::EpisodeOutcomeName(*summary.outcome))];
    }
    steps_recorded += summary.steps;
    lost += std::max<int64_t>(0, episode.answered_steps - summary.steps);
    extra += std::max<int64_t>(0, summary.steps - episode.answered_steps);
  }
  *ok = lost == 0 && missing == 0 && open == 0;
  return Json{{"store", path},
              {"episodes_started", expected},
              {"episodes_recorded", found},
              {"episodes_missing", missing},
              {"episodes_open", open},
              {"episode_outcomes", outcomes},
              {"steps_answered", answered},
              {"steps_uncertain", uncertain},
              {"steps_recorded", steps_recorded},
              {"steps_recorded_beyond_answered", extra},
              {"lost", lost}};
}

}  // namespace

int RunBenchServe(const std::vector<std::string>& args) {
  auto parsed = ParseArgs("envforge bench serve", args,
                          {.value_options = {"--url", "--token", "--env", "--task", "--sessions", "--steps", "--concurrency",
                                             "--tool", "--arguments", "--answer", "--trajectories", "--transport",
                                             "--io-threads", "--chaos-drop-rate", "--chaos-interval-ms", "--idle-connections",
                                             "--idle-peers"},
                           .flags = {"--chaos", "--json", "--idle-reopen"}});
  if (!parsed.ok()) return Fail(parsed.status(), kExitUsage);
  BenchConfig config;
  auto url = parsed->Option("--url");
  auto env = parsed->Option("--env");
  auto task = parsed->Option("--task");
  if (!url || !env || !task) return Fail(InvalidArgumentError("envforge bench serve: --url, --env and --task are required"), kExitUsage);
  config.url = *url;
  config.env = *env;
  config.task = *task;
  Status url_ok = ParseUrlInto(*url, parsed->OptionOr("--transport", "ws"), &config);
  if (!url_ok.ok()) return Fail(url_ok, kExitUsage);
  config.token = parsed->OptionOr("--token", "");
  if (config.token.empty()) {
    if (const char* from_env = std::getenv("ENVFORGE_SERVE_TOKEN"); from_env != nullptr) config.token = from_env;
  }
  auto sessions = parsed->IntOption("--sessions", 1000, 1, 10'000'000);
  auto steps = parsed->IntOption("--steps", 20, 0, 100'000);
  auto concurrency = parsed->IntOption("--concurrency", 256, 1, 20'000);
  auto io_threads = parsed->IntOption("--io-threads", 1, 1, 16);
  auto drop_permille = parsed->IntOption("--chaos-drop-rate", 10, 0, 1000);
  auto kill_interval = parsed->IntOption("--chaos-interval-ms", 100, 1, 3'600'000);
  for (const auto* r : {&sessions, &steps, &concurrency, &io_threads, &drop_permille, &kill_interval}) {
    if (!r->ok()) return Fail(r->status(), kExitUsage);
  }
  config.sessions = static_cast<size_t>(*sessions);
  config.steps = static_cast<size_t>(*steps);
  config.concurrency = static_cast<size_t>(*concurrency);
  config.io_threads = static_cast<int>(*io_threads);
  config.chaos = parsed->Has("--chaos");
  config.drop_rate = static_cast<double>(*drop_permille) / 1000.0;
  config.kill_interval = std::chrono::milliseconds(*kill_interval);
  config.answer = parsed->OptionOr("--answer", "0");
  auto arguments = ParseJson(parsed->OptionOr("--arguments", "{}"), "--arguments");
  if (!arguments.ok() || !arguments->is_object()) {
    return Fail(arguments.ok() ? InvalidArgumentError("--arguments must be a JSON object") : arguments.status(), kExitUsage);
  }
  config.arguments = *arguments;
  bool json_output = parsed->Has("--json");

  // A control connection: picks the default tool, warms the zygote up (its first session starts
  // the interpreter; not a cost of the load) and later reads server/stats.
  std::string control_url = "http://" + config.host_header + "/rpc";
  auto control = server::RpcClient::Connect(control_url, {.token = config.token});
  if (!control.ok()) return Fail(control.status().WithContext("envforge bench serve"), kExitInfra);
  config.tool = parsed->OptionOr("--tool", "");
  if (config.tool.empty()) {
    auto tool = DefaultTool(**control, config.env);
    if (!tool.ok()) return Fail(tool.status(), ExitCodeFor(tool.status()));
    config.tool = *tool;
  }
  auto warm = (*control)->Call("session/create", Json{{"env", config.env}, {"task", config.task}});
  if (!warm.ok()) return Fail(warm.status().WithContext("envforge bench serve: warm-up session"), ExitCodeFor(warm.status()));
  (void)(*control)->Call("session/close", Json{{"session", warm->value("session", "")}});
  std::string warm_trajectory = StringMember(*warm, "trajectory");

  // The idle flood, held from here to the end of the load.
  auto idle_connections = parsed->IntOption("--idle-connections", 0, 0, 1'000'000);
  auto idle_peers = parsed->IntOption("--idle-peers", 1, 0, 250);
  if (!idle_connections.ok()) return Fail(idle_connections.status(), kExitUsage);
  if (!idle_peers.ok()) return Fail(idle_peers.status(), kExitUsage);
  std::unique_ptr<IdleFlood> flood;
  Json idle_report = nullptr;
  pid_t server_process = 0;
  if (*idle_connections > 0) {
    server_process = ListeningProcess(static_cast<uint16_t>(std::stoi(config.port)));
    idle_report = Json{{"server_pid", server_process}, {"server_before", ProcessFootprint(server_process)}};
    flood = std::make_unique<IdleFlood>(IdleFloodOptions{.host = config.host,
                                                         .port = static_cast<uint16_t>(std::stoi(config.port)),
                                                         .connections = static_cast<size_t>(*idle_connections),
                                                         .peers = static_cast<size_t>(*idle_peers),
                                                         .reopen = parsed->Has("--idle-reopen")});
    auto flood_started = std::chrono::steady_clock::now();
    Status started = flood->Start();
    if (!started.ok()) return Fail(started, kExitUsage);
    idle_report["open_seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - flood_started).count();
    std::this_thread::sleep_for(std::chrono::seconds(1));  // the server accepts and sorts them out
    idle_report["server_with_idle"] = ProcessFootprint(server_process);
    idle_report["flood_before_load"] = flood->Report();
  }

  LoadRun run(config);
  ErrorCode resolve_ec;
  tcp::resolver resolver(run.io);
  run.endpoints = resolver.resolve(config.host, config.port, tcp::resolver::numeric_service, resolve_ec);
  if (resolve_ec) return Fail(UnavailableError("cannot resolve " + config.host + ": " + resolve_ec.message()), kExitInfra);

  // Chaos killer.
  std::atomic<bool> running{true};
  std::atomic<uint64_t> killed{0};
  std::string kill_source = "off";
  std::thread killer;
  if (config.chaos) {
    pid_t server_pid = ListeningProcess(static_cast<uint16_t>(std::stoi(config.port)));
    if (server_pid == 0) {
      kill_source = "unavailable: no local process listens on port " + config.port;
    } else {
      kill_source = "/proc: sessions of server pid " + std::to_string(server_pid);
      killer = std::thread([&, server_pid] {
        std::mt19937 rng(12345);
        while (running.load()) {
          std::this_thread::sleep_for(config.kill_interval);
          std::vector<pid_t> candidates = SessionProcesses(server_pid);
          if (candidates.empty()) continue;
          pid_t victim = candidates[std::uniform_int_distribution<size_t>(0, candidates.size() - 1)(rng)];
          if (::kill(victim, SIGKILL) == 0) ++killed;
        }
      });
    }
  }

  std::vector<std::shared_ptr<LoadClient>> clients;
  size_t client_count = std::min(config.concurrency, config.sessions);
  for (size_t i = 0; i < client_count; ++i) clients.push_back(std::make_shared<LoadClient>(run, static_cast<uint32_t>(i + 1)));
  auto started = Clock::now();
  for (auto& client : clients) client->Start();
  std::vector<std::thread> io_threads_running;
  for (int i = 0; i < config.io_threads; ++i) {
    io_threads_running.emplace_back([&run] {
      for (;;) {
        try {
          run.io.run();
          return;
        } catch (const std::exception& e) {
          std::fprintf(stderr, "envforge bench serve: a client handler threw: %s\n", e.what());
        }
      }
    });
  }
  // Progress on stderr while the io threads work.
  auto last_print = Clock::now();
  while (run.active_clients.load() > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (Clock::now() - last_print >= std::chrono::seconds(2)) {
      last_print = Clock::now();
      double elapsed = std::chrono::duration<double>(last_print - started).count();
      std::fprintf(stderr, "bench serve: %zu/%zu episodes, %llu tool calls (%.0f/s), %llu sessions killed\n",
                   static_cast<size_t>(run.episodes_done.load()), config.sessions,
                   static_cast<unsigned long long>(run.tool_calls_answered.load()),
                   static_cast<double>(run.tool_calls_answered.load()) / elapsed, static_cast<unsigned long long>(killed.load()));
    }
  }
  for (auto& thread : io_threads_running) thread.join();
  double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  if (flood) {
    idle_report["server_after_load"] = ProcessFootprint(server_process);
    idle_report["flood_after_load"] = flood->Report();
    flood->Stop();
  }
  running.store(false);
  if (killer.joinable()) killer.join();

  ClientStats total;
  for (const auto& client : clients) client->stats().MergeInto(total);
  uint64_t created = 0, closed = 0, answered_rpc = 0;
  for (const auto& episode : run.episodes) {
    created += episode.created;
    closed += episode.closed;
  }
  Json latency = Json::object();
  for (auto& [method, samples] : total.latency_ms) {
    answered_rpc += samples.size();
    latency[method] = Percentiles(samples);
  }
  double tool_calls = static_cast<double>(run.tool_calls_answered.load());
  Json report{{"url", config.url},
              {"transport", config.websocket ? "ws" : "http"},
              {"env", config.env},
              {"task", config.task},
              {"tool", config.tool},
              {"concurrency", client_count},
              {"steps_per_session", config.steps},
              {"sessions", {{"wanted", config.sessions}, {"created", created}, {"closed", closed}}},
              {"wall_seconds", std::round(seconds * 1000) / 1000},
              {"tool_calls", run.tool_calls_answered.load()},
              {"calls_per_s", std::round(tool_calls / seconds)},
              {"rpc_per_s", std::round(static_cast<double>(answered_rpc) / seconds)},
              {"latency_ms", latency},
              {"tool_outcomes", total.outcomes},
              {"errors", total.errors},
              {"reconnects", total.reconnects > client_count ? total.reconnects - client_count : 0},
              {"chaos",
               {{"enabled", config.chaos},
                {"killed_sessions", killed.load()},
                {"dropped_connections", total.dropped},
                {"kill_source", kill_source}}},
              {"idle_flood", idle_report}};

  bool reconciled = true;
  if (auto trajectories = parsed->Option("--trajectories")) {
    WaitForTrajectoryFlush(**control);
    report["reconciliation"] = Reconcile(*trajectories, run.episodes, &reconciled);
    report["lost"] = report["reconciliation"].value("lost", -1);
  }

  if (json_output) {
    std::printf("%s\n", report.dump(2, ' ', false, Json::error_handler_t::replace).c_str());
  } else {
    const Json& tool_latency = latency.value("tools/call", Json::object());
    std::printf("%llu episodes, %llu tool calls in %.2f s: %.0f calls/s; tools/call p50 %s ms, p99 %s ms\n",
                static_cast<unsigned long long>(created), static_cast<unsigned long long>(run.tool_calls_answered.load()), seconds,
                tool_calls / seconds, tool_latency.value("p50", Json()).dump().c_str(), tool_latency.value("p99", Json()).dump().c_str());
    if (report.contains("reconciliation")) std::printf("reconciliation: %s\n", report["reconciliation"].dump().c_str());
    if (!total.errors.empty()) std::printf("errors: %s\n", Json(total.errors).dump().c_str());
  }
  (void)warm_trajectory;
  return reconciled ? kExitOk : kExitCheckFailed;
}

}  // namespace envforge::cli
