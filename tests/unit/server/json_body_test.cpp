// Request bodies as JSON: the nesting limit (checked before anything walks the value), NUL
// bytes, parse errors that neither echo the input nor name library internals, and short
// quotes of bad values, through the parser alone and through the real router.
#include <gtest/gtest.h>

#include "fake_generator.h"
#include "server/api_error.h"
#include "server/json_body.h"
#include "server/router.h"

namespace tandem::server {
namespace {

std::string nested(int depth, const std::string& open = "[", const std::string& close = "]",
                   const std::string& inner = "1") {
  std::string s;
  s.reserve(size_t(depth) * (open.size() + close.size()) + inner.size());
  for (int i = 0; i < depth; ++i) s += open;
  s += inner;
  for (int i = 0; i < depth; ++i) s += close;
  return s;
}

std::string error_of(std::string_view body) {
  try {
    parse_json_body(body);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.what();
  }
  return "";
}

TEST(JsonBody, DepthCountsArraysAndObjectsButNotBracketsInStrings) {
  EXPECT_EQ(json_depth("1"), 0);
  EXPECT_EQ(json_depth("[]"), 1);
  EXPECT_EQ(json_depth(R"({"a":[{"b":[]}]})"), 4);
  EXPECT_EQ(json_depth(R"({"a":"[[[[{{{{"})"), 1);
  EXPECT_EQ(json_depth(R"(["\"[[[", "\\", [1]])"), 2);  // escaped quotes and backslashes
  EXPECT_EQ(json_depth(nested(10000), 64), 65);         // stops counting past the limit
}

TEST(JsonBody, SixtyFourLevelsParseAndSixtyFiveAreRefusedBeforeParsing) {
  EXPECT_NO_THROW(parse_json_body(nested(kMaxJsonDepth)));
  EXPECT_NO_THROW(parse_json_body(nested(kMaxJsonDepth - 1, "{\"a\":", "}", "[]")));
  const std::string why = error_of(nested(kMaxJsonDepth + 1));
  EXPECT_NE(why.find("deeper than 64 levels"), std::string::npos) << why;
  // Deep enough to overflow the stack of any recursive walk: refused just the same, fast.
  EXPECT_NE(error_of(nested(1'000'000)).find("deeper than"), std::string::npos);
  EXPECT_NE(error_of(nested(300'000, "{\"k\":", "}", "0")).find("deeper than"), std::string::npos);
}

TEST(JsonBody, NulBytesAndTrailingJunkAreRefused) {
  EXPECT_NE(error_of(std::string("{}\0junk", 7)).find("NUL byte at line 1, column 3"),
            std::string::npos);
  EXPECT_NE(error_of(std::string("{\"a\":\"x\0\"}", 10)).find("NUL"), std::string::npos);
  EXPECT_FALSE(error_of("{} x").empty());
  EXPECT_FALSE(error_of("{}{}").empty());
}

TEST(JsonBody, ParseErrorsSayWhereAndWhyWithoutTheInputOrLibraryCodes) {
  const std::string secret(5 << 20, 'q');
  for (std::string body :
       std::vector<std::string>{"{\"a\":tru" + secret + "}", "{\"a\":1", std::string(""),
                                "{\"a\":\"\t\"}", "[1,2]" + secret, "{\"a\":1e999" + secret + "}",
                                "{\"a\" " + secret + "}", "\"\\ud800\""}) {
    const std::string why = error_of(body);
    ASSERT_FALSE(why.empty());
    EXPECT_EQ(why.rfind("the request body is not valid JSON: ", 0), 0u) << why;
    EXPECT_EQ(why.find("json.exception"), std::string::npos) << why;
    EXPECT_EQ(why.find("qqqq"), std::string::npos) << why;
    EXPECT_EQ(why.find("last read"), std::string::npos) << why;
    EXPECT_LT(why.size(), 200u) << why;
  }
  EXPECT_EQ(error_of("{\n\"a\":tru}"),
            "the request body is not valid JSON: invalid literal at line 2, column 8");
  EXPECT_EQ(error_of("{\"a\":1e999}"),
            "the request body is not valid JSON: a number is out of range");
}

TEST(JsonBody, QuotesAreShortPrintableAndCutOnCharacterBoundaries) {
  EXPECT_EQ(quote("user"), "'user'");
  EXPECT_EQ(quote(std::string(5 << 20, 'x')), "'" + std::string(kMaxQuoted, 'x') + "...'");
  EXPECT_EQ(quote("a\r\nb\x01"), "'a\\x0d\\x0ab\\x01'");
  EXPECT_EQ(quote("\xff\xfe"), "'\\xff\\xfe'");
  std::string cjk;
  for (int i = 0; i < 50; ++i) cjk += "\xe4\xbd\xa0";  // 你 x 50
  std::string q = quote(cjk);
  EXPECT_EQ(q.size(), 2 + kMaxQuoted * 3 + 3);  // 40 whole characters, never half of one
  EXPECT_EQ(describe(nlohmann::ordered_json::array({1, 2, 3})), "an array of 3");
  EXPECT_EQ(describe(nlohmann::ordered_json::object()), "an object of 0 fields");
  EXPECT_EQ(describe(nlohmann::ordered_json(2.5)), "2.5");
}

// Through the router: the forms that used to overflow the stack (deep JSON in tool
// parameters, tool-call arguments and integer fields) and 5 MB values in error messages.
struct Rig {
  std::shared_ptr<const tok::Tokenizer> tok = tok::load_tokenizer("");
  testing::FakeGenerator fake{[this](const engine::Request&) { return tok->encode("ok", true); }};
  ServerContext ctx = testing::test_context(fake, tok);
  Router router{ctx};
  HttpResponse post(const std::string& path, const std::string& body) {
    return router.handle(HttpRequest("POST", path, body), [] {});
  }
};

TEST(JsonBody, DeepValuesInEveryFieldGetA400InTheRoutesShape) {
  Rig rig;
  const std::string deep = nested(75'000);
  const std::string deep_obj = nested(30'000, "{\"a\":", "}", "1");
  const std::string msgs = R"("messages":[{"role":"user","content":"hi"}])";
  const std::pair<std::string, std::string> cases[] = {
      {"/v1/chat/completions",
       R"({"model":"tiny",)" + msgs +
           R"(,"tools":[{"type":"function","function":{"name":"f","parameters":)" + deep_obj +
           "}}]}"},
      {"/v1/chat/completions",
       R"({"model":"tiny","messages":[{"role":"assistant","content":"",
          "tool_calls":[{"function":{"name":"f","arguments":)" +
           deep_obj + "}}]}]}"},
      {"/v1/chat/completions", R"({"model":"tiny",)" + msgs + R"(,"max_tokens":)" + deep + "}"},
      {"/v1/chat/completions", R"({"model":"tiny",)" + msgs + R"(,"seed":)" + deep + "}"},
      {"/v1/chat/completions", R"({"model":"tiny",)" + msgs + R"(,"n":)" + deep + "}"},
      {"/v1/completions", R"({"model":"x","prompt":"a","top_k":)" + deep + "}"},
      {"/api/chat", R"({"model":"tiny",)" + msgs + R"(,"options":{"seed":)" + deep + "}}"},
      {"/api/generate", R"({"prompt":"a","options":{"seed":)" + deep + "}}"},
      {"/api/show", R"({"model":)" + deep + "}"},
  };
  for (auto& [path, body] : cases) {
    HttpResponse r = rig.post(path, body);
    EXPECT_EQ(r.status, 400) << path;
    EXPECT_NE(r.body.find("deeper than 64 levels"), std::string::npos) << r.body;
    EXPECT_LT(r.body.size(), 300u);
    const bool ollama = path.rfind("/api/", 0) == 0;
    EXPECT_EQ(r.body.rfind(ollama ? "{\"error\":\"" : "{\"error\":{\"message\"", 0), 0u) << r.body;
  }
  // Under the limit, the values reach the field checks, which name their kind only.
  HttpResponse r = rig.post("/v1/chat/completions",
                            R"({"model":"tiny",)" + msgs + R"(,"max_tokens":)" + nested(60) + "}");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("'max_tokens' must be an integer, got an array of 1"), std::string::npos)
      << r.body;
}

TEST(JsonBody, HugeValuesAreQuotedShortInErrors) {
  Rig rig;
  const std::string big(5 << 20, 'z');
  const std::string msgs = R"("messages":[{"role":"user","content":"hi"}])";
  const std::pair<std::string, std::string> cases[] = {
      {"/v1/chat/completions", R"({"model":")" + big + R"(",)" + msgs + "}"},
      {"/v1/chat/completions", R"({"model":"tiny","messages":[{"role":")" + big + R"("}]})"},
      {"/v1/chat/completions", R"({"model":"tiny",)" + msgs + R"(,"max_tokens":")" + big + R"("})"},
      {"/v1/chat/completions",
       R"({"model":"tiny",)" + msgs + R"(,"tool_choice":{"function":{"name":")" + big + R"("}}})"},
      {"/v1/chat/completions",
       R"({"model":"tiny",)" + msgs + R"(,"response_format":{"type":")" + big + R"("}})"},
      {"/v1/completions", R"({"model":"tiny","prompt":"a","temperature":")" + big + R"("})"},
      {"/api/chat", R"({"model":"tiny",)" + msgs + R"(,"think":")" + big + R"("})"},
      {"/api/chat", R"({"model":")" + big + R"(",)" + msgs + "}"},
      {"/api/show", R"({"model":")" + big + R"("})"},
  };
  for (auto& [path, body] : cases) {
    HttpResponse r = rig.post(path, body);
    EXPECT_GE(r.status, 400) << path;
    EXPECT_LT(r.body.size(), 400u) << r.body.substr(0, 400);
  }
  HttpResponse r = rig.post("/v1/models/x", "");
  EXPECT_EQ(r.status, 405);
  r = rig.router.handle(HttpRequest("GET", "/v1/models/" + big), [] {});
  EXPECT_EQ(r.status, 404);
  EXPECT_LT(r.body.size(), 400u);
  r = rig.router.handle(HttpRequest("GET", "/" + big), [] {});
  EXPECT_EQ(r.status, 404);
  EXPECT_LT(r.body.size(), 400u);
}

TEST(JsonBody, ShowNamesNoServerPath) {
  Rig rig;
  rig.ctx.model.source = "/srv/models/secret-folder/Qwen3-14B";
  HttpResponse r = rig.post("/api/show", R"({"model":"tiny"})");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body.find("secret-folder"), std::string::npos) << r.body;
  EXPECT_EQ(r.body.find("/srv"), std::string::npos);
}

}  // namespace
}  // namespace tandem::server
