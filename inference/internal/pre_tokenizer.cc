#include "inference/internal/pre_tokenizer.h"

#include <utility>

#include "inference/internal/unicode.h"

namespace envforge::inference::internal {
namespace {

// GPT-2's pattern, which ByteLevel uses when use_regex is true.
constexpr std::string_view kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

Status Unsupported(const std::string& path, std::string_view what) {
  return InvalidArgumentError("tokenizer.json: " + path + ": unsupported " + std::string(what));
}

// A regex matching `literal` exactly: letters and digits stand for themselves, everything else is
// escaped (the engine reads any escaped non-alphanumeric character literally).
std::string EscapeLiteral(std::string_view literal) {
  std::string out;
  for (char c : literal) {
    const auto byte = static_cast<unsigned char>(c);
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && byte < 0x80) out.push_back('\\');
    out.push_back(c);
  }
  return out;
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
      auto regex = Regex::Compile(kGpt2Pattern);
      if (!regex.ok()) return regex.status();
      step.regex.push_back(std::move(regex).value());
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
  auto regex = Regex::Compile(regex_text);
  if (!regex.ok()) {
    return InvalidArgumentError("tokenizer.json: " + path + ".pattern: " + regex.status().message());
  }
  step.regex.push_back(std::move(regex).value());
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

void PreTokenizer::ApplySplit(const Regex& regex, Behavior behavior, bool invert, const std::string& piece,
                              std::vector<std::string>* out) {
  thread_local DecodedUtf8 decoded;
  DecodeUtf8(piece, &decoded);
  const std::span<const char32_t> text(decoded.code_points);
  // (byte begin, byte end, is_match) covering the piece.
  struct Range {
    size_t begin;
    size_t end;
    bool is_match;
  };
  std::vector<Range> ranges;
  size_t last = 0;
  size_t from = 0;
  while (from <= text.size()) {
    auto match = regex.Find(text, from);
    if (!match) break;
    if (match->end == match->begin) {  // empty matches split nothing
      from = match->begin + 1;
      continue;
    }
    if (match->begin > last) ranges.push_back({decoded.offsets[last], decoded.offsets[match->begin], invert});
    ranges.push_back({decoded.offsets[match->begin], decoded.offsets[match->end], !invert});
    last = match->end;
    from = match->end;
  }
  if (last < text.size()) ranges.push_back({decoded.offsets[last], decoded.offsets[text.size()], invert});

  auto slice = [&](const Range& r) { return piece.substr(r.begin, r.end - r.begin); };
  switch (behavior) {
    case Behavior::kIsolated:
      for (const Range& r : ranges) out->push_back(slice(r));
      return;
    case Behavior::kRemoved:
      for (const Range& r : ranges) {
        if (!r.is_match) out->push_back(slice(r));
      }
      return;
    case Behavior::kMergedWithPrevious: {
      bool previous_open = false;
      for (const Range& r : ranges) {
        if (r.is_match && previous_open) {
          out->back() += slice(r);
        } else {
          out->push_back(slice(r));
        }
        previous_open = !r.is_match;
      }
      return;
    }
    case Behavior::kMergedWithNext: {
      std::string pending;
      for (const Range& r : ranges) {
        if (r.is_match) {
          pending += slice(r);
        } else {
          out->push_back(pending + slice(r));
          pending.clear();
        }
      }
      if (!pending.empty()) out->push_back(pending);
      return;
    }
    case Behavior::kContiguous: {
      bool previous_match = false;
      for (const Range& r : ranges) {
        if (r.is_match && previous_match) {
          out->back() += slice(r);
        } else {
          out->push_back(slice(r));
        }
        previous_match = r.is_match;
      }
      return;
    }
  }
}

void PreTokenizer::Split(std::string_view text, std::vector<std::string>* pieces) const {
  std::vector<std::string> current;
  current.emplace_back(text);
  std::vector<std::string> next;
  for (const Step& step : steps_) {
    next.clear();
    for (std::string& piece : current) {
      if (step.byte_level && step.add_prefix_space && (piece.empty() || piece[0] != ' ')) {
        piece.insert(piece.begin(), ' ');
      }
      if (step.regex.empty()) {
        next.push_back(std::move(piece));
      } else {
        ApplySplit(step.regex[0], step.byte_level ? Behavior::kIsolated : step.behavior,
                   step.byte_level ? false : step.invert, piece, &next);
      }
    }
    current.swap(next);
  }
  for (std::string& piece : current) {
    if (!piece.empty()) pieces->push_back(std::move(piece));
  }
}

}  // namespace envforge::inference::internal
