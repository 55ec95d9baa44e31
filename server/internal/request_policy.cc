// Origin and Content-Type checks (contract in request_policy.h).
#include "server/internal/request_policy.h"

#include <algorithm>

namespace envforge::server::internal {
namespace {

std::string Lower(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c); });
  return lower;
}

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

bool EqualsIgnoringCase(std::string_view text, std::string_view lower) {
  return text.size() == lower.size() && std::equal(text.begin(), text.end(), lower.begin(), [](char a, char b) {
           return (a >= 'A' && a <= 'Z' ? static_cast<char>(a - 'A' + 'a') : a) == b;
         });
}

bool AllDigits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The parts of a lower-cased "scheme://host[:port]"; false when it is not of that shape.
struct OriginParts {
  std::string_view scheme, host, port;
};

bool SplitOrigin(std::string_view origin, OriginParts* parts) {
  size_t separator = origin.find("://");
  if (separator == std::string_view::npos || separator == 0) return false;
  parts->scheme = origin.substr(0, separator);
  std::string_view authority = origin.substr(separator + 3);
  if (authority.empty() || authority.find_first_of("/?#@ ") != std::string_view::npos) return false;
  parts->port = {};
  if (authority.front() == '[') {  // an IPv6 literal
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return false;
    parts->host = authority.substr(0, close + 1);
    std::string_view rest = authority.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':' || !AllDigits(rest.substr(1))) return false;
      parts->port = rest.substr(1);
    }
    return true;
  }
  size_t colon = authority.find(':');
  parts->host = authority.substr(0, colon);
  if (colon != std::string_view::npos) {
    parts->port = authority.substr(colon + 1);
    if (!AllDigits(parts->port)) return false;
  }
  return !parts->host.empty();
}

}  // namespace

Result<std::string> NormalizeAllowedOrigin(std::string_view origin) {
  std::string lower = Lower(Trim(origin));
  if (!lower.empty() && lower.back() == '/') lower.pop_back();
  OriginParts parts;
  if (!SplitOrigin(lower, &parts)) {
    return InvalidArgumentError("allowed origin '" + std::string(origin) +
                                "' is not of the form scheme://host[:port] (e.g. https://app.example.com)");
  }
  return lower;
}

bool IsAllowedOrigin(std::string_view origin, const std::vector<std::string>& allowed) {
  std::string lower = Lower(Trim(origin));
  OriginParts parts;
  if (!SplitOrigin(lower, &parts)) return false;  // "null", garbage
  bool web_scheme = parts.scheme == "http" || parts.scheme == "https";
  if (web_scheme && (parts.host == "localhost" || parts.host == "127.0.0.1" || parts.host == "[::1]")) return true;
  return std::find(allowed.begin(), allowed.end(), lower) != allowed.end();
}

bool IsJsonContentType(std::string_view content_type) {
  std::string_view media_type = Trim(content_type.substr(0, content_type.find(';')));
  return EqualsIgnoringCase(media_type, "application/json");  // no allocation: runs per request
}

}  // namespace envforge::server::internal
