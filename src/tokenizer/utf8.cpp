#include "tokenizer/utf8.h"

#include <cstdlib>
#include <cstring>

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

bool quick_nfc(std::string_view sv) {
  auto* s = reinterpret_cast<const unsigned char*>(sv.data());
  size_t i = 0, n = sv.size();
  while (i < n) {
    unsigned c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    uint32_t cp;
    size_t len;
    if (c < 0xE0) {
      cp = ((c & 0x1F) << 6) | (s[i + 1] & 0x3F);
      len = 2;
    } else if (c < 0xF0) {
      cp = ((c & 0x0F) << 12) | ((s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F);
      len = 3;
    } else {
      return false;  // supplementary planes: let utf8proc decide
    }
    // Code points below U+0300, CJK unified ideographs, Hangul syllables, and kana other
    // than the combining voiced marks are NFC_QC=Yes with combining class 0: a string made
    // only of them is already NFC.
    const bool stable = cp < 0x300 || (cp >= 0x4E00 && cp <= 0x9FFF) ||
                        (cp >= 0xAC00 && cp <= 0xD7A3) ||
                        (cp >= 0x3040 && cp <= 0x30FF && cp != 0x3099 && cp != 0x309A);
    if (!stable) return false;
    i += len;
  }
  return true;
}

std::string nfc(std::string_view s) {
  if (quick_nfc(s)) return std::string(s);
  utf8proc_uint8_t* out = nullptr;
  utf8proc_ssize_t r = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                    static_cast<utf8proc_ssize_t>(s.size()), &out,
                                    utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (r < 0) fail(ErrorKind::kInvalidArgument, "NFC normalization failed: {}", utf8proc_errmsg(r));
  std::string result(reinterpret_cast<char*>(out), static_cast<size_t>(r));
  std::free(out);
  return result;
}

}  // namespace tandem::tok
