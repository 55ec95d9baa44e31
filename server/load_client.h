// A load generator for `envforge serve` (server/http_server.h): many asynchronous JSON-RPC
// clients over real sockets, each playing whole episodes in turn. Used by `envforge bench serve`
// (apps/envforge/cmd_bench_serve.cc), which adds the chaos killer, the idle flood and the
// reconciliation with the server's trajectory store around it.
//
//   LoadOptions options;
//   ENVFORGE_RETURN_IF_ERROR(ParseLoadUrl("ws://127.0.0.1:8080/ws", "ws", &options));
//   options.env = "trip_planning"; options.task = "t1"; options.tool = "list_cities";
//   ENVFORGE_ASSIGN_OR_RETURN(auto load, LoadRun::Create(options));
//   load->Run([](const LoadProgress& p) { ... every 2 s ... });
//   LoadStats stats = load->Stats();  // latency per method, errors by kind, outcomes
//
// What one client does: session/create (retried with the server's retry_after_ms while it is
// full, -32003), `steps` tools/call of `tool` with `arguments`, session/submit of `answer`,
// session/close; one request at a time per connection (an agent waits for each observation).
// A failed connection is reopened (up to 20 failures in a row, then the client stops). With
// `drop_rate` > 0 a client closes its connection right after writing a tools/call (about that
// fraction of them), reconnects and goes on with the same session: the call's answer is never
// seen, so the step is counted "uncertain". Latency is measured per method from writing the
// request to reading its answer.
//
// Behind a load balancer (a fleet of servers, server/README.md "A fleet behind HAProxy"): a
// WebSocket reconnect in the middle of an episode asks for `PATH?session=HANDLE`, so that the
// balancer sends it to the session's owner. An episode whose owner is gone (the balancer answers
// 502/503/504, or the session is unknown, -32001) ends at once as "infra_error", never retried;
// one whose server shuts down (-32006 on a call) ends as "shutdown". A session/create answered
// -32006 (that server stops creating) is retried on a fresh connection, which the balancer places
// elsewhere.
//
// Threads: the clients run on `io_threads` threads over one io_context. Every handler of a client
// runs on that client's strand (its socket, WebSocket stream and timer are bound to the strand),
// so a client's state and statistics are touched by one thread at a time; the statistics are
// read (Stats, episodes) only after Run has joined the threads. Error texts are valid UTF-8 (bytes
// from the wire are cut on a character boundary and invalid sequences replaced).
//
// Errors: Create fails (InvalidArgument) for options that cannot work, Unavailable when the host
// does not resolve. Run never fails: what went wrong is counted in LoadStats::errors by kind
// ("connect: ...", "transport (METHOD): ...", "METHOD: KIND" for JSON-RPC errors).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/json.h"
#include "base/status.h"

namespace envforge::server {

struct LoadOptions {
  // Where and how (ParseLoadUrl fills these from a URL).
  bool websocket = true;
  std::string host, port, path, host_header;
  std::string token;  // sent as Authorization: Bearer (empty: none)
  // What each episode does.
  std::string env, task;
  std::string tool;                 // the tool of every tools/call (required)
  Json arguments = Json::object();  // its arguments
  std::string answer = "0";         // what session/submit sends
  bool create_with_tools = true;    // false: session/create sends "tools": false (no tool list back)
  size_t sessions = 1000;           // episodes in all
  size_t steps = 20;                // tools/call per episode
  size_t concurrency = 256;         // clients (connections); at most `sessions` are started
  int io_threads = 1;               // 1..64
  double drop_rate = 0;             // chaos: fraction of tools/call whose connection is dropped after the write
  // Bursts (`envforge bench burst`): with connect_first every client opens its connection and
  // the first episodes all start (session/create) once every client is connected or gave up;
  // without submit an episode is session/create, `steps` tools/call, session/close (its end is
  // "unsubmitted").
  bool connect_first = false;
  // With hold_sessions a created session stays open, unused, until every client's create was
  // answered: the creates of a burst do not compete with its closes. For one episode per client.
  bool hold_sessions = false;
  bool submit = true;
  std::chrono::seconds request_timeout{60};
};

// Fills the transport fields of `options` from "ws://HOST:PORT[/PATH]" or "http://HOST:PORT[/PATH]"
// and `transport` ("ws" or "http"; an http:// URL may be used with either, its host and port then
// name the server). PATH defaults to /ws or /rpc; HOST may be a bracketed IPv6 literal.
// InvalidArgument for another scheme, transport, a ws:// URL with transport http, or no port.
Status ParseLoadUrl(const std::string& url, const std::string& transport, LoadOptions* options);

// What the clients know about one episode (index = the order episodes were started in).
struct EpisodeTally {
  std::string handle;      // the session handle
  std::string trajectory;  // the server's trajectory id ("" without --trajectories)
  std::string server;      // the owner's id (session/create's "server"; "" for a server without one)
  // How the episode ended as the clients saw it: "submitted", "submit_error", "unsubmitted", "crashed",
  // "infra_error" (its owner was gone), "shutdown" (its owner shut down), "" when not created.
  std::string end;
  bool created = false;
  bool closed = false;
  bool crashed = false;
  bool owner_lost = false;      // the owner stopped answering for it: unrecorded steps are no loss
  int64_t answered_steps = 0;   // answers seen for calls the server records as steps
  int64_t uncertain_steps = 0;  // calls written whose answer never came (dropped connection)
};

struct LoadStats {
  std::map<std::string, std::vector<double>> latency_ms;  // per method, every answered request
  // The first tools/call of each episode (also in latency_ms["tools/call"]): the call that meets a
  // session process fresh from its start or its recycle, where a server's tail usually is.
  std::vector<double> first_call_latency_ms;
  std::map<std::string, uint64_t> errors;    // by kind (see the header comment)
  std::map<std::string, uint64_t> outcomes;  // tools/call results by outcome
  uint64_t dropped = 0;                      // connections dropped on purpose (drop_rate)
  uint64_t reconnects = 0;                   // connections opened, the first of each client included

  void MergeInto(LoadStats& total) const;
};

struct LoadProgress {
  size_t episodes_done = 0;
  uint64_t tool_calls_answered = 0;
  double seconds = 0;  // since Run started
};

class LoadRun {
 public:
  // Checks the options and resolves the host; starts nothing.
  static Result<std::unique_ptr<LoadRun>> Create(const LoadOptions& options);
  ~LoadRun();
  LoadRun(const LoadRun&) = delete;
  LoadRun& operator=(const LoadRun&) = delete;

  // Runs every episode to its end (or until every client gave up on connecting), calling
  // `on_progress` (may be empty) from the calling thread about every `progress_every`. Call once.
  void Run(const std::function<void(const LoadProgress&)>& on_progress,
           std::chrono::milliseconds progress_every = std::chrono::seconds(2));

  // After Run: the clients' statistics merged, and each episode's tally.
  LoadStats Stats() const;
  const std::vector<EpisodeTally>& episodes() const;
  uint64_t tool_calls_answered() const;
  size_t clients() const;  // clients started: min(concurrency, sessions)

  struct State;  // shared with the clients (load_client.cc)

 private:
  explicit LoadRun(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace envforge::server
