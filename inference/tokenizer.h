// A byte-level BPE tokenizer read from a Hugging Face tokenizer.json (+ tokenizer_config.json
// beside it for bos/eos names), as DeepSeek-V3/V3.2 ship it.
//
// Supported tokenizer.json parts: model.type "BPE" with vocab + merges (strings "a b" or pairs),
// byte_fallback false, ignore_merges; pre_tokenizer ByteLevel or Sequence of Split (regex pattern,
// behavior Isolated/Removed, invert false) and ByteLevel (add_prefix_space, use_regex);
// normalizer null or NFC-free sequences (others: InvalidArgument naming the type); decoder
// ByteLevel; added_tokens (special or not) matched before pre-tokenization, longest first.
// Anything else is InvalidArgument "tokenizer.json: <path>: unsupported ...".
//
// Encode/Decode round-trip: Decode(Encode(s)) == s for every byte string s (valid UTF-8 or not;
// with parse_special false special-token text is encoded as ordinary text).
// Thread safety: immutable after loading; Encode/Decode are const and may run concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace envforge::inference {

class Tokenizer {
 public:
  // path: a tokenizer.json file, or a directory holding one.
  static Result<std::unique_ptr<Tokenizer>> Load(const std::string& path);
  static Result<std::unique_ptr<Tokenizer>> FromJsonText(std::string_view tokenizer_json,
                                                         std::string_view tokenizer_config_json = {});
  ~Tokenizer();

  // parse_special: added tokens written in the text become their ids.
  std::vector<int32_t> Encode(std::string_view text, bool parse_special = true) const;
  // The bytes of the tokens (special tokens included unless skip_special). Unknown ids: "".
  std::string Decode(std::span<const int32_t> ids, bool skip_special = false) const;
  std::string TokenBytes(int32_t id) const;
  std::optional<int32_t> TokenId(std::string_view token_text) const;  // vocab or added token
  bool IsSpecial(int32_t id) const;
  int32_t vocab_size() const;  // highest id + 1
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;

 private:
  class Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace envforge::inference
