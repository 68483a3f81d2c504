// UTF-8 repair and the byte-level alphabet, checked against properties and known vectors
// of Python's bytes.decode("utf-8", "replace") (the maximal-subpart rule).
#include <gtest/gtest.h>

#include "core/rng.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

using namespace tandem::tok;

namespace {
const std::string R = std::string(kReplacementChar);

// Random bytes biased towards UTF-8 lead and continuation bytes.
std::string random_bytes(tandem::Rng& rng, size_t n) {
  std::string s(n, '\0');
  for (auto& c : s) {
    uint64_t k = rng.next() % 4;
    c = char(k == 0   ? rng.next() % 256
             : k == 1 ? 0x80 + rng.next() % 64
             : k == 2 ? 0xC2 + rng.next() % 51
                      : 'a' + rng.next() % 26);
  }
  return s;
}
}  // namespace

TEST(Utf8, ReplacesMaximalSubparts) {
  // Each case is what Python 3 prints for b"...".decode("utf-8", "replace").
  EXPECT_EQ(to_valid_utf8("a\xed\xa0\x80z"), "a" + R + R + R + "z");  // surrogate: 3 subparts
  EXPECT_EQ(to_valid_utf8("\xe4\xbd"), R);                            // truncated: one
  EXPECT_EQ(to_valid_utf8("\xe4\xbd"
                          "a"),
            R + "a");
  EXPECT_EQ(to_valid_utf8("\xc0\xaf"), R + R);                  // overlong lead
  EXPECT_EQ(to_valid_utf8("\xf4\x90\x80\x80"), R + R + R + R);  // above U+10FFFF
  EXPECT_EQ(to_valid_utf8("\xf0\x9f\x98"), R);
  EXPECT_EQ(to_valid_utf8("\xf0\x9f\x98\x80"), "\xf0\x9f\x98\x80");
  EXPECT_EQ(to_valid_utf8("\xff\xfe"), R + R);
  EXPECT_EQ(to_valid_utf8(std::string("a\0b", 3)), std::string("a\0b", 3));
}

TEST(Utf8, RepairIsValidAndStreamingAgrees) {
  tandem::Rng rng(11);
  for (int iter = 0; iter < 3000; ++iter) {
    std::string s = random_bytes(rng, 1 + rng.next() % 37);
    std::string fixed = to_valid_utf8(s);
    ASSERT_EQ(valid_utf8_prefix(fixed), fixed.size());
    ASSERT_EQ(to_valid_utf8(fixed), fixed);  // valid text passes through
    // Feeding the bytes in random pieces gives the same text.
    std::string pending, out;
    for (size_t i = 0; i < s.size();) {
      size_t k = std::min<size_t>(1 + rng.next() % 5, s.size() - i);
      pending += s.substr(i, k);
      i += k;
      size_t used = append_final_utf8(pending, out);
      pending.erase(0, used);
      ASSERT_LT(pending.size(), 4u);
    }
    out += to_valid_utf8(pending);
    ASSERT_EQ(out, fixed) << "iteration " << iter;
  }
}

TEST(ByteLevel, AllBytesRoundTrip) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(char(b));
  std::string enc = byte_level_encode(all);
  auto dec = byte_level_decode(enc);
  ASSERT_TRUE(dec.has_value());
  EXPECT_EQ(*dec, all);
  EXPECT_EQ(byte_to_codepoint(' '), 0x120u);
  EXPECT_EQ(byte_to_codepoint('\n'), 0x10Au);
  EXPECT_EQ(byte_to_codepoint('A'), uint32_t('A'));
  EXPECT_FALSE(byte_level_decode("\xe4\xbd\xa0").has_value());  // not in the alphabet
}

TEST(Nfc, QuickCheckAgreesWithUtf8proc) {
  // For every code point the quick scan calls stable, full NFC must leave it unchanged.
  for (uint32_t cp = 0x20; cp < 0x30000; cp += (cp < 0x3100 ? 1 : 7)) {
    if (cp >= 0xD800 && cp < 0xE000) continue;
    std::string s;
    if (cp < 0x80) {
      s.push_back(char(cp));
    } else if (cp < 0x800) {
      s += char(0xC0 | (cp >> 6));
      s += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      s += char(0xE0 | (cp >> 12));
      s += char(0x80 | ((cp >> 6) & 0x3F));
      s += char(0x80 | (cp & 0x3F));
    } else {
      s += char(0xF0 | (cp >> 18));
      s += char(0x80 | ((cp >> 12) & 0x3F));
      s += char(0x80 | ((cp >> 6) & 0x3F));
      s += char(0x80 | (cp & 0x3F));
    }
    if (quick_nfc(s)) {
      // The leading U+0301 fails the quick scan, so nfc() really runs utf8proc here.
      std::string full = "a" + s + "b";
      ASSERT_EQ(nfc(std::string("\xcc\x81") + full), std::string("\xcc\x81") + full) << cp;
    }
  }
  EXPECT_EQ(nfc("e\xcc\x81"), "\xc3\xa9");  // e + U+0301 -> U+00E9
}
