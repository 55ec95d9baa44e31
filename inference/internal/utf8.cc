#include "inference/internal/utf8.h"

namespace envforge::inference::internal {

int ValidUtf8Length(std::string_view bytes, size_t i) {
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  const unsigned char lead = data[i];
  if (lead < 0x80) return 1;
  int length = 0;
  char32_t cp = 0;
  char32_t minimum = 0;
  if ((lead & 0xE0) == 0xC0) {
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
  } else {
    return 0;
  }
  if (i + length > bytes.size()) return 0;
  for (int k = 1; k < length; ++k) {
    if ((data[i + k] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (data[i + k] & 0x3F);
  }
  if (cp < minimum || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return length;
}

void DecodeUtf8(std::string_view bytes, DecodedUtf8* out) {
  out->code_points.clear();
  out->offsets.clear();
  out->code_points.reserve(bytes.size());
  out->offsets.reserve(bytes.size() + 1);
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t i = 0;
  while (i < bytes.size()) {
    out->offsets.push_back(static_cast<uint32_t>(i));
    const int length = ValidUtf8Length(bytes, i);
    if (length == 0) {
      out->code_points.push_back(kInvalidByteBase + data[i]);
      i += 1;
      continue;
    }
    char32_t cp = length == 1 ? data[i] : data[i] & (0x7F >> length);
    for (int k = 1; k < length; ++k) cp = (cp << 6) | (data[i + k] & 0x3F);
    out->code_points.push_back(cp);
    i += length;
  }
  out->offsets.push_back(static_cast<uint32_t>(bytes.size()));
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
