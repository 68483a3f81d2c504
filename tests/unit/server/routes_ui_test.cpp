// The web page's files as the router serves them: GET / for browsers and for API clients,
// encodings chosen from Accept-Encoding, cache headers, ETags and 304s, and the page's
// security headers.
#include <gtest/gtest.h>

#include "fake_generator.h"
#include "server/router.h"
#include "server/routes.h"
#include "server/web_assets.h"

namespace tandem::server {
namespace {

using testing::FakeGenerator;

struct Page {
  FakeGenerator gen{[](const engine::Request&) { return std::vector<engine::TokenId>{}; }};
  ServerContext ctx;
  Router router;
  Page() : ctx(testing::test_context(gen, nullptr)), router(ctx) {}
  HttpResponse get(std::string target, std::vector<std::pair<std::string, std::string>> h = {},
                   std::string method = "GET") {
    HttpRequest r(method, std::move(target));
    for (auto& [k, v] : h) r.headers.add(k, v);
    return router.handle(r, [] {});
  }
};

constexpr const char* kBrowserAccept =
    "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8";

TEST(UiRoutes, RootIsThePageForBrowsersAndOllamaIsRunningForClients) {
  Page p;
  for (auto accept : {"", "*/*", "application/json", "text/plain", "text/plain, text/html;q=0.5",
                      "text/html;q=0"}) {
    auto r = p.get("/", {{"accept", accept}});
    EXPECT_EQ(r.body, "Ollama is running") << accept;
    EXPECT_EQ(r.headers.get("vary"), "Accept");
  }
  auto head = p.get("/", {}, "HEAD");
  EXPECT_EQ(head.body, "Ollama is running");
  for (auto accept : {kBrowserAccept, "text/html", "text/plain;q=0.5, text/html"}) {
    auto r = p.get("/", {{"accept", accept}});
    EXPECT_EQ(r.content_type, "text/html; charset=utf-8") << accept;
    EXPECT_NE(r.body.find("<html"), std::string::npos) << accept;
    EXPECT_NE(std::string(r.headers.get("vary")).find("Accept"), std::string::npos);
  }
}

TEST(UiRoutes, PageIsNeverCachedAndLocksDownScripts) {
  Page p;
  auto r = p.get("/ui/");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers.get("cache-control"), "no-cache");
  std::string csp(r.headers.get("content-security-policy"));
  EXPECT_NE(csp.find("script-src 'self'"), std::string::npos);
  EXPECT_EQ(csp.find("unsafe-eval"), std::string::npos);
  EXPECT_NE(csp.find("object-src 'none'"), std::string::npos);
  EXPECT_EQ(r.headers.get("x-content-type-options"), "nosniff");
  auto redirect = p.get("/ui");
  EXPECT_EQ(redirect.status, 308);
  EXPECT_EQ(redirect.headers.get("location"), "/ui/");
}

TEST(UiRoutes, EveryAssetIsServedHashedImmutableAndRevalidated) {
  Page p;
  int n = 0;
  for (auto& a : web_assets()) {
    if (a.name == "index.html") continue;
    ++n;
    auto r = p.get("/ui/" + std::string(a.name));
    ASSERT_EQ(r.status, 200) << a.name;
    EXPECT_EQ(r.content_type, a.content_type);
    EXPECT_EQ(r.headers.get("cache-control"), "public, max-age=31536000, immutable");
    EXPECT_EQ(r.headers.get("etag"), a.etag);
    EXPECT_EQ(r.body, a.identity) << a.name;  // no Accept-Encoding: as is
    auto again = p.get("/ui/" + std::string(a.name), {{"if-none-match", std::string(a.etag)}});
    EXPECT_EQ(again.status, 304);
    EXPECT_TRUE(again.body.empty());
  }
  if (web_page_built()) {
    EXPECT_GT(n, 3);
  }
  EXPECT_EQ(p.get("/ui/assets/nope.js").status, 404);
  EXPECT_EQ(p.get("/ui/assets/../index.html").status, 404);
}

TEST(UiRoutes, EncodingFollowsAcceptEncodingAndItsQValues) {
  if (!web_page_built()) GTEST_SKIP() << "web/node_modules was missing at build time";
  Page p;
  const WebAsset* js = nullptr;
  for (auto& a : web_assets())
    if (a.name.substr(0, 12) == "assets/main-" && !a.br.empty() && !a.gzip.empty()) js = &a;
  ASSERT_TRUE(js);
  const std::string path = "/ui/" + std::string(js->name);
  struct Case {
    const char* accept;
    const char* want;  // "" = identity
  } cases[] = {{"gzip, deflate, br, zstd", "br"},
               {"br", "br"},
               {"gzip", "gzip"},
               {"br;q=0, gzip", "gzip"},
               {"gzip;q=1, br;q=0.5", "gzip"},
               {"identity", ""},
               {"*", "br"},
               {"*;q=0", ""},
               {"deflate", ""},
               {"BR", "br"},
               {"gzip;q=0", ""}};
  for (auto& c : cases) {
    auto r = p.get(path, {{"accept-encoding", c.accept}});
    EXPECT_EQ(r.headers.get("content-encoding"), c.want) << c.accept;
    std::string_view want_body = std::string_view(c.want) == "br"     ? js->br
                                 : std::string_view(c.want) == "gzip" ? js->gzip
                                                                      : js->identity;
    EXPECT_EQ(r.body, want_body) << c.accept;
    EXPECT_EQ(r.headers.get("vary"), "Accept-Encoding");
  }
  // gzip bytes start with the gzip magic; compressed is smaller.
  EXPECT_EQ(js->gzip.substr(0, 2), std::string_view("\x1f\x8b", 2));
  EXPECT_LT(js->br.size(), js->identity.size() / 2);
}

TEST(UiRoutes, TheFirstLoadFitsTheBudget) {
  if (!web_page_built()) GTEST_SKIP() << "web/node_modules was missing at build time";
  size_t gz = 0, files = 0;
  for (auto& a : web_assets())
    if (a.first_load) {
      gz += a.gzip.empty() ? a.identity.size() : a.gzip.size();
      ++files;
    }
  EXPECT_GE(files, 3u);  // index.html, main JS, CSS
  EXPECT_LT(gz, 300u * 1024) << "first load " << gz << " bytes gzip";
}

}  // namespace
}  // namespace tandem::server
