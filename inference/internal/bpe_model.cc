#include "inference/internal/bpe_model.h"

#include <queue>

namespace envforge::inference::internal {
namespace {

// Pieces longer than this are rare (long runs of one class) and not worth caching.
constexpr size_t kMaxCachedPieceBytes = 128;
// The cache is dropped wholesale when it reaches this many entries.
constexpr size_t kMaxCacheEntries = 1 << 17;

struct Symbol {
  int32_t id;
  int prev;  // index of the previous live symbol, -1 at the start
  int next;  // index of the next live symbol, -1 at the end
};

struct Candidate {
  int32_t rank;
  int left;  // index of the left symbol
  int32_t left_id;
  int32_t right_id;
  bool operator>(const Candidate& other) const { return rank != other.rank ? rank > other.rank : left > other.left; }
};

}  // namespace

BpeModel::BpeModel(const std::vector<Merge>& merges, const std::vector<int32_t>& byte_token_ids,
                   std::optional<int32_t> unk_id, bool ignore_merges,
                   std::unordered_map<std::string, int32_t> whole_piece_ids)
    : byte_token_ids_(byte_token_ids),
      unk_id_(unk_id),
      ignore_merges_(ignore_merges),
      whole_piece_ids_(std::move(whole_piece_ids)) {
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    // The first occurrence of a pair wins, as in Hugging Face's loader.
    merges_.emplace(PairKey(merges[rank].left, merges[rank].right),
                    std::make_pair(static_cast<int32_t>(rank), merges[rank].merged));
  }
}

void BpeModel::Encode(std::string_view piece, std::vector<int32_t>* ids) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    if (auto it = whole_piece_ids_.find(std::string(piece)); it != whole_piece_ids_.end()) {
      ids->push_back(it->second);
      return;
    }
  }
  const bool cacheable = piece.size() <= kMaxCachedPieceBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (auto it = cache_.find(std::string(piece)); it != cache_.end()) {
      ids->insert(ids->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t start = ids->size();
  EncodeUncached(piece, ids);
  if (cacheable) {
    std::vector<int32_t> encoded(ids->begin() + static_cast<std::ptrdiff_t>(start), ids->end());
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kMaxCacheEntries) cache_.clear();
    cache_.emplace(std::string(piece), std::move(encoded));
  }
}

void BpeModel::EncodeUncached(std::string_view piece, std::vector<int32_t>* ids) const {
  thread_local std::vector<Symbol> symbols;
  symbols.clear();
  for (char c : piece) {
    int32_t id = byte_token_ids_[static_cast<unsigned char>(c)];
    if (id < 0) {
      if (!unk_id_) continue;
      id = *unk_id_;
    }
    const int index = static_cast<int>(symbols.size());
    symbols.push_back(Symbol{id, index - 1, -1});
    if (index > 0) symbols[index - 1].next = index;
  }
  if (symbols.empty()) return;

  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto consider = [&](int left) {
    if (left < 0) return;
    const int right = symbols[left].next;
    if (right < 0) return;
    auto it = merges_.find(PairKey(symbols[left].id, symbols[right].id));
    if (it == merges_.end()) return;
    queue.push(Candidate{it->second.first, left, symbols[left].id, symbols[right].id});
  };
  for (int i = 0; i + 1 < static_cast<int>(symbols.size()); ++i) consider(i);

  while (!queue.empty()) {
    const Candidate candidate = queue.top();
    queue.pop();
    Symbol& left = symbols[candidate.left];
    // Stale entries: the left symbol was merged away or changed, or its neighbour changed.
    if (left.id != candidate.left_id || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    if (right.id != candidate.right_id) continue;
    auto it = merges_.find(PairKey(left.id, right.id));
    left.id = it->second.second;
    const int after = right.next;
    right.id = -1;  // dead
    left.next = after;
    if (after >= 0) symbols[after].prev = candidate.left;
    consider(left.prev);
    consider(candidate.left);
  }
  for (int i = 0; i >= 0; i = symbols[i].next) ids->push_back(symbols[i].id);
}

}  // namespace envforge::inference::internal
