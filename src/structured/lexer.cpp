#include "structured/lexer.h"

#include <algorithm>

#include "core/error.h"

namespace tandem::structured {

namespace {

// Byte sets that split UTF-8 into its structural parts, so that the alphabet (and with it
// every transition row) tells lead bytes of each kind and the continuation ranges apart.
const ByteSet kUtf8Parts[] = {
    ByteSet::range(0x80, 0x8F), ByteSet::range(0x90, 0x9F), ByteSet::range(0xA0, 0xBF),
    ByteSet::range(0xC2, 0xDF), ByteSet::single(0xE0),      ByteSet::range(0xE1, 0xEC),
    ByteSet::single(0xED),      ByteSet::range(0xEE, 0xEF), ByteSet::single(0xF0),
    ByteSet::range(0xF1, 0xF3), ByteSet::single(0xF4),
};

ByteSet plain_ascii() {
  ByteSet s = ByteSet::range(0x20, 0x7F);
  s.w['"' >> 6] &= ~(uint64_t(1) << ('"' & 63));
  s.w['\\' >> 6] &= ~(uint64_t(1) << ('\\' & 63));
  return s;
}

template <typename T>
size_t hash_vec(const std::vector<T>& v) {
  size_t h = v.size() * 0x9e3779b97f4a7c15ull;
  for (const T& x : v) {
    uint64_t k;
    if constexpr (sizeof(T) == 8) {
      k = *reinterpret_cast<const uint64_t*>(&x);
    } else {
      k = uint64_t(*reinterpret_cast<const uint32_t*>(&x));
    }
    h = (h ^ (k + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2))) * 0xff51afd7ed558ccdull;
  }
  return h;
}

}  // namespace

size_t Lexer::PairsHash::operator()(const std::vector<Pair>& v) const {
  return hash_vec(v);
}
size_t Lexer::IdsHash::operator()(const std::vector<LexemeId>& v) const {
  return hash_vec(v);
}

Lexer::Lexer(ExprStore& store, std::mutex& mu, std::vector<ExprId> lexemes, size_t max_states)
    : store_(store),
      mu_(mu),
      lexemes_(std::move(lexemes)),
      max_states_(std::min(max_states, kMaxChunks * kChunkStates)),
      chunks_(new std::atomic<Chunk*>[kMaxChunks]) {
  for (size_t i = 0; i < kMaxChunks; ++i) chunks_[i].store(nullptr, std::memory_order_relaxed);
  std::vector<ExprId> roots = lexemes_;
  for (const ByteSet& s : kUtf8Parts) roots.push_back(store_.bytes(s));
  roots.push_back(store_.bytes(plain_ascii()));
  alpha_ = store_.alphabet(roots);
  std::lock_guard<std::mutex> lock(mu_);
  intern_locked({});  // kDead: the empty set
}

Lexer::~Lexer() {
  uint32_t n = num_states_.load(std::memory_order_relaxed);
  for (uint32_t s = 0; s < n; ++s) delete info(s).mask.load(std::memory_order_relaxed);
  for (size_t i = 0; i < kMaxChunks; ++i) delete chunks_[i].load(std::memory_order_relaxed);
}

const StateMask* Lexer::keep_mask(StateId s, std::unique_ptr<StateMask> m) {
  size_t bytes = m->bytes();
  if (mask_bytes_.fetch_add(bytes, std::memory_order_relaxed) + bytes > kMaskCacheBytes) {
    mask_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
    return state_mask(s);
  }
  const StateMask* expected = nullptr;
  const StateMask* mine = m.get();
  if (info_mut(s).mask.compare_exchange_strong(expected, mine, std::memory_order_acq_rel)) {
    m.release();
    return mine;
  }
  mask_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
  return expected;
}

