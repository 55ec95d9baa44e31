// JSON-RPC 2.0 envelope checks, error codes and response objects.
#include "server/internal/rpc_protocol.h"

#include <type_traits>
#include <utility>

namespace envforge::server::internal {
namespace {

// The hint a -32003 gives: sessions free up as clients close them or they expire, so an
// immediate retry is pointless and a long one wastes trainer time.
constexpr int kServerFullRetryAfterMs = 1000;

std::string TypeName(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::string: return "a string";
    case Json::value_t::array: return "an array";
    case Json::value_t::object: return "an object";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float: return "a number";
    default: return "an unsupported value";
  }
}

EnvelopeError Invalid(Json id, std::string message) {
  return EnvelopeError{std::move(id), MakeError(kRpcInvalidRequest, "invalid request: " + std::move(message))};
}

}  // namespace

RpcError MakeError(int code, std::string message, Json extra) {
  Json data = {{"kind", std::string(RpcErrorKind(code))}, {"retryable", IsRetryableRpcError(code)}};
  if (code == kRpcServerFull && !(extra.is_object() && extra.contains("retry_after_ms"))) {
    data["retry_after_ms"] = kServerFullRetryAfterMs;
  }
  if (extra.is_object()) {
    for (auto& [key, value] : extra.items()) data[key] = value;
  }
  return RpcError{code, std::move(message), std::move(data)};
}

RpcError InvalidParams(std::string_view field, std::string message) {
  return MakeError(kRpcInvalidParams, std::move(message), Json{{"field", "params." + std::string(field)}});
}

RpcError ErrorFromStatus(const Status& status) {
  return MakeError(RpcErrorCodeFor(status.code()), status.message(),
                   Json{{"status", std::string(StatusCodeName(status.code()))}});
}

Json ResultResponse(const Json& id, Json result) {
  return Json{{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

Json ErrorResponse(const Json& id, const RpcError& error) {
  Json body = {{"code", error.code}, {"message", error.message}};
  if (!error.data.is_null()) body["data"] = error.data;
  return Json{{"jsonrpc", "2.0"}, {"id", id}, {"error", std::move(body)}};
}

namespace {

// `Message` is `const Json` (copy out) or `Json` (move out).
template <typename Message>
std::variant<RpcRequest, EnvelopeError> ParseRequestFrom(Message& message) {
  if (!message.is_object()) return Invalid(nullptr, "a request must be a JSON object, not " + TypeName(message));
  RpcRequest request;
  auto id = message.find("id");
  request.notification = id == message.end();
  if (!request.notification) {
    if (!id->is_string() && !id->is_number() && !id->is_null()) {
      return Invalid(nullptr, "'id' must be a string, a number or null, not " + TypeName(*id));
    }
    request.id = *id;
  }
  auto version = message.find("jsonrpc");
  if (version == message.end()) return Invalid(request.id, "'jsonrpc' is missing (must be \"2.0\")");
  if (!version->is_string() || *version != "2.0") {
    return Invalid(request.id, "'jsonrpc' must be \"2.0\", not " + DumpJson(*version));
  }
  auto method = message.find("method");
  if (method == message.end()) return Invalid(request.id, "'method' is missing");
  if (!method->is_string()) return Invalid(request.id, "'method' must be a string, not " + TypeName(*method));
  if constexpr (std::is_const_v<Message>) {
    request.method = method->template get<std::string>();
  } else {
    request.method = std::move(method->template get_ref<std::string&>());
  }
  auto params = message.find("params");
  if (params == message.end()) {
    request.params = Json::object();
  } else if (params->is_object() || params->is_array()) {
    if constexpr (std::is_const_v<Message>) {
      request.params = *params;
    } else {
      request.params = std::move(*params);
    }
  } else {
    return Invalid(request.id, "'params' must be an object or an array, not " + TypeName(*params));
  }
  return request;
}

}  // namespace

std::variant<RpcRequest, EnvelopeError> ParseRequest(const Json& message) { return ParseRequestFrom(message); }

std::variant<RpcRequest, EnvelopeError> ParseRequest(Json&& message) { return ParseRequestFrom(message); }

std::optional<RpcError> RequireString(const Json& params, std::string_view field, std::string* out) {
  auto it = params.find(field);
  if (it == params.end() || it->is_null()) {
    return InvalidParams(field, "params." + std::string(field) + " is required (a string)");
  }
  if (!it->is_string()) {
    return InvalidParams(field, "params." + std::string(field) + " must be a string, not " + TypeName(*it));
  }
  *out = it->get<std::string>();
  return std::nullopt;
}

std::optional<RpcError> OptionalString(const Json& params, std::string_view field, std::string* out) {
  auto it = params.find(field);
  if (it == params.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) {
    return InvalidParams(field, "params." + std::string(field) + " must be a string, not " + TypeName(*it));
  }
  *out = it->get<std::string>();
  return std::nullopt;
}

std::optional<RpcError> OptionalObject(const Json& params, std::string_view field, Json* out) {
  auto it = params.find(field);
  if (it == params.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) {
    return InvalidParams(field, "params." + std::string(field) + " must be an object, not " + TypeName(*it));
  }
  *out = *it;
  return std::nullopt;
}

std::optional<RpcError> OptionalBool(const Json& params, std::string_view field, bool* out) {
  auto it = params.find(field);
  if (it == params.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) {
    return InvalidParams(field, "params." + std::string(field) + " must be a boolean, not " + TypeName(*it));
  }
  *out = it->get<bool>();
  return std::nullopt;
}

std::optional<RpcError> TakeOptionalObject(Json& params, std::string_view field, Json* out) {
  auto it = params.find(field);
  if (it == params.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) {
    return InvalidParams(field, "params." + std::string(field) + " must be an object, not " + TypeName(*it));
  }
  *out = std::move(*it);
  return std::nullopt;
}

std::optional<RpcError> OptionalInteger(const Json& params, std::string_view field, std::optional<int64_t>* out) {
  auto it = params.find(field);
  if (it == params.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer()) {
    return InvalidParams(field, "params." + std::string(field) + " must be an integer, not " + TypeName(*it));
  }
  *out = it->get<int64_t>();
  return std::nullopt;
}

bool IsResponse(const Json& message) {
  if (!message.is_object() || message.contains("method") || !message.contains("id")) return false;
  auto version = message.find("jsonrpc");
  if (version == message.end() || *version != "2.0") return false;
  return message.contains("result") != message.contains("error");
}

}  // namespace envforge::server::internal
