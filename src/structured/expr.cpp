#include "structured/expr.h"

#include <algorithm>
#include <deque>
#include <unordered_set>

namespace tandem::structured {

namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

}  // namespace

ExprStore::ExprStore() : intern_hash_(256, 0), intern_id_(256, kNothing) {
  nodes_.push_back({ExprKind::kNothing, false, false});
  nodes_.push_back({ExprKind::kEpsilon, true, false});
  ByteSet all = ~ByteSet{};
  any_bytes_ = repeat(bytes(all), 0, kUnbounded);
}

ExprId ExprStore::intern(Node n, std::span<const ExprId> args) {
  uint64_t h = mix(uint64_t(n.kind), n.kind == ExprKind::kBytes ? 0 : n.a);
  if (n.kind == ExprKind::kBytes) {
    const ByteSet& s = sets_[n.a];
    for (uint64_t w : s.w) h = mix(h, w);
  } else if (n.kind == ExprKind::kOr || n.kind == ExprKind::kAnd) {
    h = mix(uint64_t(n.kind), args.size());
    for (ExprId a : args) h = mix(h, a);
  } else {
    h = mix(mix(h, n.b), n.c);
  }
  size_t mask = intern_id_.size() - 1;
  size_t slot = size_t(h >> 7) & mask;
  for (; intern_id_[slot] != kNothing; slot = (slot + 1) & mask) {
    if (intern_hash_[slot] != h) continue;
    ExprId cand = intern_id_[slot];
    const Node& o = nodes_[cand];
    if (o.kind != n.kind) continue;
    switch (n.kind) {
      case ExprKind::kBytes:
        if (sets_[o.a] == sets_[n.a]) {
          sets_.pop_back();  // the caller pushed the candidate set
          return cand;
        }
        break;
      case ExprKind::kOr:
      case ExprKind::kAnd: {
        auto oa = this->args(o);
        if (oa.size() == args.size() && std::equal(oa.begin(), oa.end(), args.begin())) return cand;
        break;
      }
      default:
        if (o.a == n.a && o.b == n.b && o.c == n.c) return cand;
    }
  }
  switch (n.kind) {
    case ExprKind::kBytes:
      n.nullable = false;
      n.boolean = false;
      break;
    case ExprKind::kConcat:
      n.nullable = nodes_[n.a].nullable && nodes_[n.b].nullable;
      n.boolean = nodes_[n.a].boolean || nodes_[n.b].boolean;
      break;
    case ExprKind::kOr:
    case ExprKind::kAnd: {
      bool any = false, all = true, boolean = n.kind == ExprKind::kAnd;
      for (ExprId a : args) {
        any |= nodes_[a].nullable;
        all &= nodes_[a].nullable;
        boolean |= nodes_[a].boolean;
      }
      n.nullable = n.kind == ExprKind::kOr ? any : all;
      n.boolean = boolean;
      n.a = uint32_t(args_.size());
      n.b = uint32_t(args.size());
      args_.insert(args_.end(), args.begin(), args.end());
      break;
    }
    case ExprKind::kNot:
      n.nullable = !nodes_[n.a].nullable;
      n.boolean = true;
      break;
    case ExprKind::kRepeat:
      n.nullable = n.b == 0 || nodes_[n.a].nullable;
      n.boolean = nodes_[n.a].boolean;
      break;
    default:
      break;
  }
  ExprId id = ExprId(nodes_.size());
  nodes_.push_back(n);
  intern_hash_[slot] = h;
  intern_id_[slot] = id;
  if (++intern_count_ * 2 > intern_id_.size()) {
    std::vector<uint64_t> hs(intern_hash_.size() * 2, 0);
    std::vector<ExprId> ids(hs.size(), kNothing);
    size_t m = ids.size() - 1;
    for (size_t i = 0; i < intern_id_.size(); ++i) {
      if (intern_id_[i] == kNothing) continue;
      size_t j = size_t(intern_hash_[i] >> 7) & m;
      while (ids[j] != kNothing) j = (j + 1) & m;
      hs[j] = intern_hash_[i];
      ids[j] = intern_id_[i];
    }
    intern_hash_ = std::move(hs);
    intern_id_ = std::move(ids);
  }
  return id;
}

