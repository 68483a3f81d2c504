// Regexes against std::regex (ECMAScript), an independent engine, on random ASCII texts:
// full matches (guided_regex) and searches (JSON Schema `pattern`); then what is refused.
#include <gtest/gtest.h>

#include <random>
#include <regex>

#include "core/error.h"
#include "structured/regex.h"

using namespace tandem;
using namespace tandem::structured;

namespace {

bool mine(ExprStore& st, const std::string& pattern, const std::string& text, RegexMatch how) {
  RegexOptions o;
  o.match = how;
  return st.matches(compile_regex(st, pattern, o), text);
}

}  // namespace

TEST(Regex, AgreesWithStdRegex) {
  const std::vector<std::string> patterns = {
      "a+b*",           "(ab|ba)*a?",  "[a-c]{2,4}",    "x?y?z?",      "a{3}",          "[^ab]+",
      "\\d+(\\.\\d+)?", "\\w+\\s\\w+", "^ab",           "ab$",         "^(a|b)+$",      "[-_ ]+",
      "(a|)b",          "a{2,}b{0,1}", "(?:ab){1,2}c?", "[A-Z][a-z]*", ".a.",           "\\W\\D",
      "a|b|xyz",        "[\\d-]+",     "^a|b$",         "((a))((b))",  "[a\\-z]",       "z{0}a",
      "\\.\\-\\*",      "(a+)+b",      "[^\\s]{2}",     "^$",          "0|[1-9][0-9]*", "a.*b.*a",
  };
  const std::string alphabet = "ab01-_ .xyzAZ*";
  std::mt19937 rng(11);
  ExprStore st;
  int checked = 0;
  for (const std::string& p : patterns) {
    std::regex re(p, std::regex::ECMAScript);
    for (int i = 0; i < 300; ++i) {
      std::string text;
      int len = int(rng() % 7);
      for (int k = 0; k < len; ++k) text += alphabet[rng() % alphabet.size()];
      bool full = std::regex_match(text, re), search = std::regex_search(text, re);
      ASSERT_EQ(mine(st, p, text, RegexMatch::kFull), full)
          << "/" << p << "/ full '" << text << "'";
      ASSERT_EQ(mine(st, p, text, RegexMatch::kSearch), search)
          << "/" << p << "/ search '" << text << "'";
      ++checked;
    }
  }
  EXPECT_EQ(checked, int(patterns.size()) * 300);
}

TEST(Regex, UnicodeAndEscapes) {
  ExprStore st;
  EXPECT_FALSE(mine(st, "[α-ω]+", "λόγος", RegexMatch::kFull));  // ό (U+03CC) is past ω
  EXPECT_TRUE(mine(st, "[α-ω]+", "λογος", RegexMatch::kFull));
  EXPECT_TRUE(mine(st, "\\u00e9t\\u00E9", "été", RegexMatch::kFull));
  EXPECT_TRUE(mine(st, "\\u{1F600}", "😀", RegexMatch::kFull));
  EXPECT_TRUE(mine(st, "\\ud83d\\ude00", "😀", RegexMatch::kFull));
  EXPECT_TRUE(mine(st, ".", "日", RegexMatch::kFull));
  EXPECT_FALSE(mine(st, ".", "\n", RegexMatch::kFull));
  EXPECT_TRUE(mine(st, "\\x41\\t", "A\t", RegexMatch::kFull));
  EXPECT_TRUE(mine(st, "(?P<year>\\d{4})-(?<m>\\d\\d)", "2024-05", RegexMatch::kFull));
  EXPECT_TRUE(mine(st, "a+?b", "aab", RegexMatch::kFull));  // lazy: same language
  EXPECT_TRUE(mine(st, "x{", "x{", RegexMatch::kFull));     // a brace that is not a quantifier
  EXPECT_TRUE(mine(st, "[^]", "q", RegexMatch::kFull));
  EXPECT_FALSE(mine(st, "[]", "q", RegexMatch::kFull));
  // Invalid UTF-8 never matches, even `.`.
  EXPECT_FALSE(mine(st, ".", "\xC3", RegexMatch::kFull));
  EXPECT_FALSE(mine(st, ".", "\xED\xA0\x80", RegexMatch::kFull));  // a surrogate
}

TEST(Regex, JsonStringEncoding) {
  ExprStore st;
  RegexOptions o;
  o.encoding = TextEncoding::kJsonString;
  o.match = RegexMatch::kFull;
  ExprId quoteish = compile_regex(st, "a\"b\\\\c/\\n", o);
  EXPECT_TRUE(st.matches(quoteish, "a\\\"b\\\\c/\\n"));
  EXPECT_TRUE(st.matches(quoteish, "a\\\"b\\\\c\\/\\n"));
  EXPECT_FALSE(st.matches(quoteish, "a\"b\\\\c/\\n"));  // a raw quote cannot be in a string
  ExprId ctl = compile_regex(st, "[\\x00-\\x1f]", o);
  EXPECT_TRUE(st.matches(ctl, "\\u001f"));
  EXPECT_TRUE(st.matches(ctl, "\\u001F"));
  EXPECT_TRUE(st.matches(ctl, "\\t"));
  EXPECT_FALSE(st.matches(ctl, "\t"));
}

TEST(Regex, RefusesWhatItCannotMatchExactly) {
  ExprStore st;
  RegexOptions o;
  auto refused = [&](const char* p, const char* what) {
    try {
      compile_regex(st, p, o);
      ADD_FAILURE() << p << " compiled";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUnsupported) << p;
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  refused("(a)\\1", "backreference");
  refused("a(?=b)", "lookahead");
  refused("(?<!a)b", "lookbehind");
  refused("\\bword\\b", "word boundary");
  refused("\\p{L}+", "Unicode property");
  refused("(?i)abc", "inline flag");
  refused("a++", "possessive");
  refused("a^b", "anchor");
  for (const char* bad : {"(", "a)", "[a", "*a", "a{3,2}", "\\", "[z-a]"}) {
    try {
      compile_regex(st, bad, o);
      ADD_FAILURE() << bad << " compiled";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << bad;
    }
  }
}

// UTF-8 byte-range splitting, against the sets themselves: random sets of ranges, code
// points at every encoding boundary, and invalid byte strings that must never match.
TEST(Charset, Utf8FormsMatchExactlyTheirCharacters) {
  std::mt19937 rng(2);
  const uint32_t edges[] = {0, 0x7F, 0x80, 0x7FF, 0x800, 0xD7FF, 0xE000, 0xFFFF, 0x10000, 0x10FFFF};
  for (int trial = 0; trial < 60; ++trial) {
    CharSet set;
    for (int k = 0; k < 1 + int(rng() % 4); ++k) {
      uint32_t a = edges[rng() % 10] + rng() % 300, b = a + rng() % (trial % 2 ? 5000 : 70000);
      set.add(std::min(a, 0x10FFFFu), std::min(b, 0x10FFFFu));
    }
    ExprStore st;
    ExprId e = char_expr(st, set, TextEncoding::kUtf8);
    for (int k = 0; k < 400; ++k) {
      uint32_t cp = k < 40 ? edges[k % 10] + (k / 10) - 1 : rng() % 0x110000;
      if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) continue;
      std::string bytes;
      append_utf8(bytes, cp);
      ASSERT_EQ(st.matches(e, bytes), set.contains(cp)) << std::hex << cp;
    }
    for (const char* bad : {"\xC0\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\x80", "\xE2\x82"})
      EXPECT_FALSE(st.matches(e, bad));
  }
}
