// Constraints on the tokens a choice may sample next (constrained decoding): the engine masks
// every other token's logit to -inf before the sampler's temperature, top-k and top-p, so the
// recorded logprobs and kept sets are those of the distribution actually sampled from.
//
// VocabTrie holds the bytes of every ordinary token of a tokenizer as a byte trie; a grammar
// finds its allowed tokens by walking the trie once with copies of its state, cutting every
// subtree whose prefix it rejects (the cost is the part of the trie still viable, not the
// vocabulary times the token length). Special tokens are left out: a constraint allows the end
// of sequence by id when its grammar may end, and no other special token. In free text (content,
// reasoning, text values; ToolCallGrammar::TakesPlainText) most of a vocabulary is allowed as it
// is: the "plain" tokens (whole UTF-8 characters without '>' or the byte 0xEF, so that they end no
// chat marker) are set at once, and only a second trie of the other tokens is walked.
//
// ToolCallConstraint applies ToolCallGrammar (tool_call_grammar.h) to one choice's tokens.
// Thread safety: a trie and a grammar are immutable and shared; a constraint is one choice's.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "inference/tokenizer.h"
#include "inference/tool_call_grammar.h"

namespace envforge::inference {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets allowed[t] = 1 for every token that may come next; `allowed` has one zeroed entry per
  // token of the vocabulary.
  virtual void Allow(std::vector<uint8_t>& allowed) const = 0;
  // Advances past a sampled token; false when it was not allowed.
  virtual bool Accept(int32_t token) = 0;
  // A fresh copy in the current state (each choice of a request gets its own).
  virtual std::unique_ptr<TokenConstraint> Clone() const = 0;
};

class VocabTrie {
 public:
  static std::shared_ptr<const VocabTrie> Build(const Tokenizer& tokenizer);

  struct Node {
    uint32_t first_edge = 0;  // edges_[first_edge, first_edge + edge_count), by byte
    uint32_t edge_count = 0;
    uint32_t first_token = 0;  // tokens_[first_token, first_token + token_count) end here
    uint32_t token_count = 0;
  };
  struct Edge {
    uint8_t byte = 0;
    uint32_t node = 0;
  };
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<Edge>& edges() const { return edges_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  // The bytes of an ordinary token (empty for special tokens and ids out of range).
  const std::string& bytes(int32_t token) const;
  int32_t vocab_size() const { return static_cast<int32_t>(bytes_.size()); }
  // The plain tokens, their longest length in bytes, and the root of the trie of the others.
  const std::vector<int32_t>& plain() const { return plain_; }
  int64_t longest_plain() const { return longest_plain_; }
  uint32_t rest_root() const { return rest_root_; }

 private:
  uint32_t AddTrie(const std::vector<int32_t>& ids);

  std::vector<Node> nodes_;  // nodes_[0] is the root of every ordinary token's trie
  std::vector<Edge> edges_;
  std::vector<int32_t> tokens_;
  std::vector<std::string> bytes_;
  std::vector<int32_t> plain_;
  int64_t longest_plain_ = 0;
  uint32_t rest_root_ = 0;
};

class ToolCallConstraint : public TokenConstraint {
 public:
  ToolCallConstraint(std::shared_ptr<const ToolCallGrammar> grammar, std::shared_ptr<const VocabTrie> trie,
                     int32_t eos_token);
  void Allow(std::vector<uint8_t>& allowed) const override;
  bool Accept(int32_t token) override;
  std::unique_ptr<TokenConstraint> Clone() const override;
  const ToolCallGrammar::State& state() const { return state_; }

 private:
  void Walk(uint32_t node, const ToolCallGrammar::State& state, std::vector<uint8_t>& allowed) const;

  std::shared_ptr<const ToolCallGrammar> grammar_;
  std::shared_ptr<const VocabTrie> trie_;
  int32_t eos_token_;
  ToolCallGrammar::State state_;
  bool ended_ = false;  // EOS was accepted: nothing may follow
};

}  // namespace envforge::inference