ExprId ExprStore::bytes(const ByteSet& s) {
  if (s.empty()) return kNothing;
  sets_.push_back(s);
  Node n{ExprKind::kBytes, false, false};
  n.a = uint32_t(sets_.size() - 1);
  return intern(n);
}

ExprId ExprStore::literal(std::string_view s) {
  ExprId r = kEpsilon;
  for (size_t i = s.size(); i-- > 0;) r = concat(byte(uint8_t(s[i])), r);
  return r;
}

ExprId ExprStore::concat(ExprId a, ExprId b) {
  if (a == kNothing || b == kNothing) return kNothing;
  if (a == kEpsilon) return b;
  if (b == kEpsilon) return a;
  if (nodes_[a].kind == ExprKind::kConcat) {
    ExprId head = nodes_[a].a, tail = nodes_[a].b;
    return concat(head, concat(tail, b));
  }
  Node n{ExprKind::kConcat, false, false};
  n.a = a;
  n.b = b;
  return intern(n);
}

ExprId ExprStore::concat(std::span<const ExprId> parts) {
  ExprId r = kEpsilon;
  for (size_t i = parts.size(); i-- > 0;) r = concat(parts[i], r);
  return r;
}

ExprId ExprStore::make_nary(ExprKind kind, std::vector<ExprId>& args) {
  std::sort(args.begin(), args.end());
  args.erase(std::unique(args.begin(), args.end()), args.end());
  if (args.size() == 1) return args[0];
  Node n{kind, false, false};
  return intern(n, args);
}

ExprId ExprStore::alt(std::span<const ExprId> parts) {
  std::vector<ExprId> args;
  ByteSet merged;
  bool have_set = false;
  auto add = [&](ExprId e, auto&& self) -> bool {
    const Node& n = nodes_[e];
    if (e == kNothing) return true;
    if (e == any_bytes_) return false;
    if (n.kind == ExprKind::kOr) {
      for (ExprId a : this->args(n))
        if (!self(a, self)) return false;
      return true;
    }
    if (n.kind == ExprKind::kBytes) {
      merged = merged | sets_[n.a];
      have_set = true;
      return true;
    }
    args.push_back(e);
    return true;
  };
  for (ExprId p : parts)
    if (!add(p, add)) return any_bytes_;
  if (have_set) args.push_back(bytes(merged));
  if (args.empty()) return kNothing;
  return make_nary(ExprKind::kOr, args);
}

ExprId ExprStore::intersect(std::span<const ExprId> parts) {
  std::vector<ExprId> args;
  ByteSet merged = ~ByteSet{};
  bool have_set = false, has_eps = false;
  auto add = [&](ExprId e, auto&& self) -> bool {
    const Node& n = nodes_[e];
    if (e == kNothing) return false;
    if (e == any_bytes_) return true;
    if (e == kEpsilon) {
      has_eps = true;
      return true;
    }
    if (n.kind == ExprKind::kAnd) {
      for (ExprId a : this->args(n))
        if (!self(a, self)) return false;
      return true;
    }
    if (n.kind == ExprKind::kBytes) {
      merged = merged & sets_[n.a];
      have_set = true;
      return true;
    }
    args.push_back(e);
    return true;
  };
  for (ExprId p : parts)
    if (!add(p, add)) return kNothing;
  if (has_eps) {  // ε ∩ X is ε when X matches the empty string, else ∅
    if (have_set) return kNothing;
    for (ExprId a : args)
      if (!nodes_[a].nullable) return kNothing;
    return kEpsilon;
  }
  if (have_set) {
    if (merged.empty()) return kNothing;
    args.push_back(bytes(merged));
  }
  if (args.empty()) return any_bytes_;
  std::sort(args.begin(), args.end());
  for (ExprId a : args) {
    const Node& n = nodes_[a];
    if (n.kind == ExprKind::kNot && std::binary_search(args.begin(), args.end(), n.a))
      return kNothing;
  }
  return make_nary(ExprKind::kAnd, args);
}

