// Shared HTTP pieces of the viewer's endpoints.
#include "server/internal/ui_http.h"

#include <charconv>

namespace envforge::server::internal {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

UiResponse JsonAnswer(int status, const Json& body) {
  return UiResponse{status, "application/json", body.dump(-1, ' ', false, Json::error_handler_t::replace)};
}

UiResponse ErrorAnswer(int status, std::string message) {
  return JsonAnswer(status, Json{{"error", std::move(message)}});
}

std::string PercentDecode(std::string_view text, bool plus_is_space) {
  std::string decoded;
  for (size_t i = 0; i < text.size(); ++i) {
    if (plus_is_space && text[i] == '+') {
      decoded += ' ';
    } else if (text[i] == '%' && i + 2 < text.size() && HexValue(text[i + 1]) >= 0 && HexValue(text[i + 2]) >= 0) {
      decoded += static_cast<char>(HexValue(text[i + 1]) * 16 + HexValue(text[i + 2]));
      i += 2;
    } else {
      decoded += text[i];
    }
  }
  return decoded;
}

std::map<std::string, std::string> ParseQuery(std::string_view query) {
  std::map<std::string, std::string> parameters;
  while (!query.empty()) {
    const size_t end = query.find('&');
    const std::string_view pair = query.substr(0, end);
    const size_t equals = pair.find('=');
    if (!pair.empty()) {
      parameters[PercentDecode(pair.substr(0, equals), true)] =
          equals == std::string_view::npos ? "" : PercentDecode(pair.substr(equals + 1), true);
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
