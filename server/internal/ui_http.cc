// Shared HTTP pieces of the viewer's endpoints.
#include "server/internal/ui_http.h"

#include <charconv>

#include "base/percent_decode.h"

namespace envforge::server::internal {

UiResponse JsonAnswer(int status, const Json& body) {
  return UiResponse{status, "application/json", body.dump(-1, ' ', false, Json::error_handler_t::replace)};
}

UiResponse ErrorAnswer(int status, std::string message) {
  return JsonAnswer(status, Json{{"error", std::move(message)}});
}

std::map<std::string, std::string> ParseQuery(std::string_view query) {
  std::map<std::string, std::string> parameters;
  while (!query.empty()) {
    const size_t end = query.find('&');
    const std::string_view pair = query.substr(0, end);
    const size_t equals = pair.find('=');
    if (!pair.empty()) {
      parameters[PercentDecode(pair.substr(0, equals), PlusSign::kSpace)] =
          equals == std::string_view::npos ? "" : PercentDecode(pair.substr(equals + 1), PlusSign::kSpace);
    }
    query = end == std::string_view::npos ? std::string_view() : query.substr(end + 1);
  }
  return parameters;
}

Result<int64_t> IntParameter(const std::map<std::string, std::string>& parameters, const std::string& name,
                             int64_t fallback, int64_t low, int64_t high) {
  auto it = parameters.find(name);
  if (it == parameters.end() || it->second.empty()) return fallback;
  int64_t value = 0;
  const auto [end, error] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), value);
  if (error != std::errc() || end != it->second.data() + it->second.size() || value < low || value > high) {
    return InvalidArgumentError(name + " must be an integer from " + std::to_string(low) + " to " +
                                std::to_string(high) + ", got '" + it->second.substr(0, 40) + "'");
  }
  return value;
}

}  // namespace envforge::server::internal
