// Percent-decoding of URI components (RFC 3986 section 2.1): "%7E" -> "~".
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace envforge {

// What a '+' means: itself in a URI path or fragment, a space in a form-encoded query
// (application/x-www-form-urlencoded).
enum class PlusSign { kLiteral, kSpace };

// Each "%XX" (two hex digits, either case) becomes the byte it names; a malformed escape ("%",
// "%G1", "%4" at the end) stays as it is, for callers that look the result up and fail there.
std::string PercentDecode(std::string_view text, PlusSign plus = PlusSign::kLiteral);

// As PercentDecode with '+' literal, but a malformed escape makes the whole text undecodable
// (nullopt), for callers that must name the bad input (a schema's $ref).
std::optional<std::string> PercentDecodeStrict(std::string_view text);

}  // namespace envforge
