#pragma once
// Regular expressions in the syntax JSON Schema `pattern` uses (ECMA-262, as with the `u`
// flag) and the Python forms clients send (`(?P<name>...)`), compiled to byte-level
// expressions (expr.h) over characters written in a given encoding (charset.h).
//
// Supported: literals, `.`, classes with ranges and negation, \d \w \s and their
// negations, \xHH \uHHHH \u{...} \cX \0 \t \n \v \f \r, escaped punctuation, groups
// (plain, `(?:`, named), alternation, the quantifiers * + ? {n} {n,} {n,m} (lazy forms
// match the same language), and the anchors ^ and $ at the edges of the pattern or of its
// top-level alternatives. Refused with a message naming the construct (never matched
// approximately): backreferences, lookaround, \b and \B, \p{...}, inline flags,
// possessive quantifiers, anchors elsewhere.
#include <string_view>

#include "structured/charset.h"
#include "structured/expr.h"

namespace tandem::structured {

enum class RegexMatch {
  kFull,    // the whole text must match (guided_regex, grammar terminals)
  kSearch,  // a match anywhere, unless anchored with ^ / $ (JSON Schema `pattern`)
};

struct RegexOptions {
  TextEncoding encoding = TextEncoding::kUtf8;
  RegexMatch match = RegexMatch::kFull;
  bool case_insensitive = false;  // ASCII letters only (the `i` flag of grammar terminals)
  bool dot_all = false;           // `.` matches line terminators too (the `s` flag)
};

// Throws Error(kInvalidArgument) for a malformed pattern and Error(kUnsupported) for a
// construct listed above; the message names it and its offset.
ExprId compile_regex(ExprStore& store, std::string_view pattern, const RegexOptions& opt);

}  // namespace tandem::structured
