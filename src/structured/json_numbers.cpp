#include "structured/json_numbers.h"

#include <algorithm>
#include <vector>

namespace tandem::structured {

namespace {

// Magnitude (unsigned) comparison of digit strings without leading zeros.
int cmp_int(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  int c = a.compare(b);
  return c < 0 ? -1 : c > 0 ? 1 : 0;
}

int cmp_mag(const Decimal& a, const Decimal& b) {
  if (int c = cmp_int(a.int_digits, b.int_digits)) return c;
  int c = a.frac_digits.compare(b.frac_digits);
  return c < 0 ? -1 : c > 0 ? 1 : 0;
}

std::string inc(std::string s) {  // magnitude + 1
  int i = int(s.size()) - 1;
  while (i >= 0 && s[size_t(i)] == '9') s[size_t(i--)] = '0';
  if (i < 0) return s.insert(0, 1, '1');
  ++s[size_t(i)];
  return s;
}

std::string dec(std::string s) {  // magnitude - 1, s >= 1
  int i = int(s.size()) - 1;
  while (s[size_t(i)] == '0') s[size_t(i--)] = '9';
  --s[size_t(i)];
  size_t nz = s.find_first_not_of('0');
  return nz == std::string::npos ? "0" : s.substr(nz);
}

Decimal make(bool neg, std::string digits) {
  Decimal d;
  d.int_digits = std::move(digits);
  d.negative = neg && d.int_digits != "0";
  return d;
}

class Builder {
 public:
  explicit Builder(ExprStore& st) : st_(st) {
    dig_ = st.bytes(ByteSet::range('0', '9'));
    nz_ = st.bytes(ByteSet::range('1', '9'));
    point_ = st.byte('.');
  }

  ExprId digits(char lo, char hi) {
    if (lo > hi) return kNothing;
    return st_.bytes(ByteSet::range(uint8_t(lo), uint8_t(hi)));
  }

  // Digit strings of the same length as s that are >= s (ge) or <= s (!ge).
  ExprId bound_len(const std::string& s, size_t i, bool ge) {
    if (i == s.size()) return kEpsilon;
    char c = s[i];
    ExprId rest_any = st_.repeat(dig_, uint32_t(s.size() - i - 1), uint32_t(s.size() - i - 1));
    ExprId other = ge ? digits(char(c + 1), '9') : digits('0', char(c - 1));
    ExprId a = st_.concat(st_.byte(uint8_t(c)), bound_len(s, i + 1, ge));
    return st_.alt(a, st_.concat(other, rest_any));
  }

  // Integers written with a.size() == b.size() digits in [a, b].
  ExprId same_len(const std::string& a, const std::string& b) {
    size_t i = 0;
    while (i < a.size() && a[i] == b[i]) ++i;
    if (i == a.size()) return st_.literal(a);
    ExprId prefix = st_.literal(a.substr(0, i));
    size_t k = a.size() - i - 1;
    ExprId lo = st_.concat(st_.byte(uint8_t(a[i])), bound_len(a, i + 1, true));
    ExprId hi = st_.concat(st_.byte(uint8_t(b[i])), bound_len(b, i + 1, false));
    ExprId mid = st_.concat(digits(char(a[i] + 1), char(b[i] - 1)),
                            st_.repeat(dig_, uint32_t(k), uint32_t(k)));
    ExprId parts[3] = {lo, mid, hi};
    return st_.concat(prefix, st_.alt(parts));
  }

  // Unsigned integers (no leading zeros) in [lo, hi]; hi empty = unbounded.
  ExprId uint_range(std::string lo, const std::string* hi) {
    if (hi && cmp_int(lo, *hi) > 0) return kNothing;
    std::vector<ExprId> alts;
    if (lo == "0") {
      alts.push_back(st_.byte('0'));
      if (hi && *hi == "0") return alts[0];
      lo.assign(1, '1');
    }
    size_t nlo = lo.size();
    std::string nines(nlo, '9');
    if (hi && hi->size() == nlo) {
      alts.push_back(same_len(lo, *hi));
      return st_.alt(alts);
    }
    alts.push_back(same_len(lo, nines));
    if (!hi) {
      alts.push_back(st_.concat(nz_, st_.repeat(dig_, uint32_t(nlo), kUnbounded)));
      return st_.alt(alts);
    }
    size_t nhi = hi->size();
    if (nhi >= nlo + 2)
      alts.push_back(st_.concat(nz_, st_.repeat(dig_, uint32_t(nlo), uint32_t(nhi - 2))));
    alts.push_back(same_len(std::string(1, '1').append(nhi - 1, '0'), *hi));
    return st_.alt(alts);
  }

