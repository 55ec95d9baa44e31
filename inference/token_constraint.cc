// The vocabulary trie and the tool-call constraint's walk over it.
#include "inference/token_constraint.h"

#include <algorithm>
#include <map>

namespace envforge::inference {

namespace {

// Whether `bytes` is whole UTF-8 characters (RFC 3629) without '>' or 0xEF: such a token can end
// no chat marker (they end in '>' or in "｜", EF BD 9C) and cut no character.
bool IsPlainText(const std::string& bytes) {
  ToolCallGrammar::State utf8;
  for (char c : bytes) {
    const auto byte = static_cast<uint8_t>(c);
    if (byte == '>' || byte == 0xEF || !Utf8Byte(utf8, byte)) return false;
  }
  return utf8.utf8_due == 0;
}

}  // namespace

// A map-based trie of `ids`, flattened breadth-first after the nodes already there (each node's
// edges contiguous); returns its root.
uint32_t VocabTrie::AddTrie(const std::vector<int32_t>& ids) {
  struct Building {
    std::map<uint8_t, size_t> children;
    std::vector<int32_t> tokens;
  };
  std::vector<Building> building(1);
  for (int32_t id : ids) {
    size_t node = 0;
    for (char c : bytes_[static_cast<size_t>(id)]) {
      auto [it, added] = building[node].children.try_emplace(static_cast<uint8_t>(c), building.size());
      if (added) building.emplace_back();
      node = it->second;
    }
    building[node].tokens.push_back(id);
  }
  const auto base = static_cast<uint32_t>(nodes_.size());
  std::vector<size_t> order = {0};
  std::vector<uint32_t> index(building.size(), base);
  for (size_t at = 0; at < order.size(); ++at) {
    for (const auto& [byte, child] : building[order[at]].children) {
      index[child] = base + static_cast<uint32_t>(order.size());
      order.push_back(child);
    }
  }
  nodes_.resize(base + order.size());
  for (size_t at = 0; at < order.size(); ++at) {
    const Building& from = building[order[at]];
    Node& node = nodes_[base + at];
    node.first_edge = static_cast<uint32_t>(edges_.size());
    node.edge_count = static_cast<uint32_t>(from.children.size());
    for (const auto& [byte, child] : from.children) edges_.push_back({byte, index[child]});
    node.first_token = static_cast<uint32_t>(tokens_.size());
    node.token_count = static_cast<uint32_t>(from.tokens.size());
    tokens_.insert(tokens_.end(), from.tokens.begin(), from.tokens.end());
  }
  return base;
}

std::shared_ptr<const VocabTrie> VocabTrie::Build(const Tokenizer& tokenizer) {
  auto trie = std::shared_ptr<VocabTrie>(new VocabTrie());
  const int32_t vocab = tokenizer.vocab_size();
  trie->bytes_.resize(static_cast<size_t>(vocab));
  std::vector<int32_t> all, rest;
  for (int32_t id = 0; id < vocab; ++id) {
    if (tokenizer.IsSpecial(id)) continue;
    std::string bytes = tokenizer.TokenBytes(id);
    if (bytes.empty()) continue;
    all.push_back(id);
    if (IsPlainText(bytes)) {
      trie->plain_.push_back(id);
      trie->longest_plain_ = std::max(trie->longest_plain_, static_cast<int64_t>(bytes.size()));
    } else {
      rest.push_back(id);
    }
    trie->bytes_[static_cast<size_t>(id)] = std::move(bytes);
  }
  trie->AddTrie(all);
  trie->rest_root_ = trie->AddTrie(rest);
  return trie;
}

const std::string& VocabTrie::bytes(int32_t token) const {
  static const std::string kNone;
  if (token < 0 || static_cast<size_t>(token) >= bytes_.size()) return kNone;
  return bytes_[static_cast<size_t>(token)];
}

ToolCallConstraint::ToolCallConstraint(std::shared_ptr<const ToolCallGrammar> grammar,
                                       std::shared_ptr<const VocabTrie> trie, int32_t eos_token)
    : grammar_(std::move(grammar)), trie_(std::move(trie)), eos_token_(eos_token), state_(grammar_->Start()) {}

void ToolCallConstraint::Walk(uint32_t node_index, const ToolCallGrammar::State& state,
                              std::vector<uint8_t>& allowed) const {
  const VocabTrie::Node& node = trie_->nodes()[node_index];
  for (uint32_t e = node.first_edge; e < node.first_edge + node.edge_count; ++e) {
    const VocabTrie::Edge& edge = trie_->edges()[e];
    ToolCallGrammar::State next = state;
    if (!grammar_->FeedByte(next, edge.byte)) continue;
    const VocabTrie::Node& child = trie_->nodes()[edge.node];
    for (uint32_t t = child.first_token; t < child.first_token + child.token_count; ++t) {
      const auto token = static_cast<size_t>(trie_->tokens()[t]);
      if (token < allowed.size()) allowed[token] = 1;
    }
    Walk(edge.node, next, allowed);
  }
}

void ToolCallConstraint::Allow(std::vector<uint8_t>& allowed) const {
  if (ended_) return;
  if (grammar_->TakesPlainText(state_, trie_->longest_plain())) {
    // Free text: every plain token is allowed as it is; only the others need the grammar.
    for (int32_t token : trie_->plain()) {
      if (static_cast<size_t>(token) < allowed.size()) allowed[static_cast<size_t>(token)] = 1;
    }
    Walk(trie_->rest_root(), state_, allowed);
  } else {
    Walk(0, state_, allowed);
  }
  if (grammar_->CanEnd(state_) && eos_token_ >= 0 && static_cast<size_t>(eos_token_) < allowed.size()) {
    allowed[static_cast<size_t>(eos_token_)] = 1;
  }
}

bool ToolCallConstraint::Accept(int32_t token) {
  if (ended_) return false;
  if (token == eos_token_) {
    ended_ = grammar_->CanEnd(state_);
    return ended_;
  }
  const std::string& bytes = trie_->bytes(token);
  return !bytes.empty() && grammar_->Feed(state_, bytes);
}

std::unique_ptr<TokenConstraint> ToolCallConstraint::Clone() const {
  return std::make_unique<ToolCallConstraint>(*this);
}

}  // namespace envforge::inference
