// JSON-RPC 2.0 mechanics of the service, independent of any method: the error codes and how a
// Status maps onto them (the one place that does), envelope validation of a request object, the
// response objects, and params readers whose errors name the offending field.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "base/error_table.h"
#include "base/json.h"
#include "base/status.h"

namespace envforge::server::internal {

// The codes of server/rpc_service.h are base/error_table.h's RpcErrorCode (kRpc...).

struct RpcError {
  int code = kRpcInternalError;
  std::string message;
  Json data;  // an object with at least "kind" and "retryable"
};

// An error whose data is {"kind", "retryable"} merged with `extra` (an object).
RpcError MakeError(int code, std::string message, Json extra = Json::object());
RpcError InvalidParams(std::string_view field, std::string message);
// The error base/error_table.h gives the status's code (-32003 carries retry_after_ms), with
// data.status its StatusCodeName. The handlers that know better (unknown session) build their
// errors directly.
RpcError ErrorFromStatus(const Status& status);

// The result (or error) of one method call.
using RpcReply = std::variant<Json, RpcError>;

Json ResultResponse(const Json& id, Json result);
Json ErrorResponse(const Json& id, const RpcError& error);

// One request object whose envelope is valid.
struct RpcRequest {
  Json id;                    // null when absent
  bool notification = false;  // no "id" member
  std::string method;
  Json params;  // an object or an array; an absent params is an empty object
};

// Checks the envelope of one request (not its params' contents): an object, "jsonrpc" exactly
// "2.0", "method" a string, "params" absent or an object or array, "id" absent or a string,
// number or null. On failure: the -32600 error and the id to answer it with (the request's id
// when that id itself is valid, else null).
struct EnvelopeError {
  Json id;
  RpcError error;
};
std::variant<RpcRequest, EnvelopeError> ParseRequest(const Json& message);
// The same, moving the method and params out of `message` instead of copying them (the request
// path: params may be large).
std::variant<RpcRequest, EnvelopeError> ParseRequest(Json&& message);

// Whether `message` is a JSON-RPC response object: "jsonrpc" "2.0", an "id", no "method", and
// exactly one of "result" and "error".
bool IsResponse(const Json& message);

// Params readers. Each returns nullopt when the field is well-formed (writing it to *out) and an
// -32602 error naming "params.<field>" otherwise. Optional readers leave *out untouched when the
// field is absent (or null).
std::optional<RpcError> RequireString(const Json& params, std::string_view field, std::string* out);
std::optional<RpcError> OptionalString(const Json& params, std::string_view field, std::string* out);
std::optional<RpcError> OptionalObject(const Json& params, std::string_view field, Json* out);
// As OptionalObject, but moves the field's value out of `params` (left null there).
std::optional<RpcError> TakeOptionalObject(Json& params, std::string_view field, Json* out);
std::optional<RpcError> OptionalInteger(const Json& params, std::string_view field, std::optional<int64_t>* out);
// A boolean field; `out` keeps its value when the field is absent or null.
std::optional<RpcError> OptionalBool(const Json& params, std::string_view field, bool* out);

}  // namespace envforge::server::internal
