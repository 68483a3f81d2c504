// Number ranges as expressions, against exact decimal comparison, on random bounds and
// random number texts (odd lengths, trailing zeros, negative zero).
#include <gtest/gtest.h>

#include <random>

#include "structured/json_numbers.h"

using namespace tandem::structured;

namespace {

std::string random_number(std::mt19937& rng, bool integer) {
  std::string s;
  if (rng() % 3 == 0) s += '-';
  int n = int(rng() % 4);
  if (n == 0 || rng() % 5 == 0)
    s += '0';
  else {
    s += char('1' + rng() % 9);
    for (int i = 1; i < n; ++i) s += char('0' + rng() % 10);
  }
  if (!integer && rng() % 2) {
    s += '.';
    int f = 1 + int(rng() % 3);
    for (int i = 0; i < f; ++i) s += char('0' + rng() % (i == f - 1 && rng() % 3 == 0 ? 1 : 10));
  }
  return s;
}

bool in_range(const Decimal& x, const NumberRange& r) {
  if (r.min) {
    int c = compare(x, *r.min);
    if (c < 0 || (c == 0 && r.min_exclusive)) return false;
  }
  if (r.max) {
    int c = compare(x, *r.max);
    if (c > 0 || (c == 0 && r.max_exclusive)) return false;
  }
  return true;
}

}  // namespace

TEST(Numbers, DecimalParse) {
  EXPECT_EQ(Decimal::parse("1e3")->str(), "1000");
  EXPECT_EQ(Decimal::parse("-0.0")->str(), "0");
  EXPECT_EQ(Decimal::parse("12.3400")->str(), "12.34");
  EXPECT_EQ(Decimal::parse("1.5e-3")->str(), "0.0015");
  EXPECT_EQ(Decimal::parse("007")->str(), "7");
  EXPECT_FALSE(Decimal::parse("1."));
  EXPECT_FALSE(Decimal::parse("abc"));
  EXPECT_EQ(compare(*Decimal::parse("-2.5"), *Decimal::parse("-2.45")), -1);
  EXPECT_EQ(floor_of(*Decimal::parse("-2.5")).str(), "-3");
  EXPECT_EQ(ceil_of(*Decimal::parse("-2.5")).str(), "-2");
  EXPECT_EQ(sub_one(*Decimal::parse("0")).str(), "-1");
}

TEST(Numbers, RangesAgreeWithExactComparison) {
  std::mt19937 rng(5);
  int agreed = 0;
  for (int trial = 0; trial < 300; ++trial) {
    NumberRange r;
    r.integer = trial % 3 == 0;
    if (rng() % 4) r.min = *Decimal::parse(random_number(rng, false));
    if (rng() % 4) r.max = *Decimal::parse(random_number(rng, false));
    if (r.min && r.max && compare(*r.min, *r.max) > 0) std::swap(r.min, r.max);
    r.min_exclusive = rng() % 2;
    r.max_exclusive = rng() % 2;
    ExprStore st;
    ExprId e = number_expr(st, r);
    for (int k = 0; k < 200; ++k) {
      std::string text = random_number(rng, r.integer);
      Decimal x = *Decimal::parse(text);
      bool want = in_range(x, r);
      ASSERT_EQ(st.matches(e, text), want)
          << text << " in [" << (r.min ? r.min->str() : "-inf") << (r.min_exclusive ? "(" : "[")
          << ", " << (r.max ? r.max->str() : "inf") << (r.max_exclusive ? ")" : "]")
          << (r.integer ? " integer" : "");
      ++agreed;
    }
    EXPECT_EQ(range_empty(r), st.is_empty(e)) << trial;
  }
  EXPECT_EQ(agreed, 300 * 200);
}

TEST(Numbers, SyntaxOnlyJson) {
  ExprStore st;
  NumberRange any;
  ExprId e = number_expr(st, any);
  for (const char* ok : {"0", "-0", "12", "1.5", "1e10", "1E+2", "-3.25e-7"})
    EXPECT_TRUE(st.matches(e, ok)) << ok;
  for (const char* bad : {"01", "+1", "1.", ".5", "1e", "--1", "0x10", "1.5.2", ""})
    EXPECT_FALSE(st.matches(e, bad)) << bad;
  NumberRange r;
  r.min = *Decimal::parse("0");
  ExprId b = number_expr(st, r);
  EXPECT_FALSE(st.matches(b, "1e2"));  // bounded numbers are written without an exponent
  EXPECT_TRUE(st.matches(b, "100"));
  EXPECT_TRUE(st.matches(b, "-0.00"));  // -0 is 0, which is >= 0
}
