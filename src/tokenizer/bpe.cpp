#include "tokenizer/bpe.h"

#include <algorithm>
#include <atomic>

#include "core/error.h"
#include "tokenizer/byte_level.h"

namespace tandem::tok {
namespace {

inline uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

std::atomic<uint64_t> g_next_instance{1};

// Per-thread word cache: a hash map from word bytes to a slice of an id pool. Bounded: it
// is dropped whole when it grows past its limits (simple, and rare in practice).
struct WordCache {
  uint64_t owner = 0;
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, std::pair<uint32_t, uint32_t>, Hash, std::equal_to<>> map;
  std::vector<TokenId> pool;
  static constexpr size_t kMaxWords = 1 << 19;
  static constexpr size_t kMaxIds = 1 << 23;
  static constexpr size_t kMaxWordBytes = 256;  // longer words are rare; don't keep them

  void reset(uint64_t o) {
    owner = o;
    map.clear();
    pool.clear();
  }
};

WordCache& word_cache() {
  thread_local WordCache c;
  return c;
}

}  // namespace

BpeModel::BpeModel(std::unordered_map<std::string, TokenId> vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges,
                   bool ignore_merges)
    : vocab_(std::move(vocab)), ignore_merges_(ignore_merges), instance_(g_next_instance++) {
  for (int b = 0; b < 256; ++b) {
    auto it = vocab_.find(std::string(1, char(b)));
    if (it == vocab_.end())
      fail(ErrorKind::kUnsupported,
           "tokenizer.json: byte 0x{:02x} ('{}') has no token, and byte_fallback/unk_token are "
           "not supported",
           b, byte_level_encode(std::string(1, char(b))));
    byte_id_[b] = it->second;
  }
  size_t cap = 1;
  while (cap < merges.size() * 2 + 16) cap <<= 1;
  pairs_.assign(cap, PairEntry{kEmpty, 0, 0});
  pair_mask_ = cap - 1;
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& [a, b] = merges[r];
    auto ia = vocab_.find(a), ib = vocab_.find(b), iab = vocab_.find(a + b);
    if (ia == vocab_.end() || ib == vocab_.end() || iab == vocab_.end())
      fail(ErrorKind::kInvalidArgument,
           "tokenizer.json: merge {} ('{}' '{}') uses a token that is not in the vocab", r,
           byte_level_encode(a), byte_level_encode(b));
    uint64_t key = (uint64_t(uint32_t(ia->second)) << 32) | uint32_t(ib->second);
    for (uint64_t h = mix(key) & pair_mask_;; h = (h + 1) & pair_mask_) {
      if (pairs_[h].key == kEmpty) {
        pairs_[h] = PairEntry{key, int32_t(r), iab->second};
        break;
      }
      if (pairs_[h].key == key) break;  // a repeated merge keeps its first (lowest) rank
    }
  }
}

const BpeModel::PairEntry* BpeModel::find_pair(TokenId a, TokenId b) const {
  uint64_t key = (uint64_t(uint32_t(a)) << 32) | uint32_t(b);
  for (uint64_t h = mix(key) & pair_mask_;; h = (h + 1) & pair_mask_) {
    const PairEntry& e = pairs_[h];
    if (e.key == key) return &e;
    if (e.key == kEmpty) return nullptr;
  }
}

void BpeModel::encode_word_uncached(std::string_view word, std::vector<TokenId>& out) const {
  const size_t n = word.size();
  if (n == 1) {
    out.push_back(byte_id_[uint8_t(word[0])]);
    return;
  }
  if (ignore_merges_) {
    if (auto it = vocab_.find(std::string(word)); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  // Symbols as a linked list over the byte positions; a merged symbol keeps the position
  // of its left part, which is also its tie-break order (leftmost first).
  struct Sym {
    TokenId id;
    int32_t prev, next;
  };
  thread_local std::vector<Sym> syms;
  thread_local std::vector<std::pair<int32_t, int32_t>> heap;  // (rank, position)
  syms.resize(n);
  heap.clear();
  for (size_t i = 0; i < n; ++i)
    syms[i] = Sym{byte_id_[uint8_t(word[i])], int32_t(i) - 1, i + 1 < n ? int32_t(i + 1) : -1};
  auto greater = std::greater<std::pair<int32_t, int32_t>>();
  auto push = [&](int32_t pos) {
    const Sym& s = syms[pos];
    if (s.next < 0) return;
    if (const PairEntry* p = find_pair(s.id, syms[s.next].id)) {
      heap.emplace_back(p->rank, pos);
      std::push_heap(heap.begin(), heap.end(), greater);
    }
  };
  for (size_t i = 0; i + 1 < n; ++i) push(int32_t(i));
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), greater);
    auto [rank, pos] = heap.back();
    heap.pop_back();
    Sym& s = syms[pos];
    if (s.id < 0 || s.next < 0) continue;  // merged away, or now last
    const PairEntry* p = find_pair(s.id, syms[s.next].id);
    if (!p || p->rank != rank) continue;  // stale: one side changed since it was queued
    Sym& right = syms[s.next];
    s.id = p->merged;
    right.id = -1;
    s.next = right.next;
    if (s.next >= 0) syms[s.next].prev = pos;
    if (s.prev >= 0) push(s.prev);
    push(pos);
  }
  for (int32_t i = 0; i >= 0; i = syms[i].next) out.push_back(syms[i].id);
}

void BpeModel::encode_word(std::string_view word, std::vector<TokenId>& out) const {
  if (word.size() == 1) {
    out.push_back(byte_id_[uint8_t(word[0])]);
    return;
  }
  if (word.size() > WordCache::kMaxWordBytes) {
    encode_word_uncached(word, out);
    return;
  }
  WordCache& c = word_cache();
  if (c.owner != instance_) c.reset(instance_);
  if (auto it = c.map.find(word); it != c.map.end()) {
    auto [off, len] = it->second;
    out.insert(out.end(), c.pool.begin() + off, c.pool.begin() + off + len);
    return;
  }
  size_t start = out.size();
  encode_word_uncached(word, out);
  if (c.map.size() >= WordCache::kMaxWords || c.pool.size() >= WordCache::kMaxIds)
    c.reset(instance_);
  uint32_t off = uint32_t(c.pool.size()), len = uint32_t(out.size() - start);
  c.pool.insert(c.pool.end(), out.begin() + start, out.end());
  c.map.emplace(std::string(word), std::make_pair(off, len));
}

}  // namespace tandem::tok
