#include "toolsets/search/html_text.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <map>
#include <optional>
#include <set>

namespace envforge::search {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

void AppendUtf8(std::string& out, uint32_t code) {
  if (code == 0 || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) code = 0xFFFD;
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xC0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else if (code < 0x10000) {
    out += static_cast<char>(0xE0 | (code >> 12));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code >> 18));
    out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  }
}

std::optional<uint32_t> NamedEntity(std::string_view name) {
  static const std::map<std::string_view, uint32_t> kEntities = {
      {"amp", '&'},      {"lt", '<'},        {"gt", '>'},       {"quot", '"'},     {"apos", '\''},    {"nbsp", 0xA0},
      {"para", 0xB6},    {"sect", 0xA7},     {"copy", 0xA9},    {"reg", 0xAE},     {"trade", 0x2122}, {"mdash", 0x2014},
      {"ndash", 0x2013}, {"hellip", 0x2026}, {"lsquo", 0x2018}, {"rsquo", 0x2019}, {"ldquo", 0x201C}, {"rdquo", 0x201D},
      {"laquo", 0xAB},   {"raquo", 0xBB},    {"middot", 0xB7},  {"bull", 0x2022},  {"deg", 0xB0},     {"times", 0xD7},
      {"divide", 0xF7},  {"plusmn", 0xB1},   {"micro", 0xB5},   {"larr", 0x2190},  {"rarr", 0x2192},  {"uarr", 0x2191},
      {"darr", 0x2193},  {"le", 0x2264},     {"ge", 0x2265},    {"ne", 0x2260},    {"euro", 0x20AC},  {"pound", 0xA3},
      {"yen", 0xA5},     {"cent", 0xA2},     {"shy", 0xAD},     {"zwj", 0x200D}};
  auto it = kEntities.find(name);
  if (it == kEntities.end()) return std::nullopt;
  return it->second;
}

std::optional<uint32_t> NumericEntity(std::string_view digits) {
  const bool hex = !digits.empty() && (digits[0] == 'x' || digits[0] == 'X');
  if (hex) digits.remove_prefix(1);
  if (digits.empty() || digits.size() > 8) return std::nullopt;
  uint32_t value = 0;
  for (char c : digits) {
    int digit = -1;
    if (c >= '0' && c <= '9')
      digit = c - '0';
    else if (hex && Lower(c) >= 'a' && Lower(c) <= 'f')
      digit = Lower(c) - 'a' + 10;
    if (digit < 0) return std::nullopt;
    value = value * (hex ? 16 : 10) + static_cast<uint32_t>(digit);
  }
  return value;
}

const std::set<std::string, std::less<>>& VoidElements() {
  static const std::set<std::string, std::less<>> kVoid = {"area",  "base", "br",   "col",    "embed", "hr", "img",
                                                           "input", "link", "meta", "source", "track", "wbr"};
  return kVoid;
}

bool IsBlock(std::string_view name) {
  static const std::set<std::string, std::less<>> kBlocks = {
      "address", "article", "aside",      "blockquote", "body",   "caption", "dd",    "details", "div",
      "dl",      "dt",      "figcaption", "figure",     "footer", "form",    "h1",    "h2",      "h3",
      "h4",      "h5",      "h6",         "header",     "hr",     "li",      "main",  "ol",      "p",
      "pre",     "section", "summary",    "table",      "tbody",  "thead",   "tfoot", "tr",      "ul"};
  return kBlocks.count(name) > 0;
}

struct Tag {
  std::string name;  // lower case
  std::string attributes;
  bool closing = false;
  bool self_closing = false;
  size_t end = 0;  // index just past '>'
};

// The tag starting at html[lt] == '<', or nullopt when the '<' starts no tag (it is text).
std::optional<Tag> ParseTag(std::string_view html, size_t lt) {
  Tag tag;
  size_t i = lt + 1;
  if (i < html.size() && html[i] == '/') {
    tag.closing = true;
    ++i;
  }
  const size_t name_start = i;
  while (i < html.size() && (std::isalnum(static_cast<unsigned char>(html[i])) || html[i] == '-' || html[i] == ':'))
    ++i;
  if (i == name_start) return std::nullopt;
  for (size_t k = name_start; k < i; ++k) tag.name += Lower(html[k]);
  const size_t attributes_start = i;
  char quote = 0;
  for (; i < html.size(); ++i) {
    if (quote) {
      if (html[i] == quote) quote = 0;
    } else if (html[i] == '"' || html[i] == '\'') {
      quote = html[i];
    } else if (html[i] == '>') {
      break;
    }
  }
  if (i >= html.size()) return std::nullopt;
  tag.attributes = std::string(html.substr(attributes_start, i - attributes_start));
  tag.self_closing = !tag.attributes.empty() && tag.attributes.back() == '/';
  tag.end = i + 1;
  return tag;
}

