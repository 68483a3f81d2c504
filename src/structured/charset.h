#pragma once
// Sets of Unicode scalar values (code points without the surrogates) as sorted ranges, and
// their byte-level forms: raw UTF-8, or the text a JSON string holds for each character.
//
// The JSON form is canonical, as JSON.stringify and Python's json.dumps(ensure_ascii=False)
// write it: `"` and `\` escaped as \" and \\, the control characters below U+0020 as \b \t
// \n \f \r or \u00XX (either case of hex), every other character as its UTF-8 bytes; `/`
// may also be written \/. Each written unit stands for exactly one character, so lengths
// and patterns over characters become lengths and patterns over units.
#include <cstdint>
#include <string>
#include <vector>

#include "structured/expr.h"

namespace tandem::structured {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

struct CodeRange {
  uint32_t lo, hi;  // inclusive
};

class CharSet {
 public:
  CharSet() = default;
  static CharSet range(uint32_t lo, uint32_t hi);
  static CharSet single(uint32_t c) { return range(c, c); }
  static CharSet all();  // every scalar value

  void add(uint32_t lo, uint32_t hi);
  void add(const CharSet& o);
  CharSet complement() const;  // within all()
  CharSet intersect(const CharSet& o) const;
  CharSet minus(const CharSet& o) const { return intersect(o.complement()); }
  bool contains(uint32_t c) const;
  bool empty() const { return ranges_.empty(); }
  const std::vector<CodeRange>& ranges() const { return ranges_; }
  // ASCII letters of the set with their other case added (for case-insensitive classes).
  CharSet ascii_case_folded() const;

 private:
  void normalize();
  std::vector<CodeRange> ranges_;
};

enum class TextEncoding {
  kUtf8,        // characters as their UTF-8 bytes
  kJsonString,  // characters as JSON string content (canonical escapes, see above)
};

// The byte-level expression matching exactly one character of `set`, written in `enc`.
ExprId char_expr(ExprStore& store, const CharSet& set, TextEncoding enc);
// A literal text (valid UTF-8) written in `enc`.
ExprId text_expr(ExprStore& store, const std::string& text, TextEncoding enc);
// JSON string content for `text` (canonical escapes), without the quotes.
std::string json_escape(const std::string& text);

// Decodes one UTF-8 scalar at s[i]; returns false for invalid input.
bool decode_utf8(const std::string& s, size_t& i, uint32_t& cp);
void append_utf8(std::string& out, uint32_t cp);

}  // namespace tandem::structured