  // Fraction digit strings D (0.D) with lo <(=) 0.D <(=) hi. `hi` null: no upper bound.
  // `nonempty`: D must have at least one digit.
  ExprId frac(const std::string& lo, bool ls, const std::string* hi, bool hs, bool nonempty) {
    return frac_at(lo, ls, hi, hs, 0, true, hi != nullptr, nonempty);
  }

  ExprId frac_at(const std::string& lo, bool ls, const std::string* hi, bool hs, size_t i, bool tl,
                 bool th, bool nonempty) {
    if (!tl && !th) return nonempty && i == 0 ? st_.plus(dig_) : st_.star(dig_);
    bool lo_done = i >= lo.size(), hi_done = !th || i >= hi->size();
    if (tl && lo_done && th && hi_done) {
      // D so far equals both bounds; only zeros may follow, and only without strictness.
      if (ls || hs) return kNothing;
      return nonempty && i == 0 ? st_.plus(st_.byte('0')) : st_.star(st_.byte('0'));
    }
    if (tl && lo_done && !th) {
      if (!ls) return nonempty && i == 0 ? st_.plus(dig_) : st_.star(dig_);
      ExprId parts[3] = {st_.star(dig_), nz_, st_.star(dig_)};  // some non-zero digit
      return st_.concat(parts);
    }
    if (th && hi_done && !tl) {
      if (hs) return kNothing;
      return nonempty && i == 0 ? st_.plus(st_.byte('0')) : st_.star(st_.byte('0'));
    }
    // Ending here: 0.D equals the prefix; it must satisfy both bounds.
    bool end_ok = !(nonempty && i == 0);
    if (tl) end_ok = end_ok && lo_done && !ls;    // lo has more digits: D < lo (they are > 0)
    if (th && !hi_done) end_ok = end_ok && true;  // D < hi since hi has non-zero digits left
    char lo_d = tl && !lo_done ? lo[i] : '0';
    char hi_d = th && !hi_done ? (*hi)[i] : '9';
    std::vector<ExprId> alts;
    if (end_ok) alts.push_back(kEpsilon);
    if (lo_d == hi_d && tl && th) {
      alts.push_back(st_.concat(st_.byte(uint8_t(lo_d)),
                                frac_at(lo, ls, hi, hs, i + 1, true, true, nonempty)));
      return st_.alt(alts);
    }
    if (tl)
      alts.push_back(st_.concat(st_.byte(uint8_t(lo_d)),
                                frac_at(lo, ls, hi, hs, i + 1, true, false, nonempty)));
    if (th)
      alts.push_back(st_.concat(st_.byte(uint8_t(hi_d)),
                                frac_at(lo, ls, hi, hs, i + 1, false, true, nonempty)));
    char mid_lo = tl ? char(lo_d + 1) : lo_d;
    char mid_hi = th ? char(hi_d - 1) : hi_d;
    alts.push_back(st_.concat(digits(mid_lo, mid_hi), st_.star(dig_)));
    return st_.alt(alts);
  }

  // The part after the integer digits: nothing, or '.' and a non-empty D, for fractions
  // in the given bounds.
  ExprId frac_part(const std::string& lo, bool ls, const std::string* hi, bool hs) {
    ExprId empty = frac(lo, ls, hi, hs, false);
    bool has_eps = st_.nullable(empty);
    ExprId dotted = st_.concat(point_, frac(lo, ls, hi, hs, true));
    return has_eps ? st_.alt(kEpsilon, dotted) : dotted;
  }

  ExprId any_frac() { return st_.optional(st_.concat(point_, st_.plus(dig_))); }