// The value of attribute `name` (lower case) in a tag's attribute text, entities decoded; empty
// when absent.
std::string Attribute(std::string_view attributes, std::string_view name) {
  size_t i = 0;
  while (i < attributes.size()) {
    while (i < attributes.size() && (IsSpace(attributes[i]) || attributes[i] == '/')) ++i;
    const size_t key_start = i;
    while (i < attributes.size() && !IsSpace(attributes[i]) && attributes[i] != '=' && attributes[i] != '/') ++i;
    std::string key;
    for (size_t k = key_start; k < i; ++k) key += Lower(attributes[k]);
    while (i < attributes.size() && IsSpace(attributes[i])) ++i;
    std::string_view value;
    if (i < attributes.size() && attributes[i] == '=') {
      ++i;
      while (i < attributes.size() && IsSpace(attributes[i])) ++i;
      if (i < attributes.size() && (attributes[i] == '"' || attributes[i] == '\'')) {
        const char quote = attributes[i++];
        const size_t close = std::min(attributes.find(quote, i), attributes.size());
        value = attributes.substr(i, close - i);
        i = close + 1;
      } else {
        const size_t value_start = i;
        while (i < attributes.size() && !IsSpace(attributes[i])) ++i;
        value = attributes.substr(value_start, i - value_start);
      }
    }
    if (key == name) return DecodeHtmlEntities(value);
    if (i == key_start) ++i;  // a stray character: step over it
  }
  return {};
}

