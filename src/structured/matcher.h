#pragma once
// The state of one constrained output: which bytes it has produced so far, as a lexer
// state plus an Earley parser, and the mask of tokens that may come next.
//
// Lexing is greedy: a lexeme ends where the next byte cannot extend it, and the parser then
// scans every lexeme the lexer state accepts. A token is allowed when each of its bytes
// keeps that going (the lexer state never empty, each scan accepted by the parser): then
// some continuation reaches the end of the grammar. EOS is allowed where the grammar may
// end.
//
// Mask computation walks the vocabulary's tries against the current state (vocabulary.h):
// a trie node whose byte fails skips its whole subtree; a byte that ends a lexeme pushes a
// parser row, popped when the walk leaves that subtree. Plain-token slices that the lexer
// state keeps alive are taken whole from precomputed masks.
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "structured/compiled_grammar.h"
#include "structured/earley.h"
#include "structured/vocabulary.h"

namespace tandem::structured {

class Matcher {
 public:
  Matcher(std::shared_ptr<const CompiledGrammar> g, std::shared_ptr<const Vocabulary> v);

  // Writes the allowed tokens as a bitmask: bit t of word t / 32 (mask.size() ==
  // vocabulary().mask_words()). After the output ended, nothing is allowed.
  void fill_mask(std::span<uint32_t> mask);
  // Moves past token `t`; false (state unchanged) when `t` is not allowed. An EOS token
  // ends the output where the grammar may end.
  bool accept_token(TokenId t);
  // Whether accept_token(t) would succeed, without moving (token by token, no trie: the
  // reference the masks are tested against).
  bool allows(TokenId t);
  // Moves past `bytes`; false when some byte is not allowed, with `*consumed` (if given)
  // the bytes accepted before it and the state after them.
  bool accept_bytes(std::string_view bytes, size_t* consumed = nullptr);
  // Whether the grammar may end here (EOS would be allowed).
  bool can_end();
  bool ended() const { return ended_; }
  // Whether no token but EOS can follow (the grammar is complete and closed).
  bool must_end();
  uint64_t bytes_consumed() const { return consumed_; }

  const Vocabulary& vocabulary() const { return *vocab_; }
  const CompiledGrammar& grammar() const { return *g_; }

 private:
  bool push_byte(uint8_t b);  // the committed path: one byte, state changed only on success
  StateId row_start(Earley::Row& r);
  StateId boundary(StateId s, uint8_t b);  // end the lexeme in s, then b; kDead on failure
  // Walks the subtree of trie node `root` (its children) from lexer state `from`, setting
  // the allowed tokens' bits. Recording: no lexeme is ended; the nodes where one could end
  // go to `ends` instead (for a StateMask). Returns the nodes visited.
  template <bool kRecord>
  uint32_t walk(const TokenTrie& trie, uint32_t* mask, uint32_t root, StateId from,
                std::vector<StateMask::End>* ends = nullptr, uint8_t trie_id = 0);
  const TokenTrie& trie(int id) const;  // 1..kMaxPlainRun + 1: plain slices; 0: the rest
  // The mask of state_ from scratch (recording into `sm` when given).
  uint32_t compute_mask(uint32_t* mask, StateMask* sm);
  void apply(const StateMask& sm, uint32_t* mask);
  const StateMask* build_state_mask();  // for state_; null when not kept

  std::shared_ptr<const CompiledGrammar> g_;
  std::shared_ptr<const Vocabulary> vocab_;
  Lexer& lexer_;
  Earley parser_;
  StateId state_ = kDead;
  bool ended_ = false;
  uint64_t consumed_ = 0;
  struct Frame {
    uint32_t end;
    StateId state;
    const std::atomic<uint32_t>* row;
    uint32_t rows;
  };
  std::vector<Frame> frames_;
};

}  // namespace tandem::structured
