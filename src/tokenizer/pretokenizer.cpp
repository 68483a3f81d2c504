#include "tokenizer/pretokenizer.h"

#include <pcre2.h>

#include <vector>

#include "core/error.h"

namespace tandem::tok {
namespace {

// Unicode White_Space (Oniguruma's `\s` on UTF-8 text), as class members.
constexpr std::string_view kWhiteSpace =
    "\\x{9}-\\x{D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
    "\\x{202F}\\x{205F}\\x{3000}";

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof buf);
  return reinterpret_cast<char*>(buf);
}

}  // namespace

std::string onig_to_pcre2(std::string_view p) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char e = p[i + 1];
      ++i;
      if (e == 's') {
        if (in_class) {
          out += kWhiteSpace;
        } else {
          out += "[";
          out += kWhiteSpace;
          out += "]";
        }
      } else if (e == 'S') {
        if (in_class)
          fail(ErrorKind::kUnsupported,
               "tokenizer.json: pre_tokenizer regex uses \\S inside a character class");
        out += "[^";
        out += kWhiteSpace;
        out += "]";
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (c == '[' && in_class)
      fail(ErrorKind::kUnsupported,
           "tokenizer.json: pre_tokenizer regex uses a nested character class");
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

struct RegexSplitter::Impl {
  pcre2_code* code = nullptr;
  ~Impl() {
    if (code) pcre2_code_free(code);
  }
};

RegexSplitter::RegexSplitter(std::string_view onig_pattern) : impl_(std::make_unique<Impl>()) {
  std::string pat = onig_to_pcre2(onig_pattern);
  int err = 0;
  PCRE2_SIZE off = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat.data()), pat.size(),
                              PCRE2_UTF | PCRE2_UCP, &err, &off, nullptr);
  if (!impl_->code)
    fail(ErrorKind::kUnsupported, "tokenizer.json: pre_tokenizer regex does not compile ({} at {})",
         pcre2_message(err), off);
  // JIT is an optimisation: the interpreter gives the same matches if it is unavailable.
  pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE);
}

RegexSplitter::~RegexSplitter() = default;

void RegexSplitter::split(std::string_view text,
                          std::vector<std::pair<uint32_t, uint32_t>>& pieces) const {
  pieces.clear();
  struct MatchData {
    pcre2_match_data* md = nullptr;
    ~MatchData() {
      if (md) pcre2_match_data_free(md);
    }
  };
  thread_local MatchData tmd;
  if (!tmd.md) tmd.md = pcre2_match_data_create(4, nullptr);
  auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0, gap = 0;
  while (pos < text.size()) {
    int rc =
        pcre2_match(impl_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, tmd.md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) fail(ErrorKind::kInternal, "pre-tokenizer regex failed: {}", pcre2_message(rc));
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(tmd.md);
    size_t s = ov[0], e = ov[1];
    if (e == s) {
      // An empty match cuts nothing; step over one character.
      ++pos;
      while (pos < text.size() && (uint8_t(text[pos]) & 0xC0) == 0x80) ++pos;
      continue;
    }
    if (s > gap) pieces.emplace_back(uint32_t(gap), uint32_t(s - gap));
    pieces.emplace_back(uint32_t(s), uint32_t(e - s));
    pos = gap = e;
  }
  if (gap < text.size()) pieces.emplace_back(uint32_t(gap), uint32_t(text.size() - gap));
}

void RegexSplitter::split(std::string_view text,
                          const std::function<void(std::string_view)>& piece) const {
  std::vector<std::pair<uint32_t, uint32_t>> pieces;
  split(text, pieces);
  for (auto [o, n] : pieces) piece(text.substr(o, n));
}

}  // namespace tandem::tok
