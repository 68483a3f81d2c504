#include "tokenizer/utf8.h"

#include <cstdlib>
#include <cstring>
#include <vector>

#include <utf8proc.h>

#include "core/error.h"

namespace tandem::tok {
namespace {

// Result of examining one sequence starting at s[i].
struct Step {
  enum Kind { kChar, kInvalid, kIncomplete } kind;
  size_t len;  // bytes that form the character, or the maximal subpart to replace
};

// The allowed range of the second byte depends on the lead byte (Unicode Table 3-7): this
// excludes overlong forms, surrogates and code points above U+10FFFF.
Step step(const unsigned char* s, size_t n) {
  const unsigned c = s[0];
  if (c < 0x80) return {Step::kChar, 1};
  size_t need;
  unsigned lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    need = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return {Step::kInvalid, 1};
  }
  for (size_t k = 1; k < need; ++k) {
    if (k >= n) return {Step::kIncomplete, k};
    const unsigned b = s[k];
    const bool ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return {Step::kInvalid, k};
  }
  return {Step::kChar, need};
}

}  // namespace

size_t valid_utf8_prefix(std::string_view sv) {
  auto* s = reinterpret_cast<const unsigned char*>(sv.data());
  size_t i = 0, n = sv.size();
  while (i < n) {
    // ASCII runs are the common case: skip 8 bytes at a time.
    while (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, s + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    Step st = step(s + i, n - i);
    if (st.kind != Step::kChar) return i;
    i += st.len;
  }
  return n;
}

size_t append_final_utf8(std::string_view in, std::string& out) {
  auto* s = reinterpret_cast<const unsigned char*>(in.data());
  size_t i = 0, n = in.size();
  while (i < n) {
    size_t ok = valid_utf8_prefix(in.substr(i));
    out.append(in.data() + i, ok);
    i += ok;
    if (i >= n) break;
    Step st = step(s + i, n - i);
    if (st.kind == Step::kIncomplete) return i;
    out.append(kReplacementChar);
    i += st.len;
  }
  return n;
}

std::string to_valid_utf8(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  size_t used = append_final_utf8(in, out);
  if (used < in.size()) out.append(kReplacementChar);  // a truncated tail is one subpart
  return out;
}

namespace {

// Code points after which, and before which, NFC cannot change the text: NFC_QC=Yes and
// canonical combining class 0. Built once from utf8proc's data: a code point is unstable
// when its class is non-zero, when it has a canonical decomposition that NFC does not
// recompose to itself (NFC_QC=No), or when it appears after the first position of some
// canonical decomposition (a possible second half of a composition: NFC_QC=Maybe).
class StableTable {
 public:
  StableTable() : unstable_(kLimit / 64, 0) {
    utf8proc_int32_t buf[32];
    auto scan = [&](uint32_t lo, uint32_t hi) {
      for (uint32_t cp = lo; cp < hi; ++cp) {
        if (cp >= 0xD800 && cp < 0xE000) continue;
        const utf8proc_property_t* p = utf8proc_get_property(utf8proc_int32_t(cp));
        if (p->combining_class != 0) set(cp);
        int boundclass = 0;
        utf8proc_ssize_t n =
            utf8proc_decompose_char(utf8proc_int32_t(cp), buf, 32, UTF8PROC_DECOMPOSE, &boundclass);
        if (n <= 0 || (n == 1 && uint32_t(buf[0]) == cp)) continue;
        for (utf8proc_ssize_t i = 1; i < n && i < 32; ++i) set(uint32_t(buf[i]));
        if (cp >= 0xAC00 && cp <= 0xD7A3) continue;  // Hangul syllables recompose
        if (compose_one(cp) != cp) set(cp);
      }
    };
    scan(0, 0x32400);        // every plane with assigned characters...
    scan(0xE0000, 0xE1000);  // ...and the tags and variation selectors
  }
  bool stable(uint32_t cp) const { return cp >= kLimit || !(unstable_[cp >> 6] >> (cp & 63) & 1); }

 private:
  static constexpr uint32_t kLimit = 0x110000;
  void set(uint32_t cp) {
    if (cp < kLimit) unstable_[cp >> 6] |= uint64_t(1) << (cp & 63);
  }
  // NFC of the single code point cp, or 0 when it is not one code point.
  static uint32_t compose_one(uint32_t cp) {
    utf8proc_uint8_t in[4];
    utf8proc_ssize_t len = utf8proc_encode_char(utf8proc_int32_t(cp), in);
    utf8proc_uint8_t* out = nullptr;
    utf8proc_ssize_t r =
        utf8proc_map(in, len, &out, utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
    uint32_t result = 0;
    if (r > 0) {
      utf8proc_int32_t c = 0;
      utf8proc_ssize_t used = utf8proc_iterate(out, r, &c);
      if (used == r) result = uint32_t(c);
    }
    std::free(out);
    return result;
  }
  std::vector<uint64_t> unstable_;
};

}  // namespace

namespace {

const StableTable& stable_table() {
  static const StableTable t;
  return t;
}

// Decodes the code point at s[i] of valid UTF-8; sets len.
inline uint32_t decode_at(const unsigned char* s, size_t i, size_t& len) {
  unsigned c = s[i];
  if (c < 0x80) {
    len = 1;
    return c;
  }
  if (c < 0xE0) {
    len = 2;
    return ((c & 0x1F) << 6) | (s[i + 1] & 0x3F);
  }
  if (c < 0xF0) {
    len = 3;
    return ((c & 0x0F) << 12) | ((s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F);
  }
  len = 4;
  return ((c & 0x07) << 18) | ((s[i + 1] & 0x3F) << 12) | ((s[i + 2] & 0x3F) << 6) |
         (s[i + 3] & 0x3F);
}

}  // namespace

bool quick_nfc(std::string_view sv) {
  auto* s = reinterpret_cast<const unsigned char*>(sv.data());
  const StableTable& t = stable_table();
  for (size_t i = 0, len = 0; i < sv.size(); i += len) {
    if (s[i] < 0x80) {
      len = 1;
      continue;
    }
    if (!t.stable(decode_at(s, i, len))) return false;
  }
  return true;
}

std::string nfc_reference(std::string_view s) {
  utf8proc_uint8_t* out = nullptr;
  utf8proc_ssize_t r = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                    static_cast<utf8proc_ssize_t>(s.size()), &out,
                                    utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (r < 0) fail(ErrorKind::kInvalidArgument, "NFC normalization failed: {}", utf8proc_errmsg(r));
  std::string result(reinterpret_cast<char*>(out), static_cast<size_t>(r));
  std::free(out);
  return result;
}

// NFC only where it can change something: a span that starts at the last stable character
// before an unstable one (that starter may compose with what follows) and ends before the
// next stable character (a stable character never combines with anything before it).
std::string nfc(std::string_view sv) {
  auto* s = reinterpret_cast<const unsigned char*>(sv.data());
  const StableTable& t = stable_table();
  std::string out;
  size_t copied = 0, prev = 0, span = std::string_view::npos;
  bool any = false;
  for (size_t i = 0, len = 0; i < sv.size(); prev = i, i += len) {
    const bool st = s[i] < 0x80 ? (len = 1, true) : t.stable(decode_at(s, i, len));
    if (!st) {
      if (span == std::string_view::npos) span = i == 0 ? 0 : prev;
      continue;
    }
    if (span != std::string_view::npos) {
      if (!any) out.reserve(sv.size() + 16);
      any = true;
      out.append(sv.data() + copied, span - copied);
      out += nfc_reference(sv.substr(span, i - span));
      copied = i;
      span = std::string_view::npos;
    }
  }
  if (span != std::string_view::npos) {
    any = true;
    out.append(sv.data() + copied, span - copied);
    out += nfc_reference(sv.substr(span));
    copied = sv.size();
  }
  if (!any) return std::string(sv);
  out.append(sv.data() + copied, sv.size() - copied);
  return out;
}

}  // namespace tandem::tok
