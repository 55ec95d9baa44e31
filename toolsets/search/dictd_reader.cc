#include "toolsets/search/dictd_reader.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "base/fd.h"

namespace envforge::search {
namespace {

constexpr std::string_view kDictdDigits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
char AsciiLower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// Runs of whitespace as one space, none at either end.
std::string CollapseSpaces(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (!IsSpace(c)) {
      out += c;
    } else if (!out.empty() && out.back() != ' ') {
      out += ' ';
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// The whole decompressed content of a gzip (dictzip) file; zlib passes a plain file through.
Result<std::string> ReadGzipFile(const std::string& path) {
  std::unique_ptr<gzFile_s, int (*)(gzFile)> file(gzopen(path.c_str(), "rb"), gzclose);
  if (!file) return ErrnoError("cannot open " + path, errno);
  std::string data;
  std::vector<char> buffer(1 << 20);
  while (true) {
    const int n = gzread(file.get(), buffer.data(), static_cast<unsigned>(buffer.size()));
    if (n < 0) {
      int code = 0;
      return DataLossError(path + " is corrupt: " + gzerror(file.get(), &code));
    }
    if (n == 0) break;
    data.append(buffer.data(), static_cast<size_t>(n));
  }
  return data;
}

struct IndexLine {
  std::string headword;
  uint64_t offset = 0;
  uint64_t length = 0;
};

Result<std::vector<IndexLine>> ParseIndex(const std::string& path, std::string_view text) {
  std::vector<IndexLine> lines;
  size_t start = 0, line_number = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_number;
    if (line.empty()) continue;
    const size_t tab1 = line.find('\t');
    const size_t tab2 = tab1 == std::string_view::npos ? tab1 : line.find('\t', tab1 + 1);
    if (tab2 == std::string_view::npos)
      return DataLossError(path + ":" + std::to_string(line_number) + ": not 'headword TAB offset TAB length'");
    const size_t tab3 = std::min(line.find('\t', tab2 + 1), line.size());
    auto offset = DecodeDictdNumber(line.substr(tab1 + 1, tab2 - tab1 - 1));
    auto length = DecodeDictdNumber(line.substr(tab2 + 1, tab3 - tab2 - 1));
    if (!offset.ok() || !length.ok()) {
      return DataLossError(path + ":" + std::to_string(line_number) + ": " +
                           (offset.ok() ? length : offset).status().message());
    }
    lines.push_back(IndexLine{std::string(line.substr(0, tab1)), *offset, *length});
  }
  return lines;
}

// One entry of the .dict data and every headword that points at it, in index order.
struct Entry {
  uint64_t offset = 0;
  uint64_t length = 0;
  std::vector<std::string> headwords;
};

std::vector<Entry> GroupEntries(const std::vector<IndexLine>& lines) {
  std::map<std::pair<uint64_t, uint64_t>, size_t> position;
  std::vector<Entry> entries;
  for (const IndexLine& line : lines) {
    if (line.headword.starts_with("00database") || line.headword.starts_with("00-database")) continue;
    auto [it, added] = position.try_emplace({line.offset, line.length}, entries.size());
    if (added) entries.push_back(Entry{line.offset, line.length, {}});
    entries[it->second].headwords.push_back(line.headword);
  }
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.offset < b.offset; });
  return entries;
}

// The longest headword the text begins with (case-insensitively, followed by a space, a
// backslash or the end), else the first.
const std::string& PickTitle(const Entry& entry, std::string_view text) {
  const std::string* best = &entry.headwords.front();
  size_t best_size = 0;
  for (const std::string& headword : entry.headwords) {
    if (headword.size() <= best_size || headword.size() > text.size()) continue;
    const bool prefix = std::equal(headword.begin(), headword.end(), text.begin(),
                                   [](char a, char b) { return AsciiLower(a) == AsciiLower(b); });
    const bool bounded =
        headword.size() == text.size() || IsSpace(text[headword.size()]) || text[headword.size()] == '\\';
    if (prefix && bounded) {
      best = &headword;
      best_size = headword.size();
    }
  }
  return *best;
}

std::string PercentEncode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

// The entry's text without its braces, and the brace contents as link anchors. A '{' with no
// '}' before the next '{' is literal text.
std::pair<std::string, std::vector<std::string>> StripBraces(std::string_view raw) {
  std::string text;
  std::vector<std::string> anchors;
  size_t i = 0;
  while (i < raw.size()) {
    const size_t open = raw.find('{', i);
    if (open == std::string_view::npos) {
      text.append(raw.substr(i));
      break;
    }
    const size_t close = raw.find('}', open + 1);
    const size_t next_open = raw.find('{', open + 1);
    text.append(raw.substr(i, open - i));
    if (close == std::string_view::npos || next_open < close) {
      text += '{';
      i = open + 1;
      continue;
    }
    std::string_view inner = raw.substr(open + 1, close - open - 1);
    text.append(inner);
    if (inner.find("://") == std::string_view::npos) anchors.push_back(CollapseSpaces(inner));
    i = close + 1;
  }
  while (!text.empty() && IsSpace(text.back())) text.pop_back();
  return {std::move(text), std::move(anchors)};
}

// Every headword's key -> the doc_id of its first entry; and each entry's doc_id.
struct Naming {
  std::map<std::string, std::string> by_key;
  std::vector<std::string> doc_ids;  // parallel to the entries
  std::vector<std::string> titles;
};

Result<Naming> NameEntries(const DictdDatabase& database, const std::vector<Entry>& entries, std::string_view data) {
  Naming naming;
  std::map<std::string, int> used;
  for (const Entry& entry : entries) {
    if (entry.offset + entry.length > data.size()) {
      return DataLossError(database.index_path + ": entry '" + entry.headwords.front() + "' lies outside " +
                           database.dict_path + " (offset " + std::to_string(entry.offset) + ", length " +
                           std::to_string(entry.length) + ", data " + std::to_string(data.size()) + " bytes)");
    }
    const std::string& title = PickTitle(entry, data.substr(entry.offset, entry.length));
    const std::string key = DictdKey(title);
    const int n = ++used[key];
    std::string doc_id = database.name + ":" + key + (n > 1 ? "#" + std::to_string(n) : "");
    for (const std::string& headword : entry.headwords) naming.by_key.try_emplace(DictdKey(headword), doc_id);
    naming.doc_ids.push_back(std::move(doc_id));
    naming.titles.push_back(title);
  }
  return naming;
}

}  // namespace

