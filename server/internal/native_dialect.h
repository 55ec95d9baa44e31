// The native dialect of the service: the methods an RL trainer calls over POST /rpc, /ws and
// stdio (their params and results: server/rpc_service.h, "Native dialect methods"). Each method
// reads and checks its params (errors name the field) and hands the work to the SessionTable;
// tool results come back as typed toolsets::ToolResult JSON, never as protocol errors.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "server/internal/rpc_dialect.h"
#include "server/internal/session_table.h"

namespace envforge::server::internal {

// What server/stats reports beyond the session table.
struct ServiceFigures {
  std::function<size_t()> in_flight;
  std::function<double()> uptime_s;
};

class NativeDialect : public RpcDialect {
 public:
  NativeDialect(SessionTable& sessions, ServiceFigures figures) : sessions_(sessions), figures_(std::move(figures)) {}

  std::string MetricLabel(const RpcRequest& request) const override;
  void Dispatch(RpcRequest& request, const RequestContext& context, Reply reply) override;

 private:
  void Ping(Json& params, const RequestContext& context, Reply reply);
  void EnvsList(Json& params, const RequestContext& context, Reply reply);
  void EnvsGet(Json& params, const RequestContext& context, Reply reply);
  void TasksList(Json& params, const RequestContext& context, Reply reply);
  void SessionCreate(Json& params, const RequestContext& context, Reply reply);
  void ToolsList(Json& params, const RequestContext& context, Reply reply);
  void ToolsCall(Json& params, const RequestContext& context, Reply reply);
  void SessionSubmit(Json& params, const RequestContext& context, Reply reply);
  void SessionReset(Json& params, const RequestContext& context, Reply reply);
  void SessionFork(Json& params, const RequestContext& context, Reply reply);
  void SessionClose(Json& params, const RequestContext& context, Reply reply);
  void ServerStats(Json& params, const RequestContext& context, Reply reply);

  static const MethodTable<NativeDialect>& Methods();

  SessionTable& sessions_;
  ServiceFigures figures_;
};

}  // namespace envforge::server::internal
