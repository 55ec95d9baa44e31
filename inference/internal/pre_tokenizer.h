// The pre-tokenizer of a byte-level BPE tokenizer.json: cuts text into pieces that BPE encodes
// independently. Supports null, ByteLevel (add_prefix_space, use_regex with GPT-2's pattern) and
// Sequence of Split (pattern Regex or String; behavior Isolated, Removed, MergedWithPrevious,
// MergedWithNext, Contiguous; invert) and ByteLevel steps. The byte-level mapping itself is done by
// the BPE model, which works on raw bytes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/json.h"
#include "base/status.h"
#include "inference/internal/regex.h"

namespace envforge::inference::internal {

class PreTokenizer {
 public:
  // json: the "pre_tokenizer" value. Errors name the JSON path ("pre_tokenizer.pretokenizers[2]").
  static Result<PreTokenizer> FromJson(const Json& json);

  // Appends the pieces of text (in order; their concatenation is text, plus any prefix spaces
  // ByteLevel adds, minus what Removed splits drop).
  void Split(std::string_view text, std::vector<std::string>* pieces) const;

  // Whether some step is ByteLevel (the only model input this project supports).
  bool has_byte_level() const { return has_byte_level_; }

 private:
  enum class Behavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };
  struct Step {
    bool byte_level = false;
    bool add_prefix_space = false;  // ByteLevel
    bool use_regex = false;         // ByteLevel
    Behavior behavior = Behavior::kIsolated;
    bool invert = false;
    std::vector<Regex> regex;  // zero or one
  };
  static Result<Step> StepFromJson(const Json& json, const std::string& path);
  static void ApplySplit(const Regex& regex, Behavior behavior, bool invert, const std::string& piece,
                         std::vector<std::string>* out);

  std::vector<Step> steps_;
  bool has_byte_level_ = false;
};

}  // namespace envforge::inference::internal
