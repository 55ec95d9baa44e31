// JSON Schema `format` as an assertion, for the formats tool schemas use most (Pydantic, MCP
// servers). Private to toolsets/json_schema*.cc.
//
//   date       RFC 3339 full-date: 2024-02-29 (the day must exist in that month and year)
//   date-time  RFC 3339 date-time: full-date "T" time with a mandatory offset (Z or +hh:mm);
//              "t"/"z" accepted as RFC 3339 allows; a leap second (:60) only at 23:59:60 UTC
//   time       RFC 3339 full-time: 23:20:50.52Z, 08:30:06+02:00 (offset mandatory)
//   email      RFC 5321 mailbox, simplified: local@domain, a dot-atom local part (or a quoted
//              string), a domain of dot-separated labels or an [IPv4] literal
//   uri        RFC 3986 absolute URI: scheme ":" then characters URIs allow (percent-escapes
//              well formed); relative references are not URIs
//   uuid       RFC 4122 textual form: 8-4-4-4-12 hexadecimal digits, any case
//   ipv4       dotted quad, each part 0..255 without leading zeros (RFC 2673's form)
//   ipv6       RFC 4291 text forms, "::" compression and a trailing dotted IPv4 included; no
//              zone index
#pragma once

#include <optional>
#include <string_view>

namespace envforge::toolsets::internal {

enum class Format : unsigned char { kNone, kDate, kDateTime, kTime, kEmail, kUri, kUuid, kIpv4, kIpv6 };

// The Format for a `format` value; nullopt for a name outside the list above.
std::optional<Format> FormatByName(std::string_view name);
std::string_view FormatName(Format format);

// Whether `text` is in `format` (kNone accepts everything).
bool MatchesFormat(Format format, std::string_view text);

}  // namespace envforge::toolsets::internal
