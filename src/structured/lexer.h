#pragma once
// The lexer: a DFA over bytes, built lazily from the lexemes (terminals) of a grammar.
//
// A state is a set of (lexeme, expression still to match) pairs, all non-empty; the start
// state of a parser row holds the lexemes that row allows. A byte moves every pair to its
// derivative and drops those that died; the state where nothing is left is kDead (0). A
// state accepts the lexemes whose expression matches the empty string. Lexing is greedy:
// a lexeme ends only where the next byte cannot extend it (see matcher.h).
//
// Many sequences with the same constraint walk one Lexer from several threads at once.
// Transitions live in a table that only grows (fixed chunks, never moved): a reader loads
// an entry atomically, and only an entry not yet computed takes the mutex. Per-state data
// is written before the state's id is published.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "structured/expr.h"

namespace tandem::structured {

using LexemeId = uint32_t;
using StateId = uint32_t;
inline constexpr StateId kDead = 0;

// What a state knows about runs of "plain" characters (those a JSON string holds
// unescaped: not `"`, `\` or a control character), for the token-length slices of the
// mask (matcher.h). Filled lazily.
struct PlainRun {
  // Every plain text of at most `live` characters keeps the state alive with no lexeme
  // ending inside it (kRunUnbounded: of any length).
  uint8_t live = 0;
  // Every plain text of `dead` characters kills the state (so does every longer one), with
  // no lexeme able to end on the way; kNoDeadLength when that is not known.
  uint8_t dead = 0;
};
inline constexpr uint8_t kNoDeadLength = 255;
inline constexpr uint8_t kRunUnbounded = 255;
inline constexpr int kMaxPlainRun = 32;  // a bounded `live` saturates here

// What a state allows of a vocabulary by itself: the tokens that stay inside the current
// lexeme (`inner`), and the trie nodes where a lexeme may end (`ends`, each with the state
// before that byte), which the matcher replays through its parser. Built for states that
// are met again with dense masks (matcher.cpp), so their walk is done once.
struct StateMask {
  const void* vocab = nullptr;  // the Vocabulary it was built for
  std::vector<uint32_t> inner;
  struct End {
    uint8_t trie;
    uint32_t node;
    StateId state;
  };
  std::vector<End> ends;
  size_t bytes() const { return inner.size() * 4 + ends.size() * sizeof(End) + sizeof(*this); }
};

class Lexer {
 public:
  // `store` is owned by the caller and outlives the lexer; `mu` guards it (and this
  // lexer's slow paths). `lexemes[i]` is the expression of lexeme i.
  Lexer(ExprStore& store, std::mutex& mu, std::vector<ExprId> lexemes, size_t max_states);
  ~Lexer();
  Lexer(const Lexer&) = delete;
  Lexer& operator=(const Lexer&) = delete;

  const Alphabet& alphabet() const { return alpha_; }
  size_t num_lexemes() const { return lexemes_.size(); }

  // The state allowing exactly `allowed` (sorted lexeme ids); kDead when empty.
  StateId start_state(std::span<const LexemeId> allowed);

  // The state after `byte`. Throws Error(kResource) past the state limit.
  StateId next(StateId s, uint8_t byte) {
    const std::atomic<uint32_t>* row = row_of(s);
    uint32_t t = row[alpha_.class_of[byte]].load(std::memory_order_acquire);
    if (t != kUnknown) [[likely]]
      return t;
    return compute(s, alpha_.class_of[byte]);
  }
  // The transition row of `s`, indexed by byte class (entries may read kUnknown).
  const std::atomic<uint32_t>* row_of(StateId s) const {
    Chunk* c = chunks_[s >> kChunkBits].load(std::memory_order_acquire);
    return c->trans.get() + size_t(s & kChunkMask) * size_t(alpha_.num_classes());
  }
  StateId next_slow(StateId s, uint8_t byte) { return compute(s, alpha_.class_of[byte]); }
  static constexpr uint32_t kUnknown = 0xFFFFFFFFu;

