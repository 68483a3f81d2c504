// JSON Schema keywords: instances accepted and rejected as the keyword says, member order,
// the whitespace policy, and refusals that name the keyword and its JSON pointer.
#include <gtest/gtest.h>

#include "core/error.h"
#include "structured/json_schema.h"
#include "test_util.h"

using namespace tandem;
using namespace tandem::structured;
using namespace tandem::structured::testing;

namespace {

void expect(const std::string& schema_text, std::vector<std::string> yes,
            std::vector<std::string> no) {
  auto g = schema(schema_text);
  for (const std::string& t : yes)
    EXPECT_TRUE(accepts(g, t)) << schema_text << "\n  should accept " << t;
  for (const std::string& t : no)
    EXPECT_FALSE(accepts(g, t)) << schema_text << "\n  should reject " << t;
}

void refused(const std::string& schema_text, const std::string& keyword,
             const std::string& pointer) {
  try {
    schema(schema_text);
    ADD_FAILURE() << schema_text << " compiled";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("keyword '" + keyword + "'"), std::string::npos) << m;
    EXPECT_NE(m.find("at '" + pointer + "'"), std::string::npos) << m;
  }
}

}  // namespace

TEST(JsonSchema, Types) {
  // Integers are written as digits (1.0 and 1e3 are not how they are written).
  expect(R"({"type":"integer"})", {"0", "-12", "123456789012345678901234567890"},
         {"1.5", "1e3", "1.0", "\"1\"", "01", "true"});
  expect(R"({"type":["string","null"]})", {"\"x\"", "null"}, {"1", "false", "{}"});
  expect(R"({"type":"number"})", {"1", "-0.5", "2E-3"}, {"\"1\"", "NaN", "Infinity"});
  expect(R"({"type":"boolean"})", {"true", "false"}, {"True", "1"});
  expect(R"({})", {"1", "\"s\"", "[1,{}]", "{\"a\":[null]}", "null"}, {"", "[1,]", "{\"a\"}"});
  expect(R"(true)", {"[]"}, {"nope"});
  expect(R"({"properties":{"a":{"type":"integer"}}})", {"{\"a\":1}", "\"other types pass\"", "3"},
         {"{\"a\":\"x\"}"});
}

TEST(JsonSchema, Objects) {
  const char* s = R"({"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"string"}},
                      "required":["a"],"additionalProperties":false})";
  expect(s, {R"({"b":1,"a":"x"})", R"({"a":"x"})"},
         {R"({"a":"x","b":1})" /* schema order: b before a */, R"({"b":1})", R"({"a":"x","c":1})",
          R"({})"});
  expect(
      R"({"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"boolean"}})",
      {R"({"a":1,"z":true,"y":false})", R"({"q":true})"}, {R"({"z":1})", R"({"a":true})"});
  expect(
      R"({"type":"object","patternProperties":{"^x-":{"type":"integer"}},"additionalProperties":false})",
      {R"({"x-a":1,"x-b":2})", "{}"}, {R"({"y":1})", R"({"x-a":"s"})"});
  expect(R"({"type":"object","required":["id"],"properties":{"id":{"const":7}}})",
         {R"({"id":7})", R"({"id":7.0})", R"({"id":7,"more":[1]})"}, {R"({"id":8})", "{}"});
  expect(R"({"type":"object","minProperties":1,"maxProperties":2})",
         {R"({"a":1})", R"({"a":1,"b":2})"}, {"{}", R"({"a":1,"b":2,"c":3})"});
  expect(R"({"type":"object","propertyNames":{"pattern":"^[a-z]+$"}})", {R"({"ab":1})"},
         {R"({"aB":1})"});
  // A required member not in properties comes after the listed ones.
  expect(
      R"({"type":"object","properties":{"a":{}},"required":["z","a"],"additionalProperties":{"type":"integer"}})",
      {R"({"a":"x","z":1})"}, {R"({"z":1,"a":"x"})", R"({"a":"x","z":"s"})"});
}

