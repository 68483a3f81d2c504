#include "structured/charset.h"

#include <algorithm>

namespace tandem::structured {

namespace {

constexpr uint32_t kSurrogateLo = 0xD800, kSurrogateHi = 0xDFFF;

int utf8_len(uint32_t c) {
  return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
}

void encode(uint32_t c, uint8_t* out, int n) {
  if (n == 1) {
    out[0] = uint8_t(c);
    return;
  }
  for (int i = n - 1; i > 0; --i) {
    out[i] = uint8_t(0x80 | (c & 0x3F));
    c >>= 6;
  }
  static const uint8_t lead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
  out[0] = uint8_t(lead[n] | c);
}

// Appends the expression for the code points [lo, hi], all of one encoded length, to `out`
// as alternatives whose bytes are position-wise ranges.
void utf8_range(ExprStore& st, uint32_t lo, uint32_t hi, std::vector<ExprId>& out) {
  int n = utf8_len(lo);
  for (int i = 1; i < n; ++i) {
    uint32_t m = (uint32_t(1) << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_range(st, lo, lo | m, out);
        utf8_range(st, (lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        utf8_range(st, lo, (hi & ~m) - 1, out);
        utf8_range(st, hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  encode(lo, a, n);
  encode(hi, b, n);
  std::vector<ExprId> parts;
  for (int k = 0; k < n; ++k) parts.push_back(st.bytes(ByteSet::range(a[k], b[k])));
  out.push_back(st.concat(parts));
}

ExprId utf8_set(ExprStore& st, const CharSet& set) {
  std::vector<ExprId> alts;
  static const uint32_t bounds[4][2] = {
      {0, 0x7F}, {0x80, 0x7FF}, {0x800, 0xFFFF}, {0x10000, kMaxCodePoint}};
  ByteSet ascii;
  for (const CodeRange& r : set.ranges()) {
    for (auto& bd : bounds) {
      uint32_t lo = std::max(r.lo, bd[0]), hi = std::min(r.hi, bd[1]);
      if (lo > hi) continue;
      if (bd[0] == 0) {
        ascii.set_range(uint8_t(lo), uint8_t(hi));
        continue;
      }
      utf8_range(st, lo, hi, alts);
    }
  }
  if (!ascii.empty()) alts.push_back(st.bytes(ascii));
  return st.alt(alts);
}

ExprId hex_digit_of(ExprStore& st, int v) {
  static const char* lower = "0123456789abcdef";
  static const char* upper = "0123456789ABCDEF";
  ByteSet s = ByteSet::single(uint8_t(lower[v])) | ByteSet::single(uint8_t(upper[v]));
  return st.bytes(s);
}

}  // namespace

CharSet CharSet::range(uint32_t lo, uint32_t hi) {
  CharSet s;
  s.add(lo, hi);
  return s;
}

CharSet CharSet::all() {
  return range(0, kMaxCodePoint);
}

void CharSet::add(uint32_t lo, uint32_t hi) {
  if (lo > hi) return;
  hi = std::min(hi, kMaxCodePoint);
  // Surrogates are not scalar values: cut them out.
  if (lo <= kSurrogateHi && hi >= kSurrogateLo) {
    if (lo < kSurrogateLo) ranges_.push_back({lo, kSurrogateLo - 1});
    if (hi > kSurrogateHi) ranges_.push_back({kSurrogateHi + 1, hi});
  } else {
    ranges_.push_back({lo, hi});
  }
  normalize();
}

void CharSet::add(const CharSet& o) {
  ranges_.insert(ranges_.end(), o.ranges_.begin(), o.ranges_.end());
  normalize();
}

void CharSet::normalize() {
  std::sort(ranges_.begin(), ranges_.end(),
            [](const CodeRange& a, const CodeRange& b) { return a.lo < b.lo; });
  std::vector<CodeRange> out;
  for (const CodeRange& r : ranges_) {
    if (!out.empty() && r.lo <= out.back().hi + 1)
      out.back().hi = std::max(out.back().hi, r.hi);
    else
      out.push_back(r);
  }
  ranges_ = std::move(out);
}

CharSet CharSet::complement() const {
  CharSet out;
  uint32_t next = 0;
  for (const CodeRange& r : ranges_) {
    if (r.lo > next) out.add(next, r.lo - 1);
    next = r.hi + 1;
  }
  if (next <= kMaxCodePoint) out.add(next, kMaxCodePoint);
  return out;
}

CharSet CharSet::intersect(const CharSet& o) const {
  CharSet out;
  size_t i = 0, j = 0;
  while (i < ranges_.size() && j < o.ranges_.size()) {
    uint32_t lo = std::max(ranges_[i].lo, o.ranges_[j].lo);
    uint32_t hi = std::min(ranges_[i].hi, o.ranges_[j].hi);
    if (lo <= hi) out.ranges_.push_back({lo, hi});
    if (ranges_[i].hi < o.ranges_[j].hi)
      ++i;
    else
      ++j;
  }
  return out;
}

bool CharSet::contains(uint32_t c) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), c,
                             [](uint32_t v, const CodeRange& r) { return v < r.lo; });
  return it != ranges_.begin() && std::prev(it)->hi >= c;
}

CharSet CharSet::ascii_case_folded() const {
  CharSet out = *this;
  for (uint32_t c = 'a'; c <= 'z'; ++c) {
    if (contains(c)) out.add(c - 32, c - 32);
    if (contains(c - 32)) out.add(c, c);
  }
  return out;
}

ExprId char_expr(ExprStore& st, const CharSet& set, TextEncoding enc) {
  if (enc == TextEncoding::kUtf8) return utf8_set(st, set);
  CharSet specials;
  specials.add(0, 0x1F);
  specials.add('"', '"');
  specials.add('\\', '\\');
  std::vector<ExprId> alts{utf8_set(st, set.minus(specials))};
  if (set.contains('"')) alts.push_back(st.literal("\\\""));
  if (set.contains('\\')) alts.push_back(st.literal("\\\\"));
  if (set.contains('/')) alts.push_back(st.literal("\\/"));
  CharSet controls = set.intersect(CharSet::range(0, 0x1F));
  ExprId u00 = st.literal("\\u00");
  for (const CodeRange& r : controls.ranges()) {
    for (uint32_t c = r.lo; c <= r.hi; ++c) {
      switch (c) {
        case 8:
          alts.push_back(st.literal("\\b"));
          continue;
        case 9:
          alts.push_back(st.literal("\\t"));
          continue;
        case 10:
          alts.push_back(st.literal("\\n"));
          continue;
        case 12:
          alts.push_back(st.literal("\\f"));
          continue;
        case 13:
          alts.push_back(st.literal("\\r"));
          continue;
        default:
          break;
      }
      ExprId parts[3] = {u00, hex_digit_of(st, int(c >> 4)), hex_digit_of(st, int(c & 15))};
      alts.push_back(st.concat(parts));
    }
  }
  return st.alt(alts);
}

bool decode_utf8(const std::string& s, size_t& i, uint32_t& cp) {
  uint8_t b = uint8_t(s[i]);
  int n;
  if (b < 0x80) {
    cp = b;
    ++i;
    return true;
  } else if (b >= 0xC2 && b <= 0xDF) {
    n = 2;
    cp = b & 0x1F;
  } else if (b >= 0xE0 && b <= 0xEF) {
    n = 3;
    cp = b & 0x0F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    n = 4;
    cp = b & 0x07;
  } else {
    return false;
  }
  if (i + n > s.size()) return false;
  for (int k = 1; k < n; ++k) {
    uint8_t c = uint8_t(s[i + k]);
    if ((c & 0xC0) != 0x80) return false;
    cp = (cp << 6) | (c & 0x3F);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > kMaxCodePoint)) ||
      (cp >= kSurrogateLo && cp <= kSurrogateHi))
    return false;
  i += n;
  return true;
}

void append_utf8(std::string& out, uint32_t cp) {
  uint8_t buf[4];
  int n = utf8_len(cp);
  encode(cp, buf, n);
  out.append(reinterpret_cast<char*>(buf), n);
}

ExprId text_expr(ExprStore& st, const std::string& text, TextEncoding enc) {
  if (enc == TextEncoding::kUtf8) return st.literal(text);
  return st.literal(json_escape(text));
}

std::string json_escape(const std::string& text) {
  std::string out;
  static const char* hex = "0123456789abcdef";
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          out += char(c);
        }
    }
  }
  return out;
}

}  // namespace tandem::structured
