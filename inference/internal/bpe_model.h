// The BPE model of a byte-level tokenizer: maps one pre-tokenized piece (raw bytes) to ids by
// starting from one token per byte (through the GPT-2 byte alphabet) and applying merges in rank
// order, lowest rank first and leftmost first among equal ranks (Hugging Face's order).
//
// Thread safety: Encode may run concurrently; the piece cache is guarded by a mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace envforge::inference::internal {

class BpeModel {
 public:
  // merges: (left id, right id, merged id) in rank order. byte_token_ids[b]: the id of byte b's
  // alphabet character, or -1 when the vocabulary lacks it (such bytes become unk_id, or are
  // dropped without one). whole_piece_ids: with ignore_merges, pieces found here (by their raw
  // bytes) are emitted as one id.
  struct Merge {
    int32_t left;
    int32_t right;
    int32_t merged;
  };
  BpeModel(const std::vector<Merge>& merges, const std::vector<int32_t>& byte_token_ids, std::optional<int32_t> unk_id,
           bool ignore_merges, std::unordered_map<std::string, int32_t> whole_piece_ids);

  void Encode(std::string_view piece, std::vector<int32_t>* ids) const;

 private:
  void EncodeUncached(std::string_view piece, std::vector<int32_t>* ids) const;
  static uint64_t PairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }

  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;  // pair -> (rank, merged id)
  std::vector<int32_t> byte_token_ids_;
  std::optional<int32_t> unk_id_;
  bool ignore_merges_;
  std::unordered_map<std::string, int32_t> whole_piece_ids_;

  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace envforge::inference::internal