Result<uint64_t> DecodeDictdNumber(std::string_view digits) {
  if (digits.empty()) return InvalidArgumentError("empty dictd number");
  if (digits.size() > 8) return InvalidArgumentError("dictd number '" + std::string(digits) + "' is too large");
  uint64_t value = 0;
  for (char c : digits) {
    const size_t digit = kDictdDigits.find(c);
    if (digit == std::string_view::npos)
      return InvalidArgumentError("'" + std::string(digits) + "' is not a dictd base64 number");
    value = value * 64 + digit;
  }
  return value;
}

std::string DictdKey(std::string_view headword) {
  std::string key = CollapseSpaces(headword);
  for (char& c : key) c = AsciiLower(c);
  return key;
}

Result<DictdDatabase> LocateDictdDatabase(const std::string& dir, const std::string& name) {
  DictdDatabase database{name, dir + "/" + name + ".index", dir + "/" + name + ".dict.dz"};
  if (::access(database.index_path.c_str(), R_OK) != 0)
    return NotFoundError("dictd index " + database.index_path + " not found");
  if (::access(database.dict_path.c_str(), R_OK) == 0) return database;
  database.dict_path = dir + "/" + name + ".dict";
  if (::access(database.dict_path.c_str(), R_OK) == 0) return database;
  return NotFoundError("dictd data " + dir + "/" + name + ".dict.dz (or .dict) not found");
}

Status ReadDictdDatabase(const DictdDatabase& database, const DocumentSink& sink) {
  ENVFORGE_ASSIGN_OR_RETURN(std::string index_text, ReadFileToString(database.index_path));
  ENVFORGE_ASSIGN_OR_RETURN(std::string data, ReadGzipFile(database.dict_path));
  ENVFORGE_ASSIGN_OR_RETURN(std::vector<IndexLine> lines, ParseIndex(database.index_path, index_text));
  const std::vector<Entry> entries = GroupEntries(lines);
  ENVFORGE_ASSIGN_OR_RETURN(Naming naming, NameEntries(database, entries, data));
  for (size_t i = 0; i < entries.size(); ++i) {
    auto [text, anchors] = StripBraces(std::string_view(data).substr(entries[i].offset, entries[i].length));
    Document document{naming.doc_ids[i],
                      naming.titles[i],
                      "dict://dict.org/d:" + PercentEncode(naming.titles[i]) + ":" + database.name,
                      database.name,
                      std::move(text),
                      {}};
    for (const std::string& anchor : anchors) {
      auto target = naming.by_key.find(DictdKey(anchor));
      if (target != naming.by_key.end() && target->second != document.doc_id) {
        document.links.push_back(DocumentLink{target->second, anchor});
      }
    }
    ENVFORGE_RETURN_IF_ERROR(sink(document));
  }
  return Status::Ok();
}

}  // namespace envforge::search
