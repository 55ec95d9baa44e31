// The stdio transport of `envforge serve --stdio`: newline-delimited JSON-RPC, as MCP's stdio
// transport (https://modelcontextprotocol.io/specification/2025-06-18/basic/transports#stdio).
//
// Each line of `in` is one JSON-RPC message (a request, a notification or a batch); it must not
// contain a raw newline (JSON escapes them). Requests run concurrently through
// RpcService::HandleAsync, and every answer is written to `out` as one line, in completion order
// (not request order: clients match answers by id), one whole line at a time. Blank lines are
// skipped; a trailing '\r' is dropped. A line longer than max_line_bytes is not parsed: it gets a
// -32008 error (id null) and reading goes on with the next line.
//
// At end of input, Run waits until every request it read has been answered and written, then
// returns; it does not shut the service down (the caller does: RpcService::Shutdown). A drain on a
// signal, while Run still blocks reading, runs RpcService::BeginDrain and Shutdown, then WaitIdle:
// every request read by then has its answer line written before the process leaves.
// Nothing but JSON-RPC messages is written to `out`; logs go to stderr (base/log.h).
//
// Thread safety: `out` is written only under an internal mutex, from whichever thread finishes a
// request; the caller must not write to it while the server runs. `in` is read only by the thread
// in Run. WaitIdle may be called from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <iosfwd>
#include <memory>

#include "base/status.h"
#include "server/rpc_service.h"

namespace envforge::server {

struct StdioServerOptions {
  size_t max_line_bytes = size_t{16} << 20;  // longer lines answer -32008
  Dialect dialect = Dialect::kNative;        // kMcp for MCP clients (initialize, tools/call ...)
};

class StdioServer {
 public:
  // `service` and `out` must outlive the server.
  StdioServer(RpcService& service, std::ostream& out, StdioServerOptions options = {});
  ~StdioServer();
  StdioServer(const StdioServer&) = delete;
  StdioServer& operator=(const StdioServer&) = delete;

  // Serves until end of input; returns OK then, or an error when `in` fails for another reason
  // than end of input (after the requests already read have been answered).
  Status Run(std::istream& in);
  // Blocks until every request read so far has been answered and its line written, or `timeout`
  // passes. Returns true when idle.
  bool WaitIdle(std::chrono::milliseconds timeout);

 private:
  class Lines;
  RpcService& service_;
  StdioServerOptions options_;
  std::shared_ptr<Lines> lines_;  // shared with the callbacks of requests in flight
};

// StdioServer(service, out, options).Run(in).
Status RunStdioServer(RpcService& service, std::istream& in, std::ostream& out, StdioServerOptions options = {});

}  // namespace envforge::server