  // Magnitudes (unsigned numbers) from `lo` (strict: ls) to `hi` (null: unbounded).
  ExprId mag_range(const Decimal& lo, bool ls, const Decimal* hi, bool hs, bool integer) {
    if (hi) {
      int c = cmp_mag(lo, *hi);
      if (c > 0 || (c == 0 && (ls || hs))) return kNothing;
    }
    if (integer) {
      std::string a = ls                ? inc(lo.int_digits)
                      : lo.is_integer() ? lo.int_digits
                                        : inc(lo.int_digits);
      std::string b;
      if (hi) {
        if (hi->is_integer()) {
          if (hs) {
            if (hi->int_digits == "0") return kNothing;
            b = dec(hi->int_digits);
          } else {
            b = hi->int_digits;
          }
        } else {
          b = hi->int_digits;
        }
      }
      return uint_range(a, hi ? &b : nullptr);
    }
    const std::string& il = lo.int_digits;
    if (hi && il == hi->int_digits)
      return st_.concat(st_.literal(il), frac_part(lo.frac_digits, ls, &hi->frac_digits, hs));
    std::vector<ExprId> alts;
    alts.push_back(st_.concat(st_.literal(il), frac_part(lo.frac_digits, ls, nullptr, false)));
    std::string from = inc(il);
    if (!hi) {
      alts.push_back(st_.concat(uint_range(from, nullptr), any_frac()));
    } else {
      const std::string& ih = hi->int_digits;
      if (cmp_int(from, ih) < 0) {
        std::string to = dec(ih);
        alts.push_back(st_.concat(uint_range(from, &to), any_frac()));
      }
      static const std::string zero;
      alts.push_back(st_.concat(st_.literal(ih), frac_part(zero, false, &hi->frac_digits, hs)));
    }
    return st_.alt(alts);
  }

  ExprStore& st_;
  ExprId dig_, nz_, point_;
};

bool zero_in(const NumberRange& r) {
  Decimal z;
  bool lo_ok = !r.min || compare(*r.min, z) < 0 || (compare(*r.min, z) == 0 && !r.min_exclusive);
  bool hi_ok = !r.max || compare(*r.max, z) > 0 || (compare(*r.max, z) == 0 && !r.max_exclusive);
  return lo_ok && hi_ok;
}

}  // namespace

std::optional<Decimal> Decimal::parse(const std::string& text) {
  size_t i = 0;
  bool neg = false;
  if (i < text.size() && text[i] == '-') neg = true, ++i;
  std::string digits;
  size_t int_len = 0;
  while (i < text.size() && isdigit(uint8_t(text[i]))) digits += text[i++], ++int_len;
  if (int_len == 0) return std::nullopt;
  if (i < text.size() && text[i] == '.') {
    ++i;
    size_t start = i;
    while (i < text.size() && isdigit(uint8_t(text[i]))) digits += text[i++];
    if (i == start) return std::nullopt;
  }
  long exp = 0;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool eneg = false;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) eneg = text[i++] == '-';
    size_t start = i;
    while (i < text.size() && isdigit(uint8_t(text[i]))) {
      exp = exp * 10 + (text[i++] - '0');
      if (exp > 400) return std::nullopt;
    }
    if (i == start) return std::nullopt;
    if (eneg) exp = -exp;
  }
  if (i != text.size()) return std::nullopt;
  long point = long(int_len) + exp;  // digits before the decimal point
  std::string ip, fp;
  if (point <= 0) {
    ip = "0";
    fp = std::string(size_t(-point), '0') + digits;
  } else if (size_t(point) >= digits.size()) {
    ip = digits + std::string(size_t(point) - digits.size(), '0');
  } else {
    ip = digits.substr(0, size_t(point));
    fp = digits.substr(size_t(point));
  }
  size_t nz = ip.find_first_not_of('0');
  ip = nz == std::string::npos ? "0" : ip.substr(nz);
  while (!fp.empty() && fp.back() == '0') fp.pop_back();
  if (ip.size() + fp.size() > 400) return std::nullopt;
  Decimal d;
  d.int_digits = ip;
  d.frac_digits = fp;
  d.negative = neg && !d.is_zero();
  return d;
}