StateId Lexer::intern_locked(std::vector<Pair> pairs) {
  if (auto it = states_.find(pairs); it != states_.end()) return it->second;
  uint32_t id = num_states_.load(std::memory_order_relaxed);
  if (id >= max_states_)
    fail(ErrorKind::kResource,
         "the constraint needs more than {} lexer states; simplify the schema or grammar",
         max_states_);
  size_t ci = id >> kChunkBits;
  Chunk* c = chunks_[ci].load(std::memory_order_relaxed);
  if (!c) {
    c = new Chunk;
    size_t n = size_t(kChunkStates) * size_t(alpha_.num_classes());
    c->trans.reset(new std::atomic<uint32_t>[n]);
    for (size_t i = 0; i < n; ++i) c->trans[i].store(kUnknown, std::memory_order_relaxed);
    c->info.reset(new Info[kChunkStates]);
    chunks_[ci].store(c, std::memory_order_release);
  }
  Info& in = c->info[id & kChunkMask];
  for (const Pair& p : pairs) {
    if (store_.nullable(p.expr)) in.accepts.push_back(p.lexeme);
    in.possible.push_back(p.lexeme);
  }
  in.possible.erase(std::unique(in.possible.begin(), in.possible.end()), in.possible.end());
  in.accepts.erase(std::unique(in.accepts.begin(), in.accepts.end()), in.accepts.end());
  if (id == kDead) {
    // Every transition of the dead state leads back to it.
    for (int k = 0; k < alpha_.num_classes(); ++k)
      c->trans[k].store(kDead, std::memory_order_relaxed);
  }
  in.pairs = pairs;
  states_.emplace(std::move(pairs), id);
  num_states_.store(id + 1, std::memory_order_release);
  return id;
}

StateId Lexer::start_state(std::span<const LexemeId> allowed) {
  std::vector<LexemeId> key(allowed.begin(), allowed.end());
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = starts_.find(key); it != starts_.end()) return it->second;
  std::vector<Pair> pairs;
  for (LexemeId l : allowed) pairs.push_back({l, lexemes_[l]});
  StateId s = intern_locked(std::move(pairs));
  starts_.emplace(std::move(key), s);
  return s;
}

StateId Lexer::compute(StateId s, uint8_t cls) {
  std::lock_guard<std::mutex> lock(mu_);
  std::atomic<uint32_t>* row = const_cast<std::atomic<uint32_t>*>(row_of(s));
  uint32_t t = row[cls].load(std::memory_order_acquire);
  if (t != kUnknown) return t;
  uint8_t rep = alpha_.representative[cls];
  std::vector<Pair> next;
  for (const Pair& p : info_mut(s).pairs) {
    ExprId d = store_.deriv(p.expr, rep);
    if (d == kNothing || store_.is_empty(d, 4096, &alpha_)) continue;
    next.push_back({p.lexeme, d});
  }
  // Pairs stay sorted by lexeme (derivatives keep the order they came in).
  StateId id = next.empty() ? kDead : intern_locked(std::move(next));
  row[cls].store(id, std::memory_order_release);
  return id;
}

