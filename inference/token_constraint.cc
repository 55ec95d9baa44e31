// The vocabulary trie and the tool-call constraint's walk over it.
#include "inference/token_constraint.h"

#include <map>

namespace envforge::inference {

std::shared_ptr<const VocabTrie> VocabTrie::Build(const Tokenizer& tokenizer) {
  auto trie = std::shared_ptr<VocabTrie>(new VocabTrie());
  const int32_t vocab = tokenizer.vocab_size();
  trie->bytes_.resize(static_cast<size_t>(vocab));
  // A map-based trie first, flattened breadth-first below so each node's edges are contiguous.
  struct Building {
    std::map<uint8_t, size_t> children;
    std::vector<int32_t> tokens;
  };
  std::vector<Building> building(1);
  for (int32_t id = 0; id < vocab; ++id) {
    if (tokenizer.IsSpecial(id)) continue;
    std::string bytes = tokenizer.TokenBytes(id);
    if (bytes.empty()) continue;
    size_t node = 0;
    for (char c : bytes) {
      auto [it, added] = building[node].children.try_emplace(static_cast<uint8_t>(c), building.size());
      if (added) building.emplace_back();
      node = it->second;
    }
    building[node].tokens.push_back(id);
    trie->bytes_[static_cast<size_t>(id)] = std::move(bytes);
  }
  // Node i of `building` becomes node order_index[i]; the root stays 0.
  std::vector<size_t> order = {0};
  std::vector<uint32_t> index(building.size(), 0);
  for (size_t at = 0; at < order.size(); ++at) {
    for (const auto& [byte, child] : building[order[at]].children) {
      index[child] = static_cast<uint32_t>(order.size());
      order.push_back(child);
    }
  }
  trie->nodes_.resize(order.size());
  for (size_t at = 0; at < order.size(); ++at) {
    const Building& from = building[order[at]];
    Node& node = trie->nodes_[at];
    node.first_edge = static_cast<uint32_t>(trie->edges_.size());
    node.edge_count = static_cast<uint32_t>(from.children.size());
    for (const auto& [byte, child] : from.children) trie->edges_.push_back({byte, index[child]});
    node.first_token = static_cast<uint32_t>(trie->tokens_.size());
    node.token_count = static_cast<uint32_t>(from.tokens.size());
    trie->tokens_.insert(trie->tokens_.end(), from.tokens.begin(), from.tokens.end());
  }
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
  Walk(0, state_, allowed);
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