ExprId ExprStore::complement(ExprId a) {
  if (a == kNothing) return any_bytes_;
  if (a == any_bytes_) return kNothing;
  if (nodes_[a].kind == ExprKind::kNot) return nodes_[a].a;
  Node n{ExprKind::kNot, false, true};
  n.a = a;
  return intern(n);
}

ExprId ExprStore::repeat(ExprId a, uint32_t min, uint32_t max) {
  if (max != kUnbounded && max < min) return kNothing;
  if (max == 0) return kEpsilon;
  if (a == kNothing) return min == 0 ? kEpsilon : kNothing;
  if (a == kEpsilon) return kEpsilon;
  if (nodes_[a].nullable) min = 0;
  if (min == 1 && max == 1) return a;
  const Node& in = nodes_[a];
  if (in.kind == ExprKind::kRepeat && in.b == 0 && in.c == kUnbounded && min == 0 &&
      max == kUnbounded)
    return a;
  Node n{ExprKind::kRepeat, false, false};
  n.a = a;
  n.b = min;
  n.c = max;
  return intern(n);
}

ExprId ExprStore::any_bytes() {
  return any_bytes_;
}

ExprId ExprStore::deriv(ExprId e, uint8_t b) {
  if (e <= kEpsilon) return kNothing;
  uint64_t key = (uint64_t(e) << 8) | b;
  if (const uint32_t* hit = deriv_cache_.find(key)) return *hit;
  const Node n = nodes_[e];  // copy: building nodes may reallocate nodes_
  ExprId r = kNothing;
  switch (n.kind) {
    case ExprKind::kBytes:
      r = sets_[n.a].test(b) ? kEpsilon : kNothing;
      break;
    case ExprKind::kConcat: {
      r = concat(deriv(n.a, b), n.b);
      if (nodes_[n.a].nullable) r = alt(r, deriv(n.b, b));
      break;
    }
    case ExprKind::kOr:
    case ExprKind::kAnd: {
      std::vector<ExprId> args(args_.begin() + n.a, args_.begin() + n.a + n.b);
      for (ExprId& a : args) a = deriv(a, b);
      r = n.kind == ExprKind::kOr ? alt(args) : intersect(args);
      break;
    }
    case ExprKind::kNot:
      r = complement(deriv(n.a, b));
      break;
    case ExprKind::kRepeat: {
      uint32_t min = n.b == 0 ? 0 : n.b - 1;
      uint32_t max = n.c == kUnbounded ? kUnbounded : n.c - 1;
      r = concat(deriv(n.a, b), repeat(n.a, min, max));
      break;
    }
    default:
      break;
  }
  deriv_cache_.insert(key, r);
  return r;
}

bool ExprStore::matches(ExprId e, std::string_view s) {
  for (char c : s) {
    e = deriv(e, uint8_t(c));
    if (e == kNothing) return false;
  }
  return nodes_[e].nullable;
}

void ExprStore::collect_sets(ExprId e, std::vector<uint8_t>& seen,
                             std::vector<uint32_t>& sets) const {
  std::vector<ExprId> stack{e};
  while (!stack.empty()) {
    ExprId x = stack.back();
    stack.pop_back();
    if (x >= seen.size()) seen.resize(nodes_.size(), 0);
    if (seen[x]) continue;
    seen[x] = 1;
    const Node& n = nodes_[x];
    switch (n.kind) {
      case ExprKind::kBytes:
        sets.push_back(n.a);
        break;
      case ExprKind::kConcat:
        stack.push_back(n.a);
        stack.push_back(n.b);
        break;
      case ExprKind::kOr:
      case ExprKind::kAnd:
        for (ExprId a : args(n)) stack.push_back(a);
        break;
      case ExprKind::kNot:
      case ExprKind::kRepeat:
        stack.push_back(n.a);
        break;
      default:
        break;
    }
  }
}

