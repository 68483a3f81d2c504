#pragma once
// What constraints see of a tokenizer: each token's bytes, organised for mask computation.
//
// Tokens are grouped in slices, each with its own trie (nodes in preorder, so a subtree is
// a contiguous range that one index jump skips):
//   - "plain" tokens, whose bytes are complete UTF-8 characters none of which is `"`, `\`
//     or a control character (what a JSON string holds unescaped), one slice per length in
//     characters 1..kMaxPlainRun and one for longer ones;
//   - every other token (quotes, escapes, newlines, partial UTF-8).
// For a lexer state that keeps every plain text of up to n characters alive (lexer.h,
// PlainRun), the plain tokens of up to n characters are allowed wholesale from a
// precomputed mask and their tries are not walked; that is what makes dense masks
// (inside a JSON string) cheap.
//
// Special tokens (<|im_end|> ...) and rows past the tokenizer (the model's padding) are in
// no trie: a constraint never allows them, except the EOS tokens where the grammar may end.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "structured/lexer.h"

namespace tandem::tok {
class Tokenizer;
}

namespace tandem::structured {

using TokenId = int32_t;
inline constexpr uint32_t kNoToken = 0xFFFFFF;

// One trie node: its byte, its token (kNoToken for inner nodes), and the size of its
// subtree (itself included), so node i's subtree is [i, i + size).
struct TrieNode {
  uint32_t byte_token;  // byte | token << 8
  uint32_t size;
  uint8_t byte() const { return uint8_t(byte_token); }
  uint32_t token() const { return byte_token >> 8; }
};

struct TokenTrie {
  std::vector<TrieNode> nodes;  // nodes[0] is the root (no byte)
  int max_depth = 0;
  // Builds from (bytes, id) pairs with distinct non-empty bytes.
  static TokenTrie build(std::vector<std::pair<std::string, TokenId>> tokens);
};

class Vocabulary {
 public:
  // `bytes[i]` is token i's text ("" for a token a constraint must never produce);
  // `mask_size` is the width of a logits row (>= bytes.size()); `eos` the ids that end a
  // constrained output.
  Vocabulary(std::vector<std::string> bytes, int mask_size, std::vector<TokenId> eos);
  // From a tokenizer: special tokens excluded, non-special added tokens (<think>,
  // <tool_call>) kept as their text.
  static std::shared_ptr<const Vocabulary> from_tokenizer(const tok::Tokenizer& t, int mask_size,
                                                          std::vector<TokenId> eos);

  int size() const { return mask_size_; }
  int mask_words() const { return (mask_size_ + 31) / 32; }
  const std::string& bytes(TokenId id) const { return bytes_[size_t(id)]; }
  int num_tokens() const { return int(bytes_.size()); }
  const std::vector<TokenId>& eos() const { return eos_; }
  bool is_eos(TokenId id) const;

  // Slices (see above). plain(k): tokens of exactly k plain characters, k in
  // 1..kMaxPlainRun; plain(kMaxPlainRun + 1): longer ones.
  const TokenTrie& plain(int k) const { return plain_[size_t(k)]; }
  const TokenTrie& rest() const { return rest_; }
  // Mask words of the plain tokens of at most k characters (k <= kMaxPlainRun), and of all.
  std::span<const uint32_t> plain_upto(int k) const {
    return {plain_upto_.data() + size_t(k) * size_t(mask_words()), size_t(mask_words())};
  }
  std::span<const uint32_t> plain_all() const { return plain_upto(kMaxPlainRun + 1); }
  // Tokens with the same bytes as an earlier one: (first id, this id).
  const std::vector<std::pair<TokenId, TokenId>>& duplicates() const { return dups_; }

 private:
  std::vector<std::string> bytes_;
  int mask_size_;
  std::vector<TokenId> eos_;
  std::vector<TokenTrie> plain_;  // [kMaxPlainRun + 2], index 0 unused
  TokenTrie rest_;
  std::vector<uint32_t> plain_upto_;  // [(kMaxPlainRun + 2) * mask_words]
  std::vector<std::pair<TokenId, TokenId>> dups_;
};

// The number of characters when every byte of `s` forms complete UTF-8 characters that a
// JSON string holds unescaped; 0 otherwise.
int plain_length(const std::string& s);

}  // namespace tandem::structured
