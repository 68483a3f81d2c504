#pragma once
// Byte-level regular expressions as hash-consed nodes, with Brzozowski derivatives.
//
// Every constraint (a JSON string with its pattern and length, a number range, a grammar
// terminal) ends up as one expression over bytes. Expressions are built once and shared:
// equal expressions get the same id, so a derivative (the expression left to match after
// one byte) is a table lookup once computed, and the states of a lazily built DFA are just
// expression ids. Besides the usual operators there are intersection and complement
// ("a key that is a string but none of the listed names"), which derivatives handle as
// easily as union.
//
// Simplification on construction keeps the state space finite and small: unions are flat,
// sorted and deduplicated (byte sets merged), concatenation is right-nested, ∅ absorbs,
// ε is the unit, r{0,0} = ε. A language is empty exactly when the expression is ∅ unless
// it contains an intersection or complement; then is_empty() explores derivatives.
//
// Not thread-safe: a CompiledGrammar guards its store with a mutex (lexer.h).
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tandem::structured {

using ExprId = uint32_t;
inline constexpr ExprId kNothing = 0;  // ∅: matches no string
inline constexpr ExprId kEpsilon = 1;  // ε: matches the empty string only
inline constexpr uint32_t kUnbounded = 0xFFFFFFFFu;

struct ByteSet {
  std::array<uint64_t, 4> w{};
  void set(uint8_t b) { w[b >> 6] |= uint64_t(1) << (b & 63); }
  void set_range(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) set(uint8_t(b));
  }
  bool test(uint8_t b) const { return (w[b >> 6] >> (b & 63)) & 1; }
  bool empty() const { return !(w[0] | w[1] | w[2] | w[3]); }
  bool operator==(const ByteSet& o) const { return w == o.w; }
  ByteSet operator|(const ByteSet& o) const {
    return {{w[0] | o.w[0], w[1] | o.w[1], w[2] | o.w[2], w[3] | o.w[3]}};
  }
  ByteSet operator&(const ByteSet& o) const {
    return {{w[0] & o.w[0], w[1] & o.w[1], w[2] & o.w[2], w[3] & o.w[3]}};
  }
  ByteSet operator~() const { return {{~w[0], ~w[1], ~w[2], ~w[3]}}; }
  static ByteSet single(uint8_t b) {
    ByteSet s;
    s.set(b);
    return s;
  }
  static ByteSet range(uint8_t lo, uint8_t hi) {
    ByteSet s;
    s.set_range(lo, hi);
    return s;
  }
};

enum class ExprKind : uint8_t { kNothing, kEpsilon, kBytes, kConcat, kOr, kAnd, kNot, kRepeat };

// The partition of the 256 byte values into classes that every byte set of some
// expressions respects: bytes of one class have the same derivative everywhere.
struct Alphabet {
  std::array<uint8_t, 256> class_of{};
  std::vector<uint8_t> representative;  // [num_classes] one byte of each class
  int num_classes() const { return int(representative.size()); }
};

// uint64 -> uint32 with open addressing (key 0 is reserved as empty): the derivative
// memo and the hash-consing table, both hot when a lexer meets new states.
class FlatMap {
 public:
  FlatMap() : keys_(64, 0), vals_(64, 0) {}
  const uint32_t* find(uint64_t key) const {
    size_t m = keys_.size() - 1;
    for (size_t i = slot(key) & m;; i = (i + 1) & m) {
      if (keys_[i] == key) return &vals_[i];
      if (keys_[i] == 0) return nullptr;
    }
  }
  void insert(uint64_t key, uint32_t val) {
    if ((count_ + 1) * 2 > keys_.size()) grow();
    size_t m = keys_.size() - 1;
    size_t i = slot(key) & m;
    while (keys_[i] != 0 && keys_[i] != key) i = (i + 1) & m;
    if (keys_[i] == 0) ++count_;
    keys_[i] = key;
    vals_[i] = val;
  }

 private:
  static size_t slot(uint64_t k) { return size_t((k * 0x9e3779b97f4a7c15ull) >> 17); }
  void grow() {
    std::vector<uint64_t> k(keys_.size() * 2, 0);
    std::vector<uint32_t> v(k.size(), 0);
    std::swap(k, keys_);
    std::swap(v, vals_);
    count_ = 0;
    for (size_t i = 0; i < k.size(); ++i)
      if (k[i]) insert(k[i], v[i]);
  }
  std::vector<uint64_t> keys_;
  std::vector<uint32_t> vals_;
  size_t count_ = 0;
};

