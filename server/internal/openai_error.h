// Errors of the OpenAI-compatible /v1 endpoint (server/openai_api.h) in OpenAI's shape:
//   HTTP status + {"error": {"message", "type", "param", "code"}}
// (agents-and-rollouts.md section 3), plus the Status -> error mapping for Backend::Complete.
#pragma once

#include <string>

#include "base/json.h"
#include "base/status.h"

namespace envforge::server::internal {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;            // the offending field ("messages[2].role"); empty: null
  std::string code;             // e.g. "context_length_exceeded", "model_not_found"; empty: null
  int retry_after_seconds = 0;  // > 0: sent as Retry-After (429, 503)
};

// 400 invalid_request_error naming `param`.
ApiError InvalidField(std::string param, std::string message);

// The response body {"error": {...}}.
Json ErrorJson(const ApiError& error);

// A failed Backend::Complete: InvalidArgument -> 400; a prompt past the context window
// (ResourceExhausted "context length exceeded", inference/backend.h) -> 400 code
// context_length_exceeded; Unavailable, other ResourceExhausted and
// DeadlineExceeded -> 503 with Retry-After (not the request's fault, retry later); the rest -> 500.
ApiError V1ErrorFromStatus(const Status& status);

}  // namespace envforge::server::internal
