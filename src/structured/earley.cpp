#include "structured/earley.h"

#include <algorithm>

namespace tandem::structured {

Earley::Earley(const Grammar& g) : g_(g), predicted_(g.num_nonterminals(), 0) {
  slots_.assign(64, 0);
  slot_stamp_.assign(64, 0);
  rows_.emplace_back();
  size_ = 1;
  ++serial_;
  row_items_ = 0;
  for (uint32_t i = g_.rules_begin[g_.start]; i < g_.rules_begin[g_.start + 1]; ++i)
    add(g_.rule_start[g_.rules_of[i]], 0);
  close_row(0);
}

void Earley::add(uint32_t dot, uint32_t origin) {
  // Grow the table to keep it at most half full.
  if (size_t(row_items_ + 1) * 2 > slots_.size()) {
    size_t n = slots_.size() * 2;
    slots_.assign(n, 0);
    slot_stamp_.assign(n, 0);
    uint32_t begin = rows_[size_ - 1].items_begin;
    size_t mask = n - 1;
    for (uint32_t i = begin; i < items_.size(); ++i) {
      uint64_t key = uint64_t(items_[i].dot) << 32 | items_[i].origin;
      size_t h = size_t((key * 0x9e3779b97f4a7c15ull) >> 20) & mask;
      while (slot_stamp_[h] == serial_) h = (h + 1) & mask;
      slot_stamp_[h] = serial_;
      slots_[h] = key;
    }
  }
  uint64_t key = uint64_t(dot) << 32 | origin;
  size_t mask = slots_.size() - 1;
  size_t h = size_t((key * 0x9e3779b97f4a7c15ull) >> 20) & mask;
  while (slot_stamp_[h] == serial_) {
    if (slots_[h] == key) return;
    h = (h + 1) & mask;
  }
  slot_stamp_[h] = serial_;
  slots_[h] = key;
  items_.push_back({dot, origin});
  ++row_items_;
}

void Earley::close_row(uint32_t k) {
  Row& row = rows_[k];
  uint32_t lex_begin = uint32_t(lexemes_.size());
  bool accepting = false;
  for (uint32_t i = row.items_begin; i < items_.size(); ++i) {
    Item it = items_[i];
    Symbol s = g_.flat[it.dot];
    if (is_nonterminal(s)) {
      uint32_t n = s & ~kNonterminalBit;
      if (predicted_[n] != serial_) {
        predicted_[n] = serial_;
        for (uint32_t j = g_.rules_begin[n]; j < g_.rules_begin[n + 1]; ++j)
          add(g_.rule_start[g_.rules_of[j]], k);
      }
      if (g_.nullable[n]) add(it.dot + 1, it.origin);
    } else if (is_rule_end(s)) {
      uint32_t lhs = g_.rule_lhs[s & ~kRuleEndBit];
      if (lhs == g_.start && it.origin == 0) accepting = true;
      if (it.origin == k) continue;  // nullable: handled at prediction
      const Row& o = rows_[it.origin];
      Symbol want = kNonterminalBit | lhs;
      for (uint32_t j = o.items_begin; j < o.items_end; ++j)
        if (g_.flat[items_[j].dot] == want) add(items_[j].dot + 1, items_[j].origin);
    } else {
      lexemes_.push_back(s);
    }
  }
  // `row` may not be used past add(): rows_ is not touched by it, but re-fetch for clarity.
  Row& r = rows_[k];
  r.items_end = uint32_t(items_.size());
  std::sort(lexemes_.begin() + lex_begin, lexemes_.end());
  lexemes_.erase(std::unique(lexemes_.begin() + lex_begin, lexemes_.end()), lexemes_.end());
  r.lex_begin = lex_begin;
  r.lex_end = uint32_t(lexemes_.size());
  r.accepting = accepting;
  r.lexer_start = kNoState;
}

bool Earley::scan(std::span<const LexemeId> lexemes, uint32_t key) {
  if (rows_.size() > size_ && rows_[size_].key == key) {
    ++size_;  // the cached continuation is exactly this scan
    return true;
  }
  // Replace the cached continuations with the new row.
  rows_.resize(size_);
  const Row& t = rows_[size_ - 1];
  items_.resize(t.items_end);
  lexemes_.resize(t.lex_end);
  ++serial_;
  if (serial_ == 0) {  // wrapped: clear the stamps
    std::fill(slot_stamp_.begin(), slot_stamp_.end(), 0);
    std::fill(predicted_.begin(), predicted_.end(), 0);
    serial_ = 1;
  }
  row_items_ = 0;
  Row nr;
  nr.items_begin = uint32_t(items_.size());
  nr.key = key;
  rows_.push_back(nr);
  ++size_;
  const Row& prev = rows_[size_ - 2];
  for (uint32_t j = prev.items_begin; j < prev.items_end; ++j) {
    Symbol s = g_.flat[items_[j].dot];
    if (is_nonterminal(s) || is_rule_end(s)) continue;
    if (std::binary_search(lexemes.begin(), lexemes.end(), s))
      add(items_[j].dot + 1, items_[j].origin);
  }
  if (row_items_ == 0) {
    rows_.pop_back();
    --size_;
    return false;
  }
  close_row(uint32_t(size_ - 1));
  return true;
}

void Earley::drop_cache() {
  if (rows_.size() == size_) return;
  rows_.resize(size_);
  items_.resize(rows_.back().items_end);
  lexemes_.resize(rows_.back().lex_end);
}

}  // namespace tandem::structured
