#include "server/internal/openai_error.h"

#include <utility>

namespace envforge::server::internal {
namespace {

bool Mentions(const std::string& text, const char* needle) { return text.find(needle) != std::string::npos; }

// A prompt past the window: ResourceExhausted "context length exceeded: ..." (inference/backend.h,
// "Errors"); an openai backend relays the upstream server's own words.
bool IsContextLengthError(const Status& status) {
  const std::string& message = status.message();
  return Mentions(message, "context length exceeded") || Mentions(message, "context_length_exceeded") ||
         Mentions(message, "maximum context length");
}

}  // namespace

ApiError InvalidField(std::string param, std::string message) {
  ApiError error;
  error.status = 400;
  error.param = std::move(param);
  error.message = std::move(message);
  return error;
}

Json ErrorJson(const ApiError& error) {
  return Json{{"error",
               {{"message", error.message},
                {"type", error.type},
                {"param", error.param.empty() ? Json(nullptr) : Json(error.param)},
                {"code", error.code.empty() ? Json(nullptr) : Json(error.code)}}}};
}

ApiError V1ErrorFromStatus(const Status& status) {
  ApiError error;
  error.message = status.message();
  if ((status.code() == StatusCode::kResourceExhausted || status.code() == StatusCode::kInvalidArgument) &&
      IsContextLengthError(status)) {
    error.status = 400;
    error.code = "context_length_exceeded";
    error.param = "messages";
    return error;
  }
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kAlreadyExists: error.status = 400; return error;
    case StatusCode::kUnauthenticated:
      error.status = 401;
      error.type = "authentication_error";
      return error;
    case StatusCode::kUnavailable:
    case StatusCode::kResourceExhausted:
    case StatusCode::kDeadlineExceeded:
      error.status = 503;
      error.type = "server_error";
      error.code = status.code() == StatusCode::kDeadlineExceeded ? "timeout" : "unavailable";
      error.retry_after_seconds = 1;
      return error;
    default:
      error.status = 500;
      error.type = "server_error";
      error.message = "internal error: " + status.message();
      return error;
  }
}

}  // namespace envforge::server::internal
