// JSON Schema `format` checks: small hand-written parsers (no regex), one per format, each a
// cursor over the text that fails closed on anything the RFC grammar does not allow.
#include "toolsets/internal/json_schema_format.h"

#include <cstddef>
#include <cstdint>

namespace envforge::toolsets::internal {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHex(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// A cursor over the text being parsed.
struct Cursor {
  std::string_view text;
  size_t pos = 0;

  bool AtEnd() const { return pos >= text.size(); }
  char Peek() const { return AtEnd() ? '\0' : text[pos]; }
  bool Take(char c) {
    if (AtEnd() || text[pos] != c) return false;
    ++pos;
    return true;
  }
  bool TakeAnyOf(std::string_view options) {
    if (AtEnd() || options.find(text[pos]) == std::string_view::npos) return false;
    ++pos;
    return true;
  }
  // Exactly `count` decimal digits, as a number.
  std::optional<int> Digits(size_t count) {
    if (text.size() - pos < count || AtEnd()) return std::nullopt;
    int value = 0;
    for (size_t i = 0; i < count; ++i) {
      if (!IsDigit(text[pos + i])) return std::nullopt;
      value = value * 10 + (text[pos + i] - '0');
    }
    pos += count;
    return value;
  }
};

bool IsLeapYear(int year) { return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0; }

int DaysInMonth(int year, int month) {
  constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return month == 2 && IsLeapYear(year) ? 29 : kDays[month - 1];
}

bool ParseFullDate(Cursor& in) {
  std::optional<int> year = in.Digits(4);
  if (!year || !in.Take('-')) return false;
  std::optional<int> month = in.Digits(2);
  if (!month || *month < 1 || *month > 12 || !in.Take('-')) return false;
  std::optional<int> day = in.Digits(2);
  return day && *day >= 1 && *day <= DaysInMonth(*year, *month);
}

// full-time = hh:mm:ss[.frac] offset; a leap second must fall on 23:59:60 UTC.
bool ParseFullTime(Cursor& in) {
  std::optional<int> hour = in.Digits(2);
  if (!hour || *hour > 23 || !in.Take(':')) return false;
  std::optional<int> minute = in.Digits(2);
  if (!minute || *minute > 59 || !in.Take(':')) return false;
  std::optional<int> second = in.Digits(2);
  if (!second || *second > 60) return false;
  if (in.Take('.')) {
    size_t start = in.pos;
    while (IsDigit(in.Peek())) ++in.pos;
    if (in.pos == start) return false;
  }
  int offset_minutes = 0;
  if (!in.TakeAnyOf("Zz")) {
    char sign = in.Peek();
    if (!in.TakeAnyOf("+-")) return false;
    std::optional<int> offset_hour = in.Digits(2);
    if (!offset_hour || *offset_hour > 23 || !in.Take(':')) return false;
    std::optional<int> offset_minute = in.Digits(2);
    if (!offset_minute || *offset_minute > 59) return false;
    offset_minutes = (*offset_hour * 60 + *offset_minute) * (sign == '-' ? -1 : 1);
  }
  if (*second == 60) {
    int utc = ((*hour * 60 + *minute - offset_minutes) % 1440 + 1440) % 1440;
    if (utc != 23 * 60 + 59) return false;
  }
  return true;
}

bool IsDate(std::string_view text) {
  Cursor in{text};
  return ParseFullDate(in) && in.AtEnd();
}

bool IsTime(std::string_view text) {
  Cursor in{text};
  return ParseFullTime(in) && in.AtEnd();
}

bool IsDateTime(std::string_view text) {
  Cursor in{text};
  return ParseFullDate(in) && in.TakeAnyOf("Tt") && ParseFullTime(in) && in.AtEnd();
}

bool IsUuid(std::string_view text) {
  if (text.size() != 36) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? text[i] != '-' : !IsHex(text[i])) return false;
  }
  return true;
}

// One decimal part of a dotted quad: 0..255, no leading zero.
bool ParseIpv4Part(Cursor& in) {
  size_t start = in.pos;
  int value = 0;
  while (IsDigit(in.Peek()) && in.pos - start < 3) value = value * 10 + (in.text[in.pos++] - '0');
  size_t length = in.pos - start;
  return length > 0 && value <= 255 && !(length > 1 && in.text[start] == '0');
}

bool ParseIpv4(Cursor& in) {
  for (int part = 0; part < 4; ++part) {
    if (part > 0 && !in.Take('.')) return false;
    if (!ParseIpv4Part(in)) return false;
  }
  return true;
}

bool IsIpv4(std::string_view text) {
  Cursor in{text};
  return ParseIpv4(in) && in.AtEnd();
}

// Counts the 16-bit groups of one side of "::" (or of an uncompressed address); a trailing
// dotted quad counts as two groups and must end the text.
std::optional<int> Ipv6Groups(std::string_view side, bool allow_ipv4) {
  if (side.empty()) return 0;
  int groups = 0;
  size_t start = 0;
  while (true) {
    size_t colon = side.find(':', start);
    std::string_view group = side.substr(start, colon == std::string_view::npos ? side.npos : colon - start);
    if (colon == std::string_view::npos && allow_ipv4 && group.find('.') != std::string_view::npos) {
      return IsIpv4(group) ? std::optional<int>(groups + 2) : std::nullopt;
    }
    if (group.empty() || group.size() > 4) return std::nullopt;
    for (char c : group) {
      if (!IsHex(c)) return std::nullopt;
    }
    ++groups;
    if (colon == std::string_view::npos) return groups;
    start = colon + 1;
  }
}

