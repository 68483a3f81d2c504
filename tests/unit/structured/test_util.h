#pragma once
// Shared by the structured-output tests: the real Qwen3 vocabulary (loaded once) and a
// brute-force mask to compare the trie walk with.
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "structured/constraint.h"
#include "tokenizer/tokenizer.h"

namespace tandem::structured::testing {

inline std::shared_ptr<const tok::Tokenizer> qwen3() {
  static auto t = tok::load_tokenizer("");
  return t;
}

// The Qwen3 vocabulary as the engine sees it: 151,936 rows, EOS = <|im_end|>, <|endoftext|>.
inline std::shared_ptr<const Vocabulary> qwen3_vocab() {
  static auto v = [] {
    auto t = qwen3();
    std::vector<TokenId> eos{*t->find_token("<|im_end|>"), *t->find_token("<|endoftext|>")};
    return Vocabulary::from_tokenizer(*t, 151936, eos);
  }();
  return v;
}

inline bool bit(const std::vector<uint32_t>& m, TokenId t) {
  return (m[size_t(t) / 32] >> (t % 32)) & 1;
}

// The mask by definition: token t is allowed when its bytes, one by one, are accepted.
inline std::vector<uint32_t> brute_mask(Matcher& m) {
  const Vocabulary& v = m.vocabulary();
  std::vector<uint32_t> out(size_t(v.mask_words()), 0);
  for (TokenId t = 0; t < v.size(); ++t)
    if (m.allows(t)) out[size_t(t) / 32] |= 1u << (t % 32);
  return out;
}

inline std::shared_ptr<const CompiledGrammar> schema(const std::string& text) {
  ConstraintSpec s;
  s.kind = ConstraintKind::kJsonSchema;
  s.text = text;
  return compile(s);
}

// Whether the whole text walks through a fresh matcher and may end there.
inline bool accepts(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text) {
  Matcher m(g, qwen3_vocab());
  return m.accept_bytes(text) && m.can_end();
}

}  // namespace tandem::structured::testing
