#include "structured/matcher.h"

#include <algorithm>
#include <cstring>

namespace tandem::structured {

Matcher::Matcher(std::shared_ptr<const CompiledGrammar> g, std::shared_ptr<const Vocabulary> v)
    : g_(std::move(g)), vocab_(std::move(v)), lexer_(g_->lexer()), parser_(g_->grammar()) {
  state_ = row_start(parser_.top());
  int depth = vocab_->rest().max_depth;
  for (int k = 1; k <= kMaxPlainRun + 1; ++k) depth = std::max(depth, vocab_->plain(k).max_depth);
  frames_.resize(size_t(depth) + 2);
}

StateId Matcher::row_start(Earley::Row& r) {
  if (r.lexer_start == Earley::kNoState) r.lexer_start = lexer_.start_state(parser_.allowed(r));
  return r.lexer_start;
}

StateId Matcher::boundary(StateId s, uint8_t b) {
  if (!lexer_.accepting(s)) return kDead;
  if (!parser_.scan(lexer_.accepts(s), s)) return kDead;
  StateId t = lexer_.next(row_start(parser_.top()), b);
  if (t == kDead) parser_.truncate(parser_.size() - 1);
  return t;
}

bool Matcher::push_byte(uint8_t b) {
  StateId t = lexer_.next(state_, b);
  if (t == kDead) t = boundary(state_, b);
  if (t == kDead) return false;
  state_ = t;
  ++consumed_;
  return true;
}

bool Matcher::accept_bytes(std::string_view bytes, size_t* consumed) {
  size_t i = 0;
  bool ok = true;
  for (; i < bytes.size(); ++i) {
    if (ended_ || !push_byte(uint8_t(bytes[i]))) {
      ok = false;
      break;
    }
  }
  parser_.drop_cache();
  if (consumed) *consumed = i;
  return ok;
}

bool Matcher::accept_token(TokenId t) {
  if (ended_ || t < 0 || t >= vocab_->size()) return false;
  if (vocab_->is_eos(t)) {
    if (!can_end()) return false;
    ended_ = true;
    return true;
  }
  if (t >= vocab_->num_tokens()) return false;
  const std::string& bytes = vocab_->bytes(t);
  if (bytes.empty()) return false;
  StateId saved_state = state_;
  size_t saved_rows = parser_.size();
  uint64_t saved_consumed = consumed_;
  for (char c : bytes) {
    if (!push_byte(uint8_t(c))) {
      state_ = saved_state;
      parser_.truncate(saved_rows);
      consumed_ = saved_consumed;
      return false;
    }
  }
  parser_.drop_cache();
  return true;
}

bool Matcher::allows(TokenId t) {
  if (ended_ || t < 0 || t >= vocab_->size()) return false;
  if (vocab_->is_eos(t)) return can_end();
  if (t >= vocab_->num_tokens() || vocab_->bytes(t).empty()) return false;
  StateId saved_state = state_;
  size_t saved_rows = parser_.size();
  uint64_t saved_consumed = consumed_;
  bool ok = true;
  for (char c : vocab_->bytes(t))
    if (!push_byte(uint8_t(c))) {
      ok = false;
      break;
    }
  state_ = saved_state;
  parser_.truncate(saved_rows);
  consumed_ = saved_consumed;
  return ok;
}

bool Matcher::can_end() {
  if (ended_) return false;
  if (lexer_.accepting(state_)) {
    size_t rows = parser_.size();
    bool ok = parser_.scan(lexer_.accepts(state_), state_) && parser_.top().accepting;
    parser_.truncate(rows);
    return ok;
  }
  // No lexeme in progress only before the first byte.
  return consumed_ == 0 && parser_.top().accepting;
}

bool Matcher::must_end() {
  if (!can_end()) return false;
  std::vector<uint32_t> mask(size_t(vocab_->mask_words()));
  // Only EOS bits: anything else means more can follow.
  fill_mask(mask);
  for (TokenId e : vocab_->eos()) mask[size_t(e) / 32] &= ~(1u << (e % 32));
  return std::all_of(mask.begin(), mask.end(), [](uint32_t w) { return w == 0; });
}

const TokenTrie& Matcher::trie(int id) const {
  return id == 0 ? vocab_->rest() : vocab_->plain(id);
}

template <bool kRecord>
uint32_t Matcher::walk(const TokenTrie& trie, uint32_t* mask, uint32_t root, StateId from,
                       std::vector<StateMask::End>* ends, uint8_t trie_id) {
  const TrieNode* nodes = trie.nodes.data();
  const uint32_t n = root + nodes[root].size;
  if (n <= root + 1) return 0;
  const uint8_t* cls = lexer_.alphabet().class_of.data();
  Frame* f = frames_.data();
  f[0] = {n, from, lexer_.row_of(from), uint32_t(parser_.size())};
  int top = 0;
  uint32_t i = root + 1;
  while (i < n) {
    while (i >= f[top].end) {
      --top;
      if constexpr (!kRecord) parser_.truncate(f[top].rows);
    }
    const TrieNode node = nodes[i];
    const uint8_t b = node.byte();
    StateId t = f[top].row[cls[b]].load(std::memory_order_acquire);
    if (t == Lexer::kUnknown) [[unlikely]]
      t = lexer_.next_slow(f[top].state, b);
    if (t == kDead) {
      if constexpr (kRecord) {
        if (lexer_.accepting(f[top].state)) ends->push_back({trie_id, i, f[top].state});
        i += node.size;
        continue;
      } else {
        t = boundary(f[top].state, b);
        if (t == kDead) {
          i += node.size;
          continue;
        }
      }
    }
    uint32_t tok = node.token();
    if (tok != kNoToken) mask[tok >> 5] |= 1u << (tok & 31);
    if (node.size > 1) {
      ++top;
      f[top] = {i + node.size, t, lexer_.row_of(t), uint32_t(parser_.size())};
    } else if constexpr (!kRecord) {
      parser_.truncate(f[top].rows);
    }
    ++i;
  }
  if constexpr (!kRecord) parser_.truncate(f[0].rows);
  return i - root;
}

uint32_t Matcher::compute_mask(uint32_t* mask, StateMask* sm) {
  const size_t words = size_t(vocab_->mask_words());
  PlainRun run = lexer_.plain_run(state_);
  if (run.live == kRunUnbounded) {
    std::memcpy(mask, vocab_->plain_all().data(), words * 4);
  } else if (run.live > 0) {
    std::memcpy(mask, vocab_->plain_upto(run.live).data(), words * 4);
  } else {
    std::memset(mask, 0, words * 4);
  }
  uint32_t visited = 0;
  for (int k = 1; k <= kMaxPlainRun + 1; ++k) {
    bool covered = run.live == kRunUnbounded || (k <= kMaxPlainRun && k <= run.live);
    bool dead = run.dead != kNoDeadLength && k >= run.dead;
    if (covered || dead) continue;
    visited += sm ? walk<true>(trie(k), mask, 0, state_, &sm->ends, uint8_t(k))
                  : walk<false>(trie(k), mask, 0, state_);
  }
  visited += sm ? walk<true>(trie(0), mask, 0, state_, &sm->ends, 0)
                : walk<false>(trie(0), mask, 0, state_);
  return visited;
}

void Matcher::apply(const StateMask& sm, uint32_t* mask) {
  std::memcpy(mask, sm.inner.data(), sm.inner.size() * 4);
  for (const StateMask::End& e : sm.ends) {
    const TokenTrie& tr = trie(e.trie);
    const TrieNode node = tr.nodes[e.node];
    StateId t = boundary(e.state, node.byte());
    if (t == kDead) continue;
    uint32_t tok = node.token();
    if (tok != kNoToken) mask[tok >> 5] |= 1u << (tok & 31);
    if (node.size > 1) walk<false>(tr, mask, e.node, t);  // with the row boundary() pushed
    parser_.truncate(parser_.size() - 1);
  }
}

const StateMask* Matcher::build_state_mask() {
  constexpr size_t kMaxEnds = 4096;
  auto fresh = std::make_unique<StateMask>();
  fresh->vocab = vocab_.get();
  fresh->inner.resize(size_t(vocab_->mask_words()));
  compute_mask(fresh->inner.data(), fresh.get());
  if (fresh->ends.size() > kMaxEnds) return nullptr;
  const StateMask* kept = lexer_.keep_mask(state_, std::move(fresh));
  return kept && kept->vocab == vocab_.get() ? kept : nullptr;
}

void Matcher::fill_mask(std::span<uint32_t> mask) {
  const size_t words = size_t(vocab_->mask_words());
  if (ended_) {
    std::memset(mask.data(), 0, words * 4);
    return;
  }
  // A state met again whose first mask was a long walk gets a StateMask: later masks there
  // replay only the places where a lexeme may end.
  constexpr uint32_t kDenseWalk = 4000;
  const StateMask* sm = lexer_.state_mask(state_);
  if (!sm || sm->vocab != vocab_.get()) {
    sm = nullptr;
    uint32_t visits = lexer_.note_visit(state_);
    if (visits >= 2 && lexer_.walk_nodes(state_) >= kDenseWalk && !lexer_.state_mask(state_))
      sm = build_state_mask();
    if (!sm) {
      uint32_t visited = compute_mask(mask.data(), nullptr);
      if (visits == 1) lexer_.set_walk_nodes(state_, visited);
    }
  }
  if (sm) apply(*sm, mask.data());
  for (auto [first, dup] : vocab_->duplicates())
    if (mask[size_t(first) >> 5] >> (first & 31) & 1) mask[size_t(dup) >> 5] |= 1u << (dup & 31);
  if (can_end())
    for (TokenId e : vocab_->eos()) mask[size_t(e) >> 5] |= 1u << (e & 31);
}

}  // namespace tandem::structured
