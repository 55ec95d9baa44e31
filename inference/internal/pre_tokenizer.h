// The pre-tokenizer of a byte-level BPE tokenizer.json: cuts text into pieces that BPE encodes
// independently. Supports null, ByteLevel (add_prefix_space, use_regex with GPT-2's pattern) and
// Sequence of Split (pattern Regex or String; behavior Isolated, Removed, MergedWithPrevious,
// MergedWithNext, Contiguous; invert) and ByteLevel steps. The byte-level mapping itself is done by
// the BPE model, which works on raw bytes.
//
// Patterns run on Oniguruma (base/regex.h) with Oniguruma syntax, as in Hugging Face tokenizers,
// so the pieces are theirs. Unlike Hugging Face, text may be any bytes: invalid UTF-8 bytes are
// matched as a character of no class (see pre_tokenizer.cc) and pass through unchanged.
#pragma once

#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/json.h"
#include "base/regex.h"
#include "base/status.h"

namespace envforge::inference::internal {

class PreTokenizer {
 public:
  // json: the "pre_tokenizer" value. Errors name the JSON path ("pre_tokenizer.pretokenizers[2]").
  static Result<PreTokenizer> FromJson(const Json& json);

  // Appends the pieces of text (in order; their concatenation is text, plus any prefix spaces
  // ByteLevel adds, minus what Removed splits drop). Pieces are views into text, or into *storage
  // for pieces ByteLevel's add_prefix_space extended; they live as long as both.
  void Split(std::string_view text, std::vector<std::string_view>* pieces, std::deque<std::string>* storage) const;
  // The same pieces, copied.
  void Split(std::string_view text, std::vector<std::string>* pieces) const;

  // Whether some step is ByteLevel (the only model input this project supports).
  bool has_byte_level() const { return has_byte_level_; }

 private:
  // A compiled Split pattern. `batch`, when the pattern allows it, is kBatchMatches copies of it
  // in a row, each a capture group, all but the first optional: one search then yields up to
  // kBatchMatches consecutive matches, exactly those as many searches for `single` give (the
  // argument is at CanBatch in pre_tokenizer.cc). Oniguruma has a fixed cost per search (it moves
  // its backtrack stack to the heap) that dominates on short tokens.
  struct Pattern {
    Regex single;
    std::optional<Regex> batch;
  };
  static Result<Pattern> CompilePattern(std::string_view text);

  enum class Behavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };
  struct Step {
    bool byte_level = false;
    bool add_prefix_space = false;  // ByteLevel
    bool use_regex = false;         // ByteLevel
    Behavior behavior = Behavior::kIsolated;
    bool invert = false;
    std::vector<Pattern> pattern;  // zero or one
  };
  static Result<Step> StepFromJson(const Json& json, const std::string& path);
  // Appends the pieces of one Split step on piece (views into piece).
  static void ApplySplit(const Pattern& pattern, Behavior behavior, bool invert, std::string_view piece,
                         std::vector<std::string_view>* out);

  std::vector<Step> steps_;
  bool has_byte_level_ = false;
};

}  // namespace envforge::inference::internal