  bool accepting(StateId s) const { return !info(s).accepts.empty(); }
  // Lexemes that may end in `s` (sorted).
  std::span<const LexemeId> accepts(StateId s) const { return info(s).accepts; }
  // Lexemes still possible in `s` (sorted).
  std::span<const LexemeId> possible(StateId s) const { return info(s).possible; }

  PlainRun plain_run(StateId s);

  // Per-state mask cache (see StateMask). note_visit() counts mask computations at `s`
  // and returns the count; walk_nodes() is what the first one walked.
  uint32_t note_visit(StateId s) {
    return info(s).visits.fetch_add(1, std::memory_order_relaxed) + 1;
  }
  void set_walk_nodes(StateId s, uint32_t n) {
    info(s).walk_nodes.store(n, std::memory_order_relaxed);
  }
  uint32_t walk_nodes(StateId s) const {
    return info(s).walk_nodes.load(std::memory_order_relaxed);
  }
  const StateMask* state_mask(StateId s) const {
    return info(s).mask.load(std::memory_order_acquire);
  }
  // Keeps `m` for `s` unless another is there or the cache is full; returns the mask now
  // kept for `s` (null when none).
  const StateMask* keep_mask(StateId s, std::unique_ptr<StateMask> m);
  static constexpr size_t kMaskCacheBytes = size_t(96) << 20;

  size_t num_states() const { return num_states_.load(std::memory_order_acquire); }

 private:
  static constexpr int kChunkBits = 9;
  static constexpr uint32_t kChunkStates = 1u << kChunkBits;
  static constexpr uint32_t kChunkMask = kChunkStates - 1;
  static constexpr size_t kMaxChunks = 4096;

  struct Pair {
    LexemeId lexeme;
    ExprId expr;
    bool operator==(const Pair& o) const { return lexeme == o.lexeme && expr == o.expr; }
  };
  struct Info {
    std::vector<Pair> pairs;
    std::vector<LexemeId> accepts, possible;
    std::atomic<uint32_t> plain{0};  // 0: not computed; else 1 | live << 8 | dead << 16
    mutable std::atomic<uint32_t> visits{0}, walk_nodes{0};
    std::atomic<const StateMask*> mask{nullptr};
  };
  struct Chunk {
    std::unique_ptr<std::atomic<uint32_t>[]> trans;
    std::unique_ptr<Info[]> info;
  };
  struct PairsHash {
    size_t operator()(const std::vector<Pair>& v) const;
  };
  struct IdsHash {
    size_t operator()(const std::vector<LexemeId>& v) const;
  };

  const Info& info(StateId s) const {
    Chunk* c = chunks_[s >> kChunkBits].load(std::memory_order_acquire);
    return c->info[s & kChunkMask];
  }
  Info& info_mut(StateId s) {
    Chunk* c = chunks_[s >> kChunkBits].load(std::memory_order_relaxed);
    return c->info[s & kChunkMask];
  }
  StateId compute(StateId s, uint8_t cls);
  StateId intern_locked(std::vector<Pair> pairs);
  // One plain character from `s` in every way: the live states reached, and whether some
  // way dies (with `boundary` when it dies just after an accepting state).
  // `cold` counts transitions computed for the first time.
  void plain_step(StateId s, std::vector<StateId>& out, bool& dies, bool& boundary, int* cold);

  ExprStore& store_;
  std::mutex& mu_;
  std::vector<ExprId> lexemes_;
  Alphabet alpha_;
  size_t max_states_;
  std::unique_ptr<std::atomic<Chunk*>[]> chunks_;
  std::atomic<uint32_t> num_states_{0};
  std::unordered_map<std::vector<Pair>, StateId, PairsHash> states_;
  std::unordered_map<std::vector<LexemeId>, StateId, IdsHash> starts_;
  std::atomic<size_t> mask_bytes_{0};
};

}  // namespace tandem::structured
