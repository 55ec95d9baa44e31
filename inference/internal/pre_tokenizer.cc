#include "inference/internal/pre_tokenizer.h"

#include <atomic>
#include <optional>
#include <utility>

#include "base/log.h"
#include "inference/internal/utf8.h"

namespace envforge::inference::internal {
namespace {

// GPT-2's pattern, which ByteLevel uses when use_regex is true.
constexpr std::string_view kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

Status Unsupported(const std::string& path, std::string_view what) {
  return InvalidArgumentError("tokenizer.json: " + path + ": unsupported " + std::string(what));
}

// A regex matching `literal` exactly. Hugging Face escapes a String pattern with Rust's
// regex::escape and compiles the result with Oniguruma; the same set of escaped characters gives
// the same pattern here.
std::string EscapeLiteral(std::string_view literal) {
  constexpr std::string_view kMeta = "\\.+*?()|[]{}^$#&-~";
  std::string out;
  for (char c : literal) {
    if (kMeta.find(c) != std::string_view::npos) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

// One search for a batch pattern yields up to this many consecutive matches.
constexpr int kBatchMatches = 8;

// Whether a batch of the pattern (see PreTokenizer::Pattern) finds exactly the matches that
// repeated searches for it find. A search for (P)(?:(P)(?:(P))?)? at position p matches P there
// with the path a search for P takes first: the optional tail always succeeds, so the engine never
// returns to revisit P's choice; each next copy is tried where the previous match ended, which is
// where the next search would find a match starting there. Not so when P has capture groups
// (renumbered: back-references and calls would break), \G (the search start), \K (moves the match
// start), \g (calls: \g<0> would recurse into the whole batch), callouts, or extended mode (a #
// comment could swallow the closing parenthesis). The test is conservative: an escaped "\\G" also
// disables batching, which only costs speed.
bool CanBatch(const Regex& regex) {
  if (regex.group_count() != 0) return false;
  const std::string& pattern = regex.pattern();
  for (std::string_view construct : {"\\G", "\\K", "\\g", "\\k", "(*", "(?{"}) {
    if (pattern.find(construct) != std::string::npos) return false;
  }
  for (size_t i = pattern.find("(?"); i != std::string::npos; i = pattern.find("(?", i + 2)) {
    for (size_t j = i + 2; j < pattern.size(); ++j) {
      const char c = pattern[j];
      if (c == 'x') return false;
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-')) break;
    }
  }
  return true;
}

}  // namespace

Result<PreTokenizer::Pattern> PreTokenizer::CompilePattern(std::string_view text) {
  // Oniguruma syntax, as Hugging Face compiles it. Each match attempt is bounded, not the whole
  // search: one search may scan a whole document.
  ENVFORGE_ASSIGN_OR_RETURN(Regex single, Regex::Compile(text, RegexSyntax::kOniguruma, RegexBound::kEachMatch));
  Pattern pattern{std::move(single), std::nullopt};
  if (!CanBatch(pattern.single)) return pattern;
  std::string batch_text = "(" + std::string(text) + ")";
  for (int i = 1; i < kBatchMatches; ++i) batch_text += "(?:(" + std::string(text) + ")";
  for (int i = 1; i < kBatchMatches; ++i) batch_text += ")?";
  auto batch = Regex::Compile(batch_text, RegexSyntax::kOniguruma, RegexBound::kEachMatch);
  // A batch that does not compile as expected only costs speed.
  if (batch.ok() && batch->group_count() == kBatchMatches) pattern.batch = std::move(batch).value();
  return pattern;
}

namespace {

// Oniguruma's behaviour on invalid UTF-8 is unspecified, and the tokenizer takes any bytes. Each
// invalid byte is searched as U+10FFFF instead: a noncharacter of general category Cn, so it is no
// letter, mark, number, punctuation, symbol or white space, and only negations ([^...], \P{..},
// \S, \W, \D, '.') match it. (A pattern that names U+10FFFF itself would match it too.)
constexpr std::string_view kInvalidByteStandIn = "\xF4\x8F\xBF\xBF";

// What Oniguruma searches for one piece: the piece itself when it is valid UTF-8 (nearly always),
// else a copy with each invalid byte replaced by kInvalidByteStandIn.
class Subject {
 public:
  void Reset(std::string_view piece) {
    to_piece_.clear();
    const auto* data = reinterpret_cast<const unsigned char*>(piece.data());
    size_t i = 0;
    while (i < piece.size()) {
      if (data[i] < 0x80) {
        ++i;
        continue;
      }
      const int length = ValidUtf8Length(piece, i);
      if (length == 0) break;
      i += length;
    }
    if (i == piece.size()) {
      text_ = piece;
      return;
    }
    // Rare: rebuild from the first invalid byte on, with the offset map.
    storage_.assign(piece.substr(0, i));
    to_piece_.resize(i);
    for (size_t k = 0; k < i; ++k) to_piece_[k] = static_cast<uint32_t>(k);
    while (i < piece.size()) {
      const int length = ValidUtf8Length(piece, i);
      if (length == 0) {
        storage_.append(kInvalidByteStandIn);
        to_piece_.insert(to_piece_.end(), kInvalidByteStandIn.size(), static_cast<uint32_t>(i));
        i += 1;
      } else {
        storage_.append(piece.substr(i, length));
        for (int k = 0; k < length; ++k) to_piece_.push_back(static_cast<uint32_t>(i + k));
        i += length;
      }
    }
    to_piece_.push_back(static_cast<uint32_t>(piece.size()));
    text_ = storage_;
  }

  std::string_view text() const { return text_; }
  // The piece's byte offset of a character boundary of text().
  size_t ToPiece(size_t offset) const { return to_piece_.empty() ? offset : to_piece_[offset]; }

 private:
  std::string_view text_;
  std::string storage_;
  std::vector<uint32_t> to_piece_;
};

// A search that hits the retry limit (a pattern that backtracks catastrophically) leaves the rest
// of the piece unsplit: Encode has no error to return, and the text still round-trips. Logged once.
void WarnSearchFailed(const Regex& regex, const Status& status) {
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true)) {
    ENVFORGE_LOG(kWarn) << "tokenizer: pre-tokenizer pattern '" << regex.pattern()
                        << "' gave up; the rest of the piece stays unsplit: " << status.ToString();
  }
}

bool BoolField(const Json& json, const char* key, bool fallback) {
  auto it = json.find(key);
  return it != json.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

}  // namespace

Result<PreTokenizer::Step> PreTokenizer::StepFromJson(const Json& json, const std::string& path) {
  if (!json.is_object()) return InvalidArgumentError("tokenizer.json: " + path + ": expected an object");
  auto type_it = json.find("type");
  if (type_it == json.end() || !type_it->is_string()) {
    return InvalidArgumentError("tokenizer.json: " + path + ".type: missing");
  }
  const std::string type = type_it->get<std::string>();
  Step step;
  if (type == "ByteLevel") {
    step.byte_level = true;
    step.add_prefix_space = BoolField(json, "add_prefix_space", false);
    step.use_regex = BoolField(json, "use_regex", true);
    if (step.use_regex) {
      ENVFORGE_ASSIGN_OR_RETURN(Pattern pattern, CompilePattern(kGpt2Pattern));
      step.pattern.push_back(std::move(pattern));
    }
    return step;
  }
  if (type != "Split") return Unsupported(path + ".type", "pre-tokenizer type '" + type + "'");
  auto pattern_it = json.find("pattern");
  if (pattern_it == json.end() || !pattern_it->is_object()) {
    return InvalidArgumentError("tokenizer.json: " + path + ".pattern: missing");
  }
  std::string regex_text;
  if (auto it = pattern_it->find("Regex"); it != pattern_it->end() && it->is_string()) {
    regex_text = it->get<std::string>();
  } else if (auto it2 = pattern_it->find("String"); it2 != pattern_it->end() && it2->is_string()) {
    regex_text = EscapeLiteral(it2->get<std::string>());
  } else {
    return InvalidArgumentError("tokenizer.json: " + path + ".pattern: expected {\"Regex\": ...} or {\"String\": ...}");
  }
  auto pattern = CompilePattern(regex_text);
  if (!pattern.ok()) {
    return InvalidArgumentError("tokenizer.json: " + path + ".pattern: " + pattern.status().message());
  }
  step.pattern.push_back(std::move(pattern).value());
  const std::string behavior = json.value("behavior", std::string("Isolated"));
  if (behavior == "Isolated") {
    step.behavior = Behavior::kIsolated;
  } else if (behavior == "Removed") {
    step.behavior = Behavior::kRemoved;
  } else if (behavior == "MergedWithPrevious") {
    step.behavior = Behavior::kMergedWithPrevious;
  } else if (behavior == "MergedWithNext") {
    step.behavior = Behavior::kMergedWithNext;
  } else if (behavior == "Contiguous") {
    step.behavior = Behavior::kContiguous;
  } else {
    return Unsupported(path + ".behavior", "split behavior '" + behavior + "'");
  }
  step.invert = BoolField(json, "invert", false);
  return step;
}

Result<PreTokenizer> PreTokenizer::FromJson(const Json& json) {
  PreTokenizer pre_tokenizer;
  if (json.is_null()) return pre_tokenizer;
  if (!json.is_object()) return InvalidArgumentError("tokenizer.json: pre_tokenizer: expected an object");
  if (json.value("type", std::string()) == "Sequence") {
    auto list = json.find("pretokenizers");
    if (list == json.end() || !list->is_array()) {
      return InvalidArgumentError("tokenizer.json: pre_tokenizer.pretokenizers: missing");
    }
    for (size_t i = 0; i < list->size(); ++i) {
      ENVFORGE_ASSIGN_OR_RETURN(Step step,
                                StepFromJson((*list)[i], "pre_tokenizer.pretokenizers[" + std::to_string(i) + "]"));
      pre_tokenizer.steps_.push_back(std::move(step));
    }
  } else {
    ENVFORGE_ASSIGN_OR_RETURN(Step step, StepFromJson(json, "pre_tokenizer"));
    pre_tokenizer.steps_.push_back(std::move(step));
  }
  for (const Step& step : pre_tokenizer.steps_) pre_tokenizer.has_byte_level_ |= step.byte_level;
  return pre_tokenizer;
}

void PreTokenizer::ApplySplit(const Pattern& pattern, Behavior behavior, bool invert, std::string_view piece,
                              std::vector<std::string_view>* out) {
  thread_local Subject subject;
  subject.Reset(piece);
  const std::string_view text = subject.text();
  // (byte begin, byte end, is_match) covering the piece.
  struct Range {
    size_t begin;
    size_t end;
    bool is_match;
  };
  thread_local std::vector<Range> ranges;
  ranges.clear();
  size_t last = 0;  // byte offsets into text
  size_t from = 0;
  // Takes one match, in order; false when the search is over.
  auto take = [&](const Regex::Match& match) {
    if (match.end == match.begin) {  // empty matches split nothing; step over one character
      if (match.begin == text.size()) return false;
      from = match.begin + static_cast<size_t>(ValidUtf8Length(text, match.begin));
      return true;
    }
    if (match.begin > last) ranges.push_back({subject.ToPiece(last), subject.ToPiece(match.begin), invert});
    ranges.push_back({subject.ToPiece(match.begin), subject.ToPiece(match.end), !invert});
    last = match.end;
    from = match.end;
    return true;
  };
  thread_local std::vector<std::optional<Regex::Match>> groups;
  bool more = true;
  // No search from text.size(): a match there is empty, and empty matches split nothing.
  while (more && from < text.size()) {
    bool batched = pattern.batch.has_value();
    Result<std::optional<Regex::Match>> found =
        batched ? pattern.batch->Find(text, from, &groups) : pattern.single.Find(text, from);
    if (!found.ok() && batched) {  // the batch's one attempt spans several matches: retry alone
      batched = false;
      found = pattern.single.Find(text, from);
    }
    if (!found.ok()) {
      WarnSearchFailed(pattern.single, found.status());
      break;
    }
    if (!found->has_value()) break;
    if (!batched) {
      more = take(**found);
      continue;
    }
    for (const std::optional<Regex::Match>& group : groups) {
      if (!group) break;
      const bool empty = group->begin == group->end;
      more = take(*group);
      // After an empty match the next search starts a character later; the batch's remaining
      // copies started at the same place, so they are not the next matches.
      if (!more || empty) break;
    }
  }
  if (last < text.size()) ranges.push_back({subject.ToPiece(last), piece.size(), invert});

  // Ranges are adjacent, so every merge below is again one slice of the piece.
  auto slice = [&](size_t begin, size_t end) { return piece.substr(begin, end - begin); };
  switch (behavior) {
    case Behavior::kIsolated:
      for (const Range& r : ranges) out->push_back(slice(r.begin, r.end));
      return;
    case Behavior::kRemoved:
      for (const Range& r : ranges) {
        if (!r.is_match) out->push_back(slice(r.begin, r.end));
      }
      return;
    case Behavior::kMergedWithPrevious: {
      // A match joins the non-match before it.
      bool previous_open = false;
      for (const Range& r : ranges) {
        if (r.is_match && previous_open) {
          out->back() = slice(out->back().data() - piece.data(), r.end);
        } else {
          out->push_back(slice(r.begin, r.end));
        }
        previous_open = !r.is_match;
      }
      return;
    }
    case Behavior::kMergedWithNext: {
      // Matches join the non-match after them; trailing matches form a piece of their own.
      std::optional<size_t> pending_begin;
      for (const Range& r : ranges) {
        if (r.is_match) {
          if (!pending_begin) pending_begin = r.begin;
        } else {
          out->push_back(slice(pending_begin.value_or(r.begin), r.end));
          pending_begin.reset();
        }
      }
      if (pending_begin) out->push_back(slice(*pending_begin, piece.size()));
      return;
    }
    case Behavior::kContiguous: {
      // Adjacent matches form one piece.
      bool previous_match = false;
      for (const Range& r : ranges) {
        if (r.is_match && previous_match) {
          out->back() = slice(out->back().data() - piece.data(), r.end);
        } else {
          out->push_back(slice(r.begin, r.end));
        }
        previous_match = r.is_match;
      }
      return;
    }
  }
}

void PreTokenizer::Split(std::string_view text, std::vector<std::string_view>* pieces,
                         std::deque<std::string>* storage) const {
  thread_local std::vector<std::string_view> current;
  thread_local std::vector<std::string_view> next;
  current.clear();
  current.push_back(text);
  for (const Step& step : steps_) {
    next.clear();
    for (std::string_view piece : current) {
      if (step.byte_level && step.add_prefix_space && (piece.empty() || piece[0] != ' ')) {
        storage->push_back(" " + std::string(piece));
        piece = storage->back();
      }
      if (step.pattern.empty()) {
        next.push_back(piece);
      } else {
        ApplySplit(step.pattern[0], step.byte_level ? Behavior::kIsolated : step.behavior,
                   step.byte_level ? false : step.invert, piece, &next);
      }
    }
    current.swap(next);
  }
  for (std::string_view piece : current) {
    if (!piece.empty()) pieces->push_back(piece);
  }
}

void PreTokenizer::Split(std::string_view text, std::vector<std::string>* pieces) const {
  std::vector<std::string_view> views;
  std::deque<std::string> storage;
  Split(text, &views, &storage);
  for (std::string_view view : views) pieces->emplace_back(view);
}

}  // namespace envforge::inference::internal
