// UTF-8 for the tokenizer: a decoder that never fails (each invalid byte stands for itself) and
// the validity test the pre-tokenizer uses to keep invalid bytes away from Oniguruma.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace envforge::inference::internal {

// Invalid UTF-8 bytes decode to kInvalidByteBase + byte: above U+10FFFF, so no vocabulary character
// equals one and the original bytes stay recoverable.
inline constexpr char32_t kInvalidByteBase = 0x110000;

// The length (1-4) of the well-formed UTF-8 sequence at bytes[i], or 0 when the byte there starts
// none: a stray continuation byte, a truncated sequence, an overlong form, a surrogate, a value past
// U+10FFFF, bytes F5..FF. i < bytes.size().
int ValidUtf8Length(std::string_view bytes, size_t i);

// Decodes bytes into code points. offsets has one entry per code point plus a final one
// (bytes.size()): code point i came from bytes [offsets[i], offsets[i + 1]).
struct DecodedUtf8 {
  std::vector<char32_t> code_points;
  std::vector<uint32_t> offsets;
};
void DecodeUtf8(std::string_view bytes, DecodedUtf8* out);

// The inverse of DecodeUtf8, code point by code point (kInvalidByteBase + b gives the byte b).
void AppendUtf8(char32_t cp, std::string* out);

}  // namespace envforge::inference::internal
