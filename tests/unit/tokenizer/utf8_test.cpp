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

namespace {
std::string utf8_of(uint32_t cp) {
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
  return s;
}
}  // namespace

TEST(Nfc, StableCharactersAreLeftAloneByFullNfc) {
  // A character the table calls stable is NFC by itself and never combines with what comes
  // before it (it may combine with what follows: nfc() starts its spans there).
  size_t stable = 0;
  for (uint32_t cp = 0x20; cp < 0x30000; ++cp) {
    if (cp >= 0xD800 && cp < 0xE000) continue;
    std::string c = utf8_of(cp);
    if (!quick_nfc(c)) continue;
    ++stable;
    for (const char* around : {"a", "\xcc\x81", "\xe1\x85\xa1"}) {  // a, U+0301, jamo V
      ASSERT_EQ(nfc_reference(std::string(around) + c), nfc_reference(around) + c)
          << std::hex << cp;
    }
  }
  EXPECT_GT(stable, 100000u);
  EXPECT_FALSE(quick_nfc("e\xcc\x81"));
  EXPECT_EQ(nfc("e\xcc\x81"), "\xc3\xa9");  // e + U+0301 -> U+00E9
}

TEST(Nfc, SpansAgreeWithWholeStringNfc) {
  // Random text from letters, combining marks (several classes), Hangul jamo, kana voicing
  // marks, singletons and exclusions: span-wise NFC must equal NFC of the whole string.
  const uint32_t pool[] = {'a',    'e',    'o',    'A',     ' ',    0x0301, 0x0300, 0x0323, 0x0302,
                           0x0308, 0x0334, 0x05B0, 0x093C,  0x0915, 0x0958, 0x1100, 0x1161, 0x11A8,
                           0xAC00, 0x304B, 0x3099, 0x212B,  0xF900, 0x00E9, 0x1E0A, 0x0B47, 0x0B3E,
                           0x4E00, 0x0410, 0x0306, 0x1F600, 0x0344, 0x0F73};
  tandem::Rng rng(23);
  for (int iter = 0; iter < 20000; ++iter) {
    std::string s;
    size_t n = 1 + rng.next() % 12;
    for (size_t i = 0; i < n; ++i) s += utf8_of(pool[rng.next() % (sizeof pool / sizeof *pool)]);
    ASSERT_EQ(nfc(s), nfc_reference(s)) << "iteration " << iter;
  }
}