Alphabet ExprStore::alphabet(std::span<const ExprId> roots) const {
  std::vector<uint8_t> seen(nodes_.size(), 0);
  std::vector<uint32_t> sets;
  for (ExprId r : roots) collect_sets(r, seen, sets);
  std::sort(sets.begin(), sets.end());
  sets.erase(std::unique(sets.begin(), sets.end()), sets.end());
  std::array<uint16_t, 256> cls{};  // all bytes start in class 0
  int n = 1;
  for (uint32_t si : sets) {
    const ByteSet& s = sets_[si];
    // Split every class by membership in s: (old class, in s) -> new class.
    std::vector<int> remap(size_t(n) * 2, -1);
    int m = 0;
    for (int b = 0; b < 256; ++b) {
      int key = cls[b] * 2 + (s.test(uint8_t(b)) ? 1 : 0);
      if (remap[key] < 0) remap[key] = m++;
      cls[b] = uint16_t(remap[key]);
    }
    n = m;
  }
  Alphabet a;
  a.representative.assign(n, 0);
  std::vector<bool> have(n, false);
  for (int b = 0; b < 256; ++b) {
    a.class_of[b] = uint8_t(cls[b]);
    if (!have[cls[b]]) {
      have[cls[b]] = true;
      a.representative[cls[b]] = uint8_t(b);
    }
  }
  return a;
}

uint32_t ExprStore::max_length(ExprId e) {
  if (auto it = max_len_cache_.find(e); it != max_len_cache_.end()) return it->second;
  const Node n = nodes_[e];
  uint32_t r = 0;
  auto add = [](uint32_t a, uint32_t b) {
    if (a == kUnbounded || b == kUnbounded) return kUnbounded;
    uint64_t s = uint64_t(a) + b;
    return s >= kUnbounded ? kUnbounded : uint32_t(s);
  };
  switch (n.kind) {
    case ExprKind::kBytes:
      r = 1;
      break;
    case ExprKind::kConcat:
      r = add(max_length(n.a), max_length(n.b));
      break;
    case ExprKind::kOr:
      for (uint32_t i = 0; i < n.b; ++i) r = std::max(r, max_length(args_[n.a + i]));
      break;
    case ExprKind::kRepeat: {
      uint32_t inner = max_length(n.a);
      if (inner == 0) {
        r = 0;
      } else if (n.c == kUnbounded || inner == kUnbounded) {
        r = kUnbounded;
      } else {
        uint64_t p = uint64_t(inner) * n.c;
        r = p >= kUnbounded ? kUnbounded : uint32_t(p);
      }
      break;
    }
    case ExprKind::kAnd:
    case ExprKind::kNot:
      r = kUnbounded;
      break;  // not used for these (see is_empty)
    default:
      r = 0;
  }
  max_len_cache_[e] = r;
  return r;
}

