// Masks against the definition, on the real 151,936-row Qwen3 vocabulary: at every state
// of random walks through several constraints, the trie walk (slices, per-state caches,
// parser rows pushed and popped) must allow exactly the tokens a copy of the matcher
// accepts one by one, and EOS exactly where the grammar may end.
#include <gtest/gtest.h>

#include <random>

#include "test_util.h"

using namespace tandem::structured;
using namespace tandem::structured::testing;

namespace {

struct Case {
  const char* name;
  ConstraintKind kind;
  const char* text;
  std::vector<std::string> choices = {};
};

std::shared_ptr<const CompiledGrammar> build(const Case& c) {
  ConstraintSpec s;
  s.kind = c.kind;
  s.text = c.text;
  s.choices = c.choices;
  s.max_whitespace = 3;
  return compile(s);
}

// Random walks: at each state compare masks, then take a random allowed token (favouring
// EOS once it is allowed, so walks end). Returns the number of states compared.
int check_walks(const Case& c, int walks, int max_steps, uint64_t seed) {
  auto g = build(c);
  auto v = qwen3_vocab();
  std::mt19937_64 rng(seed);
  int compared = 0;
  for (int w = 0; w < walks; ++w) {
    Matcher m(g, v);
    std::vector<uint32_t> mask(size_t(v->mask_words()));
    for (int step = 0; step < max_steps && !m.ended(); ++step) {
      // Twice: the second computation may come from the state's cached mask.
      for (int rep = 0; rep < 2; ++rep) {
        m.fill_mask(mask);
        std::vector<uint32_t> want = brute_mask(m);
        ++compared;
        for (size_t i = 0; i < mask.size(); ++i) {
          if (mask[i] == want[i]) continue;
          for (int b = 0; b < 32; ++b) {
            TokenId t = TokenId(i * 32 + size_t(b));
            if (bit(mask, t) != bit(want, t)) {
              ADD_FAILURE() << c.name << " walk " << w << " step " << step << ": token " << t
                            << " '" << (t < v->num_tokens() ? v->bytes(t) : "") << "' mask "
                            << bit(mask, t) << " brute " << bit(want, t);
              return compared;
            }
          }
        }
      }
      std::vector<TokenId> allowed;
      for (TokenId t = 0; t < v->size(); ++t)
        if (bit(mask, t)) allowed.push_back(t);
      if (allowed.empty()) {
        ADD_FAILURE() << c.name << ": a state with no allowed token (dead end)";
        return compared;
      }
      TokenId pick = allowed[rng() % allowed.size()];
      for (TokenId e : v->eos())
        if (bit(mask, e) && rng() % 3 == 0) pick = e;
      EXPECT_TRUE(m.accept_token(pick));
    }
  }
  return compared;
}

}  // namespace

TEST(Mask, MatchesBruteForce) {
  std::vector<Case> cases = {
      {"regex digits", ConstraintKind::kRegex, "-?[0-9]{1,6}(\\.[0-9]+)?"},
      {"regex words", ConstraintKind::kRegex, "(the|a) [a-z]+( [a-z]+){0,3}\\."},
      {"regex unicode", ConstraintKind::kRegex, "[α-ω]{2,5}|日本語|[^\\x00-\\x7f]{1,3}"},
      {"choice", ConstraintKind::kChoice, "", {"yes", "no", "maybe", "no way", "yes!"}},
      {"schema object", ConstraintKind::kJsonSchema,
       R"({"type":"object","properties":{"name":{"type":"string","maxLength":8},
           "age":{"type":"integer","minimum":-5,"maximum":120},
           "ok":{"type":"boolean"}},"required":["name","age"],"additionalProperties":false})"},
      {"schema anyOf", ConstraintKind::kJsonSchema,
       R"({"anyOf":[{"type":"number","exclusiveMinimum":0.5,"maximum":99.25},
           {"type":"string","pattern":"^[a-c]+$"},{"type":"null"},
           {"type":"array","items":{"enum":["x","y",3]},"maxItems":3}]})"},
      {"schema map", ConstraintKind::kJsonSchema,
       R"({"type":"object","patternProperties":{"^k[0-9]$":{"type":"integer"}},
           "additionalProperties":{"type":"string","maxLength":4},"maxProperties":3})"},
      {"schema free string", ConstraintKind::kJsonSchema, R"({"type":"string"})"},
      {"json object", ConstraintKind::kJsonObject, ""},
      {"grammar", ConstraintKind::kGrammar, R"G(
start: expr
expr: term (("+" | "-") term)*
term: NUMBER | "(" expr ")" | NAME
NAME: /[a-z_][a-z0-9_]*/
%import common.NUMBER
%ignore " "
)G"},
  };
  int total = 0;
  for (const Case& c : cases) total += check_walks(c, 3, 12, 7);
  EXPECT_GT(total, 300);
}

// Tokens that span several lexemes and end inside UTF-8 characters, on a small vocabulary
// where every token is checked at every state of a longer walk.
TEST(Mask, SmallVocabularyAcrossBoundaries) {
  std::vector<std::string> toks = {
      "{",      "}",        "\"",       "\":",    "\",\"", "a",   "b",    "ab",
      "\"a\":", "1",        "12",       "1,",     "2}",    ",",   ", \"", " ",
      "\xE6",   "\x97\xA5", "\xE6\x97", "\xA5\"", "null",  "nu",  "ll}",  "true",
      "\\n",    "\\u00",    "1f",       "e",      "-",     "0.5", "}\n",  "\"}"};
  // Every single byte a JSON text needs is a token, as in byte-level vocabularies (so no
  // state is a dead end for lack of a token).
  for (const char* one : {":", "0", "2", "n", "u", "l", "t", "r", "\\", "\xA5", "\x97"})
    toks.push_back(one);
  for (int i = 0; i < 3; ++i) toks.push_back("");  // rows a constraint never allows
  auto v = std::make_shared<Vocabulary>(toks, int(toks.size()) + 5,
                                        std::vector<TokenId>{int(toks.size()) + 1});
  auto g = schema(
      R"({"type":"object","properties":{"a":{"type":"string"},"b":{"type":["integer","null"]}},"additionalProperties":false})");
  std::mt19937_64 rng(3);
  for (int w = 0; w < 40; ++w) {
    Matcher m(g, v);
    std::vector<uint32_t> mask(size_t(v->mask_words()));
    std::string text;
    for (int step = 0; step < 30 && !m.ended(); ++step) {
      m.fill_mask(mask);
      std::vector<uint32_t> want = brute_mask(m);
      ASSERT_EQ(mask, want) << "walk " << w << " step " << step << " after " << text;
      std::vector<TokenId> allowed;
      for (TokenId t = 0; t < v->size(); ++t)
        if (bit(mask, t)) allowed.push_back(t);
      ASSERT_FALSE(allowed.empty()) << "a dead end after " << text;
      TokenId t = allowed[rng() % allowed.size()];
      if (t < v->num_tokens()) text += v->bytes(t);
      ASSERT_TRUE(m.accept_token(t));
    }
  }
}