std::string CollapseSpaces(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (IsSpace(c)) {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += c;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// Accumulates text: collapses whitespace (outside <pre>), starts block elements on new lines.
class TextBuilder {
 public:
  void Text(std::string_view text, bool preformatted) {
    for (char c : text) {
      if (preformatted) {
        out_ += c == '\r' ? '\n' : c;
        space_pending_ = false;
      } else if (IsSpace(c)) {
        space_pending_ = !out_.empty() && out_.back() != '\n';
      } else {
        if (space_pending_) out_ += ' ';
        space_pending_ = false;
        out_ += c;
      }
    }
  }
  void Break() {
    if (!out_.empty() && out_.back() != '\n') out_ += '\n';
    space_pending_ = false;
  }
  size_t size() const { return out_.size(); }
  std::string_view Since(size_t start) const { return std::string_view(out_).substr(start); }

  // Lines right-trimmed, runs of blank lines reduced to one, no blank line at either end.
  std::string Finish() const {
    std::string result;
    size_t blank_lines = 0;
    size_t start = 0;
    while (start <= out_.size()) {
      size_t end = std::min(out_.find('\n', start), out_.size());
      std::string_view line = std::string_view(out_).substr(start, end - start);
      while (!line.empty() && IsSpace(line.back())) line.remove_suffix(1);
      if (line.empty()) {
        ++blank_lines;
      } else {
        if (!result.empty()) result += blank_lines > 0 ? "\n\n" : "\n";
        result += line;
        blank_lines = 0;
      }
      start = end + 1;
    }
    return result;
  }

 private:
  std::string out_;
  bool space_pending_ = false;
};

class Extractor {
 public:
  Extractor(std::string_view html, const HtmlTextOptions& options) : html_(html), options_(options) {}

  HtmlPage Run() {
    size_t i = 0;
    while (i < html_.size()) {
      if (html_[i] != '<') {
        const size_t next = std::min(html_.find('<', i), html_.size());
        if (skip_depth_ == 0) text_.Text(DecodeHtmlEntities(html_.substr(i, next - i)), pre_depth_ > 0);
        i = next;
      } else if (html_.substr(i, 4) == "<!--") {
        const size_t close = html_.find("-->", i + 4);
        i = close == std::string_view::npos ? html_.size() : close + 3;
      } else if (i + 1 < html_.size() && (html_[i + 1] == '!' || html_[i + 1] == '?')) {
        i = std::min(html_.find('>', i), html_.size() - 1) + 1;
      } else if (std::optional<Tag> tag = ParseTag(html_, i)) {
        i = Handle(*tag);
      } else {
        if (skip_depth_ == 0) text_.Text("<", pre_depth_ > 0);
        ++i;
      }
    }
    page_.text = text_.Finish();
    return std::move(page_);
  }

 private:
  // Raw-text elements: their content is not markup. Returns the index past their end tag.
  size_t SkipRawText(const Tag& tag) {
    size_t at = tag.end;
    while (true) {
      at = html_.find("</", at);
      if (at == std::string_view::npos) return html_.size();
      std::optional<Tag> close = ParseTag(html_, at);
      if (close && close->closing && close->name == tag.name) {
        if (tag.name == "title" && page_.title.empty()) {
          page_.title = CollapseSpaces(DecodeHtmlEntities(html_.substr(tag.end, at - tag.end)));
        }
        return close->end;
      }
      at += 2;
    }
  }

  bool ShouldSkip(const Tag& tag) const {
    static const std::set<std::string, std::less<>> kDropped = {"noscript", "template", "svg", "nav"};
    if (kDropped.count(tag.name) || Attribute(tag.attributes, "role") == "navigation") return true;
    if (options_.skip_classes.empty()) return false;
    const std::string classes = " " + Attribute(tag.attributes, "class") + " ";
    for (const std::string& skipped : options_.skip_classes) {
      if (classes.find(" " + skipped + " ") != std::string::npos) return true;
    }
    return false;
  }

  size_t Handle(const Tag& tag) {
    if (!tag.closing &&
        (tag.name == "script" || tag.name == "style" || tag.name == "title" || tag.name == "textarea")) {
      return SkipRawText(tag);
    }
    const bool is_void = tag.self_closing || VoidElements().count(tag.name) > 0;
    if (skip_depth_ > 0) {
      if (tag.name == skip_name_ && !is_void) skip_depth_ += tag.closing ? -1 : 1;
      return tag.end;
    }
    if (!tag.closing && !is_void && ShouldSkip(tag)) {
      skip_name_ = tag.name;
      skip_depth_ = 1;
      return tag.end;
    }
    if (tag.name == "pre" && !is_void) pre_depth_ = std::max(0, pre_depth_ + (tag.closing ? -1 : 1));
    if (IsBlock(tag.name) || tag.name == "br") text_.Break();
    if (tag.name == "td" || tag.name == "th") text_.Text(" ", false);
    if (tag.name == "a") HandleAnchor(tag);
    return tag.end;
  }

  void HandleAnchor(const Tag& tag) {
    if (!tag.closing) {
      std::string href = Attribute(tag.attributes, "href");
      link_start_ = text_.size();
      open_link_ = href.empty() ? std::nullopt : std::optional<std::string>(std::move(href));
      return;
    }
    if (!open_link_) return;
    page_.links.push_back(
        HtmlLink{std::move(*open_link_), CollapseSpaces(text_.Since(std::min(link_start_, text_.size())))});
    open_link_.reset();
  }

  std::string_view html_;
  const HtmlTextOptions& options_;
  HtmlPage page_;
  TextBuilder text_;
  std::string skip_name_;
  int skip_depth_ = 0;
  int pre_depth_ = 0;
  std::optional<std::string> open_link_;
  size_t link_start_ = 0;
};

}  // namespace

std::string DecodeHtmlEntities(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] != '&') {
      out += text[i++];
      continue;
    }
    const size_t semicolon = text.find(';', i + 1);
    if (semicolon != std::string_view::npos && semicolon - i <= 10) {
      std::string_view name = text.substr(i + 1, semicolon - i - 1);
      std::optional<uint32_t> code =
          !name.empty() && name[0] == '#' ? NumericEntity(name.substr(1)) : NamedEntity(name);
      if (code) {
        AppendUtf8(out, *code);
        i = semicolon + 1;
        continue;
      }
    }
    out += text[i++];
  }
  return out;
}

HtmlPage ExtractHtmlText(std::string_view html, const HtmlTextOptions& options) {
  return Extractor(html, options).Run();
}

}  // namespace envforge::search