void Lexer::plain_step(StateId s, std::vector<StateId>& out, bool& dies, bool& boundary,
                       int* cold) {
  // Continuation ranges after each kind of lead byte (UTF-8, well-formed scalars only).
  struct Lead {
    uint8_t lo, hi;
    uint8_t n;  // continuation bytes
    uint8_t first_lo, first_hi;
  };
  static const Lead leads[] = {
      {0xC2, 0xDF, 1, 0x80, 0xBF}, {0xE0, 0xE0, 2, 0xA0, 0xBF}, {0xE1, 0xEC, 2, 0x80, 0xBF},
      {0xED, 0xED, 2, 0x80, 0x9F}, {0xEE, 0xEF, 2, 0x80, 0xBF}, {0xF0, 0xF0, 3, 0x90, 0xBF},
      {0xF1, 0xF3, 3, 0x80, 0xBF}, {0xF4, 0xF4, 3, 0x80, 0x8F},
  };
  const ByteSet ascii = plain_ascii();
  auto step = [&](StateId x, uint8_t byte) {
    if (row_of(x)[alpha_.class_of[byte]].load(std::memory_order_relaxed) == kUnknown) ++*cold;
    StateId y = next(x, byte);
    if (y == kDead) {
      dies = true;
      if (accepting(x)) boundary = true;
    }
    return y;
  };
  // Continuation bytes: `left` more, the first of them in [lo, hi]. Each (state, left,
  // range) is explored once: many classes of continuation bytes lead to the same state.
  std::vector<uint64_t> seen;
  auto cont = [&](auto&& self, StateId x, int left, uint8_t lo, uint8_t hi) -> void {
    if (left == 0) {
      out.push_back(x);
      return;
    }
    uint64_t key = uint64_t(x) << 24 | uint64_t(left) << 16 | uint64_t(lo) << 8 | hi;
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) return;
    seen.push_back(key);
    for (int c = 0; c < alpha_.num_classes(); ++c) {
      uint8_t rep = alpha_.representative[c];
      if (rep < lo || rep > hi) continue;
      StateId y = step(x, rep);
      if (y != kDead) self(self, y, left - 1, 0x80, 0xBF);
    }
  };
  for (int c = 0; c < alpha_.num_classes(); ++c) {
    uint8_t rep = alpha_.representative[c];
    if (ascii.test(rep)) {
      StateId y = step(s, rep);
      if (y != kDead) out.push_back(y);
      continue;
    }
    for (const Lead& l : leads) {
      if (rep < l.lo || rep > l.hi) continue;
      StateId y = step(s, rep);
      if (y != kDead) cont(cont, y, l.n, l.first_lo, l.first_hi);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
}

PlainRun Lexer::plain_run(StateId s) {
  auto decode = [](uint32_t v) { return PlainRun{uint8_t(v >> 8), uint8_t(v >> 16)}; };
  auto encode = [](PlainRun r) { return 1u | uint32_t(r.live) << 8 | uint32_t(r.dead) << 16; };
  if (s == kDead) return {0, 0};
  if (uint32_t v = info(s).plain.load(std::memory_order_acquire)) return decode(v);
  // live(x, d) = min(d, longest n with every plain text of n characters alive from x);
  // dead(x, d) = shortest n <= d with every plain text of n characters dead from x (none
  // of them able to end a lexeme on the way), else "none". Both follow every way one
  // plain character leads, depth first, with the steps and results memoised for this
  // call; past a budget of states the answer is the pessimistic one (a walk then decides).
  struct Step {
    std::vector<StateId> next;
    bool dies = false, boundary = false;
  };
  std::unordered_map<StateId, Step> steps;
  std::unordered_map<uint64_t, uint8_t> live_memo, dead_memo;
  // Budgets: states explored, and transitions computed for the first time (each costs
  // derivatives; a state whose neighbourhood is mostly new is left to the walk).
  constexpr size_t kBudget = 512;
  constexpr int kColdBudget = 2048;
  int cold = 0;
  bool over = false;
  auto step_of = [&](StateId x) -> const Step& {
    auto it = steps.find(x);
    if (it != steps.end()) return it->second;
    Step st;
    if (steps.size() >= kBudget || cold > kColdBudget) {
      over = true;
      st.dies = st.boundary = true;  // pessimistic
    } else {
      plain_step(x, st.next, st.dies, st.boundary, &cold);
    }
    return steps.emplace(x, std::move(st)).first->second;
  };
  constexpr int kDepth = kMaxPlainRun + 1;
  auto live = [&](auto&& self, StateId x, int d) -> int {
    if (d == 0) return 0;
    uint64_t key = uint64_t(x) << 8 | uint64_t(d);
    if (auto it = live_memo.find(key); it != live_memo.end()) return it->second;
    const Step& st = step_of(x);
    int r;
    if (st.dies || st.boundary) {
      r = 0;
    } else {
      r = d;
      std::vector<StateId> next = st.next;  // step_of may rehash `steps`
      for (StateId y : next) r = std::min(r, 1 + self(self, y, d - 1));
    }
    live_memo[key] = uint8_t(r);
    return r;
  };
  constexpr int kNone = 255;
  auto dead = [&](auto&& self, StateId x, int d) -> int {
    if (d == 0) return kNone;
    uint64_t key = uint64_t(x) << 8 | uint64_t(d);
    if (auto it = dead_memo.find(key); it != dead_memo.end()) return it->second;
    const Step& st = step_of(x);
    int r;
    if (st.boundary) {
      r = kNone;
    } else if (st.next.empty()) {
      r = 1;
    } else {
      r = 1;
      std::vector<StateId> next = st.next;
      for (StateId y : next) {
        int sub = self(self, y, d - 1);
        if (sub == kNone) {
          r = kNone;
          break;
        }
        r = std::max(r, 1 + sub);
      }
    }
    dead_memo[key] = uint8_t(r);
    return r;
  };
  PlainRun r;
  const Step& first = step_of(s);
  if (!first.dies && !first.boundary && first.next.size() == 1 && first.next[0] == s) {
    r = {kRunUnbounded, kNoDeadLength};  // every plain character leads back here
  } else {
    int l = live(live, s, kDepth);
    int dd = dead(dead, s, kDepth);
    if (over) {
      // Out of budget: a walk decides this mask, and warms the transitions, so a later
      // call may well finish; nothing is kept.
      return {0, kNoDeadLength};
    }
    r.live = uint8_t(std::min(l, kMaxPlainRun));
    r.dead = dd == kNone ? kNoDeadLength : uint8_t(dd);
  }
  info_mut(s).plain.store(encode(r), std::memory_order_release);
  return r;
}

}  // namespace tandem::structured
