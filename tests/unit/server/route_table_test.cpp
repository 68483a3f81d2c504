// The route table: pattern matching, HEAD on GET routes, 405 with Allow, and the Router's
// table as a whole (every route answers in its API's shape).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "fake_generator.h"
#include "server/router.h"

namespace tandem::server {
namespace {

Route route(std::string method, std::string pattern, std::string tag) {
  return Route{std::move(method), std::move(pattern), ErrorShape::kOpenAI, Access::kModel,
               [tag](const RouteCall& c) {
                 HttpResponse r;
                 r.body = tag;
                 for (auto& p : c.params) r.body += "|" + p;
                 return r;
               }};
}

TEST(RouteTable, MatchesExactPathsAndNamedSegments) {
  RouteTable t;
  t.add(route("GET", "/v1/models", "list"));
  t.add(route("GET", "/v1/models/{id}", "one"));
  t.add(route("POST", "/v1/responses/{id}/cancel", "cancel"));
  auto m = t.match("GET", "/v1/models");
  ASSERT_TRUE(m.route);
  EXPECT_EQ(m.route->pattern, "/v1/models");
  m = t.match("GET", "/v1/models/qwen3:14b");
  ASSERT_TRUE(m.route);
  ASSERT_EQ(m.params.size(), 1u);
  EXPECT_EQ(m.params[0], "qwen3:14b");
  m = t.match("POST", "/v1/responses/resp_7/cancel");
  ASSERT_TRUE(m.route);
  EXPECT_EQ(m.params, std::vector<std::string>{"resp_7"});
  // A named segment never matches an empty or a multi-segment value.
  EXPECT_FALSE(t.match("GET", "/v1/models/").route);
  EXPECT_FALSE(t.match("GET", "/v1/models/a/b").route);
  EXPECT_FALSE(t.match("POST", "/v1/responses//cancel").route);
  EXPECT_FALSE(t.match("GET", "/v1/model").route);
  EXPECT_FALSE(t.match("GET", "/v1/modelsx").route);
}

TEST(RouteTable, HeadAnswersGetRoutesAndOtherMethodsListWhatIsAllowed) {
  RouteTable t;
  t.add(route("GET", "/api/tags", "tags"));
  t.add(route("DELETE", "/api/tags", "del"));
  EXPECT_TRUE(t.match("HEAD", "/api/tags").route);
  auto m = t.match("PUT", "/api/tags");
  EXPECT_FALSE(m.route);
  EXPECT_EQ(m.allow, "DELETE, GET, HEAD");
  EXPECT_EQ(t.match("PUT", "/nowhere").allow, "");
}

TEST(RouteTable, TheSameRouteTwiceIsAnError) {
  RouteTable t;
  t.add(route("GET", "/x", "a"));
  EXPECT_THROW(t.add(route("GET", "/x", "b")), Error);
  t.add(route("POST", "/x", "c"));  // another method is another route
}

TEST(Router, EveryRouteAnswersAndUnknownMethodsGet405WithAllow) {
  auto tok = tok::load_tokenizer("");
  testing::FakeGenerator gen([](const engine::Request&) { return std::vector<engine::TokenId>{}; });
  ServerContext ctx = testing::test_context(gen, tok);
  Router router(ctx);
  ASSERT_GE(router.table().routes().size(), 12u);
  for (auto& r : router.table().routes()) {
    EXPECT_TRUE(r.handler) << r.pattern;
    EXPECT_EQ(r.pattern.front(), '/') << r.pattern;
  }
  HttpResponse r = router.handle({"PATCH", "/v1/chat/completions", ""}, [] {});
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.headers.get("allow"), "POST");
  EXPECT_EQ(nlohmann::json::parse(r.body)["error"]["type"], "invalid_request_error");
  r = router.handle({"POST", "/api/version", ""}, [] {});
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.headers.get("allow"), "GET, HEAD");
  EXPECT_TRUE(nlohmann::json::parse(r.body)["error"].is_string());  // Ollama's shape
  r = router.handle({"GET", "/v1/models/tiny", ""}, [] {});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(nlohmann::json::parse(r.body)["id"], "tiny");
  r = router.handle({"GET", "/v1/models/other?x=1", ""}, [] {});
  EXPECT_EQ(r.status, 404);
}

TEST(Headers, NamesAreCaseInsensitiveAndSetReplaces) {
  Headers h;
  h.add("Content-Type", "a");
  h.add("X-Request-Id", "b");
  EXPECT_EQ(h.get("content-type"), "a");
  EXPECT_EQ(h.get("x-request-id"), "b");
  EXPECT_FALSE(h.has("authorization"));
  h.set("content-TYPE", "c");
  EXPECT_EQ(h.get("content-type"), "c");
  EXPECT_EQ(h.items.size(), 2u);
  HttpRequest req{"GET", "/v1/models?limit=3", ""};
  EXPECT_EQ(req.path(), "/v1/models");
  EXPECT_EQ(req.query(), "limit=3");
}

}  // namespace
}  // namespace tandem::server
