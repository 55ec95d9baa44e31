#include "server/internal/openai_error.h"

#include <utility>

namespace envforge::server::internal {
namespace {

bool Mentions(const std::string& text, const char* needle) { return text.find(needle) != std::string::npos; }

// Backends word a prompt past the window this way (inference/backend.h, "Errors"); base/status.h
// has no OutOfRange code, so the words decide.
bool IsContextLengthError(const Status& status) {
  const std::string& message = status.message();
  return Mentions(message, "context window") || Mentions(message, "context length") ||
         Mentions(message, "context_length") || Mentions(message, "OutOfRange");
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

ApiError ErrorFromStatus(const Status& status) {
  ApiError error;
  error.message = status.message();
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kFailedPrecondition:
      error.status = 400;
      if (IsContextLengthError(status)) error.code = "context_length_exceeded";
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
