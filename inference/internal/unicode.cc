#include "inference/internal/unicode.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <utility>

namespace envforge::inference::internal {
namespace {

constexpr uint32_t kCategoryRuns[] = {
#include "inference/internal/unicode_tables.inc"
};

struct NamedMask {
  std::string_view name;
  CategoryMask mask;
};

constexpr CategoryMask Bits(std::initializer_list<GeneralCategory> categories) {
  CategoryMask mask = 0;
  for (GeneralCategory c : categories) mask |= CategoryBit(c);
  return mask;
}

using GC = GeneralCategory;
constexpr CategoryMask kLetter = Bits({GC::kLu, GC::kLl, GC::kLt, GC::kLm, GC::kLo});
constexpr CategoryMask kMark = Bits({GC::kMn, GC::kMc, GC::kMe});
constexpr CategoryMask kNumber = Bits({GC::kNd, GC::kNl, GC::kNo});
constexpr CategoryMask kPunctuation =
    Bits({GC::kPc, GC::kPd, GC::kPs, GC::kPe, GC::kPi, GC::kPf, GC::kPo});
constexpr CategoryMask kSymbol = Bits({GC::kSm, GC::kSc, GC::kSk, GC::kSo});
constexpr CategoryMask kSeparator = Bits({GC::kZs, GC::kZl, GC::kZp});
constexpr CategoryMask kOther = Bits({GC::kCc, GC::kCf, GC::kCs, GC::kCo, GC::kCn});

constexpr std::array<std::string_view, kGeneralCategoryCount> kShortNames = {
    "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi",
    "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn",
};

constexpr NamedMask kGroupNames[] = {
    {"L", kLetter},       {"Letter", kLetter},      {"M", kMark},         {"Mark", kMark},
    {"N", kNumber},       {"Number", kNumber},      {"P", kPunctuation},  {"Punctuation", kPunctuation},
    {"S", kSymbol},       {"Symbol", kSymbol},      {"Z", kSeparator},    {"Separator", kSeparator},
    {"C", kOther},        {"Other", kOther},        {"LC", Bits({GC::kLu, GC::kLl, GC::kLt})},
    {"L&", Bits({GC::kLu, GC::kLl, GC::kLt})},
};

}  // namespace

GeneralCategory CategoryOf(char32_t cp) {
  if (cp > 0x10FFFF) return GeneralCategory::kCn;
  // The last run starting at or before cp.
  const uint32_t key = (static_cast<uint32_t>(cp) << 5) | 31u;
  const uint32_t* it = std::upper_bound(std::begin(kCategoryRuns), std::end(kCategoryRuns), key);
  return static_cast<GeneralCategory>(*(it - 1) & 31u);
}

bool IsWhiteSpace(char32_t cp) {
  if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20;
  if (cp == 0x85) return true;
  return (CategoryBit(CategoryOf(cp)) & kSeparator) != 0;
}

CategoryMask CategoryMaskByName(std::string_view name) {
  for (const NamedMask& named : kGroupNames) {
    if (named.name == name) return named.mask;
  }
  for (int i = 0; i < kGeneralCategoryCount; ++i) {
    if (kShortNames[i] == name) return CategoryMask{1} << i;
  }
  return 0;
}

void DecodeUtf8(std::string_view bytes, DecodedUtf8* out) {
  out->code_points.clear();
  out->offsets.clear();
  out->code_points.reserve(bytes.size());
  out->offsets.reserve(bytes.size() + 1);
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t size = bytes.size();
  size_t i = 0;
  while (i < size) {
    const unsigned char lead = data[i];
    int length = 0;
    char32_t cp = 0;
    char32_t minimum = 0;
    if (lead < 0x80) {
      length = 1;
      cp = lead;
    } else if ((lead & 0xE0) == 0xC0) {
      length = 2;
      cp = lead & 0x1F;
      minimum = 0x80;
    } else if ((lead & 0xF0) == 0xE0) {
      length = 3;
      cp = lead & 0x0F;
      minimum = 0x800;
    } else if ((lead & 0xF8) == 0xF0) {
      length = 4;
      cp = lead & 0x07;
      minimum = 0x10000;
    }
    bool valid = length > 0 && i + length <= size;
    for (int k = 1; valid && k < length; ++k) {
      if ((data[i + k] & 0xC0) != 0x80) {
        valid = false;
      } else {
        cp = (cp << 6) | (data[i + k] & 0x3F);
      }
    }
    // Overlong forms, surrogates and values past U+10FFFF are invalid, byte by byte.
    if (valid && (cp < minimum || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))) valid = false;
    out->offsets.push_back(static_cast<uint32_t>(i));
    if (valid) {
      out->code_points.push_back(cp);
      i += length;
    } else {
      out->code_points.push_back(kInvalidByteBase + lead);
      i += 1;
    }
  }
  out->offsets.push_back(static_cast<uint32_t>(size));
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp >= kInvalidByteBase && cp < kInvalidByteBase + 0x100) {
    out->push_back(static_cast<char>(cp - kInvalidByteBase));
  } else if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace envforge::inference::internal
