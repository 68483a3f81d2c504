// Grammars in Lark-style EBNF: rules, terminals, common imports, %ignore, repetition forms,
// and the errors a malformed grammar gets.
#include <gtest/gtest.h>

#include "core/error.h"
#include "structured/lark.h"
#include "test_util.h"

using namespace tandem;
using namespace tandem::structured;
using namespace tandem::structured::testing;

TEST(Lark, Arithmetic) {
  auto g = compile_lark(R"G(
// expressions over integers and names
start: sum
sum: product (("+" | "-") product)*
product: atom (("*" | "/") atom)*
?atom: INT | NAME | "(" sum ")" | "-" atom
NAME: /[a-z_]\w*/
%import common.INT
%ignore " "
)G");
  for (const char* ok : {"1", "1+2*3", "(a + b) * -c", "x_1/ 4 ", " 7"})
    EXPECT_TRUE(accepts(g, ok)) << ok;
  for (const char* bad : {"", "1+", "(1", "1 2", "A", "1++2"}) EXPECT_FALSE(accepts(g, bad)) << bad;
}

TEST(Lark, TerminalsRepetitionAndFlags) {
  auto g = compile_lark(R"G(
start: greeting ("," greeting)~1..3 "!"?
greeting: HELLO WHO
HELLO: "hello"i | "hi"
WHO: " " LETTER~2..4
LETTER: "a".."z"
)G");
  EXPECT_TRUE(accepts(g, "HeLLo ab,hi cd"));
  EXPECT_FALSE(accepts(g, "hello ab"));  // one greeting: ~1..3 asks for more
  EXPECT_TRUE(accepts(g, "hi abcd,hello xy!"));
  EXPECT_TRUE(accepts(g, "hi ab,hi ab,hi ab,hi ab"));
  EXPECT_FALSE(accepts(g, "hi ab,hi ab,hi ab,hi ab,hi ab"));  // ~1..3 more
  EXPECT_FALSE(accepts(g, "HI ab"));                          // "hi" has no i flag
  EXPECT_FALSE(accepts(g, "hi a"));
  auto j = compile_lark(R"G(
start: value
?value: object | array | ESCAPED_STRING | SIGNED_NUMBER | "true" | "false" | "null"
array: "[" [value ("," value)*] "]"
object: "{" [pair ("," pair)*] "}"
pair: ESCAPED_STRING ":" value
%import common (ESCAPED_STRING, SIGNED_NUMBER, WS)
%ignore WS
)G");
  EXPECT_TRUE(accepts(j, R"({"a": [1, -2.5e3, "x\"y"], "b": {}})"));
  EXPECT_FALSE(accepts(j, R"({"a": [1,]})"));
}

TEST(Lark, Errors) {
  auto error = [](const char* text, ErrorKind kind, const char* what) {
    try {
      compile_lark(text);
      ADD_FAILURE() << text << " compiled";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), kind) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  error("start: foo\n", ErrorKind::kInvalidArgument, "rule 'foo' is used but not defined");
  error("rule: \"a\"\n", ErrorKind::kInvalidArgument, "no 'start' rule");
  error("start: A\nA: \"x\" A\n", ErrorKind::kInvalidArgument, "refers to itself");
  error("start: \"a\n", ErrorKind::kInvalidArgument, "line 1");
  error("start: \"a\"\n%declare X\n", ErrorKind::kUnsupported, "%declare");
  error("start: /a(?=b)/\n", ErrorKind::kUnsupported, "lookahead");
  error("start: \"a\" \"b\"\nstart: \"c\"\n", ErrorKind::kInvalidArgument, "defined twice");
}