TEST(JsonSchema, Arrays) {
  expect(R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})",
         {"[1]", "[1,2,3]"}, {"[]", "[1,2,3,4]", "[\"a\"]"});
  expect(R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false})",
         {R"(["a",1])", R"(["a"])", "[]"}, {R"(["a",1,2])", R"([1,"a"])"});
  expect(R"({"$schema":"http://json-schema.org/draft-07/schema#","type":"array",
             "items":[{"type":"string"}],"additionalItems":{"type":"boolean"}})",
         {R"(["a",true,false])"}, {R"(["a",1])"});
}

TEST(JsonSchema, Strings) {
  expect(R"({"type":"string","minLength":2,"maxLength":3})",
         {"\"ab\"", "\"abc\"", "\"日本\"", "\"\\n\\t\""}, {"\"a\"", "\"abcd\"", "\"日\""});
  expect(R"({"type":"string","pattern":"^[A-Z]{2}-\\d+$"})", {"\"AB-12\""},
         {"\"ab-12\"", "\"AB-\""});
  expect(R"({"type":"string","pattern":"x"})", {"\"axb\"", "\"x\""}, {"\"ab\""});
  expect(R"({"enum":["a\"b","c\\d","e/f"]})", {R"("a\"b")", R"("c\\d")", R"("e/f")", R"("e\/f")"},
         {R"("a"b")"});
}

TEST(JsonSchema, Formats) {
  expect(R"({"format":"date","type":"string"})", {"\"2024-02-29\"", "\"1999-12-31\""},
         {"\"2023-02-29\"", "\"2024-13-01\"", "\"2024-04-31\"", "\"0000-01-01\"", "\"24-01-01\""});
  expect(R"({"format":"date-time","type":"string"})",
         {"\"2024-05-01T12:30:00Z\"", "\"2024-05-01T12:30:00.123+05:30\""},
         {"\"2024-05-01 12:30:00Z\"", "\"2024-05-01T25:00:00Z\"", "\"2024-05-01T12:30:00\""});
  expect(R"({"format":"time","type":"string"})", {"\"23:59:60Z\""}, {"\"24:00:00Z\""});
  expect(R"({"format":"uuid","type":"string"})", {"\"123e4567-e89b-12d3-a456-426614174000\""},
         {"\"123e4567e89b12d3a456426614174000\"", "\"NOT_A_UUID\""});
  expect(R"({"format":"email","type":"string"})", {"\"a.b+c@example.co.uk\""},
         {"\"no-at-sign\"", "\"a@\"", "\"@b.c\""});
  expect(R"({"format":"ipv4","type":"string"})", {"\"192.168.0.1\""},
         {"\"256.1.1.1\"", "\"01.2.3.4\"", "\"1.2.3\""});
  expect(R"({"format":"ipv6","type":"string"})",
         {"\"::1\"", "\"2001:db8::8a2e:370:7334\"", "\"::ffff:1.2.3.4\""},
         {"\"1::2::3\"", "\"12345::\""});
  expect(R"({"format":"uri","type":"string"})",
         {"\"https://example.com/a?b=c#d\"", "\"urn:isbn:123\""},
         {"\"not a url\"", "\"/relative\""});
  // Formats no standard defines are annotations.
  expect(R"({"format":"my-custom","type":"string"})", {"\"anything\""}, {});
}

TEST(JsonSchema, Numbers) {
  expect(R"({"type":"number","minimum":-1.5,"exclusiveMaximum":10})", {"-1.5", "0", "9.999", "-0"},
         {"-1.51", "10", "10.0", "11"});
  expect(R"({"$schema":"http://json-schema.org/draft-04/schema#","type":"integer","minimum":3,
             "exclusiveMinimum":true,"maximum":5})",
         {"4", "5"}, {"3", "6"});
  expect(R"({"type":"integer","multipleOf":5})", {"0", "-15", "25"}, {"7", "12"});
  expect(R"({"type":"number","multipleOf":0.01})", {"1.25", "3", "-0.5"}, {"1.255"});
}

