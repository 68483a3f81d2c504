#pragma once
// JSON numbers as byte-level expressions, with exact decimal ranges.
//
// A bound is kept as an exact decimal (the shortest text that reads back as the schema's
// double, so `0.1` is 0.1). The range expressions are built digit by digit, without
// intersections, so the lexer's states stay plain: "x >= 2.5" is
//   [3-9] or a longer integer part, any fraction  |  2 then a fraction of at least .5
// Numbers with a bound are matched written without an exponent (1e3 is refused where
// 1000 is accepted); unbounded numbers take the full JSON syntax.
#include <optional>
#include <string>

#include "structured/expr.h"

namespace tandem::structured {

struct Decimal {
  bool negative = false;
  std::string int_digits = "0";  // no leading zeros
  std::string frac_digits;       // no trailing zeros
  bool is_zero() const { return int_digits == "0" && frac_digits.empty(); }
  bool is_integer() const { return frac_digits.empty(); }
  // Parses JSON number text (exponent allowed); nullopt for other text or past 400 digits.
  static std::optional<Decimal> parse(const std::string& text);
  std::string str() const;
};

int compare(const Decimal& a, const Decimal& b);  // -1, 0, 1
Decimal floor_of(const Decimal& d);
Decimal ceil_of(const Decimal& d);
Decimal add_one(const Decimal& d);  // d + 1 for integers
Decimal sub_one(const Decimal& d);  // d - 1 for integers

struct NumberRange {
  std::optional<Decimal> min, max;
  bool min_exclusive = false, max_exclusive = false;
  bool integer = false;
  bool bounded() const { return min || max; }
};

// True when no number satisfies the range.
bool range_empty(const NumberRange& r);
// The expression for JSON numbers in `r` (see above).
ExprId number_expr(ExprStore& st, const NumberRange& r);

}  // namespace tandem::structured
