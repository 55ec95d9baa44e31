// Text clean-up for JUnit reports (junit_text.h).
#include "verifiers/internal/junit_text.h"

namespace envforge::verifiers::internal {
namespace {

constexpr char kEsc = '\x1b';
constexpr char kBel = '\x07';

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// The index just past a CSI sequence whose parameters start at `at` (after "ESC [").
size_t SkipCsi(std::string_view text, size_t at) {
  while (at < text.size()) {
    unsigned char c = static_cast<unsigned char>(text[at++]);
    if (c >= 0x40 && c <= 0x7e) break;  // the final byte
    if (c < 0x20 || c > 0x3f) {         // not a parameter or intermediate: malformed, stop here
      --at;
      break;
    }
  }
  return at;
}

// The index just past an OSC sequence whose payload starts at `at` (after "ESC ]").
size_t SkipOsc(std::string_view text, size_t at) {
  while (at < text.size()) {
    if (text[at] == kBel) return at + 1;
    if (text[at] == kEsc && at + 1 < text.size() && text[at + 1] == '\\') return at + 2;
    ++at;
  }
  return at;
}

// The index just past an escape sequence starting with ESC at `at`.
size_t SkipEscape(std::string_view text, size_t at) {
  ++at;  // ESC
  if (at >= text.size()) return at;
  if (text[at] == '[') return SkipCsi(text, at + 1);
  if (text[at] == ']') return SkipOsc(text, at + 1);
  while (at < text.size() && text[at] >= 0x20 && text[at] <= 0x2f) ++at;  // intermediates
  return at < text.size() ? at + 1 : at;
}

}  // namespace

std::string StripAnsi(std::string_view text) {
  if (text.find(kEsc) == std::string_view::npos && text.find("#x1B[") == std::string_view::npos) {
    return std::string(text);
  }
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] == kEsc) {
      i = SkipEscape(text, i);
    } else if (text.compare(i, 5, "#x1B[") == 0) {
      i = SkipCsi(text, i + 5);
    } else {
      out += text[i++];
    }
  }
  return out;
}

std::string CollapseWhitespace(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool pending_space = false;
  for (char c : text) {
    if (IsSpace(c)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out += ' ';
    pending_space = false;
    out += c;
  }
  return out;
}

std::string_view Trim(std::string_view text) {
  size_t begin = 0, end = text.size();
  while (begin < end && IsSpace(text[begin])) ++begin;
  while (end > begin && IsSpace(text[end - 1])) --end;
  return text.substr(begin, end - begin);
}

std::string Truncate(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t cut = max_bytes;
  // Back off continuation bytes (10xxxxxx) so that no character is split.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "...";
}

std::string FirstLine(std::string_view text, size_t max_bytes) {
  text = Trim(text);
  size_t newline = text.find('\n');
  if (newline != std::string_view::npos) text = Trim(text.substr(0, newline));
  return Truncate(text, max_bytes);
}

std::string PathForId(std::string_view path, std::string_view source_root) {
  if (path.starts_with("./")) path.remove_prefix(2);
  if (!path.starts_with('/')) return std::string(path);
  while (source_root.size() > 1 && source_root.ends_with('/')) source_root.remove_suffix(1);
  if (!source_root.empty() && path.size() > source_root.size() + 1 && path.starts_with(source_root) &&
      path[source_root.size()] == '/') {
    return std::string(path.substr(source_root.size() + 1));
  }
  size_t slash = path.find_last_of('/');
  return std::string(path.substr(slash + 1));
}

}  // namespace envforge::verifiers::internal
