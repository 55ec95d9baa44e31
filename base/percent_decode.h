// Percent-decoding of URI components (RFC 3986 section 2.1): "%7E" -> "~".
#pragma once

#include <string>
#include <string_view>

namespace envforge {

// Each "%XX" (two hex digits) becomes the byte it names; a malformed escape ("%", "%G1") stays as
// it is. No '+' handling: form-encoded query values need that on top.
std::string PercentDecode(std::string_view text);

}  // namespace envforge
