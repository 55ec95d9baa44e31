// What a dialect of the service is (server/rpc_service.h: the native methods, the MCP methods):
// a set of named methods, each answering one request through a Reply. The service parses the
// envelope, picks the dialect from the transport's RequestContext and hands the request over; the
// dialect never sees batches, ids or metrics.
//
// The Reply contract, which every handler relies on:
//   * a Reply is answered at most once: the first call wins, later ones are ignored;
//   * a Reply whose every copy is dropped unanswered answers -32603 itself, so a lost callback can
//     never leave a client hanging or the service's in-flight count stuck;
//   * handlers never block: slow work goes through the SessionManager's *Async calls and the reply
//     is sent from their callbacks (on the manager's io thread), wrapped in Guard.
#pragma once

#include <functional>
#include <initializer_list>
#include <string>
#include <unordered_map>
#include <utility>

#include "base/json.h"
#include "server/internal/rpc_protocol.h"
#include "server/rpc_service.h"

namespace envforge::server::internal {

using Reply = std::function<void(RpcReply)>;

// The Reply of one request around `finish` (see the contract above).
Reply MakeReply(std::function<void(RpcReply)> finish);

// Wraps a callback so that an exception inside it answers -32603 through `reply` instead of
// escaping into the thread that runs it (the manager's io thread).
template <typename Fn>
auto Guard(Reply reply, Fn fn) {
  return [reply = std::move(reply), fn = std::move(fn)](auto&&... args) mutable {
    try {
      fn(std::forward<decltype(args)>(args)...);
    } catch (const std::exception& e) {
      reply(MakeError(kRpcInternalError, std::string("internal error: ") + e.what()));
    } catch (...) {
      reply(MakeError(kRpcInternalError, "internal error"));
    }
  };
}

class RpcDialect {
 public:
  virtual ~RpcDialect() = default;
  // The label `request` is counted under in the request metrics: its method when this dialect
  // has it, else a pooled name ("unknown"), so that a client cannot grow the label set.
  virtual std::string MetricLabel(const RpcRequest& request) const = 0;
  // Answers `request` through `reply`, exactly once, now or later from another thread. An
  // unknown method answers -32601. May throw; the service turns that into -32603.
  virtual void Dispatch(RpcRequest& request, const RequestContext& context, Reply reply) = 0;
};

// A dialect's methods by name, as member functions of `Owner`. Call applies the rule common to
// every method of the service: parameters are named (an object); an empty array counts as none,
// any other array is -32602.
template <typename Owner>
class MethodTable {
 public:
  using Method = void (Owner::*)(Json& params, const RequestContext& context, Reply reply);

  MethodTable(std::initializer_list<std::pair<const std::string, Method>> methods) : methods_(methods) {}

  bool Has(const std::string& name) const { return methods_.count(name) != 0; }

  void Call(Owner& owner, RpcRequest& request, const RequestContext& context, Reply reply) const {
    auto method = methods_.find(request.method);
    if (method == methods_.end()) {
      return reply(MakeError(kRpcMethodNotFound, "method not found: '" + request.method + "'"));
    }
    if (request.params.is_array()) {
      if (!request.params.empty()) {
        return reply(MakeError(kRpcInvalidParams, "params must be an object (named parameters) for " + request.method,
                               Json{{"field", "params"}}));
      }
      request.params = Json::object();
    }
    (owner.*(method->second))(request.params, context, std::move(reply));
  }

 private:
  std::unordered_map<std::string, Method> methods_;
};

}  // namespace envforge::server::internal
