#pragma once
// Byte-level BPE by merge rank, as Hugging Face's `BPE` model applies it: start from one
// symbol per byte, then repeatedly merge the adjacent pair of lowest merge rank (leftmost
// first on ties) until no pair has a merge. Words are cached per thread (word -> ids),
// which is what makes long prompts fast: most words repeat.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tandem::tok {

using TokenId = int32_t;

class BpeModel {
 public:
  // vocab: raw token bytes -> id. merges: pairs of raw byte strings, in rank order.
  // Throws tandem::Error when a merge names a token missing from the vocab or a byte has
  // no token of its own (this model has no byte fallback or unknown token).
  BpeModel(std::unordered_map<std::string, TokenId> vocab,
           const std::vector<std::pair<std::string, std::string>>& merges, bool ignore_merges);

  // Appends the ids of one pre-tokenized word (raw bytes, non-empty) to `out`.
  void encode_word(std::string_view word, std::vector<TokenId>& out) const;

  // Same, without the cache (the reference the cache is tested against).
  void encode_word_uncached(std::string_view word, std::vector<TokenId>& out) const;

 private:
  struct PairEntry {
    uint64_t key;  // (left id << 32) | right id; kEmpty when unused
    int32_t rank;
    TokenId merged;
  };
  static constexpr uint64_t kEmpty = ~uint64_t(0);
  const PairEntry* find_pair(TokenId a, TokenId b) const;

  std::unordered_map<std::string, TokenId> vocab_;
  TokenId byte_id_[256];
  std::vector<PairEntry> pairs_;  // open addressing, power-of-two size
  uint64_t pair_mask_ = 0;
  bool ignore_merges_;
  uint64_t instance_;  // tells the per-thread caches of different models apart
};

}  // namespace tandem::tok
