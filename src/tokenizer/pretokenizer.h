#pragma once
// The `Split` pre-tokenizer (behavior "Isolated"): the text is cut into the regex matches
// and the gaps between them, each a piece of its own. The pattern comes from tokenizer.json
// and is written for Oniguruma (what Hugging Face `tokenizers` uses); it is compiled with
// PCRE2 (UTF, UCP, JIT) after translating the one construct whose meaning differs.
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace tandem::tok {

// Rewrites an Oniguruma pattern for PCRE2. Oniguruma's Unicode `\s` is the White_Space
// property; PCRE2 10.42's UCP `\s` also takes U+180E and others, so `\s`/`\S` become
// explicit White_Space classes. Throws tandem::Error(kUnsupported) on what it can't map.
std::string onig_to_pcre2(std::string_view pattern);

class RegexSplitter {
 public:
  explicit RegexSplitter(std::string_view onig_pattern);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // Calls `piece` for each match and each non-empty gap, in order. `text` must be valid
  // UTF-8 (it is not checked again here).
  void split(std::string_view text, const std::function<void(std::string_view)>& piece) const;

  // Same, into a reusable list of (offset, length).
  void split(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>& pieces) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::tok
