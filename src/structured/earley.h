#pragma once
// An Earley parser over lexemes, one per sequence being constrained.
//
// Row k holds the items (a rule with a dot, and the row where the rule began) after k
// lexemes; each row knows the lexemes it allows next and whether the grammar may end there.
// Nullable nonterminals follow Aycock and Horspool: predicting one also moves the dot past
// it, so completion never has to look back into the row being built.
//
// Walking the token trie pushes and pops rows constantly (one push per lexeme boundary in
// a token). Popped rows are kept: a scan that repeats the one that made the next kept row
// (same lexemes from the same row) takes it back without recomputing it.
#include <cstdint>
#include <span>
#include <vector>

#include "structured/grammar.h"

namespace tandem::structured {

class Earley {
 public:
  static constexpr uint32_t kNoKey = 0xFFFFFFFFu;
  static constexpr StateId kNoState = 0xFFFFFFFFu;

  struct Row {
    uint32_t items_begin = 0, items_end = 0;
    uint32_t lex_begin = 0, lex_end = 0;  // the allowed lexemes, in lexemes_
    uint32_t key = kNoKey;                // the scan that made it
    bool accepting = false;
    StateId lexer_start = kNoState;  // filled by the matcher on first use
  };

  explicit Earley(const Grammar& g);

  size_t size() const { return size_; }
  Row& top() { return rows_[size_ - 1]; }
  const Row& top() const { return rows_[size_ - 1]; }
  std::span<const LexemeId> allowed(const Row& r) const {
    return {lexemes_.data() + r.lex_begin, size_t(r.lex_end - r.lex_begin)};
  }
  // Scans `lexemes` (sorted) at the top row and pushes the row after them; `key` names
  // this scan for reuse (the same key must mean the same lexemes). False, with nothing
  // pushed, when no item of the top row expects any of them.
  bool scan(std::span<const LexemeId> lexemes, uint32_t key);
  // Back to `n` rows (n >= 1); the rows above stay cached for scan().
  void truncate(size_t n) { size_ = n; }
  // Drops cached rows above the top (after a token is committed, to bound memory).
  void drop_cache();

 private:
  struct Item {
    uint32_t dot;     // index into Grammar::flat
    uint32_t origin;  // row
  };
  void add(uint32_t dot, uint32_t origin);
  void close_row(uint32_t k);

  const Grammar& g_;
  std::vector<Row> rows_;  // [0, size_) live, then cached continuations
  size_t size_ = 0;
  std::vector<Item> items_;
  std::vector<LexemeId> lexemes_;
  // Per-row dedup of items: open addressing, stamped with the row's serial.
  std::vector<uint64_t> slots_;
  std::vector<uint32_t> slot_stamp_;
  std::vector<uint32_t> predicted_;  // per nonterminal: serial of the row that predicted it
  uint32_t serial_ = 0;
  uint32_t row_items_ = 0;
};

}  // namespace tandem::structured
