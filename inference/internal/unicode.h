// Unicode pieces of the tokenizer: general categories (from the generated unicode_tables.inc),
// Oniguruma's notion of white space, and a UTF-8 decoder that never fails.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace envforge::inference::internal {

// In the order of scripts/gen_unicode_tables.py's CATEGORIES (the table stores these indices).
enum class GeneralCategory : uint8_t {
  kLu, kLl, kLt, kLm, kLo, kMn, kMc, kMe, kNd, kNl, kNo, kPc, kPd, kPs, kPe, kPi,
  kPf, kPo, kSm, kSc, kSk, kSo, kZs, kZl, kZp, kCc, kCf, kCs, kCo, kCn,
};
inline constexpr int kGeneralCategoryCount = 30;

// A bit per GeneralCategory.
using CategoryMask = uint32_t;
inline constexpr CategoryMask CategoryBit(GeneralCategory c) { return CategoryMask{1} << static_cast<int>(c); }

// Invalid UTF-8 bytes decode to kInvalidByteBase + byte: above U+10FFFF, so they belong to no
// category (kCn) and are not white space, and the original bytes stay recoverable.
inline constexpr char32_t kInvalidByteBase = 0x110000;

GeneralCategory CategoryOf(char32_t cp);

// Oniguruma's Unicode \s: U+0009..U+000D, U+0085 and the categories Zs, Zl, Zp.
bool IsWhiteSpace(char32_t cp);

// "L" -> all letter categories, "Lu" -> one, "Letter" -> all letters; 0 when the name is unknown.
CategoryMask CategoryMaskByName(std::string_view name);

// Decodes bytes into code points. offsets has one entry per code point plus a final one
// (bytes.size()): code point i came from bytes [offsets[i], offsets[i + 1]).
struct DecodedUtf8 {
  std::vector<char32_t> code_points;
  std::vector<uint32_t> offsets;
};
void DecodeUtf8(std::string_view bytes, DecodedUtf8* out);

void AppendUtf8(char32_t cp, std::string* out);

}  // namespace envforge::inference::internal