TEST(JsonSchema, Combinators) {
  expect(R"({"anyOf":[{"type":"integer","maximum":0},{"type":"string","maxLength":1}]})",
         {"-3", "\"a\""}, {"1", "\"ab\""});
  expect(R"({"oneOf":[{"type":"integer"},{"type":"string"}]})", {"1", "\"s\""}, {"null"});
  expect(R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},
                      {"properties":{"b":{"type":"string"}},"required":["b"]}]})",
         {R"({"a":1,"b":"x"})"}, {R"({"a":1})", R"({"b":"x"})"});
  expect(R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
            "next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"],
            "additionalProperties":false}},"$ref":"#/$defs/node"})",
         {R"({"v":1,"next":{"v":2,"next":null}})"}, {R"({"v":1,"next":{"v":"x","next":null}})"});
  expect(R"({"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#"}}},
             "additionalProperties":false})",
         {R"({"kids":[{"kids":[]},{}]})"}, {R"({"kids":[{"x":1}]})"});
  expect(R"({"allOf":[{"enum":[1,2,3,"a"]},{"not":{"enum":[2]}},{"not":{"type":"string"}}]})",
         {"1", "3"}, {"2", "\"a\""});
  expect(R"({"type":"object","not":{"required":["secret"]}})", {R"({"a":1})"}, {R"({"secret":1})"});
  expect(R"({"type":"object","dependentRequired":{"a":["b"]}})",
         {R"({"b":1})", R"({"b":2,"a":1})", "{}"}, {R"({"a":1})"});
}

TEST(JsonSchema, Whitespace) {
  auto g = schema(R"({"type":"object","properties":{"a":{"type":"array"}}})");
  EXPECT_TRUE(accepts(g, R"({"a":[1,2]})"));
  EXPECT_TRUE(accepts(g, "{\n  \"a\": [\n    1,\n    2\n  ]\n}"));
  EXPECT_TRUE(accepts(g, "\n{\"a\" : [ ]}"));
  EXPECT_FALSE(accepts(g, R"({"a":[1,2]} )"));                 // nothing after the value
  EXPECT_FALSE(accepts(g, "{" + std::string(21, ' ') + "}"));  // at most 20 bytes
  ConstraintSpec compact;
  compact.kind = ConstraintKind::kJsonObject;
  compact.max_whitespace = 0;
  auto c = compile(compact);
  EXPECT_TRUE(accepts(c, R"({"a":1})"));
  EXPECT_FALSE(accepts(c, R"({"a": 1})"));
}

TEST(JsonSchema, Refusals) {
  refused(R"({"type":"array","uniqueItems":true})", "uniqueItems", "#");
  refused(R"({"properties":{"x":{"contains":{"type":"integer"}}}})", "contains", "/properties/x");
  refused(R"({"oneOf":[{"type":"integer"},{"minimum":0}]})", "oneOf", "#");
  refused(R"({"properties":{"d":{"type":"string","format":"idn-email"}}})", "format",
          "/properties/d");
  refused(R"({"$ref":"https://example.com/other.json"})", "$ref", "#");
  refused(R"({"properties":{"p":{"type":"string","pattern":"(a)\\1"}}})", "pattern",
          "/properties/p");
  refused(R"({"type":"object","unevaluatedProperties":false})", "unevaluatedProperties", "#");
  refused(R"({"if":{"properties":{"a":{"const":1}}},"then":{"required":["b"]}})", "if", "#");
  refused(R"({"type":"integer","multipleOf":3})", "multipleOf", "#");
  // Malformed schemas are errors of their own (400 too).
  for (const char* bad :
       {R"({"type":"strin"})", R"({"minLength":-1})", R"({"required":"a"})", "[1]", "{"}) {
    try {
      schema(bad);
      ADD_FAILURE() << bad << " compiled";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << bad << ": " << e.what();
    }
  }
  // No value at all: refused rather than a grammar that can never finish.
  try {
    schema(R"({"type":"string","minLength":3,"maxLength":2})");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("accepts no text"), std::string::npos) << e.what();
  }
}

TEST(JsonSchema, InstancesWrittenInSchemaOrder) {
  std::string s =
      R"({"properties":{"z":{},"a":{"type":"object","properties":{"y":{},"b":{}}}},"required":["q"]})";
  EXPECT_EQ(write_json_instance(s, R"({"q":1,"a":{"b":2,"y":"é"},"extra":null,"z":[1.5,true]})"),
            R"({"z": [1.5, true], "a": {"y": "é", "b": 2}, "q": 1, "extra": null})");
}
