// tojson as Python writes it: known vectors of Python's float repr and json.dumps.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "core/rng.h"
#include "tokenizer/py_json.h"

using namespace tandem::tok;

TEST(PyJson, FloatReprMatchesPython) {
  // Each right-hand side is Python 3's repr() of the left.
  EXPECT_EQ(py_float_repr(1.0), "1.0");
  EXPECT_EQ(py_float_repr(0.1), "0.1");
  EXPECT_EQ(py_float_repr(-2.25), "-2.25");
  EXPECT_EQ(py_float_repr(0.0), "0.0");
  EXPECT_EQ(py_float_repr(-0.0), "-0.0");
  EXPECT_EQ(py_float_repr(1e-07), "1e-07");
  EXPECT_EQ(py_float_repr(2.5e-05), "2.5e-05");
  EXPECT_EQ(py_float_repr(0.0001), "0.0001");
  EXPECT_EQ(py_float_repr(1e16), "1e+16");
  EXPECT_EQ(py_float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(py_float_repr(12345678901234567.0), "1.2345678901234568e+16");
  EXPECT_EQ(py_float_repr(123456789.123), "123456789.123");
  EXPECT_EQ(py_float_repr(0.30000000000000004), "0.30000000000000004");
  EXPECT_EQ(py_float_repr(1.7976931348623157e308), "1.7976931348623157e+308");
  EXPECT_EQ(py_float_repr(5e-324), "5e-324");
  EXPECT_EQ(py_float_repr(100.0), "100.0");
}

TEST(PyJson, FloatReprRoundTrips) {
  tandem::Rng rng(3);
  for (int i = 0; i < 20000; ++i) {
    uint64_t bits = rng.next();
    double d;
    std::memcpy(&d, &bits, 8);
    if (!std::isfinite(d)) continue;
    std::string s = py_float_repr(d);
    ASSERT_EQ(std::strtod(s.c_str(), nullptr), d) << s;
    ASSERT_TRUE(s.find('.') != std::string::npos || s.find('e') != std::string::npos) << s;
  }
}

TEST(PyJson, DumpsLikeJsonDumpsEnsureAsciiFalse) {
  auto v = nlohmann::ordered_json::parse(
      R"({"z": 1, "a": [true, false, null, 2.50, -3], "s": "é\"\\\n\t\u0001\u007f东", "o": {}, "e": []})");
  EXPECT_EQ(
      py_json_dumps(v),
      "{\"z\": 1, \"a\": [true, false, null, 2.5, -3], \"s\": \"é\\\"\\\\\\n\\t\\u0001\x7f东\", "
      "\"o\": {}, \"e\": []}");
}