std::string Decimal::str() const {
  std::string s = negative ? "-" : "";
  s += int_digits;
  if (!frac_digits.empty()) s += "." + frac_digits;
  return s;
}

int compare(const Decimal& a, const Decimal& b) {
  bool an = a.negative && !a.is_zero(), bn = b.negative && !b.is_zero();
  if (an != bn) return an ? -1 : 1;
  int c = cmp_mag(a, b);
  return an ? -c : c;
}

Decimal floor_of(const Decimal& d) {
  if (d.is_integer()) return d;
  return d.negative ? make(true, inc(d.int_digits)) : make(false, d.int_digits);
}

Decimal ceil_of(const Decimal& d) {
  if (d.is_integer()) return d;
  return d.negative ? make(true, d.int_digits) : make(false, inc(d.int_digits));
}

Decimal add_one(const Decimal& d) {
  if (!d.negative) return make(false, inc(d.int_digits));
  return make(true, dec(d.int_digits));
}

Decimal sub_one(const Decimal& d) {
  if (d.negative || d.is_zero()) return make(true, inc(d.int_digits));
  return make(false, dec(d.int_digits));
}

bool range_empty(const NumberRange& r) {
  if (!r.min || !r.max) return false;
  if (r.integer) {
    Decimal lo = r.min_exclusive ? add_one(floor_of(*r.min)) : ceil_of(*r.min);
    Decimal hi = r.max_exclusive ? sub_one(ceil_of(*r.max)) : floor_of(*r.max);
    return compare(lo, hi) > 0;
  }
  int c = compare(*r.min, *r.max);
  return c > 0 || (c == 0 && (r.min_exclusive || r.max_exclusive));
}

ExprId number_expr(ExprStore& st, const NumberRange& r) {
  Builder b(st);
  ExprId minus = st.byte('-');
  ExprId uint_any = st.alt(st.byte('0'), st.concat(b.nz_, st.star(b.dig_)));
  if (!r.bounded()) {
    ExprId parts[4] = {st.optional(minus), uint_any, kEpsilon, kEpsilon};
    if (!r.integer) {
      parts[2] = b.any_frac();
      ExprId e = st.bytes(ByteSet::single('e') | ByteSet::single('E'));
      ExprId sign = st.optional(st.bytes(ByteSet::single('+') | ByteSet::single('-')));
      ExprId ex[3] = {e, sign, st.plus(b.dig_)};
      parts[3] = st.optional(st.concat(ex));
    }
    return st.concat(parts);
  }
  if (range_empty(r)) return kNothing;
  Decimal zero;
  bool zin = zero_in(r);
  std::vector<ExprId> alts;
  // Non-negative numbers: from max(min, 0) up to max.
  bool nonneg = !r.max || compare(*r.max, zero) > 0 || (compare(*r.max, zero) == 0 && zin);
  if (nonneg) {
    bool from_min = r.min && compare(*r.min, zero) >= 0;
    Decimal lo = from_min ? *r.min : zero;
    bool ls = from_min ? r.min_exclusive : false;
    if (!from_min && !zin) ls = true;
    alts.push_back(b.mag_range(lo, ls, r.max ? &*r.max : nullptr, r.max_exclusive, r.integer));
  }
  // Negative numbers (and -0 where 0 is in range): magnitudes from max(-max, 0) to -min.
  bool neg = !r.min || compare(*r.min, zero) < 0 || (compare(*r.min, zero) == 0 && zin);
  if (neg) {
    Decimal lo = zero;
    bool ls = !zin;
    if (r.max && compare(*r.max, zero) < 0) {
      lo = *r.max;
      lo.negative = false;
      ls = r.max_exclusive;
    }
    Decimal hi;
    const Decimal* hip = nullptr;
    bool hs = false;
    if (r.min) {
      hi = *r.min;
      hi.negative = false;
      hip = &hi;
      hs = r.min_exclusive;
    }
    ExprId m = b.mag_range(lo, ls, hip, hs, r.integer);
    if (m != kNothing) alts.push_back(st.concat(minus, m));
  }
  return st.alt(alts);
}

}  // namespace tandem::structured