class ExprStore {
 public:
  ExprStore();

  // Builders (simplifying, hash-consed).
  ExprId bytes(const ByteSet& s);
  ExprId byte(uint8_t b) { return bytes(ByteSet::single(b)); }
  ExprId literal(std::string_view s);  // the exact byte string
  ExprId concat(ExprId a, ExprId b);
  ExprId concat(std::span<const ExprId> parts);
  ExprId alt(std::span<const ExprId> parts);
  ExprId alt(ExprId a, ExprId b) { return alt(std::array<ExprId, 2>{a, b}); }
  ExprId intersect(std::span<const ExprId> parts);
  ExprId intersect(ExprId a, ExprId b) { return intersect(std::array<ExprId, 2>{a, b}); }
  ExprId complement(ExprId a);
  ExprId repeat(ExprId a, uint32_t min, uint32_t max);  // max may be kUnbounded
  ExprId star(ExprId a) { return repeat(a, 0, kUnbounded); }
  ExprId plus(ExprId a) { return repeat(a, 1, kUnbounded); }
  ExprId optional(ExprId a) { return alt(a, kEpsilon); }
  ExprId any_bytes();  // Σ*: every byte string

  // Queries.
  ExprKind kind(ExprId e) const { return nodes_[e].kind; }
  bool nullable(ExprId e) const { return nodes_[e].nullable; }
  // True when the language is empty. Exact for expressions without intersection or
  // complement; otherwise a structural argument where one applies (X minus finitely many
  // shorter strings is not empty), else a search over derivatives by the classes of `al`
  // (computed when null), bounded by `budget` states: an unfinished search answers false,
  // not known to be empty.
  bool is_empty(ExprId e, int budget = 4096, const Alphabet* al = nullptr);
  // The length of the longest string (kUnbounded for infinite languages), for expressions
  // without intersection or complement other than ∅.
  uint32_t max_length(ExprId e);
  // The derivative by byte `b`.
  ExprId deriv(ExprId e, uint8_t b);
  // Whether the byte string matches (derivatives all the way; for tests and checks).
  bool matches(ExprId e, std::string_view s);
  // Byte classes that every byte set reachable from `roots` respects.
  Alphabet alphabet(std::span<const ExprId> roots) const;
  // Nodes created so far (growth is bounded by the caller: see CompiledGrammar).
  size_t size() const { return nodes_.size(); }
  // The shortest string of the language (for diagnostics); empty when none is found
  // within the budget.
  bool shortest_member(ExprId e, std::string& out, int budget = 4096);

 private:
  struct Node {
    ExprKind kind;
    bool nullable;
    bool boolean;                  // contains an intersection or complement
    uint32_t a = 0, b = 0, c = 0;  // Bytes: set; Concat: head, tail; Or/And: args offset,
                                   // count; Not: arg; Repeat: arg, min, max
  };
  // n-ary nodes (Or, And) get their arguments from `args`; n.a/n.b are then set here.
  ExprId intern(Node n, std::span<const ExprId> args = {});
  ExprId make_nary(ExprKind kind, std::vector<ExprId>& args);
  std::span<const ExprId> args(const Node& n) const { return {args_.data() + n.a, size_t(n.b)}; }
  void collect_sets(ExprId e, std::vector<uint8_t>& seen, std::vector<uint32_t>& sets) const;
  // A shortest string of a plain (no intersection/complement) non-empty expression,
  // memoised: a witness that an intersection is not empty when the others match it.
  const std::string* witness(ExprId e, const Alphabet& al);

  std::vector<Node> nodes_;
  std::vector<ExprId> args_;
  std::vector<ByteSet> sets_;
  // Hash-consing: open addressing over node ids, compared by content.
  std::vector<uint64_t> intern_hash_;
  std::vector<ExprId> intern_id_;  // kNothing: empty slot
  size_t intern_count_ = 0;
  FlatMap deriv_cache_;
  std::unordered_map<ExprId, bool> empty_cache_;
  std::unordered_map<ExprId, std::string> shortest_cache_;  // plain expressions only
  std::unordered_map<ExprId, uint32_t> max_len_cache_;
  ExprId any_bytes_ = kNothing;
};

}  // namespace tandem::structured