bool IsIpv6(std::string_view text) {
  size_t gap = text.find("::");
  if (gap == std::string_view::npos) {
    std::optional<int> groups = Ipv6Groups(text, true);
    return groups && *groups == 8;
  }
  std::string_view left = text.substr(0, gap);
  std::string_view right = text.substr(gap + 2);
  if (right.find("::") != std::string_view::npos) return false;
  std::optional<int> left_groups = Ipv6Groups(left, false);
  std::optional<int> right_groups = Ipv6Groups(right, true);
  return left_groups && right_groups && *left_groups + *right_groups <= 7;
}

bool IsAtext(char c) {
  return IsAlpha(c) || IsDigit(c) || std::string_view("!#$%&'*+-/=?^_`{|}~").find(c) != std::string_view::npos;
}

bool IsDotAtom(std::string_view text) {
  if (text.empty() || text.front() == '.' || text.back() == '.') return false;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '.' ? text[i + 1] == '.' : !IsAtext(text[i])) return false;
  }
  return true;
}

bool IsQuotedLocal(std::string_view text) {
  if (text.size() < 2 || text.front() != '"' || text.back() != '"') return false;
  for (size_t i = 1; i + 1 < text.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\\') {
      if (++i + 1 >= text.size()) return false;
    } else if (c == '"' || c < 0x20) {
      return false;
    }
  }
  return true;
}

bool IsHostname(std::string_view text) {
  if (text.empty() || text.size() > 253) return false;
  size_t start = 0;
  while (start <= text.size()) {
    size_t dot = text.find('.', start);
    std::string_view label = text.substr(start, dot == std::string_view::npos ? text.npos : dot - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') return false;
    for (char c : label) {
      if (!IsAlpha(c) && !IsDigit(c) && c != '-') return false;
    }
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
  return false;
}

bool IsEmail(std::string_view text) {
  size_t at = text.rfind('@');
  if (at == std::string_view::npos || at == 0) return false;
  std::string_view local = text.substr(0, at);
  std::string_view domain = text.substr(at + 1);
  if (!IsDotAtom(local) && !IsQuotedLocal(local)) return false;
  if (domain.size() > 2 && domain.front() == '[' && domain.back() == ']') {
    return IsIpv4(domain.substr(1, domain.size() - 2));
  }
  return IsHostname(domain);
}

// RFC 3986: scheme ":" hier-part [ "?" query ] [ "#" fragment ], checked at the character
// level: every character is unreserved, reserved or a well-formed percent-escape, and at most
// one '#' separates the fragment.
bool IsUri(std::string_view text) {
  size_t colon = text.find(':');
  if (colon == std::string_view::npos || colon == 0 || !IsAlpha(text[0])) return false;
  for (size_t i = 1; i < colon; ++i) {
    if (!IsAlpha(text[i]) && !IsDigit(text[i]) && text[i] != '+' && text[i] != '-' && text[i] != '.') return false;
  }
  constexpr std::string_view kAllowed = "-._~:/?#[]@!$&'()*+,;=";
  bool in_fragment = false;
  for (size_t i = colon + 1; i < text.size(); ++i) {
    char c = text[i];
    if (c == '%') {
      if (i + 2 >= text.size() || !IsHex(text[i + 1]) || !IsHex(text[i + 2])) return false;
      i += 2;
    } else if (c == '#') {
      if (in_fragment) return false;
      in_fragment = true;
    } else if (!IsAlpha(c) && !IsDigit(c) && kAllowed.find(c) == std::string_view::npos) {
      return false;
    }
  }
  return true;
}

struct FormatEntry {
  std::string_view name;
  Format format;
};
constexpr FormatEntry kFormats[] = {
    {"date", Format::kDate}, {"date-time", Format::kDateTime}, {"time", Format::kTime}, {"email", Format::kEmail},
    {"uri", Format::kUri},   {"uuid", Format::kUuid},          {"ipv4", Format::kIpv4}, {"ipv6", Format::kIpv6},
};

}  // namespace

std::optional<Format> FormatByName(std::string_view name) {
  for (const FormatEntry& entry : kFormats) {
    if (entry.name == name) return entry.format;
  }
  return std::nullopt;
}

std::string_view FormatName(Format format) {
  for (const FormatEntry& entry : kFormats) {
    if (entry.format == format) return entry.name;
  }
  return "";
}

bool MatchesFormat(Format format, std::string_view text) {
  switch (format) {
    case Format::kNone: return true;
    case Format::kDate: return IsDate(text);
    case Format::kDateTime: return IsDateTime(text);
    case Format::kTime: return IsTime(text);
    case Format::kEmail: return IsEmail(text);
    case Format::kUri: return IsUri(text);
    case Format::kUuid: return IsUuid(text);
    case Format::kIpv4: return IsIpv4(text);
    case Format::kIpv6: return IsIpv6(text);
  }
  return false;
}

}  // namespace envforge::toolsets::internal