bool ExprStore::is_empty(ExprId e, int budget, const Alphabet* al_in) {
  if (e == kNothing) return true;
  if (!nodes_[e].boolean || nodes_[e].nullable) return false;
  if (auto it = empty_cache_.find(e); it != empty_cache_.end()) return it->second;
  const Node n = nodes_[e];
  // Structure first: a concatenation is empty when a part is, a union when all are.
  if (n.kind == ExprKind::kConcat) {
    bool r = is_empty(n.a, budget, al_in) || is_empty(n.b, budget, al_in);
    if (r) empty_cache_[e] = true;
    return r;
  }
  if (n.kind == ExprKind::kOr) {
    for (uint32_t i = 0; i < n.b; ++i)
      if (!is_empty(args_[n.a + i], budget, al_in)) return false;
    empty_cache_[e] = true;
    return true;
  }
  if (n.kind == ExprKind::kRepeat) return n.b > 0 && is_empty(n.a, budget, al_in);
  // X ∩ ~F1 ∩ ~F2 ... with plain X and F: X has a string longer than every F's strings.
  if (n.kind == ExprKind::kAnd) {
    ExprId plain = kNothing;
    uint32_t longest_excluded = 0;
    bool shape = true;
    for (ExprId a : args(n)) {
      const Node& x = nodes_[a];
      if (x.kind == ExprKind::kNot && !nodes_[x.a].boolean) {
        longest_excluded = std::max(longest_excluded, max_length(x.a));
      } else if (!x.boolean && plain == kNothing) {
        plain = a;
      } else {
        shape = false;
      }
    }
    if (shape && plain != kNothing && longest_excluded != kUnbounded &&
        (max_length(plain) == kUnbounded || max_length(plain) > longest_excluded)) {
      empty_cache_[e] = false;
      return false;
    }
  }
  ExprId root = e;
  Alphabet local;
  if (!al_in) local = alphabet(std::span<const ExprId>(&root, 1));
  const Alphabet& al = al_in ? *al_in : local;
  // X1 ∩ X2 ... of plain expressions: a shortest string of one that the others match.
  if (n.kind == ExprKind::kAnd) {
    bool plain = true;
    for (ExprId a : args(n)) plain = plain && !nodes_[a].boolean;
    if (plain) {
      std::vector<ExprId> xs(args(n).begin(), args(n).end());
      for (ExprId a : xs) {
        const std::string* w = witness(a, al);
        if (!w) break;
        bool all = true;
        for (ExprId b : xs) all = all && (b == a || matches(b, *w));
        if (all) {
          empty_cache_[e] = false;
          return false;
        }
      }
    }
  }
  std::unordered_set<ExprId> seen{e};
  std::deque<ExprId> queue{e};
  bool empty = true, finished = true;
  while (!queue.empty()) {
    ExprId x = queue.front();
    queue.pop_front();
    if (nodes_[x].nullable || !nodes_[x].boolean) {
      empty = false;
      break;
    }
    if (int(seen.size()) > budget) {
      finished = false;
      break;
    }
    for (uint8_t rep : al.representative) {
      ExprId d = deriv(x, rep);
      if (d != kNothing && seen.insert(d).second) queue.push_back(d);
    }
  }
  if (!finished) return false;  // unknown: treated as non-empty, not cached
  empty_cache_[e] = empty;
  return empty;
}

const std::string* ExprStore::witness(ExprId e, const Alphabet& al) {
  if (auto it = shortest_cache_.find(e); it != shortest_cache_.end()) return &it->second;
  struct Visit {
    ExprId parent;
    uint8_t byte;
  };
  std::unordered_map<ExprId, Visit> from{{e, {kNothing, 0}}};
  std::deque<ExprId> queue{e};
  while (!queue.empty() && from.size() <= 2048) {
    ExprId x = queue.front();
    queue.pop_front();
    if (nodes_[x].nullable) {
      std::string out;
      for (ExprId y = x; y != e; y = from[y].parent) out.push_back(char(from[y].byte));
      std::reverse(out.begin(), out.end());
      return &(shortest_cache_[e] = std::move(out));
    }
    for (uint8_t rep : al.representative) {
      ExprId d = deriv(x, rep);
      if (d != kNothing && !from.count(d)) {
        from[d] = {x, rep};
        queue.push_back(d);
      }
    }
  }
  return nullptr;
}

bool ExprStore::shortest_member(ExprId e, std::string& out, int budget) {
  out.clear();
  if (e == kNothing) return false;
  ExprId root = e;
  Alphabet al = alphabet(std::span<const ExprId>(&root, 1));
  struct Visit {
    ExprId parent;
    uint8_t byte;
  };
  std::unordered_map<ExprId, Visit> from{{e, {kNothing, 0}}};
  std::deque<ExprId> queue{e};
  while (!queue.empty() && int(from.size()) <= budget) {
    ExprId x = queue.front();
    queue.pop_front();
    if (nodes_[x].nullable) {
      for (ExprId y = x; y != e; y = from[y].parent) out.push_back(char(from[y].byte));
      std::reverse(out.begin(), out.end());
      return true;
    }
    for (uint8_t rep : al.representative) {
      ExprId d = deriv(x, rep);
      if (d != kNothing && !from.count(d)) {
        from[d] = {x, rep};
        queue.push_back(d);
      }
    }
  }
  return false;
}

}  // namespace tandem::structured
