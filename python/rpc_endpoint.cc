#include "python/rpc_endpoint.h"

#include <atomic>
#include <future>
#include <mutex>
#include <utility>

#include "sandbox/sandbox_limits.h"
#include "server/rpc_client.h"
#include "server/rpc_service.h"

namespace envforge::python {
namespace {

RpcOutcome OutcomeFromResponse(const Json& response) {
  RpcOutcome outcome;
  if (response.contains("error")) {
    const Json& error = response["error"];
    outcome.failure = RpcFailure{error.value("code", static_cast<int>(kRpcInternalError)),
                                 error.value("message", std::string("error")), error.value("data", Json())};
  } else {
    outcome.result = response.value("result", Json());
  }
  return outcome;
}

class RuntimeEndpoint final : public Endpoint {
 public:
  explicit RuntimeEndpoint(std::unique_ptr<server::RpcService> service) : service_(std::move(service)) {}
  ~RuntimeEndpoint() override { Close(); }

  RpcOutcome Call(const std::string& method, Json params) override {
    server::RpcService* service = nullptr;
    {
      std::lock_guard lock(mutex_);
      service = service_.get();
    }
    if (service == nullptr) return {Json(), RpcFailure{kRpcShuttingDown, "the runtime is closed", Json()}};
    Json request = {{"jsonrpc", "2.0"}, {"id", next_id_++}, {"method", method}, {"params", std::move(params)}};
    auto promise = std::make_shared<std::promise<std::optional<Json>>>();
    std::future<std::optional<Json>> answer = promise->get_future();
    server::RequestContext context;
    context.peer = "python";
    context.transport = "in-process";
    service->HandleJsonAsync(std::move(request), context,
                             [promise](std::optional<Json> response) { promise->set_value(std::move(response)); });
    std::optional<Json> response = answer.get();
    if (!response) return {Json(), RpcFailure{kRpcInternalError, "no response from the runtime", Json()}};
    return OutcomeFromResponse(*response);
  }

  void Close() override {
    std::unique_ptr<server::RpcService> service;
    {
      std::lock_guard lock(mutex_);
      service = std::move(service_);
    }
    if (service) {
      service->BeginDrain();
      (void)service->Shutdown();
    }
  }

 private:
  std::mutex mutex_;
  std::unique_ptr<server::RpcService> service_;
  std::atomic<int64_t> next_id_{1};
};

// A remote server. RpcClient is thread-compatible, so calls from several Python threads take
// turns on the one connection.
class ClientEndpoint final : public Endpoint {
 public:
  explicit ClientEndpoint(std::unique_ptr<server::RpcClient> client) : client_(std::move(client)) {}

  RpcOutcome Call(const std::string& method, Json params) override {
    std::lock_guard lock(mutex_);
    if (!client_) return {Json(), RpcFailure{kRpcShuttingDown, "the client is closed", Json()}};
    server::RpcReply reply = client_->CallDetailed(method, std::move(params));
    if (reply.error) return {Json(), RpcFailure{reply.error->code, reply.error->message, reply.error->data}};
    if (!reply.transport.ok()) {
      // No answer came: the call may or may not have run; the trainer decides whether to retry.
      return {Json(),
              RpcFailure{kRpcInfraError, reply.transport.message(), Json{{"kind", "transport"}, {"retryable", true}}}};
    }
    return {std::move(reply.result), std::nullopt};
  }

  void Close() override {
    std::lock_guard lock(mutex_);
    if (client_) client_->Close();
    client_.reset();
  }

 private:
  std::mutex mutex_;
  std::unique_ptr<server::RpcClient> client_;
};

}  // namespace

RpcFailure FailureFromStatus(const Status& status) {
  const int code = RpcErrorCodeFor(status.code());
  return RpcFailure{code, status.message(),
                    Json{{"kind", std::string(RpcErrorKind(code))},
                         {"retryable", IsRetryableRpcError(code)},
                         {"status", std::string(StatusCodeName(status.code()))}}};
}

Result<std::shared_ptr<Endpoint>> MakeRuntimeEndpoint(const RuntimeOptions& options) {
  server::RpcServiceOptions service_options;
  service_options.envs_dir = options.envs_dir;
  service_options.trajectories_path = options.trajectories_path;
  service_options.max_sessions = options.max_sessions;
  service_options.session_ttl = options.session_ttl;
  service_options.manager.max_sessions = options.max_sessions;
  if (!options.limits.is_null()) {
    ENVFORGE_ASSIGN_OR_RETURN(service_options.manager.limits, sandbox::SandboxLimitsFromJson(options.limits));
  }
  ENVFORGE_ASSIGN_OR_RETURN(std::unique_ptr<server::RpcService> service,
                            server::RpcService::Create(std::move(service_options)));
  return std::shared_ptr<Endpoint>(std::make_shared<RuntimeEndpoint>(std::move(service)));
}

Result<std::shared_ptr<Endpoint>> MakeClientEndpoint(const std::string& url, const std::string& token,
                                                     std::chrono::milliseconds timeout) {
  server::RpcClientOptions options;
  options.token = token;
  options.timeout = timeout;
  ENVFORGE_ASSIGN_OR_RETURN(std::unique_ptr<server::RpcClient> client, server::RpcClient::Connect(url, options));
  return std::shared_ptr<Endpoint>(std::make_shared<ClientEndpoint>(std::move(client)));
}

}  // namespace envforge::python
