#include "base/percent_decode.h"

#include <cctype>

namespace envforge {

namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  return std::tolower(static_cast<unsigned char>(c)) - 'a' + 10;
}

bool IsEscapeAt(std::string_view text, size_t i) {
  return i + 2 < text.size() && std::isxdigit(static_cast<unsigned char>(text[i + 1])) &&
         std::isxdigit(static_cast<unsigned char>(text[i + 2]));
}

// Decodes text into `decoded`; false at the first malformed escape when `strict`.
bool Decode(std::string_view text, PlusSign plus, bool strict, std::string& decoded) {
  decoded.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+' && plus == PlusSign::kSpace) {
      decoded.push_back(' ');
    } else if (text[i] == '%' && IsEscapeAt(text, i)) {
      decoded.push_back(static_cast<char>(HexValue(text[i + 1]) * 16 + HexValue(text[i + 2])));
      i += 2;
    } else if (text[i] == '%' && strict) {
      return false;
    } else {
      decoded.push_back(text[i]);
    }
  }
  return true;
}

}  // namespace

std::string PercentDecode(std::string_view text, PlusSign plus) {
  std::string decoded;
  Decode(text, plus, /*strict=*/false, decoded);
  return decoded;
}

std::optional<std::string> PercentDecodeStrict(std::string_view text) {
  std::string decoded;
  if (!Decode(text, PlusSign::kLiteral, /*strict=*/true, decoded)) return std::nullopt;
  return decoded;
}

}  // namespace envforge
